"""Log replay: which files to read (the *log segment*) and how actions fold into table state.

Reconciliation rules (PROTOCOL.md "Action Reconciliation", protocol.md §3.1):

- last ``protocol`` and last ``metaData`` win;
- ``txn``: the last one per ``appId`` wins, even if its version is lower;
- ``domainMetadata``: last per domain, ``removed=true`` deletes it;
- ``add``/``remove`` are keyed by ``(path, deletionVector.uniqueId)`` on the exact ``path`` string:
  an ``add`` replaces the live file with that key and clears its tombstone, a ``remove`` drops
  the live file and records a tombstone;
- ``commitInfo``, ``cdc`` and unknown actions do not change state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from deltamerge.errors import LogCorruptedError, VersionNotFoundError
from deltamerge.log import filenames
from deltamerge.log.actions import (
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    parse_commit,
)
from deltamerge.log.filestate import ActiveFiles, ActiveTombstones, CheckpointAdds, CheckpointRemoves, FileKey
from deltamerge.log.store import LogStore

__all__ = ["FileKey", "LogReplay"]


class LogReplay:
    """Mutable fold of actions into table state, applied in version order.

    After :meth:`set_checkpoint_files`, the live files are the checkpoint's ``add`` rows (kept as
    Arrow) minus the keys in ``shadowed``, followed by ``files``; the tombstones likewise (see
    :class:`~deltamerge.log.filestate.ActiveTombstones`). Otherwise ``files`` and ``tombstones``
    alone hold them.
    """

    def __init__(self) -> None:
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.files: dict[FileKey, AddFile] = {}
        self.tombstones: dict[FileKey, RemoveFile] = {}
        self.transactions: dict[str, SetTransaction] = {}
        self.domains: dict[str, DomainMetadata] = {}
        self.checkpoint_files: CheckpointAdds | None = None
        self.checkpoint_tombstones: CheckpointRemoves | None = None
        self.lazy = False  # set_checkpoint_files was called
        self.shadowed: set[FileKey] = set()  # keys added or removed since the checkpoint
        self.readded: set[FileKey] = set()  # keys added since the checkpoint

    def copy(self) -> LogReplay:
        """An independent copy (used to extend a cached snapshot with new commits)."""
        other = LogReplay()
        other.protocol = self.protocol
        other.metadata = self.metadata
        other.files = dict(self.files)
        other.tombstones = dict(self.tombstones)
        other.transactions = dict(self.transactions)
        other.domains = dict(self.domains)
        other.checkpoint_files = self.checkpoint_files  # immutable, shared
        other.checkpoint_tombstones = self.checkpoint_tombstones
        other.lazy = self.lazy
        other.shadowed = set(self.shadowed)
        other.readded = set(self.readded)
        return other

    def set_checkpoint_files(self, adds: CheckpointAdds | None, removes: CheckpointRemoves | None) -> None:
        """Take a checkpoint's ``add``/``remove`` rows as the live files and tombstones.

        Equivalent to applying them as actions, provided the state holds no file or tombstone yet
        and no add has the key of a remove (:func:`~deltamerge.log.checkpoint.read_checkpoint_lazy`
        ensures that).
        """
        if self.files or self.tombstones or self.lazy:
            raise ValueError("checkpoint files must be the first files of a replay")
        self.checkpoint_files = adds
        self.checkpoint_tombstones = removes
        self.lazy = True

    def active_files(self) -> ActiveFiles:
        """The live files (an immutable view; building :class:`AddFile` objects lazily)."""
        return ActiveFiles(self.checkpoint_files, frozenset(self.shadowed), tuple(self.files.values()))

    def active_tombstones(self) -> ActiveTombstones:
        """The tombstones (an immutable view; building :class:`RemoveFile` objects lazily)."""
        return ActiveTombstones(
            self.checkpoint_tombstones,
            frozenset(self.shadowed),
            frozenset(self.readded),
            dict(self.tombstones),
        )

    def apply(self, actions: Iterable[Action]) -> None:
        """Apply the actions of one commit (or one checkpoint) in file order."""
        files = self.files
        tombstones = self.tombstones
        shadowed = self.shadowed if self.lazy else None
        readded = self.readded
        for action in actions:
            cls = type(action)
            if cls is AddFile:
                # The hot path (a checkpoint of a big table is 100k's of these): same as below.
                dv = action.deletion_vector  # type: ignore[union-attr]
                key = (action.path, None if dv is None else dv.unique_id)  # type: ignore[union-attr]
                if key in files:
                    del files[key]
                files[key] = action  # type: ignore[assignment]
                if tombstones:
                    tombstones.pop(key, None)
                if shadowed is not None:
                    shadowed.add(key)
                    readded.add(key)
            elif cls is RemoveFile:
                dv = action.deletion_vector  # type: ignore[union-attr]
                key = (action.path, None if dv is None else dv.unique_id)  # type: ignore[union-attr]
                files.pop(key, None)
                tombstones[key] = action  # type: ignore[assignment]
                if shadowed is not None:
                    shadowed.add(key)
            elif isinstance(action, AddFile):
                key = action.key
                # A newer add for the same logical file replaces it (e.g. stats recomputation).
                self.files.pop(key, None)
                self.files[key] = action
                self.tombstones.pop(key, None)
                if shadowed is not None:
                    shadowed.add(key)
                    readded.add(key)
            elif isinstance(action, RemoveFile):
                key = action.key
                self.files.pop(key, None)
                self.tombstones[key] = action
                if shadowed is not None:
                    shadowed.add(key)
            elif isinstance(action, Metadata):
                self.metadata = action
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, SetTransaction):
                self.transactions[action.app_id] = action
            elif isinstance(action, DomainMetadata):
                if action.removed:
                    self.domains.pop(action.domain, None)
                else:
                    self.domains[action.domain] = action


# --- reading commits ---------------------------------------------------------------------------------


def read_commit(store: LogStore, version: int) -> list[Action]:
    """Parse commit ``version``; a missing file is :class:`VersionNotFoundError`, a broken one
    :class:`LogCorruptedError` naming the file."""
    name = filenames.commit_name(version)
    try:
        data = store.read(name)
    except FileNotFoundError:
        raise VersionNotFoundError(
            f"Commit file _delta_log/{name} for version {version} does not exist. "
            "It may have been removed by log cleanup; use a newer version."
        ) from None
    return parse_commit_file(name, data)


def parse_commit_file(name: str, data: bytes) -> list[Action]:
    """Parse commit bytes, turning every decoding problem into :class:`LogCorruptedError`."""
    try:
        return parse_commit(data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        detail = f"{type(e).__name__}: {e}"
        if isinstance(e, json.JSONDecodeError):
            detail = f"invalid JSON at line {e.lineno} column {e.colno} ({e.msg})"
        raise LogCorruptedError(
            f"The commit file _delta_log/{name} cannot be read: {detail}. The file is truncated or "
            "was not written by a Delta writer. Restore it from a backup, or if it is the newest "
            "commit and was never completed, remove it so the table goes back to the previous version."
        ) from e


# --- finding the log segment -------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointRef:
    """One complete checkpoint: all the files that make it up."""

    version: int
    names: tuple[str, ...]
    kind: str  # "classic", "multipart" or "v2"


@dataclass(frozen=True)
class LogListing:
    """What a listing of ``_delta_log`` (from some version on) found."""

    commits: dict[int, str] = field(default_factory=dict)
    checkpoints: tuple[CheckpointRef, ...] = ()  # complete ones only, newest first

    @property
    def latest_version(self) -> int:
        """Highest version with a commit or complete checkpoint, ``-1`` if none."""
        versions = list(self.commits) + [c.version for c in self.checkpoints]
        return max(versions, default=-1)


_KIND_RANK = {"classic": 0, "v2": 1, "multipart": 2}


def list_log(store: LogStore, start_version: int = 0) -> LogListing:
    """List commits and complete checkpoints with version ``>= start_version``."""
    start = filenames.version_prefix(start_version) if start_version > 0 else ""
    commits: dict[int, str] = {}
    classic: dict[int, str] = {}
    v2: dict[int, list[str]] = {}
    parts: dict[tuple[int, int], dict[int, str]] = {}
    for name in store.list_from(start):
        parsed = filenames.parse_log_file_name(name)
        if parsed is None:
            continue
        if parsed.is_commit:
            commits[parsed.version] = name
        elif parsed.is_checkpoint:
            if parsed.is_multipart:
                assert parsed.num_parts is not None and parsed.part is not None
                parts.setdefault((parsed.version, parsed.num_parts), {})[parsed.part] = name
            elif parsed.is_v2:
                v2.setdefault(parsed.version, []).append(name)
            else:
                classic[parsed.version] = name
    refs: list[CheckpointRef] = [CheckpointRef(v, (n,), "classic") for v, n in classic.items()]
    refs += [CheckpointRef(v, (sorted(ns)[0],), "v2") for v, ns in v2.items()]
    for (version, num_parts), found in parts.items():
        # A multi-part checkpoint counts only when every part is present.
        if set(found) == set(range(1, num_parts + 1)):
            refs.append(CheckpointRef(version, tuple(found[i] for i in range(1, num_parts + 1)), "multipart"))
    refs.sort(key=lambda r: (-r.version, _KIND_RANK[r.kind]))
    return LogListing(commits=commits, checkpoints=tuple(refs))


def missing_commits(listing: LogListing, start: int, end: int) -> list[int]:
    """Versions in ``start..end`` with no commit file in the listing."""
    return [v for v in range(start, end + 1) if v not in listing.commits]


def segment_error(listing: LogListing, target: int) -> Exception:
    """The error for a version that no checkpoint + contiguous commits can reconstruct."""
    present = sorted(v for v in listing.commits if v <= target)
    recreatable = [c.version for c in listing.checkpoints] + ([0] if 0 in listing.commits else [])
    earliest = min(recreatable, default=None)
    if present:
        holes = [v for v in range(present[0], target + 1) if v not in listing.commits]
        if holes:
            before = max(v for v in present if v < holes[0])
            after = min((v for v in listing.commits if v > holes[-1]), default=None)
            return LogCorruptedError(
                f"The transaction log has a gap: commit file(s) for version(s) {_ranges(holes)} are missing "
                f"between version {before} and {after if after is not None else 'the end of the log'}, "
                "and no checkpoint covers them. Versions must be contiguous. Restore the missing "
                "_delta_log/<version>.json files, or read a version at or after the next checkpoint."
            )
    if earliest is not None and target < earliest:
        return VersionNotFoundError(
            f"Cannot reconstruct version {target}: its commits were removed by log cleanup. "
            f"The earliest version that can be reconstructed is {earliest}."
        )
    return LogCorruptedError(
        f"Cannot reconstruct version {target}: there is no checkpoint at or before it and the commit "
        f"for version 0 is missing from _delta_log. Restore the missing commit files or checkpoint."
    )


def _ranges(versions: list[int]) -> str:
    if len(versions) == 1:
        return str(versions[0])
    if versions == list(range(versions[0], versions[-1] + 1)):
        return f"{versions[0]}..{versions[-1]}"
    return ", ".join(map(str, versions))
