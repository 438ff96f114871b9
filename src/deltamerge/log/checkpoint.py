"""Checkpoints: read every form (classic, multi-part, V2 with sidecars), write classic V1 ones.

A checkpoint is a Parquet file in which each row sets exactly one of the top-level struct columns
``txn``, ``add``, ``remove``, ``metaData``, ``protocol``, ``domainMetadata`` (V2 also ``sidecar`` and
``checkpointMetadata``). Readers must cope with absent columns, ``required`` or optional fields,
extra ``*_parsed`` columns and maps stored as ``key_value`` groups (protocol.md §3.2).

The writer produces the layout delta-spark 4.x writes: everything optional, 3-level lists, maps as
``key_value``, ``add.stats`` as a JSON string and ``dataChange=false`` on every file action. It writes
no ``partitionValues_parsed``/``stats_parsed`` (readers fall back to the JSON ``stats``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltamerge.config import TableProperties, parse_interval_ms
from deltamerge.errors import LogCorruptedError
from deltamerge.log import filenames
from deltamerge.log.actions import (
    Action,
    AddFile,
    DomainMetadata,
    JsonDict,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    UnknownAction,
    action_from_json,
)
from deltamerge.log.arrow_rows import (
    build_adds,
    build_removes,
    clean,
    fast_path_ok,
    file_rows_mask,
    select_rows,
)
from deltamerge.log.filestate import CheckpointAdds, CheckpointRemoves, FileChunk
from deltamerge.log.paths import decode_add_path
from deltamerge.log.replay import CheckpointRef, parse_commit_file
from deltamerge.log.store import LogStore

if TYPE_CHECKING:
    from deltamerge.log.snapshot import Snapshot

_ACTION_COLUMNS = (
    "protocol",
    "metaData",
    "txn",
    "domainMetadata",
    "add",
    "remove",
    "sidecar",
    "checkpointMetadata",
)
# --- reading -------------------------------------------------------------------------------------------


def _row_action(c: str, row: Any) -> Action | None:
    body = clean(row, c)
    # Skip all-null structs some writers emit instead of a null struct.
    if c in ("add", "remove") and not body.get("path"):
        return None
    if c == "protocol" and body.get("minReaderVersion") is None:
        return None
    if c == "metaData" and body.get("id") is None:
        return None
    if c == "txn" and body.get("appId") is None:
        return None
    if c == "domainMetadata" and body.get("domain") is None:
        return None
    return action_from_json({c: body})


def _file_actions(column: pa.ChunkedArray, kind: str) -> tuple[list[int], list[Action]] | None:
    """``(rows, actions)`` for the ``add``/``remove`` rows, or ``None`` to use the generic path."""
    if not fast_path_ok(column.type, kind):
        return None
    arr, mask = file_rows_mask(column)
    rows = pc.indices_nonzero(mask).to_pylist()
    if not rows:
        return [], []
    sub = select_rows(arr, mask)
    actions: list[Action] = list(build_adds(sub) if kind == "add" else build_removes(sub))
    return rows, actions


def _generic_actions(column: pa.ChunkedArray, c: str) -> tuple[list[int], list[Action]]:
    """``(rows, actions)`` of one column, row by row through the JSON shape (set rows only)."""
    if column.null_count == len(column):
        return [], []
    valid = pc.indices_nonzero(column.is_valid()).to_pylist()
    rows: list[int] = []
    actions: list[Action] = []
    for row, value in zip(valid, column.take(valid).to_pylist(), strict=True):
        action = _row_action(c, value)
        if action is not None:
            rows.append(row)
            actions.append(action)
    return rows, actions


def _rows_to_actions(table: pa.Table) -> list[Action]:
    columns = [c for c in _ACTION_COLUMNS if c in table.column_names]
    per_column: list[tuple[list[int], list[Action]]] = []
    for c in columns:
        got = _file_actions(table.column(c), c) if c in ("add", "remove") else None
        per_column.append(got if got is not None else _generic_actions(table.column(c), c))
    kinds = {type(a) for _, actions in per_column for a in actions}
    if AddFile not in kinds or RemoveFile not in kinds:
        # At most one kind of file action: the order across columns does not change the replayed
        # state (within a column, rows stay in file order).
        return [a for _, actions in per_column for a in actions]
    # Adds and removes: keep the file's row order, and column order within a (malformed) row.
    width = len(columns)
    placed: list[Action | None] = [None] * (table.num_rows * width)
    for slot, (rows, actions) in enumerate(per_column):
        for row, action in zip(rows, actions, strict=True):
            placed[row * width + slot] = action
    return [a for a in placed if a is not None]


# Fields of the ``add``/``remove`` structs that the lazy read leaves in the file until the files are
# built: the statistics are most of a checkpoint's bytes, and only the built actions need them.
_DEFERRED_FIELDS = ("stats", "stats_parsed")


class _DeferredFields:
    """Reads the deferred fields of one checkpoint file's ``kind`` column from its bytes, same rows."""

    def __init__(self, name: str, data: bytes, kind: str, fields: list[str], mask: pa.Array) -> None:
        self.name, self.data, self.kind, self.fields, self.mask = name, data, kind, fields, mask

    def __call__(self) -> pa.StructArray:
        try:
            pf = pq.ParquetFile(pa.BufferReader(self.data))
            column = pf.read(columns=[f"{self.kind}.{f}" for f in self.fields]).column(self.kind)
            arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            return select_rows(arr, self.mask)
        except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
            raise LogCorruptedError(
                f"The statistics of the checkpoint file _delta_log/{self.name} cannot be read "
                f"({type(e).__name__}: {e}). Delete the checkpoint (and _delta_log/_last_checkpoint if it "
                "points to it) so readers fall back to the JSON commits, then create a new checkpoint."
            ) from e


