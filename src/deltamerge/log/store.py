"""Byte-level access to a table's ``_delta_log`` directory.

The whole library reaches the log only through :class:`LogStore`, so an object-store backend
(S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, ...) only has to fill in these few methods.
Names are relative to ``_delta_log/`` (``00000000000000000003.json``, ``_sidecars/x.parquet``).

The one method with a hard correctness requirement is :meth:`LogStore.write_exclusive`: it is the
commit point of every transaction and must be an atomic put-if-absent that never exposes a
half-written file and never overwrites (protocol.md §4.1).
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from typing import Protocol, runtime_checkable

LOG_DIR_NAME = "_delta_log"


@runtime_checkable
class LogStore(Protocol):
    """What the log and transaction layers need from storage."""

    def read(self, name: str) -> bytes:
        """The whole content of ``name``; ``FileNotFoundError`` if absent."""
        ...

    def exists(self, name: str) -> bool:
        """Whether ``name`` exists."""
        ...

    def list_from(self, start: str = "") -> list[str]:
        """Names of the files directly in the log directory that sort ``>= start``, sorted.

        Temporary files (names starting with ``.``) are never listed. A missing log directory
        lists as empty.
        """
        ...

    def list_dir(self, directory: str) -> list[str]:
        """Names of the files in a subdirectory of the log (``_sidecars``), sorted; a missing
        directory lists as empty."""
        ...

    def write_exclusive(self, name: str, data: bytes) -> None:
        """Create ``name`` with ``data`` atomically, only if absent; ``FileExistsError`` otherwise."""
        ...

    def write(self, name: str, data: bytes, overwrite: bool = True) -> None:
        """Create or replace ``name`` atomically (checkpoints, ``_last_checkpoint``)."""
        ...

    def delete(self, name: str) -> None:
        """Delete ``name``; a missing file is not an error."""
        ...

    def mtime(self, name: str) -> int:
        """Modification time of ``name`` in milliseconds since the epoch."""
        ...

    def identity(self, name: str) -> tuple[int, ...] | None:
        """What tells this file from another of the same name written later (a deleted and
        re-created table): its file id, size and modification time; ``None`` if absent."""
        ...


class LocalLogStore:
    """:class:`LogStore` over ``<table_root>/_delta_log`` on a POSIX file system.

    ``write_exclusive`` writes a hidden temp file, fsyncs it and hard-links it to the final name:
    ``link(2)`` fails with ``EEXIST`` atomically, so exactly one of several racing writers (threads
    or processes) wins and readers never see a partial commit. ``rename`` is never used for
    commits because it silently replaces an existing file.
    """

    def __init__(self, table_root: str) -> None:
        self.table_root = os.path.abspath(table_root)
        self.log_dir = os.path.join(self.table_root, LOG_DIR_NAME)

    def __repr__(self) -> str:
        return f"LocalLogStore({self.table_root!r})"

    def path(self, name: str) -> str:
        """Absolute local path of a log file."""
        return os.path.join(self.log_dir, name)

    def read(self, name: str) -> bytes:
        """Read a whole log file."""
        with open(self.path(name), "rb") as f:
            return f.read()

    def exists(self, name: str) -> bool:
        """Whether a log file exists."""
        return os.path.exists(self.path(name))

    def list_from(self, start: str = "") -> list[str]:
        """Sorted names ``>= start`` in the log directory (files only, no temp files)."""
        try:
            entries = os.scandir(self.log_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with entries:
            names = [
                e.name
                for e in entries
                if e.name >= start and not e.name.startswith(".") and e.is_file(follow_symlinks=True)
            ]
        names.sort()
        return names

    def list_dir(self, directory: str) -> list[str]:
        """Names of the files in ``_delta_log/<directory>``, sorted (none if it is missing)."""
        try:
            entries = os.scandir(os.path.join(self.log_dir, directory))
        except (FileNotFoundError, NotADirectoryError):
            return []
        with entries:
            names = [
                e.name for e in entries if not e.name.startswith(".") and e.is_file(follow_symlinks=True)
            ]
        return sorted(names)

    def _write_temp(self, name: str, data: bytes) -> str:
        directory, base = os.path.split(self.path(name))
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        return tmp

    def write_exclusive(self, name: str, data: bytes) -> None:
        """Atomic put-if-absent via temp file + ``os.link``."""
        final = self.path(name)
        tmp = self._write_temp(name, data)
        try:
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise
            except OSError as e:
                # Some file systems (certain FUSE/SMB mounts) do not support hard links. O_EXCL
                # still gives exclusivity there; the content may be briefly partial, so this is
                # a fallback only.
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                self._write_excl_fallback(final, data)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _fsync_dir(os.path.dirname(final))

    @staticmethod
    def _write_excl_fallback(final: str, data: bytes) -> None:
        fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes, overwrite: bool = True) -> None:
        """Write via temp file + atomic replace (or exclusive create when ``overwrite=False``)."""
        if not overwrite:
            self.write_exclusive(name, data)
            return
        tmp = self._write_temp(name, data)
        try:
            os.replace(tmp, self.path(name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(os.path.dirname(self.path(name)))

    def delete(self, name: str) -> None:
        """Delete a log file if present."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(name))

    def mtime(self, name: str) -> int:
        """File modification time in ms."""
        return os.stat(self.path(name)).st_mtime_ns // 1_000_000

    def identity(self, name: str) -> tuple[int, ...] | None:
        """``(device, inode, size, mtime_ns)`` of a log file, ``None`` if absent."""
        try:
            st = os.stat(self.path(name))
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _fsync_dir(directory: str) -> None:
    # Makes the new directory entry durable; best effort (not possible on every platform).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
