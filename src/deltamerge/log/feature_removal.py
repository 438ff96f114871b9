"""Dropping a table feature, the log side (Delta's ``RemovableFeature`` and protocol algebra).

Which features can be dropped and which need their history protected (the reader+writer ones:
old readers must never see versions that use them), whether the latest version still uses a
feature, whether any version the log still holds does, and the protocol without it, normalized
to its weakest form as Delta's ``Protocol.removeFeature`` does: ``(1,7,{appendOnly, invariants,
checkConstraints})`` becomes ``(1,3)``, a reader version 3 with no reader feature left drops to 1.

Pure Python. The commands that remove a feature's traces (rewriting files, unsetting properties)
are in ``deltamerge.feature_drop``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from deltamerge.config import TableProperties
from deltamerge.log import column_mapping
from deltamerge.log.actions import Action, AddCDCFile, AddFile, Metadata, Protocol, RemoveFile, UnknownAction
from deltamerge.log.checkpoint import read_checkpoint
from deltamerge.log.protocol import (
    CATALOG_MANAGED,
    CHECK_CONSTRAINTS,
    CHECKPOINT_PROTECTION,
    CLUSTERING,
    COLUMN_MAPPING,
    DELETION_VECTORS,
    DOMAIN_METADATA,
    ICEBERG_COMPAT_V1,
    ICEBERG_COMPAT_V2,
    IN_COMMIT_TIMESTAMP,
    KNOWN_FEATURES,
    LEGACY_READER_FEATURES,
    LEGACY_WRITER_VERSION_OF,
    READER_WRITER_FEATURES,
    ROW_TRACKING,
    TYPE_WIDENING,
    TYPE_WIDENING_PREVIEW,
    V2_CHECKPOINT,
    VACUUM_PROTOCOL_CHECK,
)
from deltamerge.log.replay import list_log, read_commit
from deltamerge.log.store import LogStore

__all__ = [
    "CHECKPOINT_PROTECTION_VERSION",
    "HISTORY_PROTECTED",
    "REMOVABLE",
    "all_features",
    "dependents",
    "has_type_changes",
    "history_uses",
    "in_use",
    "known_to_delta",
    "removed",
    "truncated_before",
    "with_checkpoint_protection",
    "without_type_changes",
]

#: The property the fast drop of a reader+writer feature sets: versions before it may hold the
#: dropped feature's traces, so metadata cleanup must not leave a table starting before it.
CHECKPOINT_PROTECTION_VERSION = "delta.requireCheckpointProtectionBeforeVersion"

# (minReaderVersion, minWriterVersion) of the features legacy protocol versions imply.
_LEGACY = {
    f: (2 if f in LEGACY_READER_FEATURES[2] else 1, writer) for f, writer in LEGACY_WRITER_VERSION_OF.items()
}

#: Features ``DROP FEATURE`` can remove (those deltamerge can write; Delta's list at 4.1).
REMOVABLE = frozenset(
    {
        CHECK_CONSTRAINTS,
        COLUMN_MAPPING,
        DELETION_VECTORS,
        V2_CHECKPOINT,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        IN_COMMIT_TIMESTAMP,
        VACUUM_PROTOCOL_CHECK,
        ROW_TRACKING,
        DOMAIN_METADATA,
        CHECKPOINT_PROTECTION,
    }
)
#: Removable features whose traces in older versions must not reach old readers.
HISTORY_PROTECTED = frozenset(
    {
        COLUMN_MAPPING,
        DELETION_VECTORS,
        V2_CHECKPOINT,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        VACUUM_PROTOCOL_CHECK,
    }
)
# Delta's features deltamerge cannot write (so no table it writes has them), for the error that
# says a feature is known but absent rather than unknown.
_OTHER_DELTA_FEATURES = frozenset(
    {
        "materializePartitionColumns",
        "icebergCompatV3",
        "variantShredding",
        "geospatial",
        "coordinatedCommits-preview",
        "adaptiveMetadata-preview",
        "redirectReaderWriter-preview",
        "redirectWriterOnly-preview",
    }
)
# feature -> the features that require it (Delta's requiredFeatures, inverted; direct only).
_REQUIRED_BY = {
    DOMAIN_METADATA: (ROW_TRACKING, CLUSTERING, "adaptiveMetadata-preview"),
    COLUMN_MAPPING: (ICEBERG_COMPAT_V1, ICEBERG_COMPAT_V2, "icebergCompatV3", "adaptiveMetadata-preview"),
    ROW_TRACKING: ("icebergCompatV3", "adaptiveMetadata-preview"),
    IN_COMMIT_TIMESTAMP: ("coordinatedCommits-preview", CATALOG_MANAGED),
    VACUUM_PROTOCOL_CHECK: ("coordinatedCommits-preview", CATALOG_MANAGED),
    DELETION_VECTORS: ("adaptiveMetadata-preview",),
}


def known_to_delta(name: str) -> str | None:
    """The canonical spelling of a Delta feature name (case-insensitive), or None."""
    canonical = KNOWN_FEATURES.get(name.lower())
    if canonical is not None:
        return canonical
    return next((f for f in _OTHER_DELTA_FEATURES if f.lower() == name.lower()), None)


def _versions(feature: str) -> tuple[int, int]:
    if feature in _LEGACY:
        return _LEGACY[feature]
    return (3, 7) if feature in READER_WRITER_FEATURES else (1, 7)


def _implicit(reader: int, writer: int) -> set[str]:
    """The legacy features a protocol implies (none once it lists features)."""
    if reader >= 3 or writer >= 7:
        return set()
    return {f for f, (r, w) in _LEGACY.items() if r <= reader and w <= writer}


def all_features(protocol: Protocol) -> set[str]:
    """The features a protocol supports, listed or implied by its legacy versions."""
    listed = set(protocol.reader_features or ()) | set(protocol.writer_features or ())
    return listed | _implicit(protocol.min_reader_version, protocol.min_writer_version)


def _listing(reader: int, features: Iterable[str]) -> Protocol:
    """``Protocol(reader, 7)`` listing ``features``: reader features only at reader version 3, a
    legacy feature (columnMapping) among the writer features only below it."""
    wanted = set(features)
    readers = {f for f in wanted if f in READER_WRITER_FEATURES or (f == COLUMN_MAPPING and reader >= 3)}
    return Protocol(
        min_reader_version=reader,
        min_writer_version=7,
        reader_features=tuple(sorted(readers)) if reader >= 3 else None,
        writer_features=tuple(sorted(wanted)),
    )


def _normalized(features: set[str]) -> Protocol:
    """The weakest protocol supporting exactly ``features``: legacy versions when they imply
    exactly these, else writer version 7 with the lowest reader version that works."""
    reader = max([1, *(_versions(f)[0] for f in features)])
    writer = max([1, *(_versions(f)[1] for f in features)])
    if writer < 7 and _implicit(reader, writer) == features:
        return Protocol(min_reader_version=reader, min_writer_version=writer)
    return _listing(reader, features)


def removed(protocol: Protocol, feature: str) -> Protocol:
    """``protocol`` without ``feature``, normalized (Delta's ``removeFeature``)."""
    return _normalized(all_features(protocol) - {feature})


def with_checkpoint_protection(protocol: Protocol, feature: str) -> Protocol:
    """The fast drop's protocol: ``feature`` gone and ``checkpointProtection`` listed."""
    return _normalized((all_features(protocol) | {CHECKPOINT_PROTECTION}) - {feature})


def dependents(protocol: Protocol, feature: str) -> list[str]:
    """The table's features that require ``feature``."""
    have = all_features(protocol)
    return [f for f in _REQUIRED_BY.get(feature, ()) if f in have]


# --- traces -----------------------------------------------------------------------------------------


def _true(configuration: Mapping[str, str], key: str) -> bool:
    return str(configuration.get(key, "")).strip().lower() == "true"


def has_type_changes(schema: Any) -> bool:
    if isinstance(schema, dict):
        if "delta.typeChanges" in (schema.get("metadata") or {}):
            return True
        return any(has_type_changes(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_type_changes(v) for v in schema)
    return False


def without_type_changes(schema: Any) -> Any:
    """``schema`` with every ``delta.typeChanges`` entry removed."""
    if isinstance(schema, dict):
        out = {k: without_type_changes(v) for k, v in schema.items()}
        if isinstance(out.get("metadata"), dict):
            out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "delta.typeChanges"}
        return out
    if isinstance(schema, list):
        return [without_type_changes(v) for v in schema]
    return schema


def _has_mapping_metadata(schema: Any) -> bool:
    return column_mapping.without_mapping_metadata(schema) != schema


def in_use(
    feature: str,
    protocol: Protocol,
    metadata: Metadata,
    files: Iterable[AddFile],
    domains: Mapping[str, Any],
    checkpoint_kind: str | None,
) -> bool:
    """Whether the latest version still uses ``feature`` (Delta's ``validateDropInvariants``
    failing): its files, properties, schema or domains."""
    conf = metadata.configuration
    if feature == DELETION_VECTORS:
        return _action_uses(feature, metadata) or any(f.deletion_vector is not None for f in files)
    if feature == V2_CHECKPOINT:
        return _action_uses(feature, metadata) or checkpoint_kind == "v2"
    if feature == COLUMN_MAPPING:
        return _action_uses(feature, metadata) or _has_mapping_metadata(metadata.schema)
    if feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
        return TableProperties.ENABLE_TYPE_WIDENING.get(conf) or _action_uses(feature, metadata)
    if feature == CHECK_CONSTRAINTS:
        return any(k.lower().startswith("delta.constraints.") for k in conf)
    if feature == IN_COMMIT_TIMESTAMP:
        return TableProperties.ENABLE_ICT.get(conf) or any(
            k in conf
            for k in (
                "delta.inCommitTimestampEnablementVersion",
                "delta.inCommitTimestampEnablementTimestamp",
            )
        )
    if feature == ROW_TRACKING:
        return (
            _true(conf, "delta.enableRowTracking")
            or not _true(conf, "delta.rowTrackingSuspended")
            or any(f.base_row_id is not None or f.default_row_commit_version is not None for f in files)
        )
    if feature == DOMAIN_METADATA:
        return bool(domains)
    if feature == CHECKPOINT_PROTECTION:
        return CHECKPOINT_PROTECTION_VERSION in conf
    return False


def _action_uses(feature: str, action: Action) -> bool:
    """Whether one log action is a trace of ``feature`` (Delta's ``actionUsesFeature``)."""
    if isinstance(action, Metadata):
        conf = action.configuration
        if feature == DELETION_VECTORS:
            return TableProperties.ENABLE_DVS.get(conf)
        if feature == V2_CHECKPOINT:
            return str(conf.get("delta.checkpointPolicy", "")).lower() == "v2"
        if feature == COLUMN_MAPPING:
            return column_mapping.mode_of(conf) != "none"
        if feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
            return has_type_changes(action.schema)
        return False
    if feature == DELETION_VECTORS and isinstance(action, (AddFile, RemoveFile, AddCDCFile)):
        return getattr(action, "deletion_vector", None) is not None
    if feature == V2_CHECKPOINT and isinstance(action, UnknownAction):
        return action.key in ("checkpointMetadata", "sidecar")
    return False


def truncated_before(store: LogStore, version: int) -> bool:
    """Whether the log holds nothing older than ``version``: no commit before it and a checkpoint at
    or after it to start from (checkpointProtection's condition for dropping)."""
    if version <= 0:
        return True
    listing = list_log(store, 0)
    if any(v < version for v in listing.commits):
        return False
    return any(c.version >= version for c in listing.checkpoints) and not any(
        c.version < version for c in listing.checkpoints
    )


def history_uses(feature: str, store: LogStore, version: int) -> bool:
    """Whether any version up to ``version`` the log still holds uses ``feature``: the state at
    the oldest checkpoint (its tombstones aside) and every commit file (Delta's
    ``historyContainsFeature``)."""
    listing = list_log(store, 0)
    commits = sorted(v for v in listing.commits if v <= version)
    if 0 not in listing.commits and listing.checkpoints:
        oldest = min(listing.checkpoints, key=lambda c: c.version)
        if feature == V2_CHECKPOINT and oldest.kind == "v2":
            return True
        state = read_checkpoint(store, oldest)
        if any(_action_uses(feature, a) for a in state if not isinstance(a, RemoveFile)):
            return True
    return any(_action_uses(feature, a) for v in commits for a in read_commit(store, v))