def _read_parquet_actions(
    store: LogStore, name: str, files_out: list[FileChunk] | None = None
) -> list[Action]:
    """Actions of one Parquet checkpoint file. With ``files_out``, the ``add`` and ``remove`` rows are
    appended to it as Arrow (when their layout allows the column-wise conversion) instead of being
    returned."""
    data = store.read(name)
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        schema = pf.schema_arrow
        present = [c for c in _ACTION_COLUMNS if c in schema.names]
        lazy = [] if files_out is None else [c for c in ("add", "remove") if c in present]
        lazy = [c for c in lazy if fast_path_ok(schema.field(c).type, c)]
        if not lazy:
            return _rows_to_actions(pf.read(columns=present))
        columns = [c for c in present if c not in lazy]
        for kind in lazy:
            # stats/stats_parsed are deferred; other ``*_parsed`` fields (partitionValues_parsed) are unused.
            columns += [f"{kind}.{f.name}" for f in schema.field(kind).type if not f.name.endswith("_parsed")]
            columns = [c for c in columns if c != f"{kind}.stats"]
        table = pf.read(columns=columns)
        assert files_out is not None
        for kind in lazy:
            full_type = schema.field(kind).type
            deferred = [f.name for f in full_type if f.name in _DEFERRED_FIELDS]
            arr, mask = file_rows_mask(table.column(kind))
            loader = _DeferredFields(name, data, kind, deferred, mask) if deferred else None
            files_out.append(FileChunk(kind, select_rows(arr, mask), full_type, loader))
        return _rows_to_actions(table.drop_columns(lazy))
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
        raise LogCorruptedError(
            f"The checkpoint file _delta_log/{name} cannot be read ({type(e).__name__}: {e}). Delete it "
            "(and _delta_log/_last_checkpoint if it points to it) so readers fall back to the JSON commits, "
            "then create a new checkpoint."
        ) from e


def _sidecar_name(action: UnknownAction) -> str:
    path = str(action.raw.get("path", ""))
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return f"{filenames.SIDECAR_DIR}/{decode_add_path(base)}"


def read_checkpoint_file(
    store: LogStore, name: str, files_out: list[FileChunk] | None = None
) -> list[Action]:
    """Actions of one checkpoint file, with V2 sidecar files expanded in place.

    With ``files_out``, Parquet ``add``/``remove`` rows are collected there as Arrow instead (see
    :func:`read_checkpoint_lazy`).
    """
    if name.endswith(".json"):
        actions = parse_commit_file(name, store.read(name))
    else:
        actions = _read_parquet_actions(store, name, files_out)
    if UnknownAction not in set(map(type, actions)):
        return actions  # no sidecar and nothing to drop
    out: list[Action] = []
    for action in actions:
        if isinstance(action, UnknownAction) and action.key == "sidecar":
            sidecar = _sidecar_name(action)
            try:
                out.extend(_read_parquet_actions(store, sidecar, files_out))
            except FileNotFoundError:
                raise LogCorruptedError(
                    f"The V2 checkpoint _delta_log/{name} refers to the sidecar _delta_log/{sidecar}, which "
                    "does not exist. Restore the sidecar, or delete the checkpoint so readers use the JSON "
                    "commits."
                ) from None
        elif not isinstance(action, UnknownAction):
            out.append(action)
    return out


