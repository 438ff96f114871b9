"""CONVERT TO DELTA (SQL and ``DeltaTable.convertToDelta``): directories written by plain
``df.write.parquet`` become Delta tables in place that deltamerge and delta-rs read with the same
rows, with footer statistics and Delta's CONVERT commit; converting again changes nothing, and a
refused conversion leaves no log behind."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark

_CM_DEFAULT = "spark.databricks.delta.properties.defaults.columnMapping.mode"
ROWS = [(1, "a", 10, "x"), (2, "b", 10, None), (3, "c", 20, "a/b c%=1"), (4, "d", 20, "x")]
DDL = "id int, v string, part int, d string"


@pytest.fixture(autouse=True)
def _no_column_mapping_default(spark, spark_conf):
    # CONVERT refuses a column-mapping default (the files have no physical names), which a suite
    # run with DELTAMERGE_TEST_TABLE_DEFAULTS may set.
    if spark.conf.get(_CM_DEFAULT, None) not in (None, "none"):
        spark_conf({_CM_DEFAULT: "none"})


def _sql(spark, text: str):
    return deltamerge.sql(spark, text)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in deltamerge.read(spark, path).select("id", "v", "part", "d").collect())


def _rs_rows(path: str) -> list[tuple]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    out = pa.table(QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t").read_all())
    return sorted((r["id"], r["v"], r["part"], r["d"]) for r in out.to_pylist())


def _parquet(spark, path: str, partition_by: tuple[str, ...] = ()) -> None:
    df = spark.createDataFrame(ROWS, DDL).coalesce(1)
    df.write.partitionBy(*partition_by).parquet(path)


def _last_commit(spark, path: str):
    return DeltaTable.forPath(spark, path).history().collect()[0]


def test_convert_unpartitioned_directory_by_sql(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _parquet(spark, path)
    assert os.path.exists(os.path.join(path, "_SUCCESS"))  # hidden: not a data file

    assert _sql(spark, f"CONVERT TO DELTA parquet.`{path}`").collect() == []

    snap = snapshot_for(path)
    assert snap.version == 0 and snap.metadata.partition_columns == ()
    assert [f["name"] for f in snap.metadata.schema["fields"]] == ["id", "v", "part", "d"]
    assert len(snap.files) == 1 and not snap.files[0].path.startswith("/")
    stats = json.loads(snap.files[0].stats or "{}")
    assert stats["numRecords"] == 4 and stats["minValues"]["id"] == 1 and stats["maxValues"]["id"] == 4
    assert _rows(spark, path) == sorted(ROWS)
    assert _rs_rows(path) == sorted(ROWS)

    commit = _last_commit(spark, path)
    assert commit.version == 0 and commit.operation == "CONVERT"
    assert commit.operationParameters == {
        "numFiles": "1",
        "partitionedBy": "[]",
        "collectStats": "true",
        "sourceFormat": "parquet",
    }
    assert commit.operationMetrics == {"numConvertedFiles": "1"}


def test_convert_partitioned_directory_with_api(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _parquet(spark, path, ("part", "d"))
    escaped = [d for d in os.listdir(os.path.join(path, "part=20")) if d != "d=x"]
    assert escaped == ["d=a%2Fb c%25%3D1"]  # Spark's Hive escaping on disk

    table = DeltaTable.convertToDelta(spark, f"parquet.`{path}`", "part int, d string")

    assert table.path == path and table.version() == 0
    snap = snapshot_for(path)
    assert snap.metadata.partition_columns == ("part", "d")
    types = {f["name"]: f["type"] for f in snap.metadata.schema["fields"]}
    assert types == {"id": "integer", "v": "string", "part": "integer", "d": "string"}
    values = sorted((f.partition_values["part"], f.partition_values["d"] or "") for f in snap.files)
    assert values == [("10", ""), ("10", "x"), ("20", "a/b c%=1"), ("20", "x")]
    assert {f.partition_values["d"] for f in snap.files if f.partition_values["part"] == "10"} == {None, "x"}
    assert any("d=a%252Fb%20c%2525%253D1/" in f.path for f in snap.files)  # add.path URI-encodes the dir
    assert all(json.loads(f.stats or "{}")["numRecords"] == 1 for f in snap.files)
    assert _rows(spark, path) == sorted(ROWS)
    assert _rs_rows(path) == sorted(ROWS)
    params = _last_commit(spark, path).operationParameters
    assert params["partitionedBy"] == '["part","d"]' and params["numFiles"] == "4"


def test_no_statistics_then_merge(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _parquet(spark, path, ("part",))

    _sql(spark, f"CONVERT TO DELTA parquet.`{path}` NO STATISTICS PARTITIONED BY (part INT)")

    assert all(f.stats is None for f in snapshot_for(path).files)
    commit = _last_commit(spark, path)
    assert commit.operationParameters["collectStats"] == "false"
    assert commit.operationMetrics == {"numConvertedFiles": "2"}

    src = spark.createDataFrame([(2, "B", 10, "y"), (5, "e", 30, None)], DDL)
    DeltaTable.forPath(spark, path).alias("t").merge(
        src.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    expected = sorted([r for r in ROWS if r[0] != 2] + [(2, "B", 10, "y"), (5, "e", 30, None)])
    assert _rows(spark, path) == expected
    assert _rs_rows(path) == expected


def test_convert_is_idempotent(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _parquet(spark, path, ("part",))
    schema = StructType([StructField("part", IntegerType())])
    DeltaTable.convertToDelta(spark, f"parquet.`{path}`", schema)
    log = sorted(os.listdir(os.path.join(path, "_delta_log")))

    # again by path, as a Delta path, and with a partition schema that no longer matters
    _sql(spark, f"CONVERT TO DELTA parquet.`{path}`")
    _sql(spark, f"CONVERT TO DELTA delta.`{path}` PARTITIONED BY (nope string)")
    assert DeltaTable.convertToDelta(spark, f"delta.`{path}`").version() == 0

    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == log
    assert DeltaTable.forPath(spark, path).history().count() == 1
    assert _rows(spark, path) == sorted(ROWS)


def _write_conflicting_footers(spark, path: str) -> None:
    spark.createDataFrame([(1,)], "id int").coalesce(1).write.parquet(f"{path}/part=1")
    spark.createDataFrame([("1",)], "id string").coalesce(1).write.parquet(f"{path}/part=2")


@pytest.mark.parametrize(
    ("case", "statement", "error_class"),
    [
        ("empty", "CONVERT TO DELTA parquet.`{p}`", "DELTA_EMPTY_DIRECTORY"),
        (
            "partitioned",
            "CONVERT TO DELTA parquet.`{p}` PARTITIONED BY (prt int)",
            "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME",
        ),
        (
            "partitioned",
            "CONVERT TO DELTA parquet.`{p}`",
            "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME",
        ),
        (
            "partitioned",
            "CONVERT TO DELTA parquet.`{p}` PARTITIONED BY (part date)",
            "DELTA_FAILED_CAST_PARTITION_VALUE",
        ),
        ("partitioned", "CONVERT TO DELTA json.`{p}`", "DELTA_CONVERT_NON_PARQUET_TABLE"),
        ("partitioned", "CONVERT TO DELTA `{p}`", "DELTA_MISSING_PROVIDER_FOR_CONVERT"),
        (
            "conflicting",
            "CONVERT TO DELTA parquet.`{p}` PARTITIONED BY (part int)",
            "DELTA_FAILED_MERGE_SCHEMA_FILE",
        ),
    ],
)
def test_refused_conversion_leaves_no_log(
    spark, tmp_path, case: str, statement: str, error_class: str
) -> None:
    path = str(tmp_path / "t")
    if case == "empty":
        os.makedirs(os.path.join(path, "_hidden"))
        open(os.path.join(path, ".hidden"), "w").close()
    elif case == "partitioned":
        _parquet(spark, path, ("part",))
    else:
        _write_conflicting_footers(spark, path)

    with pytest.raises(DeltaMergeError) as err:
        _sql(spark, statement.format(p=path))

    assert err.value.error_class == error_class and str(err.value).startswith(f"[{error_class}] ")
    if case == "conflicting":
        assert "part=2" in str(err.value)  # names the file that does not merge
    assert not os.path.exists(os.path.join(path, "_delta_log"))


def test_refused_conversion_leaves_existing_table_unchanged(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame(ROWS, DDL), path)
    log = sorted(os.listdir(os.path.join(path, "_delta_log")))

    with pytest.raises(DeltaMergeError, match=r"^\[DELTA_CONVERT_NON_PARQUET_TABLE\]"):
        DeltaTable.convertToDelta(spark, f"json.`{path}`")
    # a Delta table claimed as Parquet: nothing to do, even with a partition schema it lacks
    DeltaTable.convertToDelta(spark, f"parquet.`{path}`", StructType([StructField("d", StringType())]))

    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == log
    assert snapshot_for(path).version == 0
    assert _rows(spark, path) == sorted(ROWS)
