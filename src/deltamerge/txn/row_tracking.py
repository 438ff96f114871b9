"""Row tracking (Delta's ``rowTracking`` writer feature): stable row ids and row commit versions.

A row's id is its file's ``baseRowId`` plus its physical position, unless the file materializes it
in a hidden column; its commit version is the file's ``defaultRowCommitVersion`` unless
materialized. While the feature is supported, every committed file without a ``baseRowId`` gets a
fresh range above the table's high-water mark (domain ``delta.rowTracking``) and the committing
version as its default commit version (Delta's ``RowId.assignFreshRowIds`` and
``DefaultRowCommitVersion.assignIfMissing``). Rewrites keep rows' ids (and a copied row's commit
version) by writing them into the materialized columns (``spark/scan.py``, the executors).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from deltamerge.config import parse_bool
from deltamerge.errors import DeltaMergeError, InvalidArgumentError, UnsupportedOperationError
from deltamerge.log.actions import Action, AddFile, DomainMetadata, Metadata, Protocol
from deltamerge.log.protocol import ROW_TRACKING, writer_features
from deltamerge.log.snapshot import Snapshot

DOMAIN = "delta.rowTracking"
ENABLED = "delta.enableRowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
_PREFIXES = {ROW_ID_COLUMN: "_row-id-col-", COMMIT_VERSION_COLUMN: "_row-commit-version-col-"}
MISSING_HIGH_WATER_MARK = -1


def _true(configuration: Mapping[str, str], key: str) -> bool:
    try:
        return parse_bool(str(configuration.get(key, "false")))
    except ValueError:
        return False


def is_supported(protocol: Protocol | None) -> bool:
    """The protocol lists the feature: every new file then needs fresh row ids."""
    return protocol is not None and ROW_TRACKING in writer_features(protocol)


def is_enabled(protocol: Protocol | None, metadata: Metadata | None) -> bool:
    """``delta.enableRowTracking`` is on: rewrites must preserve the rows' ids."""
    if metadata is None or not _true(metadata.configuration, ENABLED):
        return False
    if not is_supported(protocol):
        raise UnsupportedOperationError(
            f"Table property '{ENABLED}' is set on the table but this table version does not support "
            f"the table feature 'rowTracking'. Set 'delta.feature.rowTracking' = 'supported' as well.",
            error_class="DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION",
        )
    return True


def is_suspended(metadata: Metadata | None) -> bool:
    """``delta.rowTrackingSuspended``: new files get no row ids (only without row tracking enabled)."""
    if metadata is None:
        return False
    suspended = _true(metadata.configuration, SUSPENDED)
    if suspended and _true(metadata.configuration, ENABLED):
        raise UnsupportedOperationError(
            f"Illegal table state was detected. Table properties `{ENABLED}` and `{SUSPENDED}` are both "
            "set to true. The issue can be resolved by disabling any of the two table properties.",
            error_class="DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION",
            sql_state="55000",
        )
    return suspended


@dataclass(frozen=True)
class MaterializedColumns:
    """The hidden Parquet columns holding materialized row ids and row commit versions."""

    row_id: str
    row_commit_version: str

    @property
    def names(self) -> tuple[str, str]:
        """(row id column, row commit version column), as scans and writers take them."""
        return (self.row_id, self.row_commit_version)


def materialized_columns(protocol: Protocol | None, metadata: Metadata | None) -> MaterializedColumns | None:
    """The materialized column names when row tracking is enabled, else None."""
    if not is_enabled(protocol, metadata):
        return None
    assert metadata is not None
    names = [metadata.configuration.get(k) for k in (ROW_ID_COLUMN, COMMIT_VERSION_COLUMN)]
    if not all(names):
        missing = "row ID" if not names[0] else "row commit version"
        raise DeltaMergeError(
            f"Materialized {missing} column name missing for table {metadata.id}.",
            error_class="DELTA_MATERIALIZED_ROW_TRACKING_COLUMN_NAME_MISSING",
            sql_state="22000",
        )
    return MaterializedColumns(str(names[0]), str(names[1]))


