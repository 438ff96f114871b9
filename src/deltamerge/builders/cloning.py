"""SHALLOW CLONE (Delta's ``CloneTableCommand``): a new table whose first commit adds the source
snapshot's files by absolute path, so nothing is copied.

The clone gets the source's schema, partitioning and properties (plus overrides), a new table id,
and at least the source's protocol. Deletion vectors of the source keep pointing at the source's
files (storage type ``p``). Writes to the clone only ever add files under the clone's own root,
and the clone never deletes the source's files; VACUUM of the *source*, though, may delete files a
clone still reads, as in Delta. Deep clone is not part of open-source Delta and is refused.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession

from deltamerge import catalog
from deltamerge.builders.creation import _register_name, replace_missing_error, table_location
from deltamerge.config import TableProperties
from deltamerge.deletion_vectors import dv_file_path
from deltamerge.errors import (
    AnalysisError,
    InvalidArgumentError,
    UnsupportedOperationError,
)
from deltamerge.log import clustering, column_mapping
from deltamerge.log.actions import AddFile, DeletionVectorDescriptor, Metadata
from deltamerge.log.paths import absolute_file_path, encode_add_path, is_absolute_path, table_root
from deltamerge.log.protocol import at_least, reader_features, with_features, writer_features
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.spark.session import conf_getter, user_properties
from deltamerge.spark.write import now_ms
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = ["CLONE_METRICS", "clone_to", "shallow_clone"]

#: The CLONE command's result columns and the commit's metrics (same order).
CLONE_METRICS = (
    ("source_table_size", "sourceTableSize"),
    ("source_num_of_files", "sourceNumOfFiles"),
    ("num_removed_files", "numRemovedFiles"),
    ("num_copied_files", "numCopiedFiles"),
    ("removed_files_size", "removedFilesSize"),
    ("copied_files_size", "copiedFilesSize"),
)


def _absolute_uri(root: str, path: str) -> str:
    """``path`` (an add path of the table at ``root``) as an absolute ``file:`` URI."""
    if is_absolute_path(path) and not path.startswith("/"):
        return path  # already a URI (a clone of a clone keeps the original's)
    # Hadoop's form, as Delta writes it (delta-rs 1.6 reads no absolute add path in either form).
    return "file:" + encode_add_path(absolute_file_path(root, path))


def _absolute_dv(root: str, dv: DeletionVectorDescriptor | None) -> DeletionVectorDescriptor | None:
    if dv is None or dv.storage_type != "u":
        return dv
    return replace(dv, storage_type="p", path_or_inline_dv="file:" + encode_add_path(dv_file_path(root, dv)))


def _check_target_dir(root: str, shown: str) -> None:
    if os.path.isdir(root) and os.listdir(root):
        raise AnalysisError(
            f"Cannot create table ({shown}). The associated location ({root}) is not empty and also not "
            "a Delta table. Clone into a new or empty directory.",
            error_class="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
        )


def shallow_clone(
    spark: SparkSession,
    source: Snapshot,
    source_name: str,
    *,
    mode: str = "create",
    name: str | None = None,
    location: str | None = None,
    properties: dict[str, str] | None = None,
) -> tuple[str, dict[str, int] | None]:
    """Clone ``source`` (a snapshot, time travelled or not) as a new table at ``location`` and/or
    under ``name``; ``mode`` is create, createIfNotExists, replace or createOrReplace.

    Returns (target root, metrics); metrics are ``None`` when IF NOT EXISTS found the table there.
    """
    if name is None and location is None:
        raise InvalidArgumentError("CLONE needs a target path or table name.")
    overrides = user_properties(spark, properties)
    if location is not None and not os.path.isabs(table_root(location)):
        raise InvalidArgumentError(
            f"The target location for CLONE needs to be an absolute path or table name. Use an absolute "
            f"path instead of {location}.",
            error_class="DELTA_INVALID_CLONE_PATH",
        )
    view = _register_name(name) if name is not None else None
    root = table_root(location) if location is not None else table_location(spark, view)  # type: ignore[arg-type]
    shown = f"`{name}`" if name else f"delta.`{root}`"
    txn = OptimisticTransaction(DeltaLog.for_table(root), conf=conf_getter(spark))
    exists = not txn.is_new_table
    if exists and mode == "createIfNotExists" and view is not None and catalog.path_for_name(view):
        return root, None  # a registered table of that name: IF NOT EXISTS does nothing
    if exists and mode in ("create", "createIfNotExists"):
        raise AnalysisError(
            f"Cannot create table ({shown}). The associated location ({root}) is not empty: it holds a "
            "Delta table. Use CREATE OR REPLACE TABLE ... SHALLOW CLONE to replace it.",
            error_class="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
        )
    if mode == "replace" and not exists:
        raise replace_missing_error(shown)
    if not exists:
        _check_target_dir(root, shown)

    src_meta = source.metadata
    configuration = {**src_meta.configuration, **overrides}
    current = txn.snapshot.metadata if txn.snapshot is not None else None
    modes = [src_meta.configuration] + ([current.configuration] if current is not None else [])
    for before in map(column_mapping.mode_of, modes):
        after = column_mapping.mode_of(configuration)
        if before != after:
            raise UnsupportedOperationError(
                f"Changing column mapping mode from '{before}' to '{after}' is not supported by CLONE.",
                error_class="DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE",
            )
    files = list(source.files)
    if any(f.deletion_vector is not None for f in files) and not TableProperties.ENABLE_DVS.get(
        configuration
    ):
        raise UnsupportedOperationError(
            "The source has deletion vectors, so the clone cannot have 'delta.enableDeletionVectors' = "
            "'false'. Clone without that override, or purge the source first (REORG TABLE ... APPLY "
            "(PURGE)).",
            error_class="DELTA_ADDING_DELETION_VECTORS_DISALLOWED",
        )
    txn.update_metadata(
        Metadata(
            id="",
            name=current.name if current is not None else None,
            description=current.description if current is not None else None,
            format_provider=src_meta.format_provider,
            format_options=dict(src_meta.format_options),
            schema_string=src_meta.schema_string,
            partition_columns=src_meta.partition_columns,
            configuration=configuration,
            created_time=src_meta.created_time,  # as Delta: the source's metadata, a new id
        )
    )
    # At least the source's protocol (the files may rely on its features), never a downgrade.
    protocol = txn.protocol
    assert protocol is not None
    sp = source.protocol
    merged = at_least(protocol, sp.min_reader_version, sp.min_writer_version)
    features = set(reader_features(sp)) | set(writer_features(sp)) if sp.min_writer_version >= 7 else set()
    if features:
        merged = with_features(merged, features)
    if merged != protocol:
        txn.update_protocol(merged)

    ts = now_ms()
    actions: list[Any] = []
    removed: list[AddFile] = []
    if exists and txn.snapshot is not None:
        removed = list(txn.snapshot.files)
        actions += [f.remove(ts) for f in removed]
        txn.mark_read_whole_table()
    src_root = source.table_root
    actions += [
        replace(
            f,
            path=_absolute_uri(src_root, f.path),
            deletion_vector=_absolute_dv(src_root, f.deletion_vector),
            data_change=True,
            base_row_id=None,
            default_row_commit_version=None,
            raw={},
        )
        for f in files
    ]
    domain = clustering.for_clone(
        sp, source.domains, txn.snapshot.domains if txn.snapshot is not None else {}
    )
    if domain is not None:
        actions.append(domain)
    metrics = {
        "sourceTableSize": sum(f.size for f in files),
        "sourceNumOfFiles": len(files),
        "numRemovedFiles": 0,
        "numCopiedFiles": 0,
        "removedFilesSize": 0,
        "copiedFilesSize": 0,
    }
    params = {"source": source_name, "sourceVersion": source.version}
    txn.commit(actions, Operation("CLONE", params, dict(metrics)))
    if view is not None:
        catalog.register_table(spark, view, root)
    catalog.refresh_views(spark, root)
    return root, metrics


def clone_to(
    spark: SparkSession,
    source_root: str,
    source_table_name: str | None,
    target: str,
    *,
    shallow: bool,
    mode: str,
    properties: dict[str, str] | None = None,
    version: int | None = None,
    timestamp: str | None = None,
    location: str | None = None,
) -> tuple[str, dict[str, int] | None]:
    """CLONE the table at ``source_root`` (as of ``version`` / ``timestamp``) to ``target``: an
    absolute path (``delta.`/path``` in SQL) or a table name; returns (target root, metrics), the
    metrics ``None`` when IF NOT EXISTS found the table."""
    from deltamerge.io import snapshot_for

    if not shallow:
        raise InvalidArgumentError(
            "Deep clone is not supported by this Delta version.", error_class="DELTA_UNSUPPORTED_DEEP_CLONE"
        )
    source = snapshot_for(
        source_root, version, timestamp, time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC"
    )
    source_name = source_table_name or f"delta.`{source_root}`"
    name: str | None
    path: str | None
    if target.startswith("file:") or os.path.isabs(target):
        name, path = None, target
    elif "/" in target or "\\" in target:
        raise InvalidArgumentError(
            f"The target location for CLONE needs to be an absolute path or table name. Use an absolute "
            f"path instead of {target}.",
            error_class="DELTA_INVALID_CLONE_PATH",
        )
    else:
        name, path = target, location
    return shallow_clone(
        spark, source, source_name, mode=mode, name=name, location=path, properties=properties
    )
