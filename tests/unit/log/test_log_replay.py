"""Snapshot reconstruction from JSON commits: reconciliation rules, corruption, time travel, history."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from logtest_helpers import RawTable, add, dv, remove

from deltamerge.errors import (
    LogCorruptedError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from deltamerge.log import filenames
from deltamerge.log.actions import (
    AddCDCFile,
    DomainMetadata,
    Protocol,
    SetTransaction,
    UnknownAction,
)
from deltamerge.log.replay import LogReplay
from deltamerge.log.snapshot import DeltaLog


def paths(snapshot) -> list[str]:
    return sorted(f.path for f in snapshot.files)


def test_add_remove_reconciliation(table: RawTable) -> None:
    table.create(add("a1"), add("a2"))
    table.commit(1, [remove("a1"), add("a3")])
    table.commit(2, [add("a1")])  # re-adding a removed path revives it and clears its tombstone
    snap = table.log().snapshot()
    assert snap.version == 2
    assert paths(snap) == ["a1", "a2", "a3"]
    assert snap.tombstones == ()
    assert snap.num_files == 3 and snap.size_in_bytes == 300


def test_files_are_keyed_by_path_and_dv(table: RawTable) -> None:
    d1, d2 = dv("AAAAAAAAAAAAAAAAAAAA"), dv("BBBBBBBBBBBBBBBBBBBB")
    table.create(add("f"))
    # DV delete: remove the DV-less file, re-add the same path with a DV.
    table.commit(1, [remove("f"), add("f", deletion_vector=d1)])
    table.commit(2, [remove("f", deletion_vector=d1), add("f", deletion_vector=d2)])
    snap = table.log().snapshot()
    assert [(f.path, f.deletion_vector) for f in snap.files] == [("f", d2)]
    assert {t.key for t in snap.tombstones} == {("f", None), ("f", d1.unique_id)}
    # Removing with the wrong DV key leaves the live file alone.
    table.commit(3, [remove("f", deletion_vector=d1)])
    assert [f.deletion_vector for f in table.log().snapshot().files] == [d2]
    # Removing with the right key drops it.
    table.commit(4, [remove("f", deletion_vector=d2)])
    assert table.log().snapshot().files == ()


def test_dv_unique_id_includes_offset() -> None:
    assert dv("XXXXXXXXXXXXXXXXXXXX").unique_id == "uXXXXXXXXXXXXXXXXXXXX@1"


def test_later_add_replaces_same_key(table: RawTable) -> None:
    table.create(add("f", stats='{"numRecords":1}'))
    table.commit(1, [add("f", stats='{"numRecords":2}')])
    (f,) = table.log().snapshot().files
    assert f.stats == '{"numRecords":2}'


def test_last_protocol_metadata_and_txn_win(table: RawTable) -> None:
    table.create()
    table.commit(1, [SetTransaction("app", 5), SetTransaction("other", 1)])
    table.commit(2, [table.metadata({"delta.appendOnly": "true"}), Protocol(1, 3), SetTransaction("app", 3)])
    snap = table.log().snapshot()
    assert snap.protocol == Protocol(1, 3)
    assert snap.configuration == {"delta.appendOnly": "true"}
    # The last txn per appId wins even though its version is lower.
    assert dict(snap.app_versions) == {"app": 3, "other": 1}
    assert snap.partition_columns == ("p",)
    assert [f["name"] for f in snap.schema["fields"]] == ["id", "value", "p"]


def test_domain_metadata_last_wins_and_removal(table: RawTable) -> None:
    table.create()
    table.commit(1, [DomainMetadata("d1", '{"a":1}'), DomainMetadata("d2", "{}")])
    table.commit(2, [DomainMetadata("d1", '{"a":2}'), DomainMetadata("d2", "{}", removed=True)])
    snap = table.log().snapshot()
    assert set(snap.domains) == {"d1"} and snap.domains["d1"].configuration == '{"a":2}'


def test_cdc_commitinfo_and_unknown_actions_do_not_change_state(table: RawTable) -> None:
    table.create(add("a1"))
    table.commit(1, [AddCDCFile("_change_data/x.parquet", {}, 10), UnknownAction("futureAction", {"x": 1})])
    snap = table.log().snapshot()
    assert paths(snap) == ["a1"] and snap.version == 1


def test_replay_state_copy_is_independent() -> None:
    state = LogReplay()
    state.apply([add("a")])
    other = state.copy()
    other.apply([remove("a")])
    assert list(state.files) == [("a", None)] and other.files == {}


def test_snapshot_is_immutable(table: RawTable) -> None:
    table.create(add("a1"))
    snap = table.log().snapshot()
    with pytest.raises(AttributeError):
        snap.version = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.app_versions["x"] = 1  # type: ignore[index]
    assert {snap: 1}[table.log().snapshot()] == 1 and snap == table.log().snapshot()


# --- corruption ----------------------------------------------------------------------------------


def test_truncated_commit_is_log_corrupted(table: RawTable) -> None:
    table.create(add("a1"))
    table.commit(1, [add("a2")])
    name = filenames.commit_name(1)
    data = table.store.read(name)
    table.path(name).write_bytes(data[: len(data) // 2])
    with pytest.raises(LogCorruptedError, match=re.escape(name)) as exc:
        table.log().snapshot()
    assert "truncated" in exc.value.message and exc.value.error_class == "DELTA_LOG_CORRUPTED"


def test_invalid_action_is_log_corrupted(table: RawTable) -> None:
    table.create()
    table.store.write_exclusive(filenames.commit_name(1), b'{"add":{"size":1}}\n')  # add without path
    with pytest.raises(LogCorruptedError, match=r"00000000000000000001\.json"):
        table.log().snapshot()


def test_gap_is_log_corrupted(table: RawTable) -> None:
    table.create()
    table.commit(1, [add("a1")])
    table.commit(3, [add("a3")])
    with pytest.raises(LogCorruptedError, match=r"gap.*version\(s\) 2 .*between version 1 and 3"):
        table.log().snapshot()
    # Versions before the gap are still readable.
    assert paths(table.log().snapshot(1)) == ["a1"]


def test_missing_first_commit_without_checkpoint(table: RawTable) -> None:
    table.create()
    table.commit(1, [add("a1")])
    os.unlink(table.path(filenames.commit_name(0)))
    with pytest.raises(LogCorruptedError, match="version 0 is missing"):
        table.log().snapshot()


def test_first_commit_without_metadata(table: RawTable) -> None:
    table.commit(0, [Protocol(1, 2), add("a")])
    with pytest.raises(LogCorruptedError, match="no metaData"):
        table.log().snapshot()


def test_metadata_without_schema_string_is_an_empty_schema(table: RawTable) -> None:
    """As Delta's Metadata.schema (Delta's golden tables of old writers have such logs)."""
    table.store.write_exclusive(
        filenames.commit_name(0),
        b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
        b'{"metaData":{"id":"m","format":{"provider":"parquet","options":{}},"partitionColumns":[],'
        b'"configuration":{}}}\n',
    )
    assert table.log().snapshot().metadata.schema == {"type": "struct", "fields": []}


def test_commit_without_trailing_newline_and_with_blank_lines(table: RawTable) -> None:
    table.create()
    table.store.write_exclusive(
        filenames.commit_name(1),
        b'\n{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
    )
    assert paths(table.log().snapshot()) == ["x"]


def test_unreadable_protocol_is_refused(table: RawTable) -> None:
    table.create(protocol=Protocol(3, 7, ("catalogManaged",), ("catalogManaged",)))
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged"):
        table.log().snapshot()


# --- tables and versions -------------------------------------------------------------------------


def test_table_not_found(tmp_path) -> None:
    log = DeltaLog(str(tmp_path / "nothing"))
    assert not log.exists() and log.latest_version() == -1
    with pytest.raises(TableNotFoundError):
        log.snapshot()
    (tmp_path / "nothing" / "_delta_log").mkdir(parents=True)
    with pytest.raises(TableNotFoundError):
        log.snapshot()


def test_time_travel_by_version(table: RawTable) -> None:
    table.create(add("a0"))
    for v in range(1, 5):
        table.commit(v, [add(f"a{v}"), remove(f"a{v - 1}")])
    log = table.log()
    assert log.exists() and log.latest_version() == 4
    for v in range(5):
        assert paths(log.snapshot(v)) == [f"a{v}"]
    with pytest.raises(VersionNotFoundError, match="latest version of the table is 4"):
        log.snapshot(5)
    with pytest.raises(VersionNotFoundError):
        log.snapshot(-1)


def test_for_table_is_cached_per_absolute_path(table: RawTable, monkeypatch) -> None:
    table.create()
    monkeypatch.chdir(os.path.dirname(table.root))
    assert DeltaLog.for_table(table.root) is DeltaLog.for_table("t") is DeltaLog.for_table(table.root + "/")
    assert DeltaLog.for_table("file://" + table.root).table_root == table.root


def test_update_reads_only_new_commits(table: RawTable, monkeypatch) -> None:
    table.create(add("a0"))
    log = table.log()
    first = log.snapshot()
    assert log.snapshot() is first  # nothing new: cached object
    table.commit(1, [add("a1")])
    table.commit(2, [remove("a0")])
    reads: list[str] = []
    original = table.store.read

    def counting_read(name: str) -> bytes:
        reads.append(name)
        return original(name)

    monkeypatch.setattr(log.store, "read", counting_read)
    snap = log.update()
    assert snap.version == 2 and paths(snap) == ["a1"]
    assert [r for r in reads if r.endswith(".json")] == [filenames.commit_name(1), filenames.commit_name(2)]
    assert paths(first) == ["a0"]  # old snapshots are unaffected


def test_update_after_table_recreated(table: RawTable) -> None:
    table.create(add("a0"))
    table.commit(1, [add("a1")])
    log = table.log()
    assert log.snapshot().version == 1
    for name in table.store.list_from(""):
        table.store.delete(name)
    table.create(add("b0"))
    assert log.update().version == 0 and paths(log.snapshot()) == ["b0"]


@pytest.mark.parametrize("new_versions", [1, 3])
def test_a_table_deleted_and_created_again_is_read_anew(table: RawTable, new_versions: int) -> None:
    """A new table's commits may have the names the cached snapshot's had: the same version, or more
    versions on top of it (which the cache must not extend the old table's state with)."""
    table.create(add("a0"))
    log = table.log()
    assert paths(log.snapshot()) == ["a0"]
    shutil.rmtree(table.root)
    table.create(add("b0"))
    for v in range(1, new_versions):
        table.commit(v, [add(f"b{v}")])
    latest = log.update()
    assert latest.version == new_versions - 1
    assert paths(latest) == sorted(f"b{v}" for v in range(new_versions))
    assert paths(log.snapshot(latest.version)) == paths(latest)
    assert paths(log.snapshot(0)) == ["b0"]


# --- timestamps ----------------------------------------------------------------------------------


def _set_mtime(table: RawTable, version: int, ms: int) -> None:
    os.utime(table.path(filenames.commit_name(version)), ns=(ms * 1_000_000, ms * 1_000_000))


def test_snapshot_timestamp_is_commit_mtime_or_ict(table: RawTable) -> None:
    table.create()
    table.commit(1, [add("a1")])
    table.commit(2, [add("a2")], info={"inCommitTimestamp": 1_234})
    _set_mtime(table, 1, 1_000_000)
    log = table.log()
    assert log.snapshot(1).timestamp == 1_000_000
    assert log.snapshot(2).timestamp == 1_234


def test_version_at_timestamp(table: RawTable) -> None:
    table.create()
    for v in (1, 2, 3):
        table.commit(v, [add(f"a{v}")])
    for v, ms in [(0, 10_000), (1, 20_000), (2, 20_000), (3, 40_000)]:  # v2 collides: becomes 20_001
        _set_mtime(table, v, ms)
    log = table.log()
    assert log.version_at_timestamp(10_000) == 0
    assert log.version_at_timestamp(19_999) == 0
    assert log.version_at_timestamp(20_000) == 1
    assert log.version_at_timestamp(20_001) == 2
    assert log.version_at_timestamp(39_999) == 2
    assert log.version_at_timestamp(10**13) == 3
    with pytest.raises(VersionNotFoundError, match="before the earliest version"):
        log.version_at_timestamp(9_999)
    with pytest.raises(VersionNotFoundError, match="after the latest version"):
        log.version_at_timestamp(10**13, strict=True)


def test_version_at_timestamp_uses_in_commit_timestamps(table: RawTable) -> None:
    table.create(configuration={"delta.enableInCommitTimestamps": "true"})
    table.commit(1, [add("a1")], info={"inCommitTimestamp": 5_000})
    table.commit(2, [add("a2")], info={"inCommitTimestamp": 6_000})
    _set_mtime(table, 0, 1_000)
    _set_mtime(table, 1, 99_000)  # file times are ignored once ICT is on
    _set_mtime(table, 2, 1_000)
    log = table.log()
    assert log.version_at_timestamp(5_500) == 1
    assert log.version_at_timestamp(6_000) == 2


def test_commit_infos_newest_first(table: RawTable) -> None:
    table.create()
    table.commit(1, [add("a1")], info={"operation": "MERGE"})
    table.commit(2, [add("a2")], info={"operation": "DELETE"})
    _set_mtime(table, 0, 1_000)
    _set_mtime(table, 1, 2_000)
    _set_mtime(table, 2, 3_000)
    history = table.log().commit_infos()
    assert [(v, ts, ci.operation) for v, ts, ci in history] == [
        (2, 3_000, "DELETE"),
        (1, 2_000, "MERGE"),
        (0, 1_000, "WRITE"),
    ]
    assert [v for v, _, _ in table.log().commit_infos(limit=1)] == [2]


def test_read_commit(table: RawTable) -> None:
    table.create(add("a0"))
    log = table.log()
    assert [type(a).__name__ for a in log.read_commit(0)] == ["CommitInfo", "Protocol", "Metadata", "AddFile"]
    with pytest.raises(VersionNotFoundError):
        log.read_commit(1)
