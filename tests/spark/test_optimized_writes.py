"""Delta's optimized writes (``delta.autoOptimize.optimizeWrite``, the session setting
``spark.databricks.delta.optimizeWrite.enabled``, the writer option ``optimizeWrite``): rows are
shuffled by the partition columns and written in files of about ``optimizeWrite.binSize``."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.config import parse_mib
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.write import optimized_write_bin_size

ENABLED = "spark.databricks.delta.optimizeWrite.enabled"
BIN_SIZE = "spark.databricks.delta.optimizeWrite.binSize"


def _frame(spark, n: int = 600, parts: int = 6):  # type: ignore[no-untyped-def]
    """``n`` rows in ``parts`` Spark partitions; ``p`` takes 3 values."""
    return spark.range(0, n, numPartitions=parts).select(
        F.col("id"), (F.col("id") % 3).alias("p"), F.concat(F.lit("v"), F.col("id").cast("string")).alias("v")
    )


def _files(path: str) -> list:  # type: ignore[type-arg]
    DeltaLog.clear_cache()
    return list(DeltaLog.for_table(path).snapshot().files)


def _added_by_last_commit(path: str) -> list:  # type: ignore[type-arg]
    log = DeltaLog.for_table(path)
    version = log.snapshot().version
    return [a for a in log.read_commit(version) if type(a).__name__ == "AddFile"]


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


@pytest.mark.parametrize(
    ("session", "option", "table_property", "optimized"),
    [
        (None, None, None, False),
        ("true", None, None, True),
        (None, "true", None, True),
        (None, None, "true", True),
        ("false", None, "true", False),  # the session setting before the table property
        ("true", "false", None, False),  # the writer option before both
        (None, "true", "false", True),
    ],
    ids=[
        "off",
        "session",
        "option",
        "table",
        "session-over-table",
        "option-over-session",
        "option-over-table",
    ],
)
def test_which_setting_applies(session, option, table_property, optimized) -> None:
    values = {ENABLED: session} if session else {}
    configuration = {"delta.autoOptimize.optimizeWrite": table_property} if table_property else {}
    options = {"OptimizeWrite": option} if option else None  # writer options match in any case
    got = optimized_write_bin_size(_Session(values), configuration, options)
    assert got == (512 << 20 if optimized else None)
    values[BIN_SIZE] = "64"
    assert optimized_write_bin_size(_Session(values), configuration, options) == (
        64 << 20 if optimized else None
    )


@pytest.mark.parametrize("optimized", [False, True], ids=["off", "table-property"])
def test_append_file_count(spark, tmp_path, optimized) -> None:
    path = str(tmp_path / "t")
    configuration = {"delta.autoOptimize.optimizeWrite": "true"} if optimized else None
    deltamerge.write(_frame(spark, 6, 1), path, configuration=configuration)
    deltamerge.write(_frame(spark), path, mode="append")
    added = _added_by_last_commit(path)
    # Six non-empty input partitions: six files as they come, one when the write is optimized.
    assert len(added) == (1 if optimized else 6)
    assert sum(a.num_records for a in added) == 600


@pytest.mark.parametrize(
    ("dv", "variant"),
    [(False, "default"), (True, "default"), (True, "one-job")],
    ids=["cow", "dv", "dv-one-job-semi-join"],
)
def test_partitioned_merge_writes_one_file_per_partition(spark, tmp_path, spark_conf, dv, variant) -> None:
    """A MERGE into a partitioned table with optimized writes (the table property) writes each
    partition's rows in one file, without its own repartition, and the rows are right; so does DV
    mode's one job (every candidate row broadcast by default; semi-joined with the source when
    forced), which once planned it without adaptive execution, where Spark drops the rebalance."""
    from merge_variants import VARIANTS

    spark_conf(VARIANTS[variant])
    path = str(tmp_path / "t")
    configuration = {
        "delta.autoOptimize.optimizeWrite": "true",
        "delta.enableDeletionVectors": str(dv).lower(),
    }
    deltamerge.write(_frame(spark, 300, 3), path, partition_by="p", configuration=configuration)
    assert len(_files(path)) == 3  # one file per partition at creation too
    source = _frame(spark, 900, 6).withColumn("v", F.lit("new"))
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id AND t.p = s.p")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )  # fmt: skip
    added = _added_by_last_commit(path)
    assert sorted(a.partition_values["p"] for a in added) == ["0", "1", "2"]
    rows = deltamerge.read(spark, path)
    assert rows.count() == 900 and rows.filter("v = 'new'").count() == 900


def test_bin_size_splits_large_partitions(spark, spark_conf, tmp_path) -> None:
    """One table partition: one file with the default bin (512 MiB), several when the bin is far
    smaller than its rows (a bin holds whole shuffle blocks, as Delta's do: at most one file per
    writing task)."""
    big = spark.range(0, 60_000, numPartitions=4).select(
        F.col("id"), F.lit(0).cast("long").alias("p"), F.sha2(F.col("id").cast("string"), 256).alias("v")
    )
    spark_conf({ENABLED: "true"})
    deltamerge.write(big, str(tmp_path / "default"), partition_by="p")
    assert len(_files(str(tmp_path / "default"))) == 1
    spark_conf({BIN_SIZE: "0.02"})  # about 20 KB of shuffle data per file
    deltamerge.write(big, str(tmp_path / "small"), partition_by="p")
    files = _files(str(tmp_path / "small"))
    assert 1 < len(files) <= 4 and sum(f.num_records for f in files) == 60_000
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.parallelismFirst") != "false"  # restored


def test_copy_on_write_merge_and_delete_rewrite_into_one_file(spark, spark_conf, tmp_path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(_frame(spark, 600, 6), path)
    assert len(_files(path)) == 6
    spark_conf({ENABLED: "true"})
    source = spark.range(0, 600, 7, numPartitions=3).select(
        F.col("id"), F.lit(9).cast("long").alias("p"), F.lit("m").alias("v")
    )
    DeltaTable.forPath(spark, path).alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().execute()
    assert len(_added_by_last_commit(path)) == 1
    DeltaTable.forPath(spark, path).delete("id % 2 = 0")
    assert len(_added_by_last_commit(path)) == 1
    rows = deltamerge.read(spark, path)
    assert rows.count() == 300 and rows.filter("v = 'm'").count() == len(range(7, 600, 14))


def test_settings_are_restored(spark, tmp_path) -> None:
    keys = (
        "spark.sql.adaptive.advisoryPartitionSizeInBytes",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst",
    )
    before = {k: spark.conf.get(k, None) for k in keys}
    deltamerge.write(_frame(spark), str(tmp_path / "t"), options={"optimizeWrite": "true"})
    assert {k: spark.conf.get(k, None) for k in keys} == before
    assert os.path.isdir(str(tmp_path / "t" / "_delta_log"))


def test_bin_size_setting_is_in_mib() -> None:
    assert parse_mib("512") == 512 << 20
    assert parse_mib("0.5") == 1 << 19
    assert parse_mib("1g") == 1 << 30
    assert parse_mib("64m") == 64 << 20


def test_create_table_as_select_and_update(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _frame(spark).createOrReplaceTempView("optimized_write_source")
    try:
        deltamerge.sql(
            spark,
            f"CREATE TABLE delta.`{path}` USING delta TBLPROPERTIES "
            "('delta.autoOptimize.optimizeWrite' = 'true') AS SELECT * FROM optimized_write_source",
        )
    finally:
        spark.catalog.dropTempView("optimized_write_source")
    assert len(_files(path)) == 1
    deltamerge.sql(spark, f"UPDATE delta.`{path}` SET v = 'u' WHERE id % 2 = 0")
    assert len(_added_by_last_commit(path)) == 1
    assert deltamerge.read(spark, path).filter("v = 'u'").count() == 300
