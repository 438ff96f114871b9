"""File actions read column-wise from checkpoints, and the live file set of a snapshot.

A checkpoint of a big table is almost all ``add`` rows. Building one :class:`AddFile` per row is
most of the cost of loading a snapshot, and many uses of a snapshot (its version, schema,
protocol, file count, size) never look at the individual files. So the checkpoint's ``add`` (and
``remove``) rows stay Arrow columns (:class:`CheckpointAdds`, :class:`CheckpointRemoves`) and a
snapshot's files (:class:`ActiveFiles`) are "the checkpoint rows, minus those whose key a later
commit added or removed, then the files the later commits added", built into :class:`AddFile`
objects only when someone iterates them; likewise its tombstones (:class:`ActiveTombstones`). The
objects are built once per checkpoint and shared by every snapshot that extends it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from deltamerge.log.actions import AddFile, RemoveFile
from deltamerge.log.arrow_rows import build_adds, build_removes, dv_descriptors, struct_field

FileKey = tuple[str, "str | None"]


# --- the lazy file set -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChunk:
    """The ``add`` or ``remove`` rows (``kind``) of one checkpoint file, valid rows only.

    ``deferred``, when set, returns the fields left out of ``rows`` (for the same rows);
    ``full_type`` is the type of the file's column with every field.
    """

    kind: str
    rows: pa.StructArray
    full_type: pa.DataType
    deferred: Callable[[], pa.StructArray] | None = None


T = TypeVar("T", AddFile, RemoveFile)
R = TypeVar("R", bound="_CheckpointRows[Any]")


class _CheckpointRows(Generic[T]):
    """A checkpoint's ``add`` or ``remove`` rows (valid rows only, file order) as Arrow columns.

    Immutable. :meth:`files` builds the action objects once and caches them, first loading the
    fields ``deferred`` returns (one callable per part, in order) when there are any.
    """

    def __init__(self, rows: pa.StructArray, deferred: Sequence[Callable[[], pa.StructArray]] = ()) -> None:
        self.rows = rows
        self._deferred = tuple(deferred)
        self._paths = rows.field("path")
        self._dv = struct_field(rows, "deletionVector")
        if self._dv is not None and self._dv.null_count == len(self._dv):
            self._dv = None
        self._lock = threading.Lock()
        self._files: list[T] | None = None
        self._live: list[int] | None = None
        self._live_known = False

    def _build(self, rows: pa.StructArray) -> list[T]:
        raise NotImplementedError

    def _dedup(self, keys: list[FileKey]) -> list[int]:
        """Surviving rows, in replay order, when keys repeat."""
        raise NotImplementedError

    @classmethod
    def from_chunks(cls: type[R], chunks: Sequence[FileChunk]) -> R:
        """The rows of several parts (same column type), in order."""
        rows = chunks[0].rows if len(chunks) == 1 else pa.concat_arrays([c.rows for c in chunks])
        deferred = [c.deferred for c in chunks if c.deferred is not None]
        if deferred and len(deferred) != len(chunks):
            raise ValueError("either every part or no part has deferred fields")
        return cls(rows, deferred)

    def __len__(self) -> int:
        return len(self.rows)

    def _full_rows(self) -> pa.StructArray:
        if not self._deferred:
            return self.rows
        parts = [load() for load in self._deferred]
        extra = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        if len(extra) != len(self.rows):
            raise ValueError("deferred checkpoint fields do not line up with the file rows")
        fields = list(self.rows.type) + list(extra.type)
        children = [self.rows.field(i) for i in range(len(self.rows.type))]
        children += [extra.field(i) for i in range(len(extra.type))]
        return pa.StructArray.from_arrays(children, fields=fields)

    def __getstate__(self) -> dict[str, Any]:
        # Picklable (snapshots may travel in closures); the lock and the built files stay behind.
        state = dict(self.__dict__)
        del state["_lock"]
        state["_files"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def files(self) -> list[T]:
        """One action per row (duplicates included), built on first use."""
        files = self._files
        if files is None:
            with self._lock:
                if self._files is None:
                    self._files = self._build(self._full_rows())
                files = self._files
        return files

    def keys(self, rows: Sequence[int] | None = None) -> list[FileKey]:
        """The ``(path, DV unique id)`` key of ``rows`` (``None``: every row), in that order."""
        paths, dv = self._paths, self._dv
        if rows is not None:
            index = pa.array(rows, pa.int64())
            paths = paths.take(index)
            dv = None if dv is None else dv.take(index)
        path_list = paths.to_pylist()
        if dv is None:
            return [(p, None) for p in path_list]
        uids = [None if d is None else d.unique_id for d in dv_descriptors(dv.to_pylist())]
        return list(zip(path_list, uids, strict=True))

    def live_rows(self) -> list[int] | None:
        """Rows that survive replay of the checkpoint alone, in replay order; ``None`` means all.

        A valid checkpoint has one row per key; should a key repeat, see :meth:`_dedup`.
        """
        if not self._live_known:
            n = len(self.rows)
            live: list[int] | None = None
            if n and pc.count_distinct(self._paths, mode="only_valid").as_py() != n:
                rows = self._dedup(self.keys())
                if len(rows) != n:
                    live = rows
            self._live = live
            self._live_known = True
        return self._live

    def rows_with_paths(self, paths: pa.Array) -> list[int]:
        """Rows whose path is one of ``paths``."""
        if not len(paths) or not len(self.rows):
            return []
        hit = pc.fill_null(pc.is_in(self._paths, value_set=paths.cast(self._paths.type)), False)
        return list(pc.indices_nonzero(hit).to_pylist())

    def rows_with_keys(self, keys: frozenset[FileKey]) -> dict[int, FileKey]:
        """Rows whose key is in ``keys``, with their key."""
        if not keys or not len(self.rows):
            return {}
        candidates = self.rows_with_paths(pa.array(sorted({k[0] for k in keys}), pa.string()))
        if not candidates:
            return {}
        return {i: k for i, k in zip(candidates, self.keys(candidates), strict=True) if k in keys}

    def size_of(self, rows: Sequence[int] | None) -> int:
        """Sum of ``size`` over ``rows`` (``None``: all rows); a null size counts as 0."""
        sizes = struct_field(self.rows, "size")
        if sizes is None or not len(self.rows):
            return 0
        if rows is not None:
            sizes = sizes.take(pa.array(rows, pa.int64()))
        total = pc.sum(sizes).as_py()
        return int(total or 0)


class CheckpointAdds(_CheckpointRows[AddFile]):
    """A checkpoint's ``add`` rows. A repeated key: the last row wins and takes its position."""

    def _build(self, rows: pa.StructArray) -> list[AddFile]:
        return build_adds(rows)

    def _dedup(self, keys: list[FileKey]) -> list[int]:
        last: dict[FileKey, int] = {}
        for i, key in enumerate(keys):
            last.pop(key, None)
            last[key] = i
        return list(last.values())


