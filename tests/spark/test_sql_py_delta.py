"""Port of delta-spark's Python SQL suite (``python/delta/tests/test_sql.py``): Delta statements
through ``spark.sql`` after ``deltamerge.configure(spark)``, on a table written twice (the second
write an overwrite, so VACUUM has files to delete)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import deltamerge

pytestmark = pytest.mark.spark


@pytest.fixture
def table(dspark, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "table")
    df = dspark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], ["key", "value"])
    df.write.format("delta").save(path)
    df.write.mode("overwrite").format("delta").save(path)
    return path


def _rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in df.collect())


def test_vacuum(dspark, spark_conf, table: str) -> None:  # type: ignore[no-untyped-def]
    spark_conf({"spark.databricks.delta.retentionDurationCheck.enabled": "false"})
    deleted = dspark.sql(f"VACUUM '{table}' RETAIN 0 HOURS").collect()
    assert deleted and table in deleted[0][0]


def test_describe_history(dspark, table: str) -> None:  # type: ignore[no-untyped-def]
    assert [r.operation for r in dspark.sql(f"desc history delta.`{table}`").collect()] == ["WRITE", "WRITE"]


def test_generate(dspark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "gen")
    dspark.range(100).repartition(10).write.format("delta").save(path)
    dspark.sql(f"GENERATE SYMLINK_FORMAT_MANIFEST FOR TABLE delta.`{path}`")
    with open(os.path.join(path, "_symlink_format_manifest", "manifest")) as f:
        assert len(f.readlines()) == 10


def test_convert(dspark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = dspark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], ["key", "value"])
    flat, parted = str(tmp_path / "flat"), str(tmp_path / "parted")
    df.write.format("parquet").save(flat)
    dspark.sql(f"CONVERT TO DELTA parquet.`{flat}`")
    assert _rows(dspark.read.format("delta").load(flat)) == [("a", 1), ("b", 2), ("c", 3)]
    df.write.partitionBy("value").format("parquet").save(parted)
    dspark.sql(f"CONVERT TO DELTA parquet.`{parted}` PARTITIONED BY (value INT)")
    converted = dspark.read.format("delta").load(parted).select("key", "value")
    assert _rows(converted) == [("a", 1), ("b", 2), ("c", 3)]


def test_ddls(dspark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    names = ("delta_table", "delta_table_part", "delta_table2")
    try:
        dspark.sql("CREATE TABLE delta_table (a LONG, b String NOT NULL) USING delta")
        assert dspark.sql("SELECT * FROM delta_table").count() == 0
        dspark.sql("CREATE TABLE delta_table_part (a LONG, b String NOT NULL) USING delta PARTITIONED BY (a)")
        described = dspark.sql("DESCRIBE TABLE delta_table").select("col_name", "data_type")
        assert [tuple(r) for r in described.collect()] == [("a", "bigint"), ("b", "string")]
        described = dspark.sql("DESCRIBE TABLE delta_table_part").select("col_name", "data_type")
        assert [tuple(r) for r in described.collect()] == [
            ("a", "bigint"),
            ("b", "string"),
            ("# Partition Information", ""),
            ("# col_name", "data_type"),
            ("a", "bigint"),
        ]
        dspark.sql("ALTER TABLE delta_table CHANGE COLUMN a a LONG AFTER b")
        assert [f.name for f in dspark.sql("SELECT * FROM delta_table").schema.fields] == ["b", "a"]
        dspark.sql("ALTER TABLE delta_table ALTER COLUMN b DROP NOT NULL")
        assert dspark.sql("SELECT * FROM delta_table").schema["b"].nullable
        dspark.sql("ALTER TABLE delta_table ADD COLUMNS (x LONG)")
        assert "x" in dspark.sql("SELECT * FROM delta_table").columns
        dspark.sql("ALTER TABLE delta_table SET TBLPROPERTIES ('k' = 'v')")
        assert _rows(dspark.sql("SHOW TBLPROPERTIES delta_table")) == [
            ("delta.minReaderVersion", "1"),
            ("delta.minWriterVersion", "2"),
            ("k", "v"),
        ]
        dspark.sql("ALTER TABLE delta_table UNSET TBLPROPERTIES ('k')")
        assert _rows(dspark.sql("SHOW TBLPROPERTIES delta_table")) == [
            ("delta.minReaderVersion", "1"),
            ("delta.minWriterVersion", "2"),
        ]
        dspark.sql("ALTER TABLE delta_table RENAME TO delta_table2")
        assert dspark.sql("SELECT * FROM delta_table2").count() == 0
        elsewhere = str(tmp_path / "elsewhere")
        dspark.createDataFrame([("", 0, 0)], ["b", "a", "x"]).write.format("delta").save(elsewhere)
        dspark.sql(f"ALTER TABLE delta_table2 SET LOCATION '{elsewhere}'")
        assert dspark.sql("SELECT * FROM delta_table2").count() == 1
    finally:
        for name in names:
            deltamerge.unregister_table(dspark, name)
