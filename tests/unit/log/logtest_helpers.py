"""Shared helpers for the log-layer tests (unique module name: imported by the test files)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from deltamerge.log import filenames
from deltamerge.log.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    Metadata,
    Protocol,
    RemoveFile,
    serialize_commit,
)
from deltamerge.log.snapshot import DeltaLog
from deltamerge.log.store import LocalLogStore

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def dv(uid: str = "vBn[lx{q8@P<9BNH/isA", cardinality: int = 2) -> DeletionVectorDescriptor:
    """An on-disk DV descriptor (the content is irrelevant to the log layer)."""
    return DeletionVectorDescriptor("u", uid, size_in_bytes=36, cardinality=cardinality, offset=1)


class RawTable:
    """A table whose commits are written action by action."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.store = LocalLogStore(self.root)

    def commit(self, version: int, actions: Sequence[Action], info: dict | None = None) -> None:
        ci = CommitInfo({"timestamp": 1, "operation": "WRITE", **(info or {})})
        self.store.write_exclusive(filenames.commit_name(version), serialize_commit([ci, *actions]))

    def metadata(self, configuration: dict[str, str] | None = None, partition_columns=("p",)) -> Metadata:
        return Metadata(
            id="table-id",
            schema_string=json.dumps(SCHEMA),
            partition_columns=tuple(partition_columns),
            configuration=dict(configuration or {}),
            created_time=1,
        )

    def create(self, *files: AddFile, protocol: Protocol | None = None, configuration=None) -> None:
        self.commit(0, [protocol or Protocol(1, 2), self.metadata(configuration), *files])

    def log(self) -> DeltaLog:
        """A fresh DeltaLog (no cached snapshot)."""
        return DeltaLog(self.root)

    def path(self, name: str) -> Path:
        return Path(self.store.path(name))


def add(
    path: str, p: str | None = "a", *, deletion_vector=None, stats: str | None = None, size=100
) -> AddFile:
    return AddFile(
        path=path,
        partition_values={"p": p},
        size=size,
        modification_time=1_700_000_000_000,
        data_change=True,
        stats=stats,
        deletion_vector=deletion_vector,
    )


def remove(path: str, *, deletion_vector=None, ts: int | None = None) -> RemoveFile:
    return RemoveFile(
        path=path,
        deletion_timestamp=int(time.time() * 1000) if ts is None else ts,
        data_change=True,
        extended_file_metadata=True,
        partition_values={"p": "a"},
        size=100,
        deletion_vector=deletion_vector,
    )
