"""VACUUM: delete files the table no longer references, once they are past retention."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from urllib.parse import unquote

from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import InvalidArgumentError
from deltamerge.log.paths import escape_path_name
from deltamerge.log.snapshot import Snapshot
from deltamerge.spark.write import STAGING_PREFIX


def _referenced(snapshot: Snapshot, retention_ms: int, now_ms: int) -> set[str]:
    keep: set[str] = set()
    for f in snapshot.files:
        keep.add(unquote(f.path))
        dv = f.deletion_vector
        if dv is not None and dv.storage_type == "u":
            from deltamerge.deletion_vectors import dv_file_path

            keep.add(os.path.relpath(dv_file_path(snapshot.table_root, dv), snapshot.table_root))
    for r in snapshot.tombstones:
        if (r.deletion_timestamp or 0) > now_ms - retention_ms:
            keep.add(unquote(r.path))
    return keep


def _expired(snapshot: Snapshot, retention_ms: int, now_ms: int) -> tuple[list[str], list[str]]:
    """(abandoned staging directories, unreferenced files) older than ``retention_ms``, relative to
    the table root.

    Never looks into ``_delta_log``; hidden and underscore directories are skipped except
    ``_change_data`` and deltamerge's own abandoned staging directories.
    """
    root = snapshot.table_root
    keep = _referenced(snapshot, retention_ms, now_ms)
    cutoff_s = (now_ms - retention_ms) / 1000
    staging: list[str] = []
    for entry in os.listdir(root):
        full = os.path.join(root, entry)
        if entry.startswith(STAGING_PREFIX) and os.path.isdir(full) and os.path.getmtime(full) < cutoff_s:
            staging.append(entry)
    files: list[str] = []
    # Partition directories are data even when hidden-looking (``_ingest_date=...``), as in Delta.
    part_prefixes = tuple(
        f"{name}=" for c in snapshot.metadata.partition_columns for name in {c, escape_path_name(c)}
    )
    for dirpath, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        visible = ("_change_data",) if rel_dir == "." else ()
        dirs[:] = [
            d for d in dirs if d in visible or d.startswith(part_prefixes) or not d.startswith(("_", "."))
        ]
        for name in names:
            if name.startswith(("_", ".")):
                continue
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            if rel in keep:
                continue
            if os.path.getmtime(os.path.join(dirpath, name)) < cutoff_s:
                files.append(rel)
    return staging, files


def vacuum_candidates(snapshot: Snapshot, retention_ms: int, *, now_ms: int) -> list[str]:
    """What ``vacuum`` would delete at ``now_ms``: relative paths, sorted (a dry run)."""
    staging, files = _expired(snapshot, retention_ms, now_ms)
    return sorted(staging + files)


def vacuum(snapshot: Snapshot, retention_ms: int, *, now_ms: int) -> list[str]:
    """Delete unreferenced files older than ``retention_ms``; returns their relative paths.

    Never touches ``_delta_log``; hidden and underscore directories are skipped except
    ``_change_data`` and deltamerge's own abandoned staging directories.
    """
    root = snapshot.table_root
    staging, files = _expired(snapshot, retention_ms, now_ms)
    for entry in staging:
        shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
    for rel in files:
        os.remove(os.path.join(root, rel))
    return sorted(staging + files)


def vacuum_table(
    snapshot: Snapshot,
    retention_hours: float | None,
    conf: Callable[[str], str | None],
    *,
    dry_run: bool = False,
) -> list[str]:
    """``VACUUM [RETAIN n HOURS] [DRY RUN]`` of the table at ``snapshot``: the absolute paths of the
    files deleted (with ``dry_run``, of those that would be).

    The retention defaults to the table's ``delta.deletedFileRetentionDuration``. A shorter one is
    refused unless ``spark.databricks.delta.retentionDurationCheck.enabled`` is false (``conf`` reads
    session settings), as Delta does: a concurrent writer's fresh files could be deleted.
    """
    default_ms = TableProperties.DELETED_FILE_RETENTION_MS.get(snapshot.metadata.configuration)
    retention_ms = default_ms if retention_hours is None else int(retention_hours * 3_600_000)
    if SessionConf.RETENTION_CHECK.get(conf) and retention_ms < default_ms:
        raise InvalidArgumentError(
            "Are you sure you would like to vacuum files with such a low retention period? If you have "
            "writers that are currently writing to this table, there is a risk that you may corrupt the "
            "state of your Delta table. If you are certain that there are no operations being performed "
            "on this table, you may turn off this check by setting "
            "spark.databricks.delta.retentionDurationCheck.enabled = false. "
            f"Requested {retention_ms / 3_600_000:g} hours, the table keeps "
            f"{default_ms / 3_600_000:g} hours.",
            error_class="DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT",
        )
    now_ms = int(time.time() * 1000)
    deleted = (vacuum_candidates if dry_run else vacuum)(snapshot, retention_ms, now_ms=now_ms)
    return [os.path.join(snapshot.table_root, p) for p in deleted]
