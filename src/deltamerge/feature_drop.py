"""``ALTER TABLE t DROP FEATURE name [TRUNCATE HISTORY]`` and ``DeltaTable.dropFeatureSupport``:
Delta's ``AlterTableDropFeatureDeltaCommand``.

First the feature's traces go from the latest version (Delta's pre-downgrade commands, each its own
commit: unset the property that turns it on, purge deletion vectors, rewrite files without column
mapping or with their widened types, unbackfill row ids, remove metadata domains); a feature still
in use after that (a CHECK constraint, a concurrent writer) is refused. Then one ``DROP FEATURE``
commit writes the protocol without it, normalized to its weakest form.

A reader+writer feature (deletion vectors, column mapping, V2 checkpoints, type widening,
vacuumProtocolCheck) may still be used by older versions, which readers that lack it must never
load. By default (``spark.databricks.delta.tableFeatures.fastDropFeature.enabled``) the drop is
Delta's fast drop: three empty commits each with a checkpoint, then the drop commit adds the
``checkpointProtection`` writer feature with ``delta.requireCheckpointProtectionBeforeVersion`` set to
its own version, and is checkpointed too; readers start from those checkpoints and never replay the
older commits. With ``TRUNCATE HISTORY`` (or fast drop off) it is Delta's older way: the first call
cleans the latest version and asks to wait for the history to expire
(``DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD``); a later call deletes the log older than
``delta.dropFeatureTruncateHistory.retentionDuration`` (24 hours; ``delta.logRetentionDuration``
without TRUNCATE HISTORY) and drops the feature if no remaining version uses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession

from deltamerge import catalog
from deltamerge.builders import compaction
from deltamerge.config import parse_interval_ms
from deltamerge.errors import AnalysisError, TableFeatureError
from deltamerge.log import clustering, column_mapping, feature_removal, table_config
from deltamerge.log.actions import AddFile, DomainMetadata
from deltamerge.log.cleanup import delete_expired_logs
from deltamerge.log.protocol import (
    CHECK_CONSTRAINTS,
    CHECKPOINT_PROTECTION,
    COLUMN_MAPPING,
    DELETION_VECTORS,
    DOMAIN_METADATA,
    IN_COMMIT_TIMESTAMP,
    ROW_TRACKING,
    TYPE_WIDENING,
    TYPE_WIDENING_PREVIEW,
    V2_CHECKPOINT,
)
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.spark.session import conf_getter
from deltamerge.spark.write import now_ms
from deltamerge.table_properties import set_properties, unset_properties
from deltamerge.txn import row_tracking
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = ["drop_feature", "remove_column_mapping"]

FAST_DROP_KEY = "spark.databricks.delta.tableFeatures.fastDropFeature.enabled"
DV_TOMBSTONES_KEY = "spark.databricks.delta.tableFeatures.fastDropFeature.generateDVTombstones.enabled"
BARRIER_CHECKPOINTS = 3  # Delta's: one more than snapshotLoading.maxRetries
_LOG_RETENTION = ("delta.logRetentionDuration", "interval 30 days")
_TRUNCATE_RETENTION = ("delta.dropFeatureTruncateHistory.retentionDuration", "interval 24 hours")
MINUTE_MS = 60_000
DAY_MS = 86_400_000
_SEE = "\nRefer to https://docs.delta.io/latest/concurrency-control.html for more details."
# Properties the DROP FEATURE commit removes (Delta's tablePropertiesToRemoveAtDowngradeCommit).
_PROPERTIES_AT_DROP = {
    ROW_TRACKING: (
        row_tracking.ENABLED,
        row_tracking.SUSPENDED,
        "delta.rowTracking.materializedRowIdColumnName",
        "delta.rowTracking.materializedRowCommitVersionColumnName",
    ),
}
# Characters Parquet column names cannot hold (Spark's check): column mapping cannot be removed
# while a column name has one.
_BAD_NAME_CHARS = " ,;{}()\n\t="


def _true(value: object) -> bool:
    return str(value).strip().lower() == "true"


def _err(cls: type[Exception], message: str, error_class: str, sql_state: str) -> Exception:
    return cls(message, error_class=error_class, sql_state=sql_state)  # type: ignore[call-arg]


def _resolve(protocol: Any, name: str) -> str:
    """The feature to drop, after Delta's checks in Delta's order."""
    present = name in feature_removal.all_features(protocol)  # exact: the canonical spelling
    canonical = feature_removal.known_to_delta(name)
    lower = name.lower()
    if not present and lower.startswith("delta.") and lower[len("delta.") :] in table_config.KNOWN:
        raise _err(
            TableFeatureError,
            f"Cannot drop `{name}` from this table because this is a delta table property and not a "
            "table feature.",
            "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY",
            "42000",
        )
    if canonical is not None and not present:
        raise _err(
            TableFeatureError,
            f"Cannot drop {name} from this table because it is not currently present in the table's "
            "protocol.",
            "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT",
            "55000",
        )
    if canonical is None:
        raise _err(
            TableFeatureError,
            f"Cannot drop {name} because it is not supported by this Delta version.\nConsider using "
            "Delta with a higher version.",
            "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE",
            "0AKDC",
        )
    if canonical not in feature_removal.REMOVABLE:
        raise _err(
            TableFeatureError,
            f"Cannot drop {name} because dropping this feature is not supported.",
            "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE",
            "0AKDC",
        )
    return canonical


def drop_feature(spark: SparkSession, path: str, name: str, truncate_history: bool = False) -> None:
    """Drop table feature ``name`` from the table at ``path`` (see the module docstring)."""
    get = conf_getter(spark)
    log = DeltaLog.for_table(path)
    snapshot = log.update()
    feature = _resolve(snapshot.protocol, name)
    protected = feature in feature_removal.HISTORY_PROTECTED
    if truncate_history and not (protected or feature == CHECKPOINT_PROTECTION):
        raise _err(
            TableFeatureError,
            "The particular feature does not require history truncation.",
            "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED",
            "42000",
        )
    if feature == CHECKPOINT_PROTECTION and not truncate_history:
        raise _err(
            TableFeatureError,
            "Could not drop the Checkpoint Protection feature.\nThis feature can only be dropped by "
            "truncating history.\nPlease try again with the TRUNCATE HISTORY option:\n\n    ALTER TABLE "
            "table_name DROP FEATURE checkpointProtection TRUNCATE HISTORY",
            "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
            "55000",
        )
    needing = feature_removal.dependents(snapshot.protocol, feature)
    if needing:
        raise _err(
            TableFeatureError,
            f"Cannot drop table feature `{feature}` because some other features ({', '.join(needing)}) "
            f"in this table depends on `{feature}`.\nConsider dropping them first before dropping this "
            "feature.",
            "DELTA_FEATURE_DROP_DEPENDENT_FEATURE",
            "55000",
        )
    fast = not truncate_history and _true(get(FAST_DROP_KEY) or "true")
    retention_start = dict(snapshot.metadata.configuration)
    performed = _PRE_DOWNGRADE.get(feature, _nothing)(spark, path, fast)
    if protected:
        for _ in range(BARRIER_CHECKPOINTS if fast else 1):
            _empty_commit_and_checkpoint(log, get)
        if not fast and performed:
            raise _wait_error(name, retention_start)
    txn = OptimisticTransaction(log, conf=get)
    # What was checked below must still hold when the protocol drops the feature: a concurrent
    # write (a deletion vector, a row id) between the check and the commit makes the drop fail.
    txn.mark_read_whole_table()
    current = txn.snapshot
    assert current is not None
    if _still_used(feature, current):
        raise _err(
            TableFeatureError,
            "Cannot drop feature because a concurrent transaction modified the table.\nPlease try the "
            f"operation again.\n{_SEE}",
            "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL",
            "40000",
        )
    if protected and not fast:
        key, default = _TRUNCATE_RETENTION if truncate_history else _LOG_RETENTION
        retention = parse_interval_ms(current.metadata.configuration.get(key, default))
        granularity = MINUTE_MS if truncate_history else DAY_MS
        delete_expired_logs(log.store, retention, now_ms(), granularity_ms=granularity)
        if feature_removal.history_uses(feature, log.store, current.version):
            raise _historical_error(name, current.metadata.configuration)
    meta = current.metadata
    drop_keys = {k.lower() for k in _PROPERTIES_AT_DROP.get(feature, ())}
    conf = {k: v for k, v in meta.configuration.items() if k.lower() not in drop_keys}
    if protected and fast:
        protocol = feature_removal.with_checkpoint_protection(current.protocol, feature)
        conf[feature_removal.CHECKPOINT_PROTECTION_VERSION] = str(current.version + 1)
        txn.set_property_to_commit_version(feature_removal.CHECKPOINT_PROTECTION_VERSION)
    else:
        protocol = feature_removal.removed(current.protocol, feature)
    txn.update_protocol(protocol)  # first: the metadata update must not bring the feature back
    txn.update_metadata(replace(meta, configuration=conf))
    actions = []
    if feature == ROW_TRACKING and row_tracking.DOMAIN in current.domains:
        actions.append(replace(current.domains[row_tracking.DOMAIN], removed=True))
    op = Operation(
        "DROP FEATURE", {"featureName": name, "truncateHistory": truncate_history}, {}, changes_data=False
    )
    version = txn.commit(actions, op)
    if protected and fast:
        log.checkpoint(log.snapshot(version))
    catalog.refresh_views(spark, path)


# --- the steps -----------------------------------------------------------------------------------


def _still_used(feature: str, snapshot: Snapshot) -> bool:
    kind = None
    if snapshot.checkpoint_version is not None:
        from deltamerge.log.replay import list_log

        refs = list_log(snapshot.store, snapshot.checkpoint_version).checkpoints
        kind = next((r.kind for r in refs if r.version == snapshot.checkpoint_version), None)
    return feature_removal.in_use(
        feature, snapshot.protocol, snapshot.metadata, snapshot.files, snapshot.domains, kind
    )


def _empty_commit_and_checkpoint(log: DeltaLog, get: Callable[[str], str | None]) -> None:
    """Delta's barrier: a commit without actions, checkpointed."""
    txn = OptimisticTransaction(log, conf=get)
    version = txn.commit([], Operation("Empty Commit", {}, {}, changes_data=False))
    log.checkpoint(log.snapshot(version))