def with_column_names(protocol: Protocol | None, read: Metadata | None, metadata: Metadata) -> Metadata:
    """``metadata`` with the table's materialized column names (kept from ``read``, else fresh) when
    the protocol supports row tracking; without it, names copied from elsewhere are dropped."""
    configuration = dict(metadata.configuration)
    old = read.configuration if read is not None else {}
    for key, prefix in _PREFIXES.items():
        if not is_supported(protocol):
            configuration.pop(key, None)
        else:
            configuration[key] = old.get(key) or prefix + str(uuid.uuid4())
    if configuration == dict(metadata.configuration):
        return metadata
    names = {str(configuration[k]) for k in _PREFIXES if configuration.get(k)}
    for f in metadata.schema.get("fields", []):
        physical = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
        clash = names & {str(f.get("name")), str(physical)}
        if clash:
            raise InvalidArgumentError(
                f"Failed to add column {sorted(clash)[0]} because the name is reserved.",
                error_class="DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED",
            )
    return replace(metadata, configuration=configuration)


def high_water_mark(domains: Mapping[str, DomainMetadata] | Sequence[Action]) -> int:
    """The highest row id assigned so far (-1 before any), from a snapshot's domains or a commit."""
    found: DomainMetadata | None = None
    if isinstance(domains, Mapping):
        found = domains.get(DOMAIN)
    else:
        found = next((a for a in domains if isinstance(a, DomainMetadata) and a.domain == DOMAIN), None)
    if found is None or found.removed:
        return MISSING_HIGH_WATER_MARK
    return int(json.loads(found.configuration or "{}").get("rowIdHighWaterMark", MISSING_HIGH_WATER_MARK))


def assign(
    actions: Sequence[Action],
    *,
    protocol: Protocol,
    metadata: Metadata,
    high_water_mark: int,
    version: int,
) -> list[Action]:
    """``actions`` with fresh ``baseRowId`` ranges and default commit versions for new files, plus the
    new high-water mark; unchanged when the protocol does not support row tracking."""
    if not is_supported(protocol):
        return list(actions)
    suspended = is_suspended(metadata)
    out: list[Action] = []
    mark = high_water_mark
    for a in actions:
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            raise InvalidArgumentError("Manually setting the Row ID high water mark is not allowed.")
        if isinstance(a, AddFile):
            if suspended:
                a = replace(a, base_row_id=None, default_row_commit_version=None)
            else:
                if a.base_row_id is None:
                    records = a.num_records
                    if records is None:
                        raise InvalidArgumentError(
                            "Cannot assign row IDs without row count statistics. Collect statistics for "
                            f"{a.path} (write with spark.databricks.delta.stats.collect=true) and retry.",
                            error_class="DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS",
                        )
                    a = replace(a, base_row_id=mark + 1)
                    mark += records
                if a.default_row_commit_version is None:
                    a = replace(a, default_row_commit_version=version)
        out.append(a)
    if mark != high_water_mark:
        out.append(DomainMetadata(DOMAIN, json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":"))))
    return out


def backfill(files: Sequence[AddFile]) -> list[AddFile]:
    """Files that need ids before row tracking can be enabled, re-added without a data change."""
    return [replace(f, data_change=False) for f in files if f.base_row_id is None]


#: Operations that rewrite rows and keep their ids (Delta tags their commits).
_PRESERVING = frozenset({"MERGE", "UPDATE", "DELETE", "OPTIMIZE", "REORG", "REMOVE COLUMN MAPPING"})


def commit_tags(snapshot: Snapshot | None, operation: str) -> dict[str, str] | None:
    """``commitInfo.tags`` of a row-preserving commit on a table with row tracking enabled
    (Delta's ``delta.rowTracking.preserved``)."""
    if snapshot is None or operation not in _PRESERVING:
        return None
    if not is_enabled(snapshot.protocol, snapshot.metadata):
        return None
    return {"delta.rowTracking.preserved": "true"}
