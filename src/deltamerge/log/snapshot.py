"""Immutable table snapshots and the per-table :class:`DeltaLog` that produces them.

Reconstruction (protocol.md §3.1): ``_last_checkpoint`` is only a hint for where to start listing;
the listing is the truth. Take the newest complete checkpoint at or before the wanted version,
then the contiguous JSON commits after it. A corrupt checkpoint falls back to an older one (or to
the commits alone) when the commits allow it; a hole in the commits is :class:`LogCorruptedError`.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from deltamerge.config import parse_bool
from deltamerge.errors import DeltaMergeError, LogCorruptedError, TableNotFoundError, VersionNotFoundError
from deltamerge.log import filenames, paths
from deltamerge.log.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltamerge.log.checkpoint import read_checkpoint_lazy, read_last_checkpoint, write_checkpoint
from deltamerge.log.filestate import ActiveFiles, ActiveTombstones
from deltamerge.log.protocol import check_can_read
from deltamerge.log.replay import (
    CheckpointRef,
    LogListing,
    LogReplay,
    list_log,
    missing_commits,
    read_commit,
    segment_error,
)
from deltamerge.log.store import LocalLogStore, LogStore


@dataclass(frozen=True)
class Snapshot:
    """The state of a table at one version. Immutable; produced by :class:`DeltaLog`."""

    table_root: str
    store: LogStore = field(compare=False, repr=False)
    version: int
    protocol: Protocol
    metadata: Metadata
    active_files: ActiveFiles = field(repr=False)
    active_tombstones: ActiveTombstones = field(repr=False)
    app_versions: Mapping[str, int]
    domains: Mapping[str, DomainMetadata]
    timestamp: int  # ms: inCommitTimestamp if present, else the commit file's modification time
    transactions: Mapping[str, SetTransaction] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    checkpoint_version: int | None = field(default=None, compare=False)
    _state: LogReplay | None = field(default=None, compare=False, repr=False)

    @property
    def schema(self) -> dict[str, Any]:
        """Table schema as Spark StructType JSON."""
        return self.metadata.schema

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """Partition column names, in order."""
        return tuple(self.metadata.partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        """Table properties (``metaData.configuration``)."""
        return dict(self.metadata.configuration)

    @property
    def files(self) -> tuple[AddFile, ...]:
        """The active files, in replay order (built on first use from the checkpoint's Arrow rows)."""
        return self.active_files.files

    @property
    def tombstones(self) -> tuple[RemoveFile, ...]:
        """The ``remove`` actions kept for VACUUM and conflict checks (built on first use)."""
        return self.active_tombstones.files

    @property
    def num_files(self) -> int:
        """Number of active files (without building the file objects)."""
        return len(self.active_files)

    @property
    def size_in_bytes(self) -> int:
        """Total size of the active files (without building the file objects)."""
        return self.active_files.size_in_bytes

    def __repr__(self) -> str:
        return f"Snapshot(table_root={self.table_root!r}, version={self.version}, num_files={self.num_files})"

    def __hash__(self) -> int:
        # A table version identifies its state; the generated hash would choke on the mappings.
        return hash((self.table_root, self.version))


def _ict_enabled(metadata: Metadata | None) -> bool:
    if metadata is None:
        return False
    try:
        return parse_bool(metadata.configuration.get("delta.enableInCommitTimestamps", "false"))
    except ValueError:
        return False


def _first_commit_info(data: bytes) -> CommitInfo | None:
    first = data.split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("commitInfo"), dict):
        return CommitInfo(obj["commitInfo"])
    return None


def _monotonize(timestamps: list[int]) -> list[int]:
    # delta-spark: commit timestamps must strictly increase with the version; clock skew between
    # writers is hidden by bumping a non-increasing timestamp to previous + 1 ms.
    out: list[int] = []
    for ts in timestamps:
        out.append(ts if not out or ts > out[-1] else out[-1] + 1)
    return out


def _normalize_root(table_root: str) -> str:
    # paths.table_root, Hadoop's reading of a file: URI (no percent-decoding), which every writer of
    # the table's data files follows.
    return paths.table_root(table_root)


