"""VACUUM: delete files the table no longer references, once they are past retention.

``VACUUM FULL`` (the default) lists the table directory. ``VACUUM LITE`` (Delta 3.3) lists nothing:
its candidates are the files that commits past the retention window removed (data files, their
deletion vectors, change-data files), read from the log from just after the window of the last
vacuum (``_delta_log/_last_vacuum_info``) on. It cannot find files no commit names (a crashed
writer's), and it refuses to run (``DELTA_CANNOT_VACUUM_LITE``) when commits it would need were
cleaned up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from urllib.parse import unquote

from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import DeltaMergeError, InvalidArgumentError, VersionNotFoundError
from deltamerge.log.actions import AddCDCFile, RemoveFile
from deltamerge.log.paths import absolute_file_path, escape_path_name, is_absolute_path
from deltamerge.log.replay import list_log
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.log.store import LogStore
from deltamerge.spark.write import STAGING_PREFIX

logger = logging.getLogger(__name__)

LAST_VACUUM_INFO = "_last_vacuum_info"
_WINDOW_KEY = "latestCommitVersionOutsideOfRetentionWindow"


def _relative(root: str, path: str) -> str:
    """An add/remove path as a path relative to ``root`` (absolute paths inside the table too: a
    shallow clone of a table unto itself, or another engine's writer, may name its files that way)."""
    if not (path.startswith("file:") or is_absolute_path(path)):
        return unquote(path)
    return os.path.relpath(absolute_file_path(root, path), root)


def _referenced(snapshot: Snapshot, retention_ms: int, now_ms: int) -> set[str]:
    from deltamerge.deletion_vectors import dv_file_path

    root = snapshot.table_root
    keep: set[str] = set()
    for f in snapshot.files:
        keep.add(_relative(root, f.path))
        dv = f.deletion_vector
        if dv is not None and dv.storage_type in ("u", "p"):
            keep.add(os.path.relpath(dv_file_path(root, dv), root))
    for r in snapshot.tombstones:
        if (r.deletion_timestamp or 0) > now_ms - retention_ms:
            keep.add(_relative(root, r.path))
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


def _last_window(store: LogStore) -> int | None:
    try:
        value = json.loads(store.read(LAST_VACUUM_INFO)).get(_WINDOW_KEY)
    except (OSError, ValueError, AttributeError):
        return None  # missing or unreadable: as if no vacuum ran (Delta does the same)
    return int(value) if isinstance(value, int) else None


def _save_window(store: LogStore, version: int | None) -> None:
    payload = {} if version is None else {_WINDOW_KEY: version}
    try:
        store.write(LAST_VACUUM_INFO, json.dumps(payload).encode())
    except OSError:  # only an optimisation for the next VACUUM LITE
        logger.warning("Could not write %s", LAST_VACUUM_INFO, exc_info=True)


def _lite_expired(snapshot: Snapshot, retention_ms: int, now_ms: int) -> tuple[list[str], int | None]:
    """(files the log says were removed past retention and still exist, the last commit outside the
    retention window); Delta's ``getFilesFromDeltaLog``."""
    from deltamerge.deletion_vectors import dv_file_path

    root = snapshot.table_root
    log = DeltaLog.for_table(root)
    cutoff = now_ms - retention_ms
    try:
        end = log.version_at_timestamp(cutoff)
    except VersionNotFoundError:
        return [], None  # no commit is outside the window yet: nothing to vacuum
    commits = list_log(log.store, 0).commits
    earliest = min(commits, default=0)
    last = _last_window(log.store)
    if earliest != 0 and (last is None or last < earliest):
        raise DeltaMergeError(
            "VACUUM LITE cannot delete all eligible files as some files are not referenced by the Delta "
            "log. Please run VACUUM FULL.",
            error_class="DELTA_CANNOT_VACUUM_LITE",
            sql_state="55000",
        )
    start = min(snapshot.version, earliest if last is None else last + 1)
    keep = _referenced(snapshot, retention_ms, now_ms)
    found: set[str] = set()
    for version in range(start, end + 1):
        if version not in commits:
            continue
        for a in log.read_commit(version):
            paths: list[str] = []
            if isinstance(a, RemoveFile) and (a.deletion_timestamp or 0) < cutoff:
                paths.append(a.path)
                dv = a.deletion_vector
                if dv is not None and dv.storage_type == "u":
                    paths.append(os.path.relpath(dv_file_path(root, dv), root))
            elif isinstance(a, AddCDCFile):
                paths.append(a.path)
            for p in paths:
                rel = _relative(root, p)
                if rel.startswith(".."):
                    continue  # outside the table directory (e.g. a shallow clone's source): not ours
                if rel not in keep and os.path.isfile(os.path.join(root, rel)):
                    found.add(rel)
    return sorted(found), end


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
    lite: bool | None = None,
) -> list[str]:
    """``VACUUM [LITE | FULL] [RETAIN n HOURS] [DRY RUN]`` of the table at ``snapshot``: the absolute
    paths of the files deleted (with ``dry_run``, of those that would be). ``lite=None`` takes
    ``spark.databricks.delta.vacuum.lite.enabled`` (default false: FULL).

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
    root = snapshot.table_root
    if lite is None:
        lite = SessionConf.VACUUM_LITE.get(conf)
    if not lite:
        deleted = (vacuum_candidates if dry_run else vacuum)(snapshot, retention_ms, now_ms=now_ms)
        window = None  # as Delta: a FULL vacuum records no window
    else:
        deleted, window = _lite_expired(snapshot, retention_ms, now_ms)
        for rel in deleted if not dry_run else ():
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(root, rel))
    if not dry_run:
        _save_window(DeltaLog.for_table(root).store, window)
    return [os.path.join(root, p) for p in deleted]
