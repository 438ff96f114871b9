"""Tables with VARIANT columns (table feature ``variantType``): written unshredded, as the protocol
asks, read back, merged into, and refused where Delta refuses them.

Ported from delta-io/delta ``DeltaVariantSuite.scala``: the protocol a variant table gets (new table,
added column), schema evolution by append and by MERGE, the change data feed, NOT NULL and CHECK
constraints, generated columns (from a variant, and of variant type), partition, clustering and
Z-order refusals, shallow clone and time travel. Catalog names become ``delta.`path```. Not ported:
streaming, the ``variantType-preview`` / ``FORCE_USE_PREVIEW_VARIANT_FEATURE`` switches, column
mapping with ``pushVariantIntoScan`` and the Spark 4.0 blocking switches (delta-spark internals),
CONVERT TO DELTA (deltamerge's CONVERT reads the footers' statistics, which are those of any struct).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.actions import Protocol
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _code_generation(spark_conf) -> None:  # type: ignore[no-untyped-def]
    """Spark 4's scan of a variant cast (``v::int`` pushed into the Parquet reader) has no
    interpreted form (``ScalarCastHelper must override either eval or nullSafeEval``): the test
    session's NO_CODEGEN mode (``tests/spark_settings.py``) would fail it where production's
    code generation does not."""
    spark_conf({"spark.sql.codegen.factoryMode": "FALLBACK"})


VARIANT_PROTOCOL = Protocol(3, 7, ("variantType",), ("appendOnly", "invariants", "variantType"))


def _sql(spark, text: str):  # type: ignore[no-untyped-def]
    return deltamerge.sql(spark, text)


def _protocol(path: str) -> Protocol:
    snap = DeltaLog.for_table(path).update()
    return snap.protocol


def _stats(path: str) -> list[dict]:
    snap = DeltaLog.for_table(path).update()
    return [json.loads(f.stats) for f in snap.files if f.stats]


def _unshredded(path: str) -> None:
    """Every data file holds each variant as the (value, metadata) pair of binaries the protocol
    asks of a table without ``variantShredding`` (Spark 4.1+ would add typed columns)."""
    for f in DeltaLog.for_table(path).update().files:
        t = pq.read_schema(str(Path(path) / f.path)).field("v").type
        assert [c.name for c in t] == ["value", "metadata"], (f.path, t)


def _ints(spark, query: str) -> list:  # type: ignore[no-untyped-def]
    rows = [tuple(r) for r in _sql(spark, query).collect()]
    return sorted(rows, key=lambda r: [(v is None, 0 if v is None else v) for v in r])


def test_new_variant_table_protocol_statistics_and_values(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = spark.sql(
        "SELECT id, parse_json(CASE WHEN id = 2 THEN NULL ELSE cast(id AS string) END) AS v, "
        "named_struct('a', parse_json('{\"x\": 1}'), 'b', id) AS s, array(parse_json('[1]')) AS arr "
        "FROM range(3)"
    ).coalesce(1)
    deltamerge.write(df, path)
    assert _protocol(path) == VARIANT_PROTOCOL
    (stats,) = _stats(path)
    # A variant gets a null count (its Parquet group's required ``metadata`` leaf) and no bounds.
    assert stats["nullCount"]["v"] == 1 and stats["nullCount"]["s"] == {"a": 0, "b": 0}
    assert "v" not in stats["minValues"] and stats["minValues"]["s"] == {"b": 0}
    assert stats["maxValues"]["id"] == 2
    rows = deltamerge.read(spark, path).selectExpr("id", "to_json(v)", "to_json(s.a)", "to_json(arr[0])")
    assert sorted(tuple(r) for r in rows.collect()) == [
        (0, "0", '{"x":1}', "[1]"),
        (1, "1", '{"x":1}', "[1]"),
        (2, None, '{"x":1}', "[1]"),
    ]
    # The null count prunes: no file holds a NULL in ``s.a``.
    assert deltamerge.read(spark, path).where("s.a IS NULL").count() == 0
    assert deltamerge.read(spark, path).where("v IS NULL").count() == 1
    _unshredded(path)
    # delta-rs reads them too (as the struct of binaries).
    from deltalake import DeltaTable as DeltaRsTable

    read = DeltaRsTable(path).to_pyarrow_table().sort_by("id").column("v").to_pylist()
    assert read[2] is None and read[0] == {"value": b"\x0c\x00", "metadata": b"\x01\x00\x00"}


def test_table_without_variant_keeps_the_minimum_protocol(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sql(spark, f"CREATE TABLE delta.`{path}` (s STRING, i INTEGER) USING DELTA")
    assert _protocol(path) == Protocol(1, 2)


def test_adding_variant_columns_upgrades_the_protocol(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    _sql(spark, f"CREATE TABLE {t} (s STRING) USING delta")
    assert _protocol(path) == Protocol(1, 2)
    _sql(spark, f"ALTER TABLE {t} ADD COLUMN v VARIANT")
    _sql(spark, f"INSERT INTO {t} (SELECT 'foo', parse_json(cast(id + 99 as string)) FROM range(1))")
    assert _ints(spark, f"SELECT v::int FROM {t}") == [(99,)]
    _sql(spark, f"ALTER TABLE {t} ADD COLUMN v2 STRUCT<v21 VARIANT>")
    _sql(
        spark,
        f"INSERT INTO {t} (SELECT 'bar', parse_json(cast(id + 100 as string)), "
        "struct(parse_json(cast(id + 101 as string))) FROM range(1))",
    )
    assert _ints(spark, f"SELECT v::int FROM {t}") == [(99,), (100,)]
    assert _ints(spark, f"SELECT v2.v21::int FROM {t}") == [(101,), (None,)]  # NULLs last
    assert _protocol(path) == VARIANT_PROTOCOL


def test_append_with_schema_evolution_adds_a_variant_column(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 100, 1, 1).selectExpr("id", "parse_json(cast(id as string)) v"), path)
    more = spark.range(100, 200, 1, 1).selectExpr(
        "id", "parse_json(cast(id as string)) v", "parse_json(cast(id as string)) v_two"
    )
    deltamerge.write(more, path, mode="append", merge_schema=True)
    got = deltamerge.read(spark, path).selectExpr("id", "v::long", "v_two::long").collect()
    assert sorted(tuple(r) for r in got) == [(i, i, i if i >= 100 else None) for i in range(200)]


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["cow", "dv"])
def test_merge_with_schema_evolution_adds_a_variant_column(
    spark, spark_conf, tmp_path: Path, deletion_vectors: bool
) -> None:
    path = str(tmp_path / "t")
    conf = {"delta.enableDeletionVectors": "true"} if deletion_vectors else None
    deltamerge.write(
        spark.range(0, 100, 1, 1).selectExpr("id", "parse_json(cast(id as string)) v"),
        path,
        configuration=conf,
    )
    source = spark.range(50, 200, 1, 1).selectExpr(
        "id", "parse_json(cast(id * 10 as string)) v", "parse_json(cast(id as string)) v_two"
    )
    spark_conf({"spark.databricks.delta.schema.autoMerge.enabled": "true"})
    table = DeltaTable.forPath(spark, path)
    table.alias("t").merge(
        source.alias("s"), "s.id = t.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    got = deltamerge.read(spark, path).selectExpr("id", "v::long", "v_two::long").collect()
    expected = [(i, i * 10 if i >= 50 else i, i if i >= 50 else None) for i in range(200)]
    assert sorted(tuple(r) for r in got) == expected
    _unshredded(path)
    assert _protocol(path).reader_features is not None and "variantType" in _protocol(path).reader_features


def test_merge_updates_and_inserts_variant_values(spark, tmp_path: Path) -> None:
    """Variant-valued SET and INSERT expressions (``parse_json`` kept as such: SQLGlot's Spark
    dialect drops it, leaving a STRING), a variant comparison in ON through ``to_json``."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.sql("SELECT id, parse_json(cast(id AS string)) v FROM range(3)"), path)
    spark.sql(
        "SELECT id, parse_json(to_json(named_struct('n', id))) v FROM range(1, 5)"
    ).createOrReplaceTempView("variant_source")
    _sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING variant_source s ON t.id = s.id "
        "WHEN MATCHED AND variant_get(t.v, '$', 'int') = 2 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = parse_json('\"updated\"') "
        "WHEN NOT MATCHED AND to_json(s.v) = '{\"n\":4}' THEN INSERT (id, v) VALUES (s.id, s.v) "
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, parse_json('[true]'))",
    )
    got = deltamerge.read(spark, path).selectExpr("id", "to_json(v)").collect()
    assert sorted(tuple(r) for r in got) == [(0, "0"), (1, '"updated"'), (3, "[true]"), (4, '{"n":4}')]


