"""Partition columns whose directories look hidden (``_ingest_date=...``, ``_p%3Dx=...``) hold data
like any other: every write keeps its rows, reads see them, VACUUM cleans their old files, and
delta-rs reads the same table. (Spark's own ``_temporary`` and ``_SUCCESS`` stay out.)"""

from __future__ import annotations

import datetime as dt
import os

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

SCHEMA = "id long, v string, `_ingest_date` date, `_p=x` string"
PARTS = ["_ingest_date", "_p=x"]


@pytest.fixture(autouse=True)
def _partition_names(spark_conf) -> None:  # type: ignore[no-untyped-def]
    """`_p=x` holds '=': Delta writes such a partition column with partitionColumnValidity off."""
    spark_conf({"spark.databricks.delta.partitionColumnValidity.enabled": "false"})


def _rows(spark, path):  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _data(ids, v="a"):  # type: ignore[no-untyped-def]
    return [(i, v, dt.date(2024, 1, 1 + i % 2), f"k{i % 3}") for i in ids]


def test_writes_merges_and_vacuum_keep_hidden_looking_partitions(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame(_data(range(6)), SCHEMA), path, partition_by=PARTS)
    assert _rows(spark, path) == sorted(_data(range(6)))
    assert all(
        f.path.startswith("_ingest_date=") and "/_p%253Dx=" in f.path
        for f in DeltaLog.for_table(path).update().files
    )
    deltamerge.write(spark.createDataFrame(_data([6, 7]), SCHEMA), path, mode="append")
    src = spark.createDataFrame(_data([1, 7, 8], v="b"), SCHEMA)
    res = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll()
        .execute().collect()[0]
    )  # fmt: skip
    assert tuple(res) == (3, 2, 0, 1)
    DeltaTable.forPath(spark, path).delete("id = 0")
    expected = sorted([*_data([2, 3, 4, 5, 6]), *_data([1, 7, 8], v="b")])
    assert _rows(spark, path) == expected
    deltalake = pytest.importorskip("deltalake")
    theirs = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted(tuple(r[c] for c in ("id", "v", "_ingest_date", "_p=x")) for r in theirs) == expected

    # The files the merge and the delete replaced are unreferenced: VACUUM finds them in the
    # partition directories and leaves the live ones.
    live = {f.path for f in DeltaLog.for_table(path).update().files}
    on_disk = set()
    for dirpath, _dirs, names in os.walk(path):
        if "_delta_log" not in dirpath:
            on_disk |= {
                os.path.relpath(os.path.join(dirpath, n), path) for n in names if n.endswith(".parquet")
            }
    assert len(on_disk) > len(live)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        deleted = DeltaTable.forPath(spark, path).vacuum(0).collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert len(deleted) == len(on_disk) - len(live)
    assert _rows(spark, path) == expected
