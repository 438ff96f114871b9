"""Symlink manifests for Presto / Athena / Hive readers (Delta's ``GenerateSymlinkManifest``).

``_symlink_format_manifest/<partition dir>/manifest`` lists the absolute paths of the data files of
one partition (the table root's ``manifest`` for an unpartitioned table), one per line, as
``file:/abs/path`` for local files. ``GENERATE symlink_format_manifest`` writes every partition's
manifest and deletes the manifests of partitions that no longer exist; with the table property
``delta.compatibility.symlinkFormatManifest.enabled`` every commit that adds or removes files
rewrites the manifests of the partitions it touched (incremental), after the commit has landed.

External readers see no deletion vectors and no column mapping, so a table with either is refused,
as Delta does. Each manifest is written to a temporary name and renamed over the old one, so a
reader sees the old or the new list, never half of one. Pure Python: it needs only the log.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from deltamerge.config import TableProperties, parse_bool
from deltamerge.errors import InvalidArgumentError, TableNotFoundError, UnsupportedOperationError
from deltamerge.log import column_mapping
from deltamerge.log.actions import Action, AddFile, Metadata, RemoveFile
from deltamerge.log.paths import absolute_file_path, is_absolute_path, partition_dir
from deltamerge.log.snapshot import Snapshot

__all__ = [
    "HOOK_NAME",
    "MANIFEST_DIR",
    "MODES",
    "ManifestStats",
    "check_properties",
    "generate",
    "generate_full",
    "generate_incremental",
    "manifest_enabled",
]

MANIFEST_DIR = "_symlink_format_manifest"
HOOK_NAME = "Generate Symlink Format Manifest"
#: GENERATE's modes (Delta's ``DeltaGenerateCommand.modeNameToGenerationFunc``; case-insensitive).
MODES = ("symlink_format_manifest",)
_ENABLED_KEY = "delta.compatibility.symlinkFormatManifest.enabled"


@dataclass(frozen=True)
class ManifestStats:
    """What one generation did: manifests written and partition manifests deleted."""

    files_written: int
    files_deleted: int
    partitioned: bool


def _flag(configuration: Mapping[str, str], key: str) -> bool:
    lowered = {k.lower(): v for k, v in configuration.items()}
    try:
        return parse_bool(lowered.get(key.lower(), "false"))
    except ValueError:
        return False


def manifest_enabled(metadata: Metadata) -> bool:
    """Whether commits keep the manifests up to date (the table property)."""
    return _flag(metadata.configuration, _ENABLED_KEY)


def _has_dvs(snapshot: Snapshot | None) -> bool:
    return snapshot is not None and any(f.deletion_vector is not None for f in snapshot.files)


def check_properties(metadata: Metadata, read_snapshot: Snapshot | None) -> None:
    """Delta's ``assertTablePropertyConstraintsSatisfied`` for new metadata: incremental manifests
    and deletion vectors exclude each other."""
    if not manifest_enabled(metadata):
        return
    table = metadata.name or metadata.id
    head = f"The validation of the properties of table {table} has been violated:"
    if _flag(metadata.configuration, TableProperties.ENABLE_DVS.key):
        raise UnsupportedOperationError(
            f"{head} Persistent deletion vectors and incremental symlink manifest generation are mutually "
            "exclusive. Set only one of 'delta.enableDeletionVectors' and "
            f"'{_ENABLED_KEY}' to true.",
            error_class="DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED."
            "PERSISTENT_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION",
        )
    if _has_dvs(read_snapshot):
        raise UnsupportedOperationError(
            f"{head} Symlink manifest generation is unsupported while deletion vectors are present in the "
            f"table. In order to produce a version of the table without deletion vectors, run 'REORG TABLE "
            f"{table} APPLY (PURGE)'.",
            error_class="DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED."
            "EXISTING_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION",
        )


def _check_supported(snapshot: Snapshot) -> None:
    if column_mapping.mode_of(snapshot.metadata.configuration) != "none":
        raise UnsupportedOperationError(
            "Manifest generation is not supported for tables that leverage column mapping, as external "
            "readers cannot read these Delta tables. See Delta documentation for more details.",
            error_class="DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING",
        )
    if _has_dvs(snapshot):
        raise UnsupportedOperationError(
            "The 'GENERATE symlink_format_manifest' command is not supported on table versions with deletion "
            "vectors. If you need to generate manifests, consider disabling deletion vectors on this table "
            "using 'ALTER TABLE table SET TBLPROPERTIES (delta.enableDeletionVectors = false)' and running "
            "'REORG TABLE table APPLY (PURGE)'.",
            error_class="DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS",
        )


def _uri(table_root: str, path: str) -> str:
    """A manifest line: the file's absolute path, unescaped, as a Hadoop path string."""
    if is_absolute_path(path) and not path.startswith(("/", "file:")):
        return absolute_file_path(table_root, path)  # another file system: its decoded URI
    return "file:" + absolute_file_path(table_root, path)


