"""In-commit timestamps (Delta's ``inCommitTimestamp`` writer feature) on the write side."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from txntest_helpers import create_table, new_add, table_metadata

from deltamerge.log import filenames
from deltamerge.log.actions import Protocol
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn import transaction
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

ICT = {"delta.enableInCommitTimestamps": "true"}
ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


def lines(log: DeltaLog, version: int) -> list[dict]:
    return [json.loads(x) for x in log.store.read(filenames.commit_name(version)).decode().splitlines()]


def ict_of(log: DeltaLog, version: int) -> int:
    first = lines(log, version)[0]
    assert next(iter(first)) == "commitInfo"  # the protocol requires it first
    info = first["commitInfo"]
    assert next(iter(info)) == "inCommitTimestamp" and info["timestamp"] == info["inCommitTimestamp"]
    return int(info["inCommitTimestamp"])


def append(log: DeltaLog) -> int:
    return OptimisticTransaction(log).commit([new_add("a")], Operation("WRITE", {"mode": "Append"}))


def set_mtime(log: DeltaLog, version: int, ms: int) -> None:
    path = os.path.join(log.table_root, "_delta_log", filenames.commit_name(version))
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_created_with_ict_every_commit_carries_an_increasing_timestamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = create_table(str(tmp_path / "t"), ICT)
    snap = log.snapshot()
    assert "inCommitTimestamp" in (snap.protocol.writer_features or ())
    # Enabled at creation: there are no older commits, so no enablement properties.
    assert ENABLEMENT_VERSION not in snap.metadata.configuration
    first = ict_of(log, 0)
    # The clock goes back an hour: the next commits still follow the previous one by 1 ms.
    monkeypatch.setattr(transaction, "_now_ms", lambda: first - 3_600_000)
    assert append(log) == 1 and append(log) == 2
    assert [ict_of(log, v) for v in (1, 2)] == [first + 1, first + 2]
    # Readers use the in-commit timestamps, not the files' modification times.
    set_mtime(log, 1, 10_000)
    fresh = DeltaLog(log.table_root)
    assert fresh.snapshot().timestamp == first + 2
    assert fresh.version_at_timestamp(first + 1) == 1
    assert [ts for _, ts, _ in fresh.commit_infos()] == [first + 2, first + 1, first]


def test_enabling_on_a_table_with_history_records_version_and_timestamp(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    append(log)
    # The commit that enables ICT must be later than the previous commit's file time.
    future = transaction._now_ms() + 86_400_000
    set_mtime(log, 1, future)
    log = DeltaLog(log.table_root)  # the cached snapshot holds the old file time
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata(ICT))
    assert txn.commit([], Operation("SET TBLPROPERTIES", {"properties": ICT})) == 2
    ts = ict_of(log, 2)
    assert ts == future + 1
    md = log.update().metadata
    assert md.configuration[ENABLEMENT_VERSION] == "2"
    assert md.configuration[ENABLEMENT_TIMESTAMP] == str(ts)
    assert "timestamp" in lines(log, 1)[0]["commitInfo"]  # older commits are left as they were
    assert "inCommitTimestamp" not in lines(log, 1)[0]["commitInfo"]
    # Later commits keep the properties and carry their own timestamps.
    assert append(log) == 3 and ict_of(log, 3) > ts
    assert log.update().metadata.configuration[ENABLEMENT_VERSION] == "2"
    assert log.version_at_timestamp(ts) == 2


def test_a_retry_follows_the_winners_timestamp_and_version(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"))
    # Our transaction enables ICT; a blind append wins version 1 first, with a file time far ahead.
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata(ICT))
    assert append(log) == 1
    future = transaction._now_ms() + 86_400_000
    set_mtime(log, 1, future)
    assert txn.commit([new_add("b")], Operation("WRITE", {"mode": "Append"})) == 2
    assert ict_of(log, 2) == future + 1
    md = log.update().metadata
    # The enablement version is the version the retry landed at, not the one first tried.
    assert (md.configuration[ENABLEMENT_VERSION], md.configuration[ENABLEMENT_TIMESTAMP]) == (
        "2",
        str(future + 1),
    )
    # Two ICT writers racing: the loser's timestamp follows the winner's.
    txn = OptimisticTransaction(log)
    winner = append(log)
    winner_ts = ict_of(log, winner)
    assert txn.commit([new_add("c")], Operation("WRITE", {"mode": "Append"})) == winner + 1
    assert ict_of(log, winner + 1) > winner_ts


def test_ict_tables_are_writable_and_disabling_keeps_plain_timestamps(tmp_path: Path) -> None:
    log = create_table(str(tmp_path / "t"), ICT)
    assert log.snapshot().protocol == Protocol(1, 7, None, ("appendOnly", "inCommitTimestamp", "invariants"))
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata({"delta.enableInCommitTimestamps": "false"}))
    txn.commit([], Operation("SET TBLPROPERTIES"))
    assert append(log) == 2
    assert "inCommitTimestamp" not in lines(log, 2)[0]["commitInfo"]