class CheckpointRemoves(_CheckpointRows[RemoveFile]):
    """A checkpoint's ``remove`` rows. A repeated key: the last row wins, at the first one's position."""

    def _build(self, rows: pa.StructArray) -> list[RemoveFile]:
        return build_removes(rows)

    def _dedup(self, keys: list[FileKey]) -> list[int]:
        last: dict[FileKey, int] = {}
        for i, key in enumerate(keys):
            last[key] = i
        return list(last.values())


class ActiveFiles:
    """The live files of one snapshot: checkpoint rows not shadowed by a later commit, then the
    files the later commits added (in replay order). Compares equal by the files it holds.

    ``shadowed`` holds every key a commit after the checkpoint added or removed: for those keys the
    later state (in ``later``, or nothing) is the truth.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self, base: CheckpointAdds | None, shadowed: frozenset[FileKey], later: tuple[AddFile, ...]
    ) -> None:
        self._base = base
        self._shadowed = shadowed
        self._later = later
        self._rows: Sequence[int] | None = None
        self._rows_known = base is None
        self._files: tuple[AddFile, ...] | None = None if base is not None else later

    def _base_rows(self) -> Sequence[int] | None:
        """Live checkpoint rows in order; ``None`` means every row."""
        base = self._base
        if base is None:
            return ()
        if not self._rows_known:
            rows: Sequence[int] | None = base.live_rows()
            dropped = base.rows_with_keys(self._shadowed)
            if dropped:
                rows = [i for i in (range(len(base)) if rows is None else rows) if i not in dropped]
            self._rows = rows
            self._rows_known = True
        return self._rows

    def __len__(self) -> int:
        if self._files is not None:
            return len(self._files)
        rows = self._base_rows()
        base_n = len(self._base) if rows is None and self._base is not None else len(rows or ())
        return base_n + len(self._later)

    @property
    def size_in_bytes(self) -> int:
        """Total size of the live files."""
        later = sum(f.size for f in self._later)
        if self._base is None:
            return later
        return self._base.size_of(self._base_rows()) + later

    @property
    def files(self) -> tuple[AddFile, ...]:
        """The live files as :class:`AddFile` objects (built on first use, then cached)."""
        files = self._files
        if files is None:
            assert self._base is not None
            built = self._base.files()
            rows = self._base_rows()
            head = tuple(built) if rows is None else tuple([built[i] for i in rows])
            files = self._files = head + self._later
        return files

    def __iter__(self) -> Iterator[AddFile]:
        return iter(self.files)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActiveFiles):
            return NotImplemented
        return self is other or self.files == other.files

    def __repr__(self) -> str:
        return f"ActiveFiles({len(self)} files)"


class ActiveTombstones:
    """The tombstones of one snapshot, in replay order, built on first use.

    Replay keeps a tombstone in place when a later ``remove`` of its key replaces it, and drops it
    when a later ``add`` revives the file (a ``remove`` after that appends it again). So: a
    checkpoint row whose key a later commit touched is replaced in place by the later tombstone
    unless the key was in ``readded``; ``later`` (replay order) supplies the rest.
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        base: CheckpointRemoves | None,
        shadowed: frozenset[FileKey],
        readded: frozenset[FileKey],
        later: dict[FileKey, RemoveFile],
    ) -> None:
        self._base = base
        self._shadowed = shadowed
        self._readded = readded
        self._later = later
        self._files: tuple[RemoveFile, ...] | None = None if base is not None else tuple(later.values())

    @property
    def files(self) -> tuple[RemoveFile, ...]:
        """The tombstones as :class:`RemoveFile` objects."""
        files = self._files
        if files is None:
            base = self._base
            assert base is not None
            built = base.files()
            rows: Sequence[int] | None = base.live_rows()
            touched = base.rows_with_keys(self._shadowed)
            if not touched:
                head = built if rows is None else [built[i] for i in rows]
                files = tuple(head) + tuple(self._later.values())
            else:
                later = self._later
                out: list[RemoveFile] = []
                in_place: set[FileKey] = set()
                for i in range(len(base)) if rows is None else rows:
                    key = touched.get(i)
                    if key is None:
                        out.append(built[i])
                    elif key not in self._readded and key in later:
                        out.append(later[key])
                        in_place.add(key)
                out += [r for k, r in later.items() if k not in in_place]
                files = tuple(out)
            self._files = files
        return files

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[RemoveFile]:
        return iter(self.files)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActiveTombstones):
            return NotImplemented
        return self is other or self.files == other.files

    def __repr__(self) -> str:
        return f"ActiveTombstones({len(self)} tombstones)"