def read_checkpoint(
    store: LogStore, ref: CheckpointRef, files_out: list[FileChunk] | None = None
) -> list[Action]:
    """All actions of a (possibly multi-part) checkpoint (``files_out``: see :func:`read_checkpoint_file`)."""
    actions: list[Action] = []
    for name in ref.names:
        try:
            actions.extend(read_checkpoint_file(store, name, files_out))
        except FileNotFoundError:
            raise LogCorruptedError(
                f"The checkpoint file _delta_log/{name} disappeared while it was being read. Retry the read."
            ) from None
    if not any(isinstance(a, Protocol) for a in actions) or not any(isinstance(a, Metadata) for a in actions):
        raise LogCorruptedError(
            f"The checkpoint for version {ref.version} ({', '.join(ref.names)}) has no protocol or "
            "metaData row. "
            "Delete it so readers fall back to the JSON commits, then create a new checkpoint."
        )
    return actions


@dataclass(frozen=True)
class LazyCheckpoint:
    """A checkpoint with its file actions kept as Arrow where possible (:func:`read_checkpoint_lazy`)."""

    actions: list[Action]
    adds: CheckpointAdds | None = None
    removes: CheckpointRemoves | None = None


def read_checkpoint_lazy(store: LogStore, ref: CheckpointRef) -> LazyCheckpoint:
    """A checkpoint whose ``add``/``remove`` rows stay Arrow (``adds``, ``removes``); the rest are actions.

    Replaying ``actions`` and then taking ``adds`` as the live files and ``removes`` as the
    tombstones gives the same state as replaying :func:`read_checkpoint` in order. When that does
    not hold (an ``add`` and a ``remove`` of the same key, or parts whose rows cannot all stay
    Arrow) every action is returned eagerly, as :func:`read_checkpoint` does.
    """
    chunks: list[FileChunk] = []
    actions = read_checkpoint(store, ref, chunks)
    by_kind = {k: [c for c in chunks if c.kind == k and len(c.rows)] for k in ("add", "remove")}
    if not by_kind["add"] and not by_kind["remove"]:
        return LazyCheckpoint(actions)
    mixed = any(isinstance(a, (AddFile, RemoveFile)) for a in actions)
    if mixed or any(len({c.full_type for c in cs}) > 1 for cs in by_kind.values()):
        return LazyCheckpoint(read_checkpoint(store, ref))
    adds = CheckpointAdds.from_chunks(by_kind["add"]) if by_kind["add"] else None
    removes = CheckpointRemoves.from_chunks(by_kind["remove"]) if by_kind["remove"] else None
    if adds is not None and removes is not None:
        # Tombstones whose path is also added: their exact keys must all differ from the adds' keys.
        both = removes.rows_with_paths(adds.rows.field("path"))
        if both and adds.rows_with_keys(frozenset(removes.keys(both))):
            return LazyCheckpoint(read_checkpoint(store, ref))
    return LazyCheckpoint(actions, adds, removes)


@dataclass(frozen=True)
class LastCheckpointInfo:
    """The ``_last_checkpoint`` hint."""

    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None


def read_last_checkpoint(store: LogStore) -> LastCheckpointInfo | None:
    """The ``_last_checkpoint`` hint, or ``None`` when missing or unreadable (it is only a hint)."""
    try:
        raw = json.loads(store.read(filenames.LAST_CHECKPOINT))
        return LastCheckpointInfo(
            version=int(raw["version"]),
            size=raw.get("size"),
            parts=raw.get("parts"),
            size_in_bytes=raw.get("sizeInBytes"),
            num_of_add_files=raw.get("numOfAddFiles"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- writing -------------------------------------------------------------------------------------------

_MAP = pa.map_(pa.string(), pa.string())
_STR_LIST = pa.list_(pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", _MAP),
                    ("deletionVector", _DV),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                    ("clusteringProvider", pa.string()),
                    ("stats", pa.string()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", _MAP),
                    ("size", pa.int64()),
                    ("deletionVector", _DV),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", _STR_LIST),
                    ("configuration", _MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", _STR_LIST),
                    ("writerFeatures", _STR_LIST),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]),
        ),
    ]
)


def _map(d: dict[str, Any] | None) -> list[tuple[str, Any]] | None:
    return None if d is None else [(k, None if v is None else str(v)) for k, v in d.items()]


def _dv(a: AddFile | RemoveFile) -> JsonDict | None:
    dv = a.deletion_vector
    if dv is None:
        return None
    return {
        "storageType": dv.storage_type,
        "pathOrInlineDv": dv.path_or_inline_dv,
        "offset": dv.offset,
        "sizeInBytes": dv.size_in_bytes,
        "cardinality": dv.cardinality,
        "maxRowIndex": dv.max_row_index,
    }


def _add_row(a: AddFile) -> JsonDict:
    return {
        "add": {
            "path": a.path,
            "partitionValues": _map(a.partition_values) or [],
            "size": a.size,
            "modificationTime": a.modification_time,
            "dataChange": False,  # a checkpoint says nothing about which commit changed data
            "tags": _map(a.tags),
            "deletionVector": _dv(a),
            "baseRowId": a.base_row_id,
            "defaultRowCommitVersion": a.default_row_commit_version,
            "clusteringProvider": a.clustering_provider,
            "stats": a.stats,
        }
    }


