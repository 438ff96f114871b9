"""REORG TABLE ... APPLY (PURGE): the GDPR erase of a deletion-vector table.

A MERGE that deletes a user's rows from a DV table only marks them in deletion vectors; the rows
stay in the data files. REORG ... APPLY (PURGE) rewrites every file whose deletion vector marks rows
(and every file that still holds a dropped column), and VACUUM then removes the old files: after
both, no Parquet file under the table holds the erased rows or the dropped column.
"""

from __future__ import annotations

import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark

DV = {"delta.enableDeletionVectors": "true"}


def _write(spark, path: str, *, partitioned: bool = True, conf=None) -> None:
    df = spark.range(0, 400, numPartitions=4).select(
        F.col("id"),
        (F.col("id") % 50).alias("user"),
        F.concat(F.lit("mail-"), F.col("id").cast("string")).alias("email"),
        F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("p"),
    )
    deltamerge.write(df, path, partition_by=["p"] if partitioned else None, configuration=conf or DV)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _ids_on_disk(path: str) -> set[int]:
    """Every id in every Parquet file under the table, live or not."""
    out: set[int] = set()
    for f in glob.glob(f"{path}/**/*.parquet", recursive=True):
        out.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return out


def _forget_user(spark, path: str, user: int) -> None:
    gone = spark.createDataFrame([(user,)], "user long")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(gone.alias("s"), "t.user = s.user")
        .whenMatchedDelete()
        .execute()
    )


def test_merge_delete_then_purge_and_vacuum_erases_the_rows(spark, tmp_path, spark_conf) -> None:
    path = str(tmp_path / "t")
    _write(spark, path)
    before = snapshot_for(path)
    _forget_user(spark, path, 7)  # ids 7, 57, 107, ...: odd partition only
    erased = {i for i in range(400) if i % 50 == 7}
    marked = [f for f in snapshot_for(path).files if f.deletion_vector is not None]
    assert marked and erased <= _ids_on_disk(path)  # deleted, but still in the files
    expected = _rows(spark, path)
    assert not erased & {r[0] for r in expected}

    result = deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()[0]
    metrics = result["metrics"]
    assert metrics["numFilesRemoved"] == len(marked)
    assert metrics["numFilesAdded"] >= 1
    assert metrics["deletionVectorStats"]["numDeletionVectorsRemoved"] == len(marked)
    assert metrics["deletionVectorStats"]["numDeletionVectorRowsRemoved"] == len(erased)
    assert metrics["totalConsideredFiles"] == len(before.files)
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operation"] == "REORG"
    assert last["operationParameters"] == {"predicate": "[]", "applyPurge": "true"}
    snap = snapshot_for(path)
    assert all(f.deletion_vector is None for f in snap.files)
    # Files without deleted rows were not rewritten (the even partition here).
    untouched = {f.path for f in before.files if "p=even" in f.path}
    assert untouched <= {f.path for f in snap.files}
    assert _rows(spark, path) == expected
    live = set()
    for f in snap.files:
        live.update(pq.read_table(os.path.join(path, f.path), columns=["id"]).column("id").to_pylist())
    assert not live & erased

    spark_conf({"spark.databricks.delta.retentionDurationCheck.enabled": "false"})
    deltamerge.sql(spark, f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    assert not _ids_on_disk(path) & erased
    assert _rows(spark, path) == expected

    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    rs = QueryBuilder().register("t", RsTable(path)).execute("SELECT id FROM t ORDER BY id").read_all()
    assert [r["id"] for r in pa.table(rs).to_pylist()] == [r[0] for r in expected]

    # Nothing left to purge: no commit.
    version = DeltaTable.forPath(spark, path).version()
    again = deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()[0]
    assert again["metrics"]["numFilesRemoved"] == 0
    assert DeltaTable.forPath(spark, path).version() == version


def test_purge_rewrites_a_lone_file_and_respects_the_partition_predicate(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _write(spark, path)
    # Delete from both partitions; purge only the even one.
    DeltaTable.forPath(spark, path).delete("id % 100 = 0 OR id % 100 = 1")
    marked = {f.path for f in snapshot_for(path).files if f.deletion_vector is not None}
    even = {p for p in marked if "p=even" in p}
    assert even and marked - even

    metrics = deltamerge.sql(spark, f"REORG TABLE delta.`{path}` WHERE p = 'even' APPLY (PURGE)").collect()[
        0
    ]["metrics"]
    assert metrics["numFilesRemoved"] == len(even)
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert json.loads(last["operationParameters"]["predicate"]) == ["(p = 'even')"]
    still = {f.path for f in snapshot_for(path).files if f.deletion_vector is not None}
    assert still == marked - even

    version = DeltaTable.forPath(spark, path).version()
    with pytest.raises(DeltaMergeError, match="DELTA_NON_PARTITION_COLUMN_REFERENCE"):
        deltamerge.sql(spark, f"REORG TABLE delta.`{path}` WHERE id > 3 APPLY (PURGE)")
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_OPERATION"):
        deltamerge.sql(
            spark, f"REORG TABLE delta.`{path}` APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION = 2))"
        )
    assert DeltaTable.forPath(spark, path).version() == version


def test_purge_removes_a_dropped_column_from_the_files(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _write(spark, path, partitioned=False, conf={"delta.columnMapping.mode": "name"})
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP COLUMN email")
    snap = snapshot_for(path)
    files = [os.path.join(path, f.path) for f in snap.files]
    assert all(len(pq.read_schema(f).names) == 4 for f in files)  # id, user, p and the dropped email
    expected = _rows(spark, path)
    assert len(expected[0]) == 3

    metrics = deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()[0]["metrics"]
    assert metrics["numFilesRemoved"] == len(files)
    snap = snapshot_for(path)
    assert all(len(pq.read_schema(os.path.join(path, f.path)).names) == 3 for f in snap.files)
    assert _rows(spark, path) == expected
    # A second purge finds nothing to do.
    version = DeltaTable.forPath(spark, path).version()
    deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    assert DeltaTable.forPath(spark, path).version() == version
