"""Shared helpers for the transaction tests (unique module name: imported by the test files)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

from deltamerge.log.actions import Action, AddFile, Metadata, Protocol
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def new_add(p: str | None = "a", *, data_change: bool = True, name: str | None = None) -> AddFile:
    path = f"p={p}/{name or 'part-' + uuid.uuid4().hex}.parquet"
    return AddFile(
        path, {"p": p}, size=100, modification_time=int(time.time() * 1000), data_change=data_change
    )


def table_metadata(configuration: dict[str, str] | None = None, partition_columns=("p",)) -> Metadata:
    return Metadata(
        id="",
        schema_string=json.dumps(SCHEMA),
        partition_columns=tuple(partition_columns),
        configuration=dict(configuration or {}),
    )


def create_table(
    root: str, configuration: dict[str, str] | None = None, files: tuple[AddFile, ...] = ()
) -> DeltaLog:
    log = DeltaLog(root)
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata(configuration))
    txn.commit(list(files), Operation("CREATE TABLE", {"partitionBy": ["p"]}))
    return log


def in_partition(value: str) -> Callable[[AddFile], bool]:
    return lambda f: f.partition_values.get("p") == value


# --- the operations of the conflict matrix ----------------------------------------------------------
# Each records its reads on the transaction and returns the actions and Operation to commit.

OpFn = Callable[[OptimisticTransaction, str], tuple[list[Action], Operation]]


def blind_append(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    return [new_add(part)], Operation("WRITE", {"mode": "Append"})


def _files_in(txn: OptimisticTransaction, part: str) -> list[AddFile]:
    assert txn.snapshot is not None
    files = [f for f in txn.snapshot.files if f.partition_values.get("p") == part]
    txn.add_read_predicate(in_partition(part), f"p = '{part}'")
    txn.add_read_files(files)
    return files


def overwrite_partition(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    files = _files_in(txn, part)
    now = int(time.time() * 1000)
    return [*(f.remove(now) for f in files), new_add(part)], Operation(
        "WRITE", {"mode": "Overwrite", "predicate": [f"p = '{part}'"]}
    )


def merge(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    files = _files_in(txn, part)
    now = int(time.time() * 1000)
    return [*(f.remove(now) for f in files), new_add(part)], Operation(
        "MERGE", {"predicate": [f"t.p = '{part}' AND t.id = s.id"]}, {"numTargetRowsUpdated": 1}
    )


def optimize(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    assert txn.snapshot is not None
    files = [f for f in txn.snapshot.files if f.partition_values.get("p") == part]
    txn.add_read_files(files)
    now = int(time.time() * 1000)
    actions: list[Action] = [f.remove(now, data_change=False) for f in files]
    actions.append(new_add(part, data_change=False))
    return actions, Operation("OPTIMIZE", {"predicate": [f"p = '{part}'"]}, changes_data=False)


def metadata_change(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    assert txn.metadata is not None
    md = txn.metadata
    txn.update_metadata(
        Metadata(
            id=md.id,
            schema_string=md.schema_string,
            partition_columns=md.partition_columns,
            configuration={**md.configuration, "user.tag": uuid.uuid4().hex},
        )
    )
    return [], Operation("SET TBLPROPERTIES", {"properties": {"user.tag": "x"}})


def protocol_change(txn: OptimisticTransaction, part: str) -> tuple[list[Action], Operation]:
    txn.update_protocol(Protocol(1, 3))
    return [], Operation("UPGRADE PROTOCOL")