def _retentions(configuration: dict[str, str]) -> tuple[str, str]:
    def shown(key: str, default: str) -> str:
        text = configuration.get(key, default).strip()
        return text[len("interval") :].strip() if text.lower().startswith("interval") else text

    return shown(*_LOG_RETENTION), shown(*_TRUNCATE_RETENTION)


def _wait_error(name: str, configuration: dict[str, str]) -> Exception:
    log_retention, truncate_retention = _retentions(configuration)
    return _err(
        TableFeatureError,
        f"Dropping {name} was partially successful.\n\nThe feature is now no longer used in the current "
        "version of the table. However, the feature\nis still present in historical versions of the "
        "table. The table feature cannot be dropped\nfrom the table protocol until these historical "
        "versions have expired.\n\nTo drop the table feature from the protocol, please wait for the "
        "historical versions to\nexpire, and then repeat this command. The retention period for "
        f"historical versions is\ncurrently configured as delta.logRetentionDuration={log_retention}.\n\n"
        f"Alternatively, please wait for the TRUNCATE HISTORY retention period to expire "
        f"({truncate_retention})\nand then run:\n    ALTER TABLE table_name DROP FEATURE feature_name "
        "TRUNCATE HISTORY",
        "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD",
        "22KD0",
    )


def _historical_error(name: str, configuration: dict[str, str]) -> Exception:
    log_retention, truncate_retention = _retentions(configuration)
    return _err(
        TableFeatureError,
        f"Cannot drop {name} because the Delta log contains historical versions that use the feature.\n"
        f"Please wait until the history retention period (delta.logRetentionDuration={log_retention}) "
        "\nhas passed since the feature was last active.\n\nAlternatively, please wait for the TRUNCATE "
        f"HISTORY retention period to expire ({truncate_retention})\nand then run:\n    ALTER TABLE "
        "table_name DROP FEATURE feature_name TRUNCATE HISTORY",
        "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST",
        "22KD0",
    )


