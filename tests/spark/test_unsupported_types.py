"""Types Spark has and Delta does not store (ANSI and calendar intervals, TIME, geospatial): every
way a schema reaches the log (a new table, schema evolution by MERGE, ALTER TABLE ADD COLUMNS)
is refused before any file is written, as Delta's commit-time type check does; the session
setting ``spark.databricks.delta.schema.typeCheck.enabled=false`` lifts it (not for geospatial
types, which need a table feature deltamerge does not write). With the change data feed on, the
feed's column names are reserved too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog
from deltamerge.sql_dialect import DIALECT, DeltamergeSpark40

pytestmark = pytest.mark.spark


@pytest.mark.skipif(DIALECT is DeltamergeSpark40, reason="TIME and GEOMETRY are Spark 4.1 types")
def test_a_new_table_with_an_interval_is_refused_and_nothing_is_written(
    spark, spark_conf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t"
    df = spark.sql("SELECT 1 AS id, INTERVAL '1' DAY AS i, named_struct('t', TIME'12:00:00') AS s")
    with pytest.raises(DeltaMergeError, match=r"\[i: interval day, s.t: time\(6\)\]") as info:
        deltamerge.write(df, str(path))
    assert info.value.error_class == "DELTA_UNSUPPORTED_DATA_TYPES"
    assert not path.exists()
    spark_conf({"spark.sql.geospatial.enabled": "true"})  # off by default before Spark 4.3
    geo = spark.sql("SELECT 1 AS id, ST_GeomFromWKB(X'0101000000000000000000F03F0000000000000040') AS g")
    with pytest.raises(DeltaMergeError, match="UNSUPPORTED_DATATYPE"):
        deltamerge.write(geo, str(path))
    assert not path.exists()


def test_schema_evolution_and_alter_table_refuse_an_interval(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.sql("SELECT 1 AS id"), path)
    files = sorted(os.listdir(path))
    source = spark.sql("SELECT 1 AS id, INTERVAL '1-2' YEAR TO MONTH AS i")
    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_DATA_TYPES"):
        builder.withSchemaEvolution().whenMatchedUpdateAll().execute()
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_DATA_TYPES"):
        deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ADD COLUMNS (d INTERVAL DAY TO SECOND)")
    assert sorted(os.listdir(path)) == files
    assert DeltaLog.for_table(path).update().version == 0


def test_the_type_check_can_be_turned_off(spark, spark_conf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spark_conf({"spark.databricks.delta.schema.typeCheck.enabled": "false"})
    path = str(tmp_path / "t")
    deltamerge.write(spark.sql("SELECT 1 AS id, INTERVAL '3' DAY AS i"), path)
    assert deltamerge.read(spark, path).selectExpr("CAST(i AS STRING)").first()[0] == "INTERVAL '3' DAY"


def test_change_data_feed_column_names_are_reserved(spark, tmp_path: Path) -> None:
    """As Delta's CDCReader.checkMetadataChange: a table with the change data feed on holds no
    column named like the feed's, whether the feed or the column comes first."""
    df = spark.createDataFrame([(1, "x")], "id INT, _change_type STRING")
    cdf = {"delta.enableChangeDataFeed": "true"}
    with pytest.raises(DeltaMergeError, match="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"):
        deltamerge.write(df, str(tmp_path / "new"), configuration=cdf)
    assert not (tmp_path / "new").exists()
    plain = str(tmp_path / "plain")
    deltamerge.write(df, plain)
    with pytest.raises(DeltaMergeError, match="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"):
        deltamerge.sql(
            spark, f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
        )
    feed = str(tmp_path / "feed")
    deltamerge.write(spark.createDataFrame([(1,)], "id INT"), feed, configuration=cdf)
    source = spark.createDataFrame([(2, 7)], "id INT, _commit_version BIGINT")
    builder = DeltaTable.forPath(spark, feed).alias("t").merge(source.alias("s"), "t.id = s.id")
    with pytest.raises(DeltaMergeError, match="RESERVED_CDC_COLUMNS_ON_WRITE"):
        builder.withSchemaEvolution().whenNotMatchedInsertAll().execute()
    assert DeltaLog.for_table(feed).update().version == 0


def test_column_names_need_column_mapping_for_spaces_and_punctuation(spark, tmp_path: Path) -> None:
    """Delta's checkSchemaFieldNames: without column mapping no name holds ' ,;{}()\\n\\t=' (a
    common first write: a CSV header "Customer Name"); with column mapping the name is kept."""
    df = spark.createDataFrame([(1, "Ann")], "id INT, `Customer Name` STRING")
    with pytest.raises(DeltaMergeError, match=r"DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES.*Customer Name"):
        deltamerge.write(df, str(tmp_path / "plain"))
    assert not (tmp_path / "plain").exists()
    mapped = str(tmp_path / "mapped")
    deltamerge.write(df, mapped, configuration={"delta.columnMapping.mode": "name"})
    assert deltamerge.read(spark, mapped).columns == ["id", "Customer Name"]
    table = str(tmp_path / "evolve")
    deltamerge.write(df.select("id"), table)
    builder = DeltaTable.forPath(spark, table).alias("t").merge(df.alias("s"), "t.id = s.id")
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES"):
        builder.withSchemaEvolution().whenMatchedUpdateAll().execute()
    assert DeltaLog.for_table(table).update().version == 0


