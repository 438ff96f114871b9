"""After a commit the cached snapshot is extended with the actions the transaction wrote, not with
the commit read back from the log: it must equal a snapshot loaded from the log by a fresh reader,
whatever the table's features (partitions, deletion vectors, row tracking, in-commit timestamps,
column mapping, the change data feed) and whatever the operation wrote."""

from __future__ import annotations

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log import replay
from deltamerge.log.snapshot import DeltaLog, Snapshot

FEATURES = {
    "plain": {},
    "dv": {"delta.enableDeletionVectors": "true"},
    "row_tracking_ict": {
        "delta.enableRowTracking": "true",
        "delta.enableInCommitTimestamps": "true",
        "delta.enableDeletionVectors": "true",
    },
    "mapped_cdf": {"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"},
}


def _facts(snap: Snapshot) -> dict:
    return {
        "version": snap.version,
        "timestamp": snap.timestamp,
        "protocol": snap.protocol.to_json(),
        "metadata": snap.metadata.to_json(),
        "files": sorted((f.path, f.to_json().__repr__()) for f in snap.files),
        "tombstones": sorted((t.path, t.to_json().__repr__()) for t in snap.tombstones),
        "apps": dict(snap.app_versions),
        "domains": {k: v.to_json() for k, v in snap.domains.items()},
    }


def _fresh(path: str) -> Snapshot:
    return DeltaLog(path).snapshot()


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("features", list(FEATURES))
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_snapshot_after_commit_equals_a_fresh_load(spark, tmp_path, monkeypatch, features, partitioned):
    path = str(tmp_path / "t")
    rows = [(i, i % 3, f"v{i}") for i in range(30)]
    deltamerge.write(
        spark.createDataFrame(rows, "id long, p int, v string").repartition(3),
        path,
        partition_by=["p"] if partitioned else None,
        configuration=FEATURES[features],
    )
    log = DeltaLog.for_table(path)
    log.update()
    reads: list[int] = []
    real = replay.read_commit
    monkeypatch.setattr(
        "deltamerge.log.snapshot.read_commit", lambda store, v: reads.append(v) or real(store, v)
    )
    source = spark.createDataFrame([(i, i % 3, f"s{i}") for i in range(20, 40)], "id long, p int, v string")
    table = DeltaTable.forPath(spark, path)
    operations = [
        lambda: (
            table.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdate("s.id % 4 = 0", {"v": "s.v"})
            .whenMatchedDelete("s.id % 4 = 1")
            .whenNotMatchedInsertAll()
            .execute()
        ),
        lambda: table.delete("id < 5"),
        lambda: table.update("id = 7", {"v": "'seven'"}),
    ]
    for operation in operations:
        reads.clear()
        operation()
        # The cache was extended with what the transaction wrote: no commit was read back.
        assert reads == []
        assert _facts(log.snapshot()) == _facts(_fresh(path))
    assert sorted(r.id for r in deltamerge.read(spark, path).collect()) == sorted(
        {i for i in range(40) if i >= 5 and not (20 <= i < 30 and i % 4 == 1)}
    )