def _nothing(spark: SparkSession, path: str, fast: bool) -> bool:
    return False


def _snapshot(path: str) -> Snapshot:
    return DeltaLog.for_table(path).update()


def _drop_deletion_vectors(spark: SparkSession, path: str, fast: bool) -> bool:
    """Turn deletion vectors off, purge the rows they mark (REORG ... APPLY (PURGE)), and, for
    the fast drop, tombstone DV files that removed files still refer to (VACUUM then deletes them)."""
    snap = _snapshot(path)
    traces = _still_used(DELETION_VECTORS, snap)
    if traces:
        unset_properties(spark, path, ["delta.enableDeletionVectors"], if_exists=True)
    # One purge (Delta runs a second one for DVs a concurrent writer adds meanwhile; here the
    # final check before the drop commit refuses those, so it would only read every footer again).
    compaction.optimize(spark, path, purge=True)
    if _true(conf_getter(spark)(DV_TOMBSTONES_KEY) or str(fast)):
        _dv_tombstones(spark, path)
    return traces


def _dv_tombstones(spark: SparkSession, path: str) -> None:
    """Delta's "Deletion Vector Tombstones" commit: a ``remove`` for each DV file a live
    tombstone still refers to, so VACUUM by an older client deletes it."""
    from deltamerge.deletion_vectors import dv_relative_path
    from deltamerge.log.paths import encode_add_path

    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    snap = txn.snapshot
    assert snap is not None
    plain = {r.path for r in snap.tombstones}
    ts = now_ms()
    removes = []
    seen: set[str] = set()
    for r in snap.tombstones:
        dv = r.deletion_vector
        if dv is None or dv.storage_type != "u":
            continue
        relative = encode_add_path(dv_relative_path(dv))
        if relative in plain or relative in seen:
            continue
        seen.add(relative)
        removes.append(
            AddFile(path=relative, partition_values={}, size=dv.size_in_bytes, modification_time=ts).remove(
                ts, data_change=False
            )
        )
    txn.commit(removes, Operation("Deletion Vector Tombstones", {}, {}, changes_data=False))