def test_not_null_nested_in_an_array_needs_the_setting(spark, spark_conf, tmp_path: Path) -> None:
    """Delta cannot enforce NOT NULL inside an array or map: CREATE TABLE with one fails, unless
    ``constraints.allowUnenforcedNotNull.enabled`` drops it (a struct's NOT NULL field stays)."""
    path = str(tmp_path / "t")
    columns = "id INT, arr ARRAY<STRUCT<x: INT NOT NULL>>, s STRUCT<y: INT NOT NULL>"
    ddl = f"CREATE TABLE delta.`{path}` ({columns}) USING delta"
    with pytest.raises(DeltaMergeError, match=r"DELTA_NESTED_NOT_NULL_CONSTRAINT.*field arr"):
        deltamerge.sql(spark, ddl)
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    spark_conf({"spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled": "true"})
    deltamerge.sql(spark, ddl)
    schema = deltamerge.read(spark, path).schema
    assert schema["arr"].dataType.elementType["x"].nullable
    assert not schema["s"].dataType["y"].nullable


def test_void_inside_an_array_or_a_map_is_refused_and_nothing_is_written(spark, tmp_path: Path) -> None:
    """Delta's SchemaUtils.dropNullTypeColumns: a void column or struct field is left out of the
    files, a void inside an array or map cannot be and is DELTA_COMPLEX_TYPE_COLUMN_CONTAINS_NULL_TYPE,
    by a plain write or by MERGE schema evolution (the table as it was)."""
    path = tmp_path / "t"
    for sql, name, kind in [
        ("SELECT 1 AS id, array(NULL) AS a", "a", "ArrayType"),
        ("SELECT 1 AS id, map('k', NULL) AS m", "m", "MapType"),
        ("SELECT 1 AS id, named_struct('x', 1, 'e', array()) AS s", "s.e", "ArrayType"),
    ]:
        with pytest.raises(DeltaMergeError, match=f"column {name} which is of {kind}") as info:
            deltamerge.write(spark.sql(sql), str(path))
        assert info.value.error_class == "DELTA_COMPLEX_TYPE_COLUMN_CONTAINS_NULL_TYPE"
        assert not path.exists() or not any(p.name.endswith(".parquet") for p in path.rglob("*"))
    deltamerge.write(spark.sql("SELECT 1 AS id"), str(path))
    files = sorted(os.listdir(path))
    source = spark.sql("SELECT 2 AS id, array(NULL) AS a")
    builder = DeltaTable.forPath(spark, str(path)).alias("t").merge(source.alias("s"), "t.id = s.id")
    with pytest.raises(DeltaMergeError, match="DELTA_COMPLEX_TYPE_COLUMN_CONTAINS_NULL_TYPE"):
        builder.withSchemaEvolution().whenNotMatchedInsertAll().execute()
    assert sorted(os.listdir(path)) == files
    assert DeltaLog.for_table(str(path)).update().version == 0


@pytest.mark.skipif(
    DIALECT is DeltamergeSpark40,
    reason="Spark 4.0's Parquet writer refuses a struct of VOID fields only (Delta's too, on 4.0)",
)
def test_void_struct_fields_are_left_out_of_the_files_and_evolve(spark, tmp_path: Path) -> None:
    """A void struct field is not written (Spark would write a BOOLEAN stand-in, which a read
    after schema evolution widened the field to STRING failed on: PARQUET_COLUMN_DATA_TYPE_MISMATCH);
    a null struct stays null; a struct whose every field is void keeps them (Parquet holds no
    empty group)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    deltamerge.write(
        spark.sql(
            "SELECT 1 AS id, named_struct('x', NULL, 'y', 1, 'n', named_struct('z', NULL, 'w', 'a')) AS s, "
            "named_struct('v', NULL) AS only_void "
            "UNION ALL SELECT 3, NULL, NULL"
        ),
        path,
    )
    data_file = next(f for f in os.listdir(path) if f.endswith(".parquet"))
    written = pq.read_schema(os.path.join(path, data_file))
    assert str(written.field("s").type) == "struct<y: int32, n: struct<w: string>>"
    assert str(written.field("only_void").type) == "struct<v: null>"
    source = spark.sql(
        "SELECT 2 AS id, named_struct('x', 'str', 'y', 2, 'n', named_struct('z', 5L, 'w', 'b')) AS s"
    )
    DeltaTable.forPath(spark, path).alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).withSchemaEvolution().whenNotMatchedInsertAll().execute()
    df = deltamerge.read(spark, path)
    assert df.schema["s"].dataType.simpleString() == "struct<x:string,y:int,n:struct<z:bigint,w:string>>"
    rows = sorted((r.id, r.s and r.s.asDict(recursive=True)) for r in df.select("id", "s").collect())
    assert rows == [
        (1, {"x": None, "y": 1, "n": {"z": None, "w": "a"}}),
        (2, {"x": "str", "y": 2, "n": {"z": 5, "w": "b"}}),
        (3, None),
    ]
    other = RsTable(path).to_pyarrow_table().sort_by("id").column("s").to_pylist()
    assert other == [r[1] for r in rows]
