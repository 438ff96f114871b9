"""Expired log cleanup (Delta's ``MetadataCleanup``; protocol.md "Metadata cleanup").

After a checkpoint, commits, checkpoints and checksum files older than ``delta.logRetentionDuration``
(30 days; the cutoff is truncated to the start of its UTC day) are deleted, but only in whole runs
that end right before a complete checkpoint, and never at or past the version of the newest
checkpoint: the table then starts at the newest checkpoint at or before the cutoff, with every
commit from it on. Without this a table written every minute keeps millions of log files, and every
snapshot load lists them all.

As Delta does, a file whose modification time is not later than the previous version's is treated
as one millisecond later (clocks and copies can disagree), so a run is expired only when its last
file is. Tables with the ``checkpointProtection`` feature are left alone (Delta's rules for them
need checks this writer does not make). When a cleanup deleted a checkpoint, sidecar files that no
remaining V2 checkpoint refers to and that are older than the cutoff go too (Delta's
``identifyAndDeleteUnreferencedSidecarFiles``; younger ones may belong to a checkpoint in progress).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pyarrow.parquet as pq

from deltamerge.log import filenames
from deltamerge.log.actions import UnknownAction
from deltamerge.log.checkpoint import read_last_checkpoint
from deltamerge.log.paths import decode_add_path
from deltamerge.log.replay import parse_commit_file
from deltamerge.log.store import LogStore

DAY_MS = 86_400_000


@dataclass(frozen=True)
class _File:
    name: str
    version: int
    mtime: int


def cutoff_ms(now_ms: int, retention_ms: int, granularity_ms: int = DAY_MS) -> int:
    """Files last modified at or before this instant are expired (truncated to a UTC day, or to
    a minute for DROP FEATURE ... TRUNCATE HISTORY)."""
    return (now_ms - retention_ms) // granularity_ms * granularity_ms


def expired_log_files(store: LogStore, cutoff: int) -> list[str]:
    """The log files cleanup may delete, in version order (see the module docstring)."""
    last = read_last_checkpoint(store)
    if last is None:
        return []
    threshold = last.version - 1
    out: list[str] = []
    buffer: list[_File] = []
    parts: dict[tuple[int, int], list[_File]] = {}
    previous: _File | None = None

    def flush() -> None:
        if buffer and buffer[-1].mtime <= cutoff and buffer[-1].version <= threshold:
            out.extend(f.name for f in buffer)
        buffer.clear()

    for name in store.list_from(""):
        parsed = filenames.parse_log_file_name(name)
        if parsed is None or parsed.kind not in (filenames.COMMIT, filenames.CHECKPOINT, filenames.CRC):
            continue
        if parsed.version > threshold + 1:
            break  # nothing from the newest checkpoint on can be deleted, nor end a deletable run
        f = _File(name, parsed.version, store.mtime(name))
        if previous is not None and previous.version < f.version and previous.mtime >= f.mtime:
            f = _File(name, f.version, previous.mtime + 1)
            buffer.append(f)
        elif parsed.is_checkpoint and parsed.num_parts is None:  # classic or V2: complete
            flush()
            buffer.append(f)
        elif parsed.is_checkpoint:
            assert parsed.num_parts is not None
            key = (parsed.version, parsed.num_parts)
            parts.setdefault(key, []).append(f)
            if len(parts[key]) == parsed.num_parts:
                flush()
                buffer.extend(parts.pop(key))
        else:
            buffer.append(f)
        previous = f
        if parsed.is_commit and f.mtime > cutoff:
            # A commit is its version's last file; every later version counts as later still, so
            # no run from here on can end expired: the files after it need no stat.
            break
    # The run still buffered ends at the newest checkpoint's version or later: it is kept.
    return out


def _sidecars_of(store: LogStore, name: str) -> set[str]:
    """Bare file names of the sidecars a V2 checkpoint refers to."""
    data = store.read(name)
    if name.endswith(".json"):
        actions = parse_commit_file(name, data)
        paths = [
            str(a.raw.get("path", "")) for a in actions if isinstance(a, UnknownAction) and a.key == "sidecar"
        ]
    else:
        rows = pq.read_table(io.BytesIO(data), columns=["sidecar"]).column("sidecar").to_pylist()
        paths = [str(r["path"]) for r in rows if r and r.get("path")]
    return {decode_add_path(p.rstrip("/").rsplit("/", 1)[-1]) for p in paths}


def unreferenced_sidecars(store: LogStore, cutoff: int) -> list[str]:
    """Sidecar files (``_sidecars/<name>``) no V2 checkpoint refers to, last modified before ``cutoff``."""
    present = store.list_dir(filenames.SIDECAR_DIR)
    if not present:
        return []
    referenced: set[str] = set()
    for name in store.list_from(""):
        parsed = filenames.parse_log_file_name(name)
        if parsed is not None and parsed.is_checkpoint and parsed.is_v2:
            referenced |= _sidecars_of(store, name)
    out = []
    for bare in present:
        rel = f"{filenames.SIDECAR_DIR}/{bare}"
        if bare not in referenced and store.mtime(rel) < cutoff:
            out.append(rel)
    return out


def delete_expired_logs(
    store: LogStore, retention_ms: int, now_ms: int, *, granularity_ms: int = DAY_MS
) -> list[str]:
    """Delete the expired log files (and then unreferenced old sidecars); returns their names."""
    cutoff = cutoff_ms(now_ms, retention_ms, granularity_ms)
    expired = expired_log_files(store, cutoff)
    for name in expired:
        store.delete(name)
    parsed = [filenames.parse_log_file_name(n) for n in expired]
    if any(p is not None and p.is_checkpoint for p in parsed):
        sidecars = unreferenced_sidecars(store, cutoff)
        for name in sidecars:
            store.delete(name)
        expired += sidecars
    return expired