def _drop_v2_checkpoints(spark: SparkSession, path: str, fast: bool) -> bool:
    snap = _snapshot(path)
    if not _still_used(V2_CHECKPOINT, snap):
        return False
    set_properties(spark, path, {"delta.checkpointPolicy": "classic"})
    return True


def _drop_column_mapping(spark: SparkSession, path: str, fast: bool) -> bool:
    if not _still_used(COLUMN_MAPPING, _snapshot(path)):
        return False
    remove_column_mapping(spark, path, drop_property=True)
    return True


def remove_column_mapping(spark: SparkSession, path: str, *, drop_property: bool) -> None:
    """Delta's ``RemoveColumnMappingCommand``: one commit rewriting every file with the columns
    under their logical names and the schema without mapping metadata; ``delta.columnMapping.mode``
    becomes ``none`` (or goes, ``drop_property``)."""
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    snap = txn.snapshot
    assert snap is not None
    meta = snap.metadata
    bad = [n for n in column_mapping.field_names(meta.schema) if any(c in n for c in _BAD_NAME_CHARS)]
    if bad:
        raise _err(
            AnalysisError,
            "Found invalid character(s) among ' ,;{}()\\n\\t=' in the column names: "
            f"{', '.join(bad)}. Rename the columns before removing column mapping.",
            "DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING",
            "42K05",
        )
    conf = {
        k: v for k, v in meta.configuration.items() if k not in (column_mapping.MODE, column_mapping.MAX_ID)
    }
    if not drop_property:
        conf[column_mapping.MODE] = "none"
    schema = column_mapping.without_mapping_metadata(meta.schema)
    new_meta = replace(meta, schema_string=json.dumps(schema, separators=(",", ":")), configuration=conf)
    txn.update_metadata(new_meta)
    assert txn.metadata is not None
    # Clustering columns are stored by physical name: they become the logical names.
    columns = clustering.clustering_columns(snap.protocol, snap.domains)
    extra = []
    if columns:
        extra.append(clustering.domain_for([clustering.logical_path(meta.schema, c) or c for c in columns]))
    op = Operation("REMOVE COLUMN MAPPING", {}, {}, changes_data=False)
    compaction.rewrite(spark, txn, list(snap.files), op, extra)


