"""Operations (what a commit did) and the ``commitInfo`` action built from them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata as _importlib_metadata
from typing import Any

from deltamerge.log.actions import CommitInfo


def _package_version() -> str:
    try:
        return _importlib_metadata.version("deltamerge")
    except _importlib_metadata.PackageNotFoundError:
        return "0.0.0"


DEFAULT_ENGINE_INFO = f"deltamerge/{_package_version()}"


def _encode_parameter(value: Any) -> Any:
    # delta-spark stores operationParameters as strings: plain strings as-is, everything else as
    # its JSON text (``"partitionBy": "[\"x\"]"``). null stays JSON null, as delta-spark writes it.
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


@dataclass
class Operation:
    """A named table operation with its parameters and metrics, recorded in ``commitInfo``.

    ``changes_data`` is False for operations that only rearrange data (OPTIMIZE); it decides
    whether a WriteSerializable commit may be downgraded to SnapshotIsolation.
    """

    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, int | str] = field(default_factory=dict)  # Mapping: accepts dict[str, int] too
    changes_data: bool = True

    def operation_parameters(self) -> dict[str, Any]:
        """``commitInfo.operationParameters``: values JSON-encoded into strings unless already str."""
        return {k: _encode_parameter(v) for k, v in self.parameters.items()}

    def operation_metrics(self) -> dict[str, str]:
        """``commitInfo.operationMetrics``: every value as a string, as delta-spark writes them."""
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.metrics.items()}


def build_commit_info(
    operation: Operation,
    *,
    timestamp: int,
    read_version: int | None,
    isolation_level: str,
    is_blind_append: bool,
    engine_info: str,
    txn_id: str,
    user_metadata: str | None = None,
    in_commit_timestamp: int | None = None,
    tags: dict[str, str] | None = None,
) -> CommitInfo:
    """The ``commitInfo`` action, with delta-spark's field names and order.

    With in-commit timestamps, ``inCommitTimestamp`` comes first and ``timestamp`` equals it (as
    delta-spark writes them).
    """
    raw: dict[str, Any] = {}
    if in_commit_timestamp is not None:
        raw["inCommitTimestamp"] = in_commit_timestamp
        timestamp = in_commit_timestamp
    raw |= {
        "timestamp": timestamp,
        "operation": operation.name,
        "operationParameters": operation.operation_parameters(),
    }
    if read_version is not None and read_version >= 0:
        raw["readVersion"] = read_version
    raw["isolationLevel"] = isolation_level
    raw["isBlindAppend"] = is_blind_append
    raw["operationMetrics"] = operation.operation_metrics()
    if user_metadata is not None:
        raw["userMetadata"] = user_metadata
    if tags:
        raw["tags"] = dict(tags)
    raw["engineInfo"] = engine_info
    raw["txnId"] = txn_id
    return CommitInfo(raw)