def _write_manifest(directory: str, lines: Iterable[str]) -> None:
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
        os.replace(tmp, os.path.join(directory, "manifest"))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _by_partition(snapshot: Snapshot, files: Iterable[AddFile]) -> dict[str, list[AddFile]]:
    columns = snapshot.metadata.partition_columns
    groups: dict[str, list[AddFile]] = {}
    for f in files:
        groups.setdefault(partition_dir(columns, f.partition_values) if columns else "", []).append(f)
    return groups


def _write_all(table_root: str, groups: Mapping[str, Sequence[AddFile]]) -> set[str]:
    root = os.path.join(table_root, MANIFEST_DIR)
    for rel, files in groups.items():
        _write_manifest(
            os.path.join(root, rel) if rel else root, sorted(_uri(table_root, f.path) for f in files)
        )
    return set(groups)


def _delete(table_root: str, partition_dirs: Iterable[str]) -> int:
    root = os.path.join(table_root, MANIFEST_DIR)
    n = 0
    for rel in partition_dirs:
        target = os.path.join(root, rel)
        if rel and os.path.isdir(target):
            shutil.rmtree(target)
            n += 1
    return n


def _existing(table_root: str) -> set[str]:
    root = os.path.join(table_root, MANIFEST_DIR)
    found: set[str] = set()
    for directory, _dirs, names in os.walk(root):
        if "manifest" in names:
            rel = os.path.relpath(directory, root)
            if rel != ".":
                found.add(rel.replace(os.sep, "/"))
    return found


def generate_full(table_root: str, snapshot: Snapshot) -> ManifestStats:
    """Write every partition's manifest for ``snapshot`` and delete the manifests of partitions
    that are gone (``GENERATE symlink_format_manifest FOR TABLE ...``)."""
    _check_supported(snapshot)
    partitioned = bool(snapshot.metadata.partition_columns)
    groups = _by_partition(snapshot, snapshot.files)
    if not groups and not partitioned:
        groups = {"": []}  # an empty table still gets its (empty) manifest
    written = _write_all(table_root, groups)
    deleted = _delete(table_root, _existing(table_root) - written)
    return ManifestStats(len(written), deleted, partitioned)


def generate_incremental(
    table_root: str, read_snapshot: Snapshot | None, snapshot: Snapshot, actions: Sequence[Action]
) -> ManifestStats:
    """Update the manifests of the partitions a commit's ``actions`` touched (the post-commit hook);
    without a manifest directory yet, generate them all."""
    _check_supported(snapshot)
    if not os.path.isdir(os.path.join(table_root, MANIFEST_DIR)):
        return generate_full(table_root, snapshot)
    columns = snapshot.metadata.partition_columns
    if not columns:
        written = _write_all(table_root, {"": list(snapshot.files)})
        return ManifestStats(len(written), 0, False)
    before = {f.path: f for f in read_snapshot.files} if read_snapshot is not None else {}
    touched: set[str] = set()
    removed_dirs: set[str] = set()
    for a in actions:
        if isinstance(a, AddFile):
            touched.add(partition_dir(columns, a.partition_values))
        elif isinstance(a, RemoveFile):
            old = before.get(a.path)
            values = old.partition_values if old is not None else a.partition_values
            if values is not None:
                rel = partition_dir(columns, values)
                touched.add(rel)
                removed_dirs.add(rel)
    groups = _by_partition(snapshot, snapshot.files)
    written = _write_all(table_root, {rel: groups[rel] for rel in touched if rel in groups})
    deleted = _delete(table_root, removed_dirs - set(groups))
    return ManifestStats(len(written), deleted, True)


def generate(table_root: str, snapshot: Snapshot | None, mode: str) -> ManifestStats:
    """``GENERATE <mode> FOR TABLE``: the only mode is ``symlink_format_manifest`` (any case)."""
    if mode.lower() not in MODES:
        raise InvalidArgumentError(
            f"Specified mode '{mode}' is not supported. Supported modes are: {', '.join(MODES)}",
            error_class="DELTA_MODE_NOT_SUPPORTED",
        )
    if snapshot is None:
        raise TableNotFoundError(f"`{table_root}` is not a Delta table.")
    return generate_full(table_root, snapshot)