def _drop_type_widening(spark: SparkSession, path: str, fast: bool) -> bool:
    """Unset ``delta.enableTypeWidening``, rewrite files that hold a column in its type from before
    a widening, then remove ``delta.typeChanges`` from the schema (a commit Delta names DROP FEATURE)."""
    from deltamerge.log.paths import absolute_file_path
    from deltamerge.stats.footer import file_has_narrower_types

    snap = _snapshot(path)
    if not _still_used(TYPE_WIDENING, snap):
        return False
    if "delta.enableTypeWidening" in snap.metadata.configuration:
        unset_properties(spark, path, ["delta.enableTypeWidening"], if_exists=True)
    snap = _snapshot(path)
    if not feature_removal.has_type_changes(snap.metadata.schema):
        return False
    physical = column_mapping.physical_schema(snap.metadata.schema, field_ids=False)
    stale = [f for f in snap.files if file_has_narrower_types(absolute_file_path(path, f.path), physical)]
    if stale:
        txn = OptimisticTransaction(DeltaLog.for_table(path), snap, conf=conf_getter(spark))
        params = {"predicate": [], "applyPurge": True}
        compaction.rewrite(spark, txn, stale, Operation("REORG", params, {}, changes_data=False))
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    schema = feature_removal.without_type_changes(meta.schema)
    changed = [f for f, g in zip(schema["fields"], meta.schema["fields"], strict=True) if f != g]
    txn.update_metadata(replace(meta, schema_string=json.dumps(schema, separators=(",", ":"))))
    txn.commit([], Operation("DROP FEATURE", {"columns": changed}, {}, changes_data=False))
    return True


def _drop_check_constraints(spark: SparkSession, path: str, fast: bool) -> bool:
    conf = _snapshot(path).metadata.configuration
    names = [k[len("delta.constraints.") :] for k in conf if k.lower().startswith("delta.constraints.")]
    if names:
        raise _err(
            AnalysisError,
            "Cannot drop the CHECK constraints table feature.\nThe following constraints must be dropped "
            f"first: {', '.join(f'`{n}`' for n in names)}.",
            "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE",
            "0AKDE",
        )
    return False


def _drop_in_commit_timestamps(spark: SparkSession, path: str, fast: bool) -> bool:
    """Turn in-commit timestamps off (``delta.enableInCommitTimestamps`` = false, as Delta leaves
    it) and remove their enablement provenance."""
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    conf = dict(meta.configuration)
    provenance = [
        k
        for k in ("delta.inCommitTimestampEnablementTimestamp", "delta.inCommitTimestampEnablementVersion")
        if k in conf
    ]
    enabled = _true(conf.get("delta.enableInCommitTimestamps", "false"))
    if not provenance and not enabled:
        return False
    keys = provenance + (["delta.enableInCommitTimestamps"] if enabled else [])
    for k in provenance:
        conf.pop(k)
    conf["delta.enableInCommitTimestamps"] = "false"
    txn.update_metadata(replace(meta, configuration=conf))
    txn.commit(
        [], Operation("UNSET TBLPROPERTIES", {"properties": keys, "ifExists": True}, {}, changes_data=False)
    )
    return True


