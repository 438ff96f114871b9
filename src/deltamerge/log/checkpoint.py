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

import datetime as dt
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

from deltamerge.config import TableProperties, parse_interval_ms
from deltamerge.errors import LogCorruptedError
from deltamerge.log import filenames
from deltamerge.log.actions import (
    Action,
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    JsonDict,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    UnknownAction,
    action_from_json,
)
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
_MAP_FIELDS = frozenset({"partitionValues", "tags", "configuration", "options"})

# --- reading -------------------------------------------------------------------------------------------


def _stats_json(value: Any) -> str | None:
    """Render a ``stats_parsed`` value as the JSON text ``stats`` would have held."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '"NaN"'
        if math.isinf(value):
            return '"Infinity"' if value > 0 else '"-Infinity"'
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")  # decimals are JSON numbers; never round-trip through float
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        if value.tzinfo is not None:
            text = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + (
                f"{value.microsecond // 1000:03d}Z"
            )
        return json.dumps(text)
    if isinstance(value, dt.date):
        return json.dumps(value.isoformat())
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = [(k, _stats_json(v)) for k, v in value.items()]
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{t}" for k, t in items if t is not None)
            + "}"
        )
    return None  # binary and other non-JSON values carry no usable stats


def _clean(value: Any, key: str | None = None) -> Any:
    """Arrow ``to_pylist`` output back to the JSON shape of the action (maps as dicts, no nulls)."""
    if isinstance(value, dict):
        out: JsonDict = {}
        for k, v in value.items():
            if v is None or k.endswith("_parsed"):
                continue
            # Only containers need converting; skipping the call for scalars keeps big checkpoints fast.
            out[k] = _clean(v, k) if isinstance(v, (dict, list)) else v
        if key in ("add", "remove") and "stats" not in out and isinstance(value.get("stats_parsed"), dict):
            stats = _stats_json(value["stats_parsed"])
            if stats:
                out["stats"] = stats
        return out
    if isinstance(value, list):
        if key in _MAP_FIELDS or (value and all(isinstance(x, tuple) and len(x) == 2 for x in value)):
            return dict(value)
        return [_clean(v) for v in value]
    return value


def _row_action(c: str, row: Any) -> Action | None:
    body = _clean(row, c)
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


def _rows_to_actions_slow(table: pa.Table) -> list[Action]:
    columns = [c for c in _ACTION_COLUMNS if c in table.column_names]
    values = {c: table.column(c).to_pylist() for c in columns}
    actions: list[Action] = []
    for i in range(table.num_rows):
        for c in columns:
            row = values[c][i]
            if row is None:
                continue
            action = _row_action(c, row)
            if action is not None:
                actions.append(action)
    return actions


# Column-wise reading of file actions. A checkpoint of a big table is almost all ``add`` rows; turning
# each row into a Python dict, cleaning it and parsing it again (the generic path) costs ~100 µs per
# file. Here every field of the ``add``/``remove`` struct becomes one Python list (Arrow does that in
# C), and the actions are built straight from those lists. The result is identical to the generic
# path; structs with fields this library does not model take the generic path (their ``raw`` must
# keep the unknown fields).
_ADD_FIELDS = (
    "path", "partitionValues", "size", "modificationTime", "dataChange", "tags", "deletionVector",
    "baseRowId", "defaultRowCommitVersion", "clusteringProvider", "stats",
)
_REMOVE_FIELDS = (
    "path", "deletionTimestamp", "dataChange", "extendedFileMetadata", "partitionValues", "size", "stats",
    "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion",
)


def _field_lists(arr: pa.StructArray, names: Sequence[str], n: int) -> dict[str, list[Any]]:
    present = {f.name: i for i, f in enumerate(arr.type)}
    children = arr.flatten()
    out: dict[str, list[Any]] = {}
    for name in names:
        i = present.get(name)
        if i is None:
            out[name] = [None] * n
            continue
        child = children[i]
        out[name] = [None] * n if child.null_count == n else child.to_pylist()
    return out


def _maps(values: list[Any], none_as_empty: bool) -> list[Any]:
    return [({} if none_as_empty else None) if v is None else dict(v) for v in values]


def _dvs(values: list[Any]) -> list[DeletionVectorDescriptor | None]:
    out: list[DeletionVectorDescriptor | None] = []
    for v in values:
        body = None if v is None else _clean(v)
        out.append(DeletionVectorDescriptor.from_json(body) if body else None)
    return out


def _stats_from_parsed(arr: pa.StructArray, stats: list[Any], n: int) -> None:
    names = [f.name for f in arr.type]
    if "stats_parsed" not in names or all(s is not None for s in stats):
        return
    parsed = arr.flatten()[names.index("stats_parsed")]
    for i in range(n):
        if stats[i] is None:
            value = parsed[i].as_py()
            if isinstance(value, dict):
                stats[i] = _stats_json(value) or None


def _file_actions(column: pa.ChunkedArray, kind: str) -> tuple[list[int], list[Action]] | None:
    """``(rows, actions)`` for the ``add``/``remove`` rows, or ``None`` to use the generic path."""
    allowed = _ADD_FIELDS if kind == "add" else _REMOVE_FIELDS
    if not pa.types.is_struct(column.type):
        return None
    names = [f.name for f in column.type]
    if "path" not in names or not all(nm in allowed or nm.endswith("_parsed") for nm in names):
        return None
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(arr, pa.ChunkedArray):  # combine_chunks of a struct column may return a ChunkedArray
        arr = pa.concat_arrays(arr.chunks) if arr.num_chunks else pa.array([], column.type)
    valid = pa.compute.and_(arr.is_valid(), arr.field("path").is_valid())
    rows = pa.compute.indices_nonzero(valid)
    n = len(rows)
    if n == 0:
        return [], []
    sub = arr.take(rows)
    f = _field_lists(sub, allowed, n)
    paths = f["path"]
    keep: Sequence[int] = range(n) if all(paths) else [i for i in range(n) if paths[i]]  # "" = an all-null struct
    _stats_from_parsed(sub, f["stats"], n)
    new = object.__new__
    row_ids = rows.to_pylist()
    out: list[Action] = []
    if kind == "add":
        pvs = _maps(f["partitionValues"], True)
        tags = _maps(f["tags"], False)
        dvs = _dvs(f["deletionVector"])
        size, mtime, change = f["size"], f["modificationTime"], f["dataChange"]
        stats, brid, drcv, clus = f["stats"], f["baseRowId"], f["defaultRowCommitVersion"], f["clusteringProvider"]
        for i in keep:
            a = new(AddFile)
            a.__dict__.update(
                path=paths[i],
                partition_values=pvs[i],
                size=int(size[i] or 0),
                modification_time=int(mtime[i] or 0),
                data_change=True if change[i] is None else bool(change[i]),
                stats=stats[i],
                tags=tags[i],
                deletion_vector=dvs[i],
                base_row_id=brid[i],
                default_row_commit_version=drcv[i],
                clustering_provider=clus[i],
                raw={},
            )
            out.append(a)
    else:
        pvs = _maps(f["partitionValues"], False)
        tags = _maps(f["tags"], False)
        dvs = _dvs(f["deletionVector"])
        for i in keep:
            r = new(RemoveFile)
            r.__dict__.update(
                path=paths[i],
                deletion_timestamp=f["deletionTimestamp"][i],
                data_change=True if f["dataChange"][i] is None else bool(f["dataChange"][i]),
                extended_file_metadata=f["extendedFileMetadata"][i],
                partition_values=pvs[i],
                size=f["size"][i],
                stats=f["stats"][i],
                tags=tags[i],
                deletion_vector=dvs[i],
                base_row_id=f["baseRowId"][i],
                default_row_commit_version=f["defaultRowCommitVersion"][i],
                raw={},
            )
            out.append(r)
    return [row_ids[i] for i in keep] if len(keep) != n else row_ids, out


def _rows_to_actions(table: pa.Table) -> list[Action]:
    columns = [c for c in _ACTION_COLUMNS if c in table.column_names]
    fast: dict[str, tuple[list[int], list[Action]]] = {}
    for c in ("add", "remove"):
        if c in columns:
            got = _file_actions(table.column(c), c)
            if got is not None:
                fast[c] = got
    if not fast:
        return _rows_to_actions_slow(table)
    others: list[tuple[int, Action]] = []
    for c in columns:
        if c in fast:
            continue
        col = table.column(c)
        if col.null_count == len(col):
            continue
        valid = pa.compute.indices_nonzero(col.is_valid()).to_pylist()
        values = col.take(valid).to_pylist()
        for row, value in zip(valid, values, strict=True):
            action = _row_action(c, value)
            if action is not None:
                others.append((row, action))
    adds = fast.get("add", ([], []))
    removes = fast.get("remove", ([], []))
    if not removes[1] and not any(type(a) is RemoveFile for _, a in others):
        # Only adds among the file actions: their order relative to protocol, metadata, txn and
        # domain rows does not change the replayed state.
        return [a for _, a in others] + adds[1]
    # Keep the file's row order across kinds: two slots per row, so a malformed row with two set
    # columns keeps both, in column order.
    placed: list[Action | None] = [None] * (table.num_rows * 2)
    for row, action in others:
        placed[2 * row] = action
    for (rows, actions), slot in ((adds, 0), (removes, 1)):
        for row, action in zip(rows, actions, strict=True):
            i = 2 * row + slot
            if placed[i] is not None:  # an add in a row that also set another column
                i = 2 * row + 1
            placed[i] = action
    return [a for a in placed if a is not None]


def _read_parquet_actions(store: LogStore, name: str) -> list[Action]:
    data = store.read(name)
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        present = [c for c in _ACTION_COLUMNS if c in pf.schema_arrow.names]
        table = pf.read(columns=present)
        return _rows_to_actions(table)
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


def read_checkpoint_file(store: LogStore, name: str) -> list[Action]:
    """Actions of one checkpoint file, with V2 sidecar files expanded in place."""
    if name.endswith(".json"):
        actions = parse_commit_file(name, store.read(name))
    else:
        actions = _read_parquet_actions(store, name)
    if UnknownAction not in set(map(type, actions)):
        return actions  # no sidecar and nothing to drop
    out: list[Action] = []
    for action in actions:
        if isinstance(action, UnknownAction) and action.key == "sidecar":
            sidecar = _sidecar_name(action)
            try:
                out.extend(_read_parquet_actions(store, sidecar))
            except FileNotFoundError:
                raise LogCorruptedError(
                    f"The V2 checkpoint _delta_log/{name} refers to the sidecar _delta_log/{sidecar}, which "
                    "does not exist. Restore the sidecar, or delete the checkpoint so readers use the JSON "
                    "commits."
                ) from None
        elif not isinstance(action, UnknownAction):
            out.append(action)
    return out


def read_checkpoint(store: LogStore, ref: CheckpointRef) -> list[Action]:
    """All actions of a (possibly multi-part) checkpoint."""
    actions: list[Action] = []
    for name in ref.names:
        try:
            actions.extend(read_checkpoint_file(store, name))
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
