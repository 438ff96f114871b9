"""Interop with delta-rs (the ``deltalake`` package): each side reads the other's log and checkpoints."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltamerge.log import filenames
from deltamerge.log.actions import AddFile, Metadata
from deltamerge.log.paths import absolute_file_path, encode_add_path, partition_dir
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.compat

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}
PARTS = ["x y", "a/b:c", None, "50%"]


def _write_data_file(root: str, ids: list[int], p: str | None) -> AddFile:
    """A parquet data file written by pyarrow (no partition column inside), as an add action."""
    rel = f"{partition_dir(['p'], {'p': p})}/part-{uuid.uuid4()}.c000.snappy.parquet"
    full = os.path.join(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "value": [f"v{i}" for i in ids]}), full)
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids), "value": f"v{min(ids)}"},
        "maxValues": {"id": max(ids), "value": f"v{max(ids)}"},
        "nullCount": {"id": 0, "value": 0},
    }
    return AddFile(
        path=encode_add_path(rel),
        partition_values={"p": p},
        size=os.path.getsize(full),
        modification_time=int(os.path.getmtime(full) * 1000),
        stats=json.dumps(stats, separators=(",", ":")),
    )


def test_deltalake_reads_our_log_and_checkpoint(tmp_path: Path) -> None:
    root = str(tmp_path / "ours")
    log = DeltaLog(root)
    txn = OptimisticTransaction(log)
    txn.update_metadata(Metadata(id="", schema_string=json.dumps(SCHEMA), partition_columns=("p",)))
    first = _write_data_file(root, [0, 1], PARTS[0])
    txn.commit([first], Operation("CREATE TABLE", {"partitionBy": ["p"]}))
    expected = {0: PARTS[0], 1: PARTS[0]}
    for v in range(1, 12):
        txn = OptimisticTransaction(log)
        ids = [10 * v, 10 * v + 1]
        actions: list = [_write_data_file(root, ids, PARTS[v % len(PARTS)])]
        expected.update(dict.fromkeys(ids, PARTS[v % len(PARTS)]))
        if v == 5:  # a delete, so the checkpoint carries a tombstone
            actions.append(first.remove(int(time.time() * 1000)))
            del expected[0], expected[1]
        assert txn.commit(actions, Operation("WRITE", {"mode": "Append"})) == v
    assert log.store.exists(filenames.checkpoint_name(10))

    def check() -> None:
        dt = deltalake.DeltaTable(root)
        assert dt.version() == 11
        rows = sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
        assert rows == [{"id": i, "value": f"v{i}", "p": expected[i]} for i in sorted(expected)]

    check()
    for v in range(10):  # now delta-rs must rely on our checkpoint
        log.store.delete(filenames.commit_name(v))
    check()


def test_we_read_a_deltalake_checkpointed_table(tmp_path: Path) -> None:
    root = str(tmp_path / "theirs")
    for i in range(12):
        part = pa.array([PARTS[i % len(PARTS)]], pa.string())  # typed: a lone None is no type
        data = pa.table({"id": pa.array([i], pa.int64()), "value": [f"v{i}"], "p": part})
        mode = "overwrite" if i == 6 else "append"
        deltalake.write_deltalake(root, data, mode=mode, partition_by=["p"])
    dt = deltalake.DeltaTable(root)
    dt.create_checkpoint()

    def check(expect_checkpoint: bool) -> None:
        snap = DeltaLog(root).snapshot()
        assert snap.version == dt.version() == 11
        assert {absolute_file_path(root, f.path) for f in snap.files} == set(dt.file_uris())
        assert snap.schema == json.loads(dt.schema().to_json())
        assert snap.partition_columns == ("p",)
        assert (snap.checkpoint_version == 11) is expect_checkpoint
        assert len(snap.tombstones) == 6  # the overwrite removed the six earlier files

    check(expect_checkpoint=True)
    for v in range(11):
        os.unlink(os.path.join(root, "_delta_log", filenames.commit_name(v)))
    check(expect_checkpoint=True)
    os.unlink(os.path.join(root, "_delta_log", "_last_checkpoint"))
    check(expect_checkpoint=True)
