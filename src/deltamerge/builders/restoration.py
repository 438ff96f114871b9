"""RESTORE: delta-spark's ``restoreToVersion`` / ``restoreToTimestamp``.

One transaction: re-adds (``dataChange=true``) the files of the old version that are gone, removes the
files the old version did not have, and restores its metadata (the protocol is never downgraded).
"""

from __future__ import annotations

import os
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession

from deltamerge import catalog
from deltamerge.errors import InvalidArgumentError, TableNotFoundError
from deltamerge.log import clustering
from deltamerge.log.actions import Action
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter, session_time_zone
from deltamerge.spark.write import now_ms
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

_RESTORE_METRICS = (
    "tableSizeAfterRestore",
    "numOfFilesAfterRestore",
    "numRemovedFiles",
    "numRestoredFiles",
    "removedFilesSize",
    "restoredFilesSize",
)
# The SQL output columns: the metric names in snake case.
RESTORE_SCHEMA = ", ".join(
    "".join("_" + c.lower() if c.isupper() else c for c in name) + " bigint" for name in _RESTORE_METRICS
)


def restore(
    spark: SparkSession, table_root: str, version: int | None = None, timestamp: str | None = None
) -> DataFrame:
    """Restore the table to ``version`` or to the version current at ``timestamp`` (RESTORE).

    Returns one row: table_size_after_restore, num_of_files_after_restore, num_removed_files,
    num_restored_files, removed_files_size, restored_files_size.
    """
    from deltamerge.deletion_vectors import dv_file_path
    from deltamerge.io import _timestamp_ms
    from deltamerge.spark.scan import absolute_file_path

    if (version is None) == (timestamp is None):
        raise InvalidArgumentError("Either the version or timestamp should be provided for restore")
    log = DeltaLog.for_table(table_root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    if txn.snapshot is None:
        raise TableNotFoundError(f"`{table_root}` is not a Delta table.")
    latest = txn.snapshot
    target = version
    if target is None:
        target = log.version_at_timestamp(_timestamp_ms(str(timestamp), session_time_zone(spark)))
    if target >= latest.version:
        raise InvalidArgumentError(
            f"requirement failed: Version to restore ({target})should be less then last available version "
            f"({latest.version})"
        )
    old = log.snapshot(target)
    now_keys = {f.key for f in latest.files}
    old_keys = {f.key for f in old.files}
    to_add = [replace(f, data_change=True) for f in old.files if f.key not in now_keys]
    ts = now_ms()
    to_remove = [f.remove(ts) for f in latest.files if f.key not in old_keys]
    if (spark.conf.get("spark.sql.files.ignoreMissingFiles", "false") or "false").lower() != "true":
        missing = [f.path for f in to_add if not os.path.exists(absolute_file_path(table_root, f.path))]
        missing += [
            f.path
            for f in to_add
            if f.deletion_vector is not None
            and f.deletion_vector.storage_type != "i"
            and not os.path.exists(dv_file_path(table_root, f.deletion_vector))
        ]
        if missing:
            raise InvalidArgumentError(
                f"Not all files from version {target} are available in file system.\n Missed files (top 100 "
                f"files): {','.join(missing[:100])}.\n Please use more recent version or timestamp for "
                "restoring. To disable check update option spark.sql.files.ignoreMissingFiles",
                error_class="DELTA_RESTORE_MISSING_DATA_FILES",
            )
    txn.update_metadata(old.metadata)
    txn.mark_read_whole_table()
    metrics = {
        "tableSizeAfterRestore": sum(f.size for f in old.files),
        "numOfFilesAfterRestore": len(old.files),
        "numRemovedFiles": len(to_remove),
        "numRestoredFiles": len(to_add),
        "removedFilesSize": sum(r.size or 0 for r in to_remove),
        "restoredFilesSize": sum(f.size for f in to_add),
    }
    params = {"version": version, "timestamp": timestamp}
    domain = clustering.for_restore(latest.domains, old.protocol, old.domains)
    actions: list[Action] = [*to_add, *to_remove, *([domain] if domain is not None else [])]
    txn.commit(actions, Operation("RESTORE", params, metrics))
    catalog.refresh_views(spark, table_root)
    row = tuple(metrics[k] for k in _RESTORE_METRICS)
    return spark.createDataFrame([row], RESTORE_SCHEMA)