def test_variant_table_change_data_feed(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    _sql(
        spark,
        f"CREATE TABLE {t} USING DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true) "
        "AS SELECT parse_json(cast(id as string)) v FROM range(100)",
    )
    _sql(spark, f"INSERT INTO {t} (SELECT parse_json(cast(id as string)) AS v FROM range(0, 1))")
    _sql(spark, f"DELETE FROM {t} WHERE v::int = 0")
    _sql(spark, f"UPDATE {t} SET v = parse_json('-2') WHERE v::int = 50")
    changes = f"SELECT _change_type, v::int FROM table_changes_by_path('{path}', 0)"
    assert _ints(spark, changes + " WHERE _change_type = 'delete'") == [("delete", 0), ("delete", 0)]
    assert _ints(spark, changes + " WHERE _change_type LIKE 'update%'") == [
        ("update_postimage", -2),
        ("update_preimage", 50),
    ]


def test_variant_not_null_constraint(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    _sql(spark, f"CREATE TABLE {t} (v variant NOT NULL) USING DELTA")
    _sql(spark, f"INSERT INTO {t} (SELECT parse_json(cast(id as string)) FROM range(0, 100))")
    with pytest.raises(DeltaMergeError, match="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"):
        _sql(spark, f"INSERT INTO {t} VALUES (cast(null as variant))")
    _sql(spark, f"ALTER TABLE {t} ALTER COLUMN v DROP NOT NULL")
    _sql(spark, f"INSERT INTO {t} VALUES (cast(null as variant))")
    assert _ints(spark, f"SELECT count(*) FROM {t} WHERE v IS NULL") == [(1,)]


def test_variant_check_constraint(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    check = f"ALTER TABLE {t} ADD CONSTRAINT variantGTEZero CHECK (variant_get(v, '$', 'INT') >= 0)"
    _sql(spark, f"CREATE TABLE {t} (v variant) USING DELTA")
    _sql(spark, check)
    _sql(spark, f"INSERT INTO {t} (SELECT parse_json(cast(id as string)) FROM range(0, 100))")
    with pytest.raises(DeltaMergeError, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES") as e:
        _sql(spark, f"INSERT INTO {t} (SELECT parse_json(cast(id as string)) FROM range(-1, 0))")
    assert "variantgtezero" in str(e.value)
    _sql(spark, f"ALTER TABLE {t} DROP CONSTRAINT variantGTEZero")
    _sql(spark, f"INSERT INTO {t} (SELECT parse_json(cast(id as string)) FROM range(-1, 0))")
    assert _ints(spark, f"SELECT count(*) FROM {t} WHERE v::int < 0") == [(1,)]
    with pytest.raises(DeltaMergeError, match=r"DELTA_NEW_CHECK_CONSTRAINT_VIOLATION.*1 rows"):
        _sql(spark, check)
    _sql(spark, f"DELETE FROM {t} WHERE variant_get(v, '$', 'INT') < 0")
    _sql(spark, check)
    assert _ints(spark, f"SELECT count(*) FROM {t} WHERE v::int < 0") == [(0,)]


def test_variant_as_generated_column_source_not_result(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "g")
    _sql(spark, f"CREATE TABLE delta.`{path}` (v VARIANT, vInt INT GENERATED ALWAYS AS (v::int)) USING DELTA")
    deltamerge.write(
        spark.range(0, 100).selectExpr("parse_json(cast(id as string)) as v"), path, mode="append"
    )
    got = deltamerge.read(spark, path).selectExpr("v::int", "vInt").collect()
    assert sorted(tuple(r) for r in got) == [(i, i) for i in range(100)]
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_DATA_TYPE_IN_GENERATED_COLUMN"):
        _sql(
            spark,
            f"CREATE TABLE delta.`{tmp_path / 'bad'}` "
            "(id INT, v VARIANT GENERATED ALWAYS AS (parse_json(cast(id as string)))) USING DELTA",
        )


def test_variant_cannot_partition_cluster_or_zorder(spark, tmp_path: Path) -> None:
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_PARTITION_COLUMN_TYPE"):
        _sql(
            spark,
            f"CREATE TABLE delta.`{tmp_path / 'p'}` (s STRING, v VARIANT) USING delta PARTITIONED BY (v)",
        )
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_PARTITION_COLUMN_TYPE"):
        deltamerge.write(
            spark.sql("SELECT 1 AS id, named_struct('a', 1) AS s"), str(tmp_path / "s"), partition_by=["s"]
        )
    assert not (tmp_path / "p" / "_delta_log").exists() and not (tmp_path / "s" / "_delta_log").exists()
    with pytest.raises(DeltaMergeError, match="CLUSTER BY"):
        _sql(spark, f"CREATE TABLE delta.`{tmp_path / 'c'}` (v variant) USING DELTA CLUSTER BY (v)")
    path = str(tmp_path / "z")
    deltamerge.write(spark.sql("SELECT id, cast(null AS variant) v FROM range(100)"), path)
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_DATA_TYPES"):
        _sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY (v)")


def test_variant_clone_and_time_travel(spark, tmp_path: Path) -> None:
    path, clone = str(tmp_path / "t"), str(tmp_path / "clone")
    _sql(
        spark,
        f"CREATE TABLE delta.`{path}` USING DELTA AS SELECT parse_json(cast(id as string)) v FROM range(100)",
    )
    _sql(spark, f"INSERT INTO delta.`{path}` (SELECT parse_json(cast(id as string)) AS v FROM range(0, 10))")
    _sql(spark, f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{path}`")
    assert _ints(spark, f"SELECT count(*), sum(v::int) FROM delta.`{clone}`") == [(110, 4995)]
    assert _protocol(clone) == VARIANT_PROTOCOL
    assert _ints(spark, f"SELECT count(*) FROM delta.`{path}` VERSION AS OF 0") == [(100,)]
    first = _sql(spark, f"SELECT v::int AS i FROM delta.`{path}` VERSION AS OF 0 WHERE v::int = 7").collect()
    assert first == [Row(i=7)]
