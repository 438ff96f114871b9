"""DeltaTable.delete / update (delta-spark's API) on the MERGE machinery: results, commits, metrics,
deletion vectors, change data, argument checks, and delta-rs reading what they write."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.dml import DELETE_METRIC_KEYS, UPDATE_METRIC_KEYS
from deltamerge.errors import AppendOnlyTableError, DeltaMergeError
from deltamerge.io import snapshot_for
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

DV = {"delta.enableDeletionVectors": "true"}
CDF = {"delta.enableChangeDataFeed": "true"}


def _make(spark, path, n=20, files=2, props=None, partitioned=False):
    df = spark.range(0, n, 1, files).selectExpr(
        "cast(id as int) as id", "cast(id * 10 as int) as v", "cast(id % 2 as string) as p"
    )
    deltamerge.write(df, path, partition_by=["p"] if partitioned else None, configuration=props)


def _rows(spark, path):
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _rs_rows(path):
    # delta-rs's pyarrow export refuses DV tables; its SQL engine reads them (and applies the DVs).
    from deltalake import QueryBuilder

    result = pa.table(QueryBuilder().register("t", RsTable(path)).execute("SELECT id, v, p FROM t"))
    return sorted(tuple(r.values()) for r in result.to_pylist())


def _last(spark, path):
    return DeltaTable.forPath(spark, path).history(1).collect()[0]


def _commit_actions(path, version):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [next(iter(json.loads(line))) for line in f]


def _expected(n=20, drop=(), change=None):
    out = []
    for i in range(n):
        if i in drop:
            continue
        row = (i, i * 10, str(i % 2))
        out.append(change(row) if change else row)
    return sorted(out)


def test_delete_rewrites_files_and_commits_delete(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    assert DeltaTable.forPath(spark, path).delete("id > 15") is None  # delta-spark returns None
    assert _rows(spark, path) == _expected(drop=range(16, 20))
    last = _last(spark, path)
    assert last["operation"] == "DELETE"
    assert last["operationParameters"] == {"predicate": '["(id > 15)"]'}
    metrics = last["operationMetrics"]
    assert set(metrics) == set(DELETE_METRIC_KEYS)
    assert (metrics["numDeletedRows"], metrics["numCopiedRows"]) == ("4", "6")
    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"]) == ("1", "1")
    assert last["isolationLevel"] == "WriteSerializable" and last["readVersion"] == 0
    assert sorted(RsTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "v": i * 10, "p": str(i % 2)} for i in range(16)
    ]


def test_update_with_column_condition_and_set(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    table = DeltaTable.forPath(spark, path)
    assert table.update(F.col("id") < 3, {"v": F.col("v") + 1, "p": "'x'"}) is None
    assert _rows(spark, path) == _expected(change=lambda r: (r[0], r[1] + 1, "x") if r[0] < 3 else r)
    last = _last(spark, path)
    assert last["operation"] == "UPDATE"
    assert last["operationParameters"] == {"predicate": '["(id < 3)"]'}
    metrics = last["operationMetrics"]
    assert set(metrics) == set(UPDATE_METRIC_KEYS)
    assert (metrics["numUpdatedRows"], metrics["numCopiedRows"]) == ("3", "7")
    table.update(set={"v": "0"})  # no condition: every row
    assert {r[1] for r in _rows(spark, path)} == {0}
    assert _last(spark, path)["operationParameters"] == {"predicate": "[]"}
    assert _rs_rows(path) == sorted((r[0], 0, r[2]) for r in _rows(spark, path))


def test_alias_qualified_condition_and_keys(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=6, files=1)
    table = DeltaTable.forPath(spark, path).alias("t")
    table.update("t.id = 1", {"t.v": "t.v * 2"})
    table.delete("t.id = 2")
    assert _rows(spark, path) == sorted([(0, 0, "0"), (1, 20, "1"), (3, 30, "1"), (4, 40, "0"), (5, 50, "1")])


def test_no_match_commits_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=6, files=1)
    table = DeltaTable.forPath(spark, path)
    before = sorted(os.listdir(path))
    table.delete("id > 100")
    table.update("id > 100", {"v": "1"})
    table.delete("p = 'zzz'")  # the metadata-only path: no partition matches either
    assert table.version() == 0
    assert sorted(os.listdir(path)) == before


def test_partition_and_full_deletes_are_metadata_only(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partitioned=True)
    table = DeltaTable.forPath(spark, path)
    before = {f.path for f in snapshot_for(path).files}
    table.delete("p = '1' AND p IS NOT NULL")
    actions = _commit_actions(path, 1)
    assert "add" not in actions and actions.count("remove") >= 1  # whole files dropped, nothing written
    assert _rows(spark, path) == _expected(drop=range(1, 20, 2))
    metrics = _last(spark, path)["operationMetrics"]
    assert set(metrics) == set(DELETE_METRIC_KEYS)
    assert metrics["numDeletedRows"] == "10" and metrics["numAddedFiles"] == "0"  # from the files' stats
    assert {f.path for f in snapshot_for(path).files} < before

    table.delete()
    assert _rows(spark, path) == []
    last = _last(spark, path)
    assert last["operationParameters"] == {"predicate": "[]"}
    assert last["operationMetrics"]["numDeletedRows"] == "10"
    assert "add" not in _commit_actions(path, 2)
    assert RsTable(path).to_pyarrow_table().num_rows == 0


def test_metadata_only_delete_without_stats_reports_minus_one(spark, tmp_path, drop_stats):
    # Without stats a metadata-only delete cannot count rows: Delta returns -1 and leaves the row
    # metrics out of history.
    path = str(tmp_path / "t")
    _make(spark, path, n=4, files=1, partitioned=True)
    drop_stats(path)
    from deltamerge import dml

    assert dml.delete(spark, path, "p = '0'").collect()[0][0] == -1
    metrics = _last(spark, path)["operationMetrics"]
    assert "numDeletedRows" not in metrics and "numCopiedRows" not in metrics
    assert metrics["numRemovedFiles"] == "1"
    assert _rows(spark, path) == [(1, 10, "1"), (3, 30, "1")]


def test_dv_table_delete_and_update_write_deletion_vectors(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, props=DV)
    table = DeltaTable.forPath(spark, path)
    table.delete("v = 30 OR v = 170")
    snap = snapshot_for(path)
    assert sorted(f.deletion_vector.cardinality for f in snap.files if f.deletion_vector) == [1, 1]
    assert sum(f.num_records for f in snap.files) == 20  # nothing rewritten
    m = _last(spark, path)["operationMetrics"]
    assert (m["numDeletionVectorsAdded"], m["numDeletedRows"], m["numAddedFiles"]) == ("2", "2", "0")

    table.update("id < 2", {"v": "-1"})
    m = _last(spark, path)["operationMetrics"]
    assert (m["numDeletionVectorsUpdated"], m["numUpdatedRows"], m["numCopiedRows"]) == ("1", "2", "0")
    expected = _expected(drop=(3, 17), change=lambda r: (r[0], -1, r[2]) if r[0] < 2 else r)
    assert _rows(spark, path) == expected
    assert _rs_rows(path) == expected  # delta-rs applies our deletion vectors


@pytest.mark.parametrize("command", ["delete", "update"])
def test_persistent_deletion_vector_settings_of_delete_and_update(spark, tmp_path, spark_conf, command):
    """Delta's ``delete.deletionVectors.persistent`` / ``update.deletionVectors.persistent``: off,
    that command rewrites files on a DV table; the other command's and MERGE's settings do not
    apply to it."""
    other = "update" if command == "delete" else "delete"
    spark_conf(
        {
            f"spark.databricks.delta.{command}.deletionVectors.persistent": "false",
            f"spark.databricks.delta.{other}.deletionVectors.persistent": "true",
            "spark.databricks.delta.merge.deletionVectors.persistent": "true",
        }
    )
    path = str(tmp_path / "t")
    _make(spark, path, props=DV)
    table = DeltaTable.forPath(spark, path)
    if command == "delete":
        table.delete("v = 30")
        expected = _expected(drop=(3,))
    else:
        table.update("id = 3", {"v": "-1"})
        expected = _expected(change=lambda r: (3, -1, r[2]) if r[0] == 3 else r)
    snap = snapshot_for(path)
    assert not any(f.deletion_vector for f in snap.files)
    m = _last(spark, path)["operationMetrics"]
    assert (m["numDeletionVectorsAdded"], m["numRemovedFiles"], m["numCopiedRows"]) == ("0", "1", "9")
    assert _rows(spark, path) == expected
    # The other command still writes a deletion vector.
    if other == "delete":
        table.delete("v = 40")
        expected = [r for r in expected if r[0] != 4]
    else:
        table.update("id = 4", {"v": "-4"})
        expected = sorted((4, -4, r[2]) if r[0] == 4 else r for r in expected)
    assert _last(spark, path)["operationMetrics"]["numDeletionVectorsAdded"] == "1"
    assert _rows(spark, path) == expected


def test_cdf_table_records_changes(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=8, files=2, props=CDF, partitioned=True)
    table = DeltaTable.forPath(spark, path)
    table.update("id = 2", {"v": "v + 1"})  # v1
    table.delete("id = 3")  # v2, rewrites a file
    table.delete("p = '0'")  # v3, metadata-only: removes whole files
    changes = deltamerge.read_changes(spark, path, 1).select("id", "v", "_change_type", "_commit_version")
    got = sorted(tuple(r) for r in changes.collect())
    assert got == sorted(
        [
            (2, 20, "update_preimage", 1),
            (2, 21, "update_postimage", 1),
            (3, 30, "delete", 2),
            (0, 0, "delete", 3),
            (2, 21, "delete", 3),
            (4, 40, "delete", 3),
            (6, 60, "delete", 3),
        ]
    )
    assert _last(spark, path)["operationMetrics"]["numAddedChangeFiles"] == "0"
    rs = pa.table(RsTable(path).load_cdf(starting_version=1).read_all())
    rs_got = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in rs.to_pylist())
    assert rs_got == sorted((g[0], g[2], g[3]) for g in got)


def test_argument_checks_match_delta_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=2, files=1)
    table = DeltaTable.forPath(spark, path)
    with pytest.raises(TypeError, match=r"^'condition' must be a Spark SQL Column or a string"):
        table.delete(1)
    with pytest.raises(ValueError, match=r"^'set' cannot be None$"):
        table.update("id = 1")
    with pytest.raises(TypeError, match=r"^'set' must be a dict, found to be <class 'list'>$"):
        table.update(set=[("v", "1")])
    with pytest.raises(TypeError, match=r"^Keys of dict in 'set' must contain only strings"):
        table.update(set={1: "1"})
    with pytest.raises(TypeError, match=r"^Values of dict in 'set' must contain only Spark SQL Columns"):
        table.update(set={"v": 1})
    with pytest.raises(TypeError, match=r"^'condition' must be"):
        table.update(condition=5, set={"v": "1"})
    with pytest.raises(DeltaMergeError, match="UNRESOLVED_COLUMN"):
        table.update(set={"nope": "1"})
    with pytest.raises(DeltaMergeError, match="DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"):
        table.delete("rand() > 0.5")
    assert table.version() == 0


def test_append_only_table_refuses_before_writing(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=4, files=1, props={"delta.appendOnly": "true"})
    with pytest.raises(AppendOnlyTableError):
        DeltaTable.forPath(spark, path).delete("id = 1")
    with pytest.raises(AppendOnlyTableError):
        DeltaTable.forPath(spark, path).update("id = 1", {"v": "0"})
    assert DeltaLog.for_table(path).update().version == 0
    assert len([n for n in os.listdir(path) if n.endswith(".parquet")]) == 1


def test_data_skipping_reads_only_candidate_files(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=20, files=4)  # ids 0-4, 5-9, 10-14, 15-19
    DeltaTable.forPath(spark, path).delete("id = 7")
    m = _last(spark, path)["operationMetrics"]
    assert (m["numRemovedFiles"], m["numCopiedRows"]) == ("1", "4")


def test_metadata_only_delete_conflicts_only_with_appends_it_would_have_seen(spark, tmp_path, monkeypatch):
    from deltamerge import dml
    from deltamerge.errors import ConcurrentAppendError
    from deltamerge.txn.transaction import OptimisticTransaction

    # Serializable: under the default WriteSerializable a blind append never conflicts with a DELETE.
    path = str(tmp_path / "t")
    _make(spark, path, n=4, files=1, partitioned=True, props={"delta.isolationLevel": "Serializable"})
    pending = []

    class Racing(OptimisticTransaction):
        def commit(self, actions, operation, **kw):
            while pending:  # a concurrent writer lands between our read and our commit
                deltamerge.write(pending.pop(), path, mode="append")
            return super().commit(actions, operation, **kw)

    monkeypatch.setattr(dml, "OptimisticTransaction", Racing)
    pending.append(spark.createDataFrame([(9, 90, "1")], "id int, v int, p string"))
    DeltaTable.forPath(spark, path).delete("p = '0'")  # the append went to another partition
    assert _rows(spark, path) == [(1, 10, "1"), (3, 30, "1"), (9, 90, "1")]
    pending.append(spark.createDataFrame([(11, 110, "1")], "id int, v int, p string"))
    with pytest.raises(ConcurrentAppendError):
        DeltaTable.forPath(spark, path).delete("p = '1'")
    assert _rows(spark, path) == [(1, 10, "1"), (3, 30, "1"), (9, 90, "1"), (11, 110, "1")]
