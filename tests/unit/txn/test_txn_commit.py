"""OptimisticTransaction: commit content, validation, isolation level, retries, post-commit checkpoints."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from txntest_helpers import create_table, merge, new_add, optimize, table_metadata

from deltamerge.errors import (
    AppendOnlyTableError,
    CommitError,
    InvalidArgumentError,
    MaxCommitAttemptsError,
    UnsupportedFeatureError,
)
from deltamerge.log import filenames
from deltamerge.log.actions import (
    CommitInfo,
    Protocol,
    SetTransaction,
    serialize_commit,
)
from deltamerge.log.snapshot import DeltaLog
from deltamerge.log.store import LocalLogStore
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction


def lines(log: DeltaLog, version: int) -> list[dict]:
    return [json.loads(x) for x in log.store.read(filenames.commit_name(version)).decode().splitlines()]


def test_create_table_commit(tmp_path: Path) -> None:
    log = DeltaLog(str(tmp_path / "t"))
    txn = OptimisticTransaction(log)
    assert txn.read_version == -1 and txn.is_new_table and txn.metadata is None
    txn.update_metadata(table_metadata({"delta.appendOnly": "false"}))
    version = txn.commit(
        [new_add("a")],
        Operation(
            "CREATE TABLE", {"partitionBy": ["p"], "mode": "ErrorIfExists", "n": None}, {"numFiles": 1}
        ),
        user_metadata="hello",
    )
    assert version == 0
    first, *rest = lines(log, 0)
    info = first["commitInfo"]
    assert "readVersion" not in info
    assert info["operation"] == "CREATE TABLE"
    assert info["operationParameters"] == {"partitionBy": '["p"]', "mode": "ErrorIfExists", "n": None}
    assert info["operationMetrics"] == {"numFiles": "1"}
    assert info["isolationLevel"] == "WriteSerializable"
    assert info["isBlindAppend"] is False  # creating (a metadata change) is never a blind append
    assert info["userMetadata"] == "hello" and info["engineInfo"].startswith("deltamerge/")
    assert uuid.UUID(info["txnId"]) and isinstance(info["timestamp"], int)
    keys = [next(iter(x)) for x in rest]
    assert keys == ["protocol", "metaData", "add"]
    md = rest[1]["metaData"]
    assert uuid.UUID(md["id"]) and md["createdTime"] > 0
    assert rest[0]["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    snap = log.snapshot()
    assert snap.version == 0 and snap.num_files == 1 and snap.metadata.id == md["id"]


def test_session_user_metadata_and_the_explicit_one(tmp_path: Path) -> None:
    log = DeltaLog(str(tmp_path / "t"))
    conf = {"spark.databricks.delta.commitInfo.userMetadata": "from the session"}
    txn = OptimisticTransaction(log, conf=conf)
    txn.update_metadata(table_metadata())
    txn.commit([new_add("a")], Operation("WRITE", {}, {}))
    assert lines(log, 0)[0]["commitInfo"]["userMetadata"] == "from the session"
    txn = OptimisticTransaction(log, conf=conf)
    txn.commit([new_add("b")], Operation("WRITE", {}, {}), user_metadata="explicit")
    assert lines(log, 1)[0]["commitInfo"]["userMetadata"] == "explicit"
    OptimisticTransaction(log).commit([new_add("c")], Operation("WRITE", {}, {}))
    assert "userMetadata" not in lines(log, 2)[0]["commitInfo"]


def test_blind_append_and_read_version(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    txn = OptimisticTransaction(log)
    assert txn.commit([new_add("a"), new_add("b")], Operation("WRITE", {"mode": "Append"})) == 1
    first, *rest = lines(log, 1)
    assert first["commitInfo"]["readVersion"] == 0 and first["commitInfo"]["isBlindAppend"] is True
    assert [next(iter(x)) for x in rest] == ["add", "add"]  # no protocol/metaData on unchanged tables


def test_not_blind_when_reading_or_removing(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"), files=(new_add("a"),))
    txn = OptimisticTransaction(log)
    txn.commit(*merge(txn, "a"))
    assert lines(log, 1)[0]["commitInfo"]["isBlindAppend"] is False
    txn = OptimisticTransaction(log)
    txn.add_read_predicate(lambda f: True, "true")
    txn.commit([new_add("a")], Operation("WRITE"))
    assert lines(log, 2)[0]["commitInfo"]["isBlindAppend"] is False


@pytest.mark.parametrize(
    ("table_level", "override", "op", "expected"),
    [
        (None, None, "merge", "WriteSerializable"),
        ("Serializable", None, "merge", "Serializable"),
        ("WriteSerializable", "Serializable", "merge", "Serializable"),
        (None, None, "optimize", "SnapshotIsolation"),
        ("Serializable", None, "optimize", "SnapshotIsolation"),
        (None, None, "rearrange_but_changes_data", "WriteSerializable"),
        ("Serializable", None, "rearrange_but_changes_data", "SnapshotIsolation"),
    ],
)
def test_isolation_level(
    tmp_path: Path, table_level: str | None, override: str | None, op: str, expected: str
) -> None:
    conf = {"delta.isolationLevel": table_level} if table_level else {}
    log = create_table(str(tmp_path / "t"), conf, files=(new_add("a"),))
    txn = OptimisticTransaction(log, isolation_level=override)
    if op == "merge":
        actions, operation = merge(txn, "a")
    else:
        actions, operation = optimize(txn, "a")
        if op == "rearrange_but_changes_data":
            operation = replace(operation, changes_data=True)
    txn.commit(actions, operation)
    assert lines(log, 1)[0]["commitInfo"]["isolationLevel"] == expected


def test_invalid_isolation_levels(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"delta\.isolationLevel"):
        create_table(str(tmp_path / "t"), {"delta.isolationLevel": "ReadCommitted"})
    assert not DeltaLog(str(tmp_path / "t")).exists()
    log = create_table(str(tmp_path / "u"))
    with pytest.raises(InvalidArgumentError, match="isolation level"):
        OptimisticTransaction(log, isolation_level="Chaos")


def test_append_only(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"), {"delta.appendOnly": "true"}, files=(new_add("a"), new_add("b")))
    txn = OptimisticTransaction(log)
    with pytest.raises(AppendOnlyTableError) as exc:
        txn.commit(*merge(txn, "a"))
    assert (
        exc.value.error_class == "DELTA_CANNOT_MODIFY_APPEND_ONLY" and "delta.appendOnly" in exc.value.message
    )
    # Rearranging data (dataChange=false removes) and appending are allowed.
    txn = OptimisticTransaction(log)
    assert txn.commit(*optimize(txn, "b")) == 1
    assert OptimisticTransaction(log).commit([new_add("a")], Operation("WRITE")) == 2


def test_refuses_unsupported_writer_features(tmp_path: Path) -> None:
    root = tmp_path / "t"
    store = LocalLogStore(str(root))
    md = replace(table_metadata(), id="x", created_time=1)
    protocol = Protocol(1, 7, None, ("appendOnly", "invariants", "icebergCompatV2"))
    store.write_exclusive(filenames.commit_name(0), serialize_commit([CommitInfo({}), protocol, md]))
    txn = OptimisticTransaction(DeltaLog(str(root)))  # readable...
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV2"):  # ...but not writable
        txn.commit([new_add("a")], Operation("WRITE"))
    assert DeltaLog(str(root)).latest_version() == 0


def test_update_metadata_upgrades_protocol_and_keeps_id(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    table_id = log.snapshot().metadata.id
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata({"delta.enableDeletionVectors": "true"}))
    assert txn.protocol == Protocol(
        3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")
    )
    txn.commit([], Operation("SET TBLPROPERTIES"))
    keys = [next(iter(x)) for x in lines(log, 1)]
    assert keys == ["commitInfo", "protocol", "metaData"]
    snap = log.snapshot()
    assert snap.metadata.id == table_id and snap.protocol.min_reader_version == 3
    # A property that needs no upgrade writes only metaData.
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata({"delta.enableDeletionVectors": "true", "x": "y"}))
    txn.commit([], Operation("SET TBLPROPERTIES"))
    assert [next(iter(x)) for x in lines(log, 2)] == ["commitInfo", "metaData"]


def test_update_metadata_to_unsupported_feature_is_refused(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    txn = OptimisticTransaction(log)
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV2"):
        txn.update_metadata(table_metadata({"delta.feature.icebergCompatV2": "supported"}))
        txn.commit([], Operation("SET TBLPROPERTIES"))
    assert log.latest_version() == 0


def test_enabling_column_mapping_keeps_the_existing_names_as_physical_names(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata({"delta.columnMapping.mode": "name"}))
    assert txn.protocol == Protocol(2, 5)
    txn.commit([], Operation("SET TBLPROPERTIES"))
    meta = log.update().metadata
    fields = meta.schema["fields"]
    assert [f["metadata"]["delta.columnMapping.physicalName"] for f in fields] == [f["name"] for f in fields]
    assert [f["metadata"]["delta.columnMapping.id"] for f in fields] == list(range(1, len(fields) + 1))
    assert meta.configuration["delta.columnMapping.maxColumnId"] == str(len(fields))


def test_configuration_values_are_written_as_strings(tmp_path: Path) -> None:
    txn = OptimisticTransaction(DeltaLog(str(tmp_path / "t")))
    txn.update_metadata(replace(table_metadata(), configuration={"delta.appendOnly": True, "n": 5}))  # type: ignore[dict-item]
    txn.commit([], Operation("CREATE TABLE"))
    assert lines(txn.log, 0)[2]["metaData"]["configuration"] == {"delta.appendOnly": "true", "n": "5"}


def test_unreadable_table_cannot_be_opened(tmp_path: Path) -> None:
    root = tmp_path / "t"
    store = LocalLogStore(str(root))
    md = replace(table_metadata(), id="x", created_time=1)
    protocol = Protocol(3, 7, ("catalogManaged",), ("catalogManaged",))
    store.write_exclusive(filenames.commit_name(0), serialize_commit([CommitInfo({}), protocol, md]))
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged"):
        OptimisticTransaction(DeltaLog(str(root)))


def test_update_metadata_rejects_unknown_partition_column(tmp_path: Path) -> None:
    txn = OptimisticTransaction(DeltaLog(str(tmp_path / "t")))
    with pytest.raises(InvalidArgumentError, match="not in the table schema"):
        txn.update_metadata(table_metadata(partition_columns=("nope",)))


@pytest.mark.parametrize(
    ("make_actions", "message"),
    [
        (lambda a: [a, a], "at most once"),
        (lambda a: [a, a.remove(1)], "same logical file"),
        (lambda a: [replace(a, partition_values={})], "no partition value"),
        (lambda a: [table_metadata()], "update_metadata"),
        (lambda a: [CommitInfo({})], "commitInfo"),
        (lambda a: [SetTransaction("x", 1), SetTransaction("x", 2)], "one txn action per appId"),
    ],
)
def test_commit_validation(tmp_path: Path, make_actions, message: str) -> None:
    log = create_table(str(tmp_path / "t"))
    with pytest.raises(InvalidArgumentError, match=message):
        OptimisticTransaction(log).commit(make_actions(new_add("a")), Operation("WRITE"))
    assert log.latest_version() == 0


def test_new_table_needs_metadata_and_commit_only_once(tmp_path: Path) -> None:
    txn = OptimisticTransaction(DeltaLog(str(tmp_path / "t")))
    with pytest.raises(InvalidArgumentError, match="update_metadata"):
        txn.commit([new_add("a")], Operation("WRITE"))
    txn.update_metadata(table_metadata())
    txn.commit([], Operation("CREATE TABLE"))
    with pytest.raises(CommitError, match="already committed"):
        txn.commit([], Operation("WRITE"))


def test_app_transactions(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    txn = OptimisticTransaction(log)
    assert txn.read_app_version("stream-1") is None
    txn.set_app_transaction("stream-1", 7)
    txn.commit([new_add("a")], Operation("STREAMING UPDATE"))
    assert log.snapshot().app_versions == {"stream-1": 7}
    assert OptimisticTransaction(log).read_app_version("stream-1") == 7
    txn_line = lines(log, 1)[1]["txn"]
    assert txn_line["appId"] == "stream-1" and txn_line["version"] == 7 and txn_line["lastUpdated"] > 0


def test_checkpoint_every_interval(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"), {"delta.checkpointInterval": "3"})
    for _ in range(7):
        OptimisticTransaction(log).commit([new_add("a")], Operation("WRITE"))
    names = log.store.list_from("")
    assert [n for n in names if "checkpoint." in n] == [
        filenames.checkpoint_name(3),
        filenames.checkpoint_name(6),
    ]
    assert json.loads(log.store.read(filenames.LAST_CHECKPOINT))["version"] == 6
    for v in range(6):
        log.store.delete(filenames.commit_name(v))
    snap = DeltaLog(log.table_root).snapshot()
    assert (snap.version, snap.checkpoint_version, snap.num_files) == (7, 6, 7)


def test_default_checkpoint_interval_is_ten(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    for _ in range(10):
        OptimisticTransaction(log).commit([new_add("a")], Operation("WRITE"))
    assert log.store.exists(filenames.checkpoint_name(10))


def test_checkpoint_failure_does_not_fail_commit(tmp_path: Path, monkeypatch, caplog) -> None:
    log = create_table(str(tmp_path / "t"), {"delta.checkpointInterval": "1"})

    def broken(snapshot) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(log, "checkpoint", broken)
    assert OptimisticTransaction(log).commit([new_add("a")], Operation("WRITE")) == 1
    assert "Post-commit work" in caplog.text
    assert log.snapshot().version == 1


class RacingStore(LocalLogStore):
    """Loses the race for the next ``races`` commit attempts to a concurrent blind append."""

    def __init__(self, root: str, races: int) -> None:
        super().__init__(root)
        self.races = races

    def write_exclusive(self, name: str, data: bytes) -> None:
        if self.races > 0 and filenames.commit_version(name) is not None:
            self.races -= 1
            winner = CommitInfo({"operation": "WRITE", "isBlindAppend": True})
            super().write_exclusive(name, serialize_commit([winner, new_add("z")]))
        super().write_exclusive(name, data)


def test_retries_after_non_conflicting_winners(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root, files=(new_add("a"),))
    log = DeltaLog(root, store=RacingStore(root, races=3))
    txn = OptimisticTransaction(log)
    actions, op = merge(txn, "a")
    assert txn.commit(actions, op) == 4
    assert lines(log, 4)[0]["commitInfo"]["readVersion"] == 0  # readVersion stays the snapshot read
    assert sorted(str(f.partition_values["p"]) for f in log.snapshot().files) == ["a", "z", "z", "z"]


def test_max_commit_attempts(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    log = DeltaLog(root, store=RacingStore(root, races=5))
    txn = OptimisticTransaction(log, conf={"spark.databricks.delta.maxCommitAttempts": "3"})
    with pytest.raises(MaxCommitAttemptsError, match="maxCommitAttempts"):
        txn.commit([new_add("a")], Operation("WRITE"))
    assert all(f.partition_values["p"] == "z" for f in log.snapshot().files)


def test_conf_as_getter(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    log = DeltaLog(root, store=RacingStore(root, races=1))
    conf = {"spark.databricks.delta.maxCommitAttempts": "1"}
    with pytest.raises(MaxCommitAttemptsError):
        OptimisticTransaction(log, conf=conf.get).commit([new_add("a")], Operation("WRITE"))


def test_v2_checkpoint_tables_are_written_with_classic_checkpoints(tmp_path: Path) -> None:
    """A table with the v2Checkpoint feature whose last checkpoint is UUID-named (V2 spec, JSON):
    commits go on, and the next checkpoint is a classic single-file one, which the feature allows."""
    log = create_table(str(tmp_path / "t"), {"delta.feature.v2Checkpoint": "supported"}, (new_add("a"),))
    snap = log.snapshot()
    assert "v2Checkpoint" in (snap.protocol.reader_features or ())
    lines = [
        {"checkpointMetadata": {"version": 0}},
        {"protocol": snap.protocol.to_json()},
        {"metaData": snap.metadata.to_json()},
        *({"add": f.to_json()} for f in snap.files),
    ]
    name = filenames.v2_checkpoint_name(0, str(uuid.uuid4()), "json")
    log.store.write(name, "\n".join(json.dumps(x) for x in lines).encode())
    log.store.delete(filenames.commit_name(0))  # only the V2 checkpoint holds version 0 now
    log = DeltaLog(log.table_root)
    for _ in range(10):
        OptimisticTransaction(log).commit([new_add("b")], Operation("WRITE", {"mode": "Append"}))
    assert log.store.exists(filenames.checkpoint_name(10))
    fresh = DeltaLog(log.table_root).snapshot()
    assert fresh.version == 10 and fresh.checkpoint_version == 10 and fresh.num_files == 11


def test_replacing_the_schema_of_a_clustered_table_drops_vanished_clustering_columns(tmp_path: Path) -> None:
    from deltamerge.log.actions import DomainMetadata

    log = create_table(str(tmp_path / "t"), {"delta.feature.clustering": "supported"})
    txn = OptimisticTransaction(log)
    txn.commit(
        [DomainMetadata("delta.clustering", '{"clusteringColumns":[["id"],["p"]]}')], Operation("OPTIMIZE")
    )
    txn = OptimisticTransaction(log)
    md = log.snapshot().metadata
    schema = {"type": "struct", "fields": [{"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    txn.update_metadata(replace(md, schema_string=json.dumps(schema)))
    txn.commit([], Operation("CREATE OR REPLACE TABLE"))
    domain = log.update().domains["delta.clustering"]
    assert json.loads(domain.configuration) == {"clusteringColumns": [["p"]]}


def test_post_commit_update_reads_only_the_commits_of_others(tmp_path: Path, monkeypatch) -> None:
    """The cache is extended with the actions this transaction wrote, and with the log's own
    commit files for versions another writer added in between: the result equals a fresh load."""
    from deltamerge.log import replay

    path = str(tmp_path / "t")
    log = DeltaLog(path)
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata())
    txn.commit([new_add("a")], Operation("WRITE", {}, {}))
    mine = OptimisticTransaction(log)  # reads version 0
    OptimisticTransaction(DeltaLog(path)).commit([new_add("b")], Operation("WRITE", {}, {}))  # version 1
    reads: list[int] = []
    real = replay.read_commit
    monkeypatch.setattr(
        "deltamerge.log.snapshot.read_commit", lambda store, v: reads.append(v) or real(store, v)
    )
    assert mine.commit([new_add("c")], Operation("WRITE", {}, {})) == 2
    # Version 1 was read twice (the conflict check, then the cache); version 2 never.
    assert 2 not in reads and 1 in reads
    cached, fresh = log.snapshot(), DeltaLog(path).snapshot()
    assert cached.version == fresh.version == 2
    assert sorted(f.to_json().__repr__() for f in cached.files) == sorted(
        f.to_json().__repr__() for f in fresh.files
    )
    assert cached.timestamp == fresh.timestamp and cached.metadata == fresh.metadata