class DeltaLog:
    """Access to one table's log. Caches the latest snapshot and extends it with new commits only."""

    _instances: ClassVar[dict[str, DeltaLog]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, table_root: str, store: LogStore | None = None) -> None:
        self.table_root = _normalize_root(table_root)
        self.store: LogStore = store if store is not None else LocalLogStore(self.table_root)
        self._lock = threading.RLock()
        # The latest snapshot and the identity of the log file it ends with: a table deleted and
        # created again at the same path has a file of the same name that is not the same file.
        self._cached: tuple[Snapshot, tuple[int, ...]] | None = None

    def __repr__(self) -> str:
        return f"DeltaLog({self.table_root!r})"

    @classmethod
    def for_table(cls, table_root: str) -> DeltaLog:
        """The process-wide :class:`DeltaLog` of ``table_root`` (keyed by absolute path)."""
        key = _normalize_root(table_root)
        with cls._instances_lock:
            log = cls._instances.get(key)
            if log is None:
                log = cls._instances[key] = cls(key)
            return log

    @classmethod
    def clear_cache(cls) -> None:
        """Forget every cached :class:`DeltaLog` (tests, or after deleting tables)."""
        with cls._instances_lock:
            cls._instances.clear()

    # --- listing ---------------------------------------------------------------------------------

    def _listing(self, max_version: int | None = None) -> tuple[LogListing, int]:
        """List the log, starting at the ``_last_checkpoint`` hint when it is usable."""
        hint = read_last_checkpoint(self.store)
        start = 0
        if hint is not None and hint.version > 0 and (max_version is None or hint.version <= max_version):
            start = hint.version
        listing = list_log(self.store, start)
        if start > 0 and listing.latest_version < 0:
            # The hint points past the end of the log (stale or from a deleted table): list everything.
            start = 0
            listing = list_log(self.store, 0)
        return listing, start

    def latest_version(self) -> int:
        """The newest version in the log, ``-1`` when there is no table."""
        return self._listing()[0].latest_version

    def exists(self) -> bool:
        """Whether ``_delta_log`` holds at least one commit or checkpoint."""
        return self.latest_version() >= 0

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The latest snapshot (refreshing the cache), or the one at ``version`` (time travel)."""
        if version is None:
            return self.update()
        if version < 0:
            raise VersionNotFoundError(f"Cannot time travel to version {version}: versions start at 0.")
        entry = self._cached
        if entry is not None and entry[0].version == version and self._mark(version) == entry[1]:
            return entry[0]
        return self._load(version)

    def update(self, known: Mapping[int, Sequence[Action]] | None = None) -> Snapshot:
        """Bring the cached snapshot up to date, reading only commits newer than it.

        ``known`` gives the actions of commits the caller has just written (exactly what their
        files hold): those are applied as they are instead of read back and parsed again, which
        for a commit of thousands of files took longer than the rest of the update."""
        with self._lock:
            entry = self._cached
            if entry is None or self._mark(entry[0].version) != entry[1]:
                # First use, or the table was deleted (and maybe created again) underneath us.
                snap = self._load(None)
            else:
                snap = self._extend(entry[0], known or {})
            if entry is None or snap is not entry[0]:
                mark = self._mark(snap.version)
                self._cached = None if mark is None else (snap, mark)
            return snap

    def _mark(self, version: int) -> tuple[int, ...] | None:
        """The identity of the file the log ends with at ``version``: its commit, else its
        checkpoint; ``None`` when neither exists."""
        mark = self.store.identity(filenames.commit_name(version))
        if mark is None:
            mark = self.store.identity(filenames.checkpoint_name(version))
        return mark

    def _extend(self, cached: Snapshot, known: Mapping[int, Sequence[Action]]) -> Snapshot:
        listing = list_log(self.store, cached.version + 1)
        if listing.latest_version < 0:
            return cached  # nothing new
        target = listing.latest_version
        if cached._state is None or missing_commits(listing, cached.version + 1, target):
            return self._load(None)
        state = cached._state.copy()
        last_info: CommitInfo | None = None
        for v in range(cached.version + 1, target + 1):
            written = known.get(v)
            actions = list(written) if written is not None else read_commit(self.store, v)
            state.apply(actions)
            last_info = _commit_info_of(actions)
        return self._make_snapshot(state, target, last_info, cached.checkpoint_version, None)

    def _load(self, version: int | None) -> Snapshot:
        listing, start = self._listing(version)
        if listing.latest_version < 0:
            raise TableNotFoundError(
                f"{self.table_root} is not a Delta table: {self.table_root}/_delta_log has no commits. "
                "Create the table first, or check the path."
            )
        if version is not None and version > listing.latest_version:
            raise VersionNotFoundError(
                f"Cannot time travel to version {version}: the latest version of the table is "
                f"{listing.latest_version}."
            )
        target = listing.latest_version if version is None else version
        snap, error = self._build(listing, target)
        if snap is None and start > 0:
            # The hinted part of the log was not enough (missing or corrupt checkpoint): list it all.
            listing = list_log(self.store, 0)
            snap, error = self._build(listing, target)
        if snap is None:
            raise error or segment_error(listing, target)
        return snap

    def _build(self, listing: LogListing, target: int) -> tuple[Snapshot | None, LogCorruptedError | None]:
        """Replay the newest usable checkpoint <= target plus commits.

        Returns ``(None, error)`` when nothing fits; ``error`` is the first unreadable checkpoint's.
        """
        candidates: list[CheckpointRef | None] = [c for c in listing.checkpoints if c.version <= target]
        candidates.append(None)
        checkpoint_error: LogCorruptedError | None = None
        for ref in candidates:
            begin = 0 if ref is None else ref.version + 1
            if missing_commits(listing, begin, target):
                continue
            state = LogReplay()
            if ref is not None:
                try:
                    checkpoint = read_checkpoint_lazy(self.store, ref)
                except LogCorruptedError as e:
                    checkpoint_error = checkpoint_error or e
                    continue
                state.apply(checkpoint.actions)
                if checkpoint.adds is not None or checkpoint.removes is not None:
                    state.set_checkpoint_files(checkpoint.adds, checkpoint.removes)
            last_info: CommitInfo | None = None
            for v in range(begin, target + 1):
                actions = read_commit(self.store, v)
                state.apply(actions)
                last_info = _commit_info_of(actions)
            snap = self._make_snapshot(state, target, last_info, None if ref is None else ref.version, ref)
            return snap, None
        return None, checkpoint_error

    def _make_snapshot(
        self,
        state: LogReplay,
        version: int,
        last_info: CommitInfo | None,
        checkpoint_version: int | None,
        checkpoint_ref: CheckpointRef | None,
    ) -> Snapshot:
        if state.protocol is None or state.metadata is None:
            missing = "protocol" if state.protocol is None else "metaData"
            raise LogCorruptedError(
                f"The log of {self.table_root} up to version {version} has no {missing} action; version 0 "
                "must contain both protocol and metaData. The table was not created by a Delta writer or "
                "its first commit is damaged."
            )
        check_can_read(state.protocol, state.metadata)
        timestamp = self._timestamp(version, last_info, state.metadata, checkpoint_ref)
        return Snapshot(
            table_root=self.table_root,
            store=self.store,
            version=version,
            protocol=state.protocol,
            metadata=state.metadata,
            active_files=state.active_files(),
            active_tombstones=state.active_tombstones(),
            app_versions=MappingProxyType({k: t.version for k, t in state.transactions.items()}),
            domains=MappingProxyType(dict(state.domains)),
            timestamp=timestamp,
            transactions=MappingProxyType(dict(state.transactions)),
            checkpoint_version=checkpoint_version,
            _state=state,
        )

    def _timestamp(
        self, version: int, info: CommitInfo | None, metadata: Metadata, ref: CheckpointRef | None
    ) -> int:
        if info is not None and info.in_commit_timestamp is not None:
            return info.in_commit_timestamp
        name = filenames.commit_name(version)
        if info is None and _ict_enabled(metadata):
            try:
                first = _first_commit_info(self.store.read(name))
                if first is not None and first.in_commit_timestamp is not None:
                    return first.in_commit_timestamp
            except FileNotFoundError:
                pass
        try:
            return self.store.mtime(name)
        except FileNotFoundError:
            if ref is not None:
                return self.store.mtime(ref.names[0])
            raise

    # --- history ---------------------------------------------------------------------------------

    def read_commit(self, version: int) -> list[Action]:
        """The actions of commit ``version``."""
        return read_commit(self.store, version)

    def _commit_timestamps(self) -> tuple[list[int], list[int]]:
        """Versions of the reconstructable commits and their monotonized timestamps."""
        listing = list_log(self.store, 0)
        recreatable = [c.version for c in listing.checkpoints] + ([0] if 0 in listing.commits else [])
        earliest = min(recreatable, default=0)
        versions = sorted(v for v in listing.commits if v >= earliest)
        ict_from: int | None = None
        if versions:
            try:
                latest = self.update()
                if _ict_enabled(latest.metadata):
                    ict_from = int(
                        latest.metadata.configuration.get("delta.inCommitTimestampEnablementVersion", 0)
                    )
            except DeltaMergeError:
                ict_from = None
        raw: list[int] = []
        for v in versions:
            name = listing.commits[v]
            ts: int | None = None
            if ict_from is not None and v >= ict_from:
                info = _first_commit_info(self.store.read(name))
                ts = None if info is None else info.in_commit_timestamp
            raw.append(ts if ts is not None else self.store.mtime(name))
        return versions, _monotonize(raw)

    def version_at_timestamp(self, ts_ms: int, *, strict: bool = False) -> int:
        """The latest version whose commit timestamp is ``<= ts_ms``.

        A timestamp before the earliest reconstructable commit is :class:`VersionNotFoundError`.
        With ``strict=True`` a timestamp after the latest commit is an error too (delta-spark's
        ``TIMESTAMP AS OF`` behaviour); by default it resolves to the latest version.
        """
        versions, timestamps = self._commit_timestamps()
        if not versions:
            raise TableNotFoundError(f"{self.table_root} is not a Delta table: it has no commits.")
        found = None
        for v, ts in zip(versions, timestamps, strict=True):
            if ts <= ts_ms:
                found = v
            else:
                break
        if found is None:
            raise VersionNotFoundError(
                f"The provided timestamp ({_fmt_ms(ts_ms)}) is before the earliest version available to this "
                f"table ({_fmt_ms(timestamps[0])}, version {versions[0]}). Use a timestamp at or after "
                f"{_fmt_ms(timestamps[0])}.",
                error_class="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
            )
        if strict and ts_ms > timestamps[-1]:
            raise VersionNotFoundError(
                f"The provided timestamp ({_fmt_ms(ts_ms)}) is after the latest version available to this "
                f"table ({_fmt_ms(timestamps[-1])}, version {versions[-1]}). Use a timestamp at or before "
                f"{_fmt_ms(timestamps[-1])}.",
                error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
            )
        return found

    def commit_infos(self, limit: int | None = None) -> list[tuple[int, int, CommitInfo]]:
        """``(version, timestamp ms, commitInfo)`` per commit, newest first (for ``history()``)."""
        versions, timestamps = self._commit_timestamps()
        pairs = list(zip(versions, timestamps, strict=True))[::-1]
        if limit is not None:
            pairs = pairs[: max(limit, 0)]
        out: list[tuple[int, int, CommitInfo]] = []
        for v, ts in pairs:
            info = _commit_info_of(self.read_commit(v)) or CommitInfo({})
            out.append((v, info.in_commit_timestamp or ts, info))
        return out

    # --- checkpoints -----------------------------------------------------------------------------

    def checkpoint(self, snapshot: Snapshot) -> None:
        """Write a classic checkpoint of ``snapshot`` and update ``_last_checkpoint``."""
        write_checkpoint(self.store, snapshot)


def _commit_info_of(actions: list[Action]) -> CommitInfo | None:
    return next((a for a in actions if isinstance(a, CommitInfo)), None)


def _fmt_ms(ts_ms: int) -> str:
    return dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")