def _drop_row_tracking(spark: SparkSession, path: str, fast: bool) -> bool:
    """Suspend row tracking, then re-add every file without row ids (ROW TRACKING UNBACKFILL)."""
    set_properties(spark, path, {row_tracking.ENABLED: "false", row_tracking.SUSPENDED: "true"})
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    snap = txn.snapshot
    assert snap is not None
    tracked = [f for f in snap.files if f.base_row_id is not None or f.default_row_commit_version is not None]
    if tracked:
        readds = [
            replace(f, data_change=False, base_row_id=None, default_row_commit_version=None) for f in tracked
        ]
        txn.add_read_files(tracked)
        txn.commit(readds, Operation("ROW TRACKING UNBACKFILL", {"batchId": "0"}, {}, changes_data=False))
    return False


def _drop_domain_metadata(spark: SparkSession, path: str, fast: bool) -> bool:
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    snap = txn.snapshot
    assert snap is not None
    if not snap.domains:
        return False
    removed: Sequence[DomainMetadata] = [replace(d, removed=True) for d in snap.domains.values()]
    op = Operation(
        "DOMAIN METADATA CLEANUP", {"domainMetadataRemovedCount": len(removed)}, {}, changes_data=False
    )
    txn.commit(list(removed), op)
    return False


def _drop_checkpoint_protection(spark: SparkSession, path: str, fast: bool) -> bool:
    """Wait until the log holds nothing before ``delta.requireCheckpointProtectionBeforeVersion``
    (deleting what ``delta.dropFeatureTruncateHistory.retentionDuration`` lets go), then unset it."""
    log = DeltaLog.for_table(path)
    get = conf_getter(spark)
    snap = log.update()
    conf = snap.metadata.configuration
    before = int(conf.get(feature_removal.CHECKPOINT_PROTECTION_VERSION, "0") or 0)
    if not feature_removal.truncated_before(log.store, before):
        _empty_commit_and_checkpoint(log, get)
        key, default = _TRUNCATE_RETENTION
        retention = parse_interval_ms(conf.get(key, default))
        delete_expired_logs(log.store, retention, now_ms(), granularity_ms=MINUTE_MS)
        if not feature_removal.truncated_before(log.store, before):
            _, truncate_retention = _retentions(dict(conf))
            raise _err(
                TableFeatureError,
                "The operation did not succeed because there are still traces of dropped features \nin "
                "the table history. CheckpointProtection cannot be dropped until these historical\n"
                "versions have expired.\n\nTo drop CheckpointProtection, please wait for the historical "
                "versions to\nexpire, and then repeat this command. The retention period for historical "
                f"versions is\ncurrently configured to {truncate_retention}.",
                "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD",
                "22KD0",
            )
    unset_properties(spark, path, [feature_removal.CHECKPOINT_PROTECTION_VERSION], if_exists=True)
    return False


_PreDowngrade = Callable[[SparkSession, str, bool], bool]
_PRE_DOWNGRADE: dict[str, _PreDowngrade] = {
    DELETION_VECTORS: _drop_deletion_vectors,
    V2_CHECKPOINT: _drop_v2_checkpoints,
    COLUMN_MAPPING: _drop_column_mapping,
    TYPE_WIDENING: _drop_type_widening,
    TYPE_WIDENING_PREVIEW: _drop_type_widening,
    CHECK_CONSTRAINTS: _drop_check_constraints,
    IN_COMMIT_TIMESTAMP: _drop_in_commit_timestamps,
    ROW_TRACKING: _drop_row_tracking,
    DOMAIN_METADATA: _drop_domain_metadata,
    CHECKPOINT_PROTECTION: _drop_checkpoint_protection,
}