def _remove_row(r: RemoveFile) -> JsonDict:
    return {
        "remove": {
            "path": r.path,
            "deletionTimestamp": r.deletion_timestamp,
            "dataChange": False,
            "extendedFileMetadata": r.extended_file_metadata,
            "partitionValues": _map(r.partition_values),
            "size": r.size,
            "deletionVector": _dv(r),
            "baseRowId": r.base_row_id,
            "defaultRowCommitVersion": r.default_row_commit_version,
        }
    }


def checkpoint_rows(
    protocol: Protocol,
    metadata: Metadata,
    transactions: Iterable[SetTransaction],
    domains: Iterable[DomainMetadata],
    files: Iterable[AddFile],
    tombstones: Iterable[RemoveFile],
) -> list[JsonDict]:
    """The rows of a V1 checkpoint, as dicts matching :data:`CHECKPOINT_SCHEMA`."""
    rows: list[JsonDict] = [
        {
            "protocol": {
                "minReaderVersion": protocol.min_reader_version,
                "minWriterVersion": protocol.min_writer_version,
                "readerFeatures": None
                if protocol.reader_features is None
                else list(protocol.reader_features),
                "writerFeatures": None
                if protocol.writer_features is None
                else list(protocol.writer_features),
            }
        },
        {
            "metaData": {
                "id": metadata.id,
                "name": metadata.name,
                "description": metadata.description,
                "format": {
                    "provider": metadata.format_provider,
                    "options": _map(metadata.format_options) or [],
                },
                "schemaString": metadata.schema_string,
                "partitionColumns": list(metadata.partition_columns),
                "configuration": _map(metadata.configuration) or [],
                "createdTime": metadata.created_time,
            }
        },
    ]
    rows += [
        {"txn": {"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated}}
        for t in transactions
    ]
    rows += [
        {"domainMetadata": {"domain": d.domain, "configuration": d.configuration, "removed": False}}
        for d in domains
        if not d.removed
    ]
    rows += [_add_row(a) for a in files]
    rows += [_remove_row(r) for r in tombstones]
    return rows


def encode_checkpoint(rows: Sequence[JsonDict]) -> bytes:
    """Parquet bytes of a V1 checkpoint."""
    table = pa.Table.from_pylist(list(rows), schema=CHECKPOINT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())


def write_checkpoint(store: LogStore, snapshot: Snapshot, *, now_ms: int | None = None) -> LastCheckpointInfo:
    """Write the classic checkpoint of ``snapshot`` and then update ``_last_checkpoint``.

    Tombstones are kept while younger than ``delta.deletedFileRetentionDuration`` (VACUUM needs
    them); ``txn`` entries older than ``delta.setTransactionRetentionDuration`` (if set) are dropped.
    The checkpoint is written under a temp name and renamed into place; two writers racing on the
    same version write equivalent content, so overwriting is harmless.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    conf = snapshot.configuration
    cutoff = now - TableProperties.DELETED_FILE_RETENTION_MS.get(conf)
    tombstones = [r for r in snapshot.tombstones if (r.deletion_timestamp or 0) > cutoff]
    transactions = list(snapshot.transactions.values())
    txn_retention = conf.get("delta.setTransactionRetentionDuration")
    if txn_retention:
        try:
            txn_cutoff = now - parse_interval_ms(txn_retention)
            transactions = [t for t in transactions if t.last_updated is None or t.last_updated > txn_cutoff]
        except ValueError:
            pass
    rows = checkpoint_rows(
        snapshot.protocol,
        snapshot.metadata,
        transactions,
        snapshot.domains.values(),
        snapshot.files,
        tombstones,
    )
    data = encode_checkpoint(rows)
    store.write(filenames.checkpoint_name(snapshot.version), data, overwrite=True)
    info = LastCheckpointInfo(
        version=snapshot.version,
        size=len(rows),
        size_in_bytes=len(data),
        num_of_add_files=len(snapshot.files),
    )
    current = read_last_checkpoint(store)
    # Never move the hint backwards (e.g. when checkpointing an older snapshot explicitly).
    if current is None or current.version <= snapshot.version:
        payload = {
            "version": info.version,
            "size": info.size,
            "sizeInBytes": info.size_in_bytes,
            "numOfAddFiles": info.num_of_add_files,
        }
        store.write(
            filenames.LAST_CHECKPOINT, json.dumps(payload, separators=(",", ":")).encode(), overwrite=True
        )
    return info
