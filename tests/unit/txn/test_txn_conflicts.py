"""Conflict matrix: every pair of operations x isolation level (protocol.md §4.3, §4.4)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from txntest_helpers import (
    OpFn,
    blind_append,
    create_table,
    in_partition,
    merge,
    metadata_change,
    new_add,
    optimize,
    overwrite_partition,
    protocol_change,
)

from deltamerge.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentModificationError,
    ConcurrentTransactionError,
    InvalidArgumentError,
    MetadataChangedError,
    ProtocolChangedError,
)
from deltamerge.log.actions import DomainMetadata, Protocol
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.conflicts import TransactionInfo, WinningCommit, check_conflicts
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

WINNERS: dict[str, OpFn] = {
    "blind_append": blind_append,
    "overwrite": overwrite_partition,
    "merge": merge,
    "optimize": optimize,
    "metadata": metadata_change,
    "protocol": protocol_change,
}
OURS: dict[str, OpFn] = {"blind_append": blind_append, "merge": merge, "optimize": optimize}

A, M, P, DR = ConcurrentAppendError, MetadataChangedError, ProtocolChangedError, ConcurrentDeleteReadError
# Expected outcome when both touch partition "a": ours -> {winner: (Serializable, WriteSerializable)}.
OVERLAP: dict[str, dict[str, tuple[type[Exception] | None, type[Exception] | None]]] = {
    "blind_append": {
        "blind_append": (None, None),
        "overwrite": (None, None),
        "merge": (None, None),
        "optimize": (None, None),
        "metadata": (M, M),
        "protocol": (P, P),
    },
    "merge": {
        "blind_append": (A, None),  # WriteSerializable may order the blind append after us
        "overwrite": (A, A),
        "merge": (A, A),
        "optimize": (A, A),  # OPTIMIZE's adds are not blind; its removes would also hit delete-read
        "metadata": (M, M),
        "protocol": (P, P),
    },
    "optimize": {  # runs at SnapshotIsolation: only removals of files it read conflict
        "blind_append": (None, None),
        "overwrite": (DR, DR),
        "merge": (DR, DR),
        "optimize": (DR, DR),
        "metadata": (M, M),
        "protocol": (P, P),
    },
}
LEVELS = ("Serializable", "WriteSerializable")


def _race(
    root: Path, level: str, ours: OpFn, winner: OpFn, winner_part: str
) -> tuple[OptimisticTransaction, int]:
    log = create_table(str(root), {"delta.isolationLevel": level}, files=(new_add("a"), new_add("b")))
    mine = OptimisticTransaction(log)
    theirs = OptimisticTransaction(DeltaLog(str(root)))
    our_actions, our_op = ours(mine, "a")
    their_actions, their_op = winner(theirs, winner_part)
    assert theirs.commit(their_actions, their_op) == 1
    return mine, mine.commit(our_actions, our_op)


@pytest.mark.parametrize("level_index", [0, 1], ids=LEVELS)
@pytest.mark.parametrize("winner", list(WINNERS))
@pytest.mark.parametrize("ours", list(OURS))
def test_overlapping(tmp_path: Path, ours: str, winner: str, level_index: int) -> None:
    expected = OVERLAP[ours][winner][level_index]
    if expected is None:
        _, version = _race(tmp_path / "t", LEVELS[level_index], OURS[ours], WINNERS[winner], "a")
        assert version == 2
    else:
        with pytest.raises(expected) as exc:
            _race(tmp_path / "t", LEVELS[level_index], OURS[ours], WINNERS[winner], "a")
        # Messages name the winning commit and say what to do.
        err = exc.value
        assert isinstance(err, ConcurrentModificationError)
        assert "version 1" in err.message and "retry" in err.message.lower()
        assert err.error_class.startswith("DELTA_")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("winner", ["blind_append", "overwrite", "merge", "optimize"])
@pytest.mark.parametrize("ours", list(OURS))
def test_disjoint_partitions_never_conflict(tmp_path: Path, ours: str, winner: str, level: str) -> None:
    _, version = _race(tmp_path / "t", level, OURS[ours], WINNERS[winner], "b")
    assert version == 2


@pytest.mark.parametrize("winner", ["metadata", "protocol"])
def test_metadata_and_protocol_changes_always_conflict(tmp_path: Path, winner: str) -> None:
    with pytest.raises((MetadataChangedError, ProtocolChangedError), match="concurrent"):
        _race(tmp_path / "t", "WriteSerializable", merge, WINNERS[winner], "b")


def test_winner_operation_named_in_message(tmp_path: Path) -> None:
    with pytest.raises(ConcurrentAppendError, match=r"concurrent MERGE \(version 1\)"):
        _race(tmp_path / "t", "WriteSerializable", merge, merge, "a")


def test_write_serializable_counts_blind_appends_when_we_change_metadata(tmp_path: Path) -> None:
    def merge_with_schema_change(txn: OptimisticTransaction, part: str):
        actions, op = merge(txn, part)
        metadata_change(txn, part)
        return actions, op

    with pytest.raises(ConcurrentAppendError):
        _race(tmp_path / "t", "WriteSerializable", merge_with_schema_change, blind_append, "a")


@pytest.mark.parametrize(("level", "expected"), [("Serializable", A), ("WriteSerializable", None)])
def test_whole_table_read(tmp_path: Path, level: str, expected: type | None) -> None:
    def read_all(txn: OptimisticTransaction, part: str):
        txn.mark_read_whole_table()
        return [new_add("a")], Operation("MERGE")

    for winner, winner_expected in [(blind_append, expected), (merge, A)]:
        root = tmp_path / winner.__name__
        if winner_expected is None:
            assert _race(root, level, read_all, winner, "b")[1] == 2
        else:
            with pytest.raises(winner_expected):
                _race(root, level, read_all, winner, "b")


def test_whole_table_read_conflicts_with_any_removal(tmp_path: Path) -> None:
    def read_all_no_add(txn: OptimisticTransaction, part: str):
        txn.mark_read_whole_table()
        return [], Operation("DELETE")

    def delete_partition(txn: OptimisticTransaction, part: str):
        assert txn.snapshot is not None
        files = [f for f in txn.snapshot.files if f.partition_values["p"] == part]
        return [f.remove(int(time.time() * 1000)) for f in files], Operation("DELETE")

    with pytest.raises(ConcurrentDeleteReadError, match="removed"):
        _race(tmp_path / "t", "WriteSerializable", read_all_no_add, delete_partition, "b")


def test_read_files_without_predicates_count_as_whole_table(tmp_path: Path) -> None:
    def read_files_only(txn: OptimisticTransaction, part: str):
        assert txn.snapshot is not None
        txn.add_read_files(txn.snapshot.files[:1])
        return [new_add("a")], Operation("UPDATE")

    with pytest.raises(ConcurrentAppendError, match="whole table"):
        _race(tmp_path / "t", "WriteSerializable", read_files_only, merge, "b")


def test_delete_delete(tmp_path: Path) -> None:
    def blind_delete(txn: OptimisticTransaction, part: str):
        assert txn.snapshot is not None
        files = [f for f in txn.snapshot.files if f.partition_values["p"] == part]
        return [f.remove(int(time.time() * 1000)) for f in files], Operation("DELETE")

    with pytest.raises(ConcurrentDeleteDeleteError, match="already removed"):
        _race(tmp_path / "t", "Serializable", blind_delete, merge, "a")


def test_app_id_read_conflicts_with_concurrent_txn(tmp_path: Path) -> None:
    def idempotent(app: str):
        def op(txn: OptimisticTransaction, part: str):
            assert txn.read_app_version(app) is None
            txn.set_app_transaction(app, 1)
            return [new_add(part)], Operation("WRITE")

        return op

    with pytest.raises(ConcurrentTransactionError, match="application id 'app'"):
        _race(tmp_path / "t1", "WriteSerializable", idempotent("app"), idempotent("app"), "a")
    assert _race(tmp_path / "t2", "WriteSerializable", idempotent("app"), idempotent("other"), "a")[1] == 2


def test_domain_conflict(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    setup = OptimisticTransaction(log)
    setup.update_protocol(Protocol(1, 7, None, ("appendOnly", "domainMetadata", "invariants")))
    setup.commit([], Operation("UPGRADE PROTOCOL"))
    mine, theirs = OptimisticTransaction(log), OptimisticTransaction(DeltaLog(log.table_root))
    theirs.commit([DomainMetadata("user.x", "{}")], Operation("SET DOMAIN"))
    with pytest.raises(ConcurrentTransactionError, match=r"domain 'user\.x'"):
        mine.commit([DomainMetadata("user.x", '{"a":1}')], Operation("SET DOMAIN"))
    # Without the feature, domain metadata cannot be written at all.
    with pytest.raises(InvalidArgumentError, match="domainMetadata"):
        OptimisticTransaction(create_table(str(tmp_path / "u"))).commit(
            [DomainMetadata("d", "")], Operation("X")
        )


def test_concurrent_table_creation(tmp_path: Path) -> None:
    from txntest_helpers import table_metadata

    root = str(tmp_path / "new")
    first, second = OptimisticTransaction(DeltaLog(root)), OptimisticTransaction(DeltaLog(root))
    for txn in (first, second):
        txn.update_metadata(table_metadata())
    assert first.commit([new_add("a")], Operation("CREATE TABLE")) == 0
    with pytest.raises(ProtocolChangedError, match="create the table before"):
        second.commit([new_add("a")], Operation("CREATE TABLE"))


def test_checks_against_several_winners_in_order(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"), files=(new_add("a"),))
    mine = OptimisticTransaction(log)
    actions, op = merge(mine, "a")
    for part in ("b", "c"):  # two harmless winners, then one that conflicts
        OptimisticTransaction(DeltaLog(log.table_root)).commit(*merge(OptimisticTransaction(log), part))
    blind = OptimisticTransaction(DeltaLog(log.table_root))
    blind.commit(*overwrite_partition(blind, "a"))
    with pytest.raises(ConcurrentAppendError, match="version 3"):
        mine.commit(actions, op)


def test_missing_blind_append_flag_means_not_blind() -> None:
    from deltamerge.log.actions import CommitInfo

    add = new_add("a")
    info = TransactionInfo(
        read_version=0,
        isolation_level="WriteSerializable",
        read_predicates=(),
        read_whole_table=True,
    )
    with pytest.raises(ConcurrentAppendError):  # delta-rs omits isBlindAppend
        check_conflicts(info, WinningCommit(1, (CommitInfo({"operation": "WRITE"}), add)))
    check_conflicts(info, WinningCommit(1, (CommitInfo({"operation": "WRITE", "isBlindAppend": True}), add)))
    assert issubclass(ConcurrentAppendError, ConcurrentModificationError)
    assert in_partition("a")(add)
