"""Delta log actions (PROTOCOL.md "Actions") as frozen dataclasses.

Each action keeps the raw JSON object it was read from (``raw``), so fields this library does not
model survive a read-modify-write (the protocol requires writers not to drop unknown fields).
Optional fields that are ``None`` are omitted on write, as delta-spark does.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]


def _drop_none(d: JsonDict) -> JsonDict:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """Where a file's deletion vector lives and how many rows it deletes."""

    storage_type: str  # "u" (uuid-relative file), "i" (inline), "p" (absolute path)
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None

    @property
    def unique_id(self) -> str:
        """``storageType + pathOrInlineDv [+ "@" + offset]``: the file-identity key part."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    @classmethod
    def from_json(cls, d: JsonDict) -> DeletionVectorDescriptor:
        """Build from the JSON object of ``add.deletionVector``."""
        return cls(
            storage_type=d["storageType"],
            path_or_inline_dv=d["pathOrInlineDv"],
            size_in_bytes=int(d["sizeInBytes"]),
            cardinality=int(d["cardinality"]),
            offset=None if d.get("offset") is None else int(d["offset"]),
            max_row_index=None if d.get("maxRowIndex") is None else int(d["maxRowIndex"]),
        )

    def to_json(self) -> JsonDict:
        """The JSON object for the log."""
        return _drop_none(
            {
                "storageType": self.storage_type,
                "pathOrInlineDv": self.path_or_inline_dv,
                "offset": self.offset,
                "sizeInBytes": self.size_in_bytes,
                "cardinality": self.cardinality,
                "maxRowIndex": self.max_row_index,
            }
        )


@dataclass(frozen=True)
class Protocol:
    """Reader/writer versions and table features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "protocol"

    @classmethod
    def from_json(cls, d: JsonDict) -> Protocol:
        """Build from the JSON object under ``protocol``."""
        rf = d.get("readerFeatures")
        wf = d.get("writerFeatures")
        return cls(
            min_reader_version=int(d["minReaderVersion"]),
            min_writer_version=int(d["minWriterVersion"]),
            reader_features=None if rf is None else tuple(rf),
            writer_features=None if wf is None else tuple(wf),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``protocol``."""
        out = dict(self.raw)
        out.update({"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version})
        for key, value in (
            ("readerFeatures", self.reader_features),
            ("writerFeatures", self.writer_features),
        ):
            if value is None:
                out.pop(key, None)
            else:
                out[key] = list(value)
        return out


EMPTY_SCHEMA_STRING = '{"type":"struct","fields":[]}'


@dataclass(frozen=True)
class Metadata:
    """Table identity, schema, partitioning and properties. Replaced whole by each metaData action."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "metaData"

    @property
    def schema(self) -> JsonDict:
        """The table schema as Spark StructType JSON."""
        return json.loads(self.schema_string)  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls, d: JsonDict) -> Metadata:
        """Build from the JSON object under ``metaData``."""
        fmt = d.get("format") or {}
        return cls(
            id=d["id"],
            # Delta reads a metaData without a schema as an empty one (old or hand-written logs).
            schema_string=d.get("schemaString") or EMPTY_SCHEMA_STRING,
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration={k: str(v) for k, v in (d.get("configuration") or {}).items()},
            name=d.get("name"),
            description=d.get("description"),
            format_provider=fmt.get("provider", "parquet"),
            format_options=dict(fmt.get("options") or {}),
            created_time=d.get("createdTime"),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``metaData`` (always the full object, as the protocol requires)."""
        out = dict(self.raw)
        out.update(
            {
                "id": self.id,
                "name": self.name,
                "description": self.description,
                "format": {"provider": self.format_provider, "options": dict(self.format_options)},
                "schemaString": self.schema_string,
                "partitionColumns": list(self.partition_columns),
                "configuration": dict(self.configuration),
                "createdTime": self.created_time,
            }
        )
        return _drop_none(out)


# Writers put ``numRecords`` first (Delta, delta-rs, deltamerge): read it without parsing the
# statistics of every column, which for a merge over thousands of files was most of the cost.
_LEADING_COUNT = re.compile(r'\{\s*"numRecords"\s*:\s*(\d+)\s*[,}]')


def _stats_num_records(stats: str | None) -> int | None:
    if not stats:
        return None
    m = _LEADING_COUNT.match(stats)
    if m is not None and stats.count('"numRecords"') == 1:  # once: no duplicate key to win instead
        return int(m.group(1))
    n = json.loads(stats).get("numRecords")
    return None if n is None else int(n)


def _logical_records(n: int | None, dv: DeletionVectorDescriptor | None) -> int | None:
    return None if n is None else n - (dv.cardinality if dv is not None else 0)


@dataclass(frozen=True)
class AddFile:
    """A data file that is part of the table (PROTOCOL.md "Add File and Remove File")."""

    path: str  # RFC 2396 URI-encoded, relative to the table root (or absolute)
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "add"

    @property
    def key(self) -> tuple[str, str | None]:
        """Logical file identity: (path, DV unique id)."""
        return (self.path, None if self.deletion_vector is None else self.deletion_vector.unique_id)

    @functools.cached_property
    def num_records(self) -> int | None:
        """``stats.numRecords`` (physical rows), when stats exist (parsed once: a merge reads it
        several times per candidate file)."""
        return _stats_num_records(self.stats)

    @property
    def num_logical_records(self) -> int | None:
        """Rows a reader sees (Delta's ``numLogicalRecords``): physical rows minus the deletion vector's."""
        return _logical_records(self.num_records, self.deletion_vector)

    @classmethod
    def from_json(cls, d: JsonDict) -> AddFile:
        """Build from the JSON object under ``add``."""
        dv = d.get("deletionVector")
        return cls(
            path=d["path"],
            partition_values=dict(d.get("partitionValues") or {}),
            size=int(d.get("size") or 0),
            modification_time=int(d.get("modificationTime") or 0),
            data_change=bool(d.get("dataChange", True)),
            stats=d.get("stats"),
            tags=d.get("tags"),
            deletion_vector=None if not dv else DeletionVectorDescriptor.from_json(dv),
            base_row_id=d.get("baseRowId"),
            default_row_commit_version=d.get("defaultRowCommitVersion"),
            clustering_provider=d.get("clusteringProvider"),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``add``."""
        out = dict(self.raw)
        out.update(
            {
                "path": self.path,
                "partitionValues": dict(self.partition_values),
                "size": self.size,
                "modificationTime": self.modification_time,
                "dataChange": self.data_change,
                "stats": self.stats,
                "tags": self.tags,
                "deletionVector": None if self.deletion_vector is None else self.deletion_vector.to_json(),
                "baseRowId": self.base_row_id,
                "defaultRowCommitVersion": self.default_row_commit_version,
                "clusteringProvider": self.clustering_provider,
            }
        )
        return _drop_none(out)

    def remove(self, timestamp_ms: int, data_change: bool = True) -> RemoveFile:
        """The tombstone that cancels exactly this logical file (same path string, same DV)."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=timestamp_ms,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            stats=self.stats,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


@dataclass(frozen=True)
class RemoveFile:
    """A tombstone for a logical file."""

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "remove"

    @property
    def key(self) -> tuple[str, str | None]:
        """Logical file identity: (path, DV unique id)."""
        return (self.path, None if self.deletion_vector is None else self.deletion_vector.unique_id)

    @property
    def num_logical_records(self) -> int | None:
        """The removed file's rows a reader saw (Delta's ``numLogicalRecords``), when stats exist."""
        return _logical_records(_stats_num_records(self.stats), self.deletion_vector)

    @classmethod
    def from_json(cls, d: JsonDict) -> RemoveFile:
        """Build from the JSON object under ``remove``."""
        dv = d.get("deletionVector")
        return cls(
            path=d["path"],
            deletion_timestamp=d.get("deletionTimestamp"),
            data_change=bool(d.get("dataChange", True)),
            extended_file_metadata=d.get("extendedFileMetadata"),
            partition_values=d.get("partitionValues"),
            size=d.get("size"),
            stats=d.get("stats"),
            tags=d.get("tags"),
            deletion_vector=None if not dv else DeletionVectorDescriptor.from_json(dv),
            base_row_id=d.get("baseRowId"),
            default_row_commit_version=d.get("defaultRowCommitVersion"),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``remove``."""
        out = dict(self.raw)
        out.update(
            {
                "path": self.path,
                "deletionTimestamp": self.deletion_timestamp,
                "dataChange": self.data_change,
                "extendedFileMetadata": self.extended_file_metadata,
                "partitionValues": self.partition_values,
                "size": self.size,
                "stats": self.stats,
                "tags": self.tags,
                "deletionVector": None if self.deletion_vector is None else self.deletion_vector.to_json(),
                "baseRowId": self.base_row_id,
                "defaultRowCommitVersion": self.default_row_commit_version,
            }
        )
        return _drop_none(out)


@dataclass(frozen=True)
class AddCDCFile:
    """A change-data file under ``_change_data/`` (always ``dataChange=false``)."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str] | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "cdc"

    @classmethod
    def from_json(cls, d: JsonDict) -> AddCDCFile:
        """Build from the JSON object under ``cdc``."""
        return cls(
            path=d["path"],
            partition_values=dict(d.get("partitionValues") or {}),
            size=int(d.get("size") or 0),
            data_change=bool(d.get("dataChange", False)),
            tags=d.get("tags"),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``cdc``."""
        out = dict(self.raw)
        out.update(
            {
                "path": self.path,
                "partitionValues": dict(self.partition_values),
                "size": self.size,
                "dataChange": self.data_change,
                "tags": self.tags,
            }
        )
        return _drop_none(out)


@dataclass(frozen=True)
class SetTransaction:
    """Idempotent-write marker: the last version an application committed."""

    app_id: str
    version: int
    last_updated: int | None = None
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "txn"

    @classmethod
    def from_json(cls, d: JsonDict) -> SetTransaction:
        """Build from the JSON object under ``txn``."""
        return cls(app_id=d["appId"], version=int(d["version"]), last_updated=d.get("lastUpdated"), raw=d)

    def to_json(self) -> JsonDict:
        """The JSON object under ``txn``."""
        out = dict(self.raw)
        out.update({"appId": self.app_id, "version": self.version, "lastUpdated": self.last_updated})
        return _drop_none(out)


@dataclass(frozen=True)
class DomainMetadata:
    """Named configuration domain; carried through, never interpreted unless implemented."""

    domain: str
    configuration: str
    removed: bool = False
    raw: JsonDict = field(default_factory=dict, compare=False, repr=False)

    KEY = "domainMetadata"

    @classmethod
    def from_json(cls, d: JsonDict) -> DomainMetadata:
        """Build from the JSON object under ``domainMetadata``."""
        return cls(
            domain=d["domain"],
            configuration=d.get("configuration", ""),
            removed=bool(d.get("removed")),
            raw=d,
        )

    def to_json(self) -> JsonDict:
        """The JSON object under ``domainMetadata``."""
        out = dict(self.raw)
        out.update({"domain": self.domain, "configuration": self.configuration, "removed": self.removed})
        return out


@dataclass(frozen=True)
class CommitInfo:
    """Provenance of a commit. Free-form: everything is kept in ``raw``."""

    raw: JsonDict

    KEY = "commitInfo"

    @property
    def timestamp(self) -> int | None:
        """``commitInfo.timestamp`` in ms."""
        ts = self.raw.get("timestamp")
        return None if ts is None else int(ts)

    @property
    def in_commit_timestamp(self) -> int | None:
        """``commitInfo.inCommitTimestamp`` (in-commit timestamps feature)."""
        ts = self.raw.get("inCommitTimestamp")
        return None if ts is None else int(ts)

    @property
    def operation(self) -> str | None:
        """The operation name, e.g. ``MERGE``."""
        return self.raw.get("operation")

    @property
    def is_blind_append(self) -> bool:
        """True only when the writer said so (a missing flag means not blind)."""
        return bool(self.raw.get("isBlindAppend", False))

    @classmethod
    def from_json(cls, d: JsonDict) -> CommitInfo:
        """Build from the JSON object under ``commitInfo``."""
        return cls(raw=d)

    def to_json(self) -> JsonDict:
        """The JSON object under ``commitInfo``."""
        return dict(self.raw)


@dataclass(frozen=True)
class UnknownAction:
    """An action this library does not know; ignored on read, never written back."""

    key: str
    raw: JsonDict

    def to_json(self) -> JsonDict:
        """The raw JSON object."""
        return dict(self.raw)


Action = (
    Protocol
    | Metadata
    | AddFile
    | RemoveFile
    | AddCDCFile
    | SetTransaction
    | DomainMetadata
    | CommitInfo
    | UnknownAction
)

_BY_KEY: dict[str, Any] = {
    cls.KEY: cls
    for cls in (
        Protocol,
        Metadata,
        AddFile,
        RemoveFile,
        AddCDCFile,
        SetTransaction,
        DomainMetadata,
        CommitInfo,
    )
}


def action_from_json(obj: JsonDict) -> Action:
    """Parse one log line's object (``{"add": {...}}``) into an action."""
    if len(obj) != 1:
        # The protocol says one action per line; tolerate extra keys by taking the first known one.
        for key in obj:
            if key in _BY_KEY:
                return _BY_KEY[key].from_json(obj[key])  # type: ignore[no-any-return]
        key = next(iter(obj), "")
        return UnknownAction(key=key, raw=obj.get(key) or {})
    ((key, value),) = obj.items()
    cls = _BY_KEY.get(key)
    if cls is None:
        return UnknownAction(key=key, raw=value if isinstance(value, dict) else {})
    return cls.from_json(value)  # type: ignore[no-any-return]


def action_to_json(action: Action) -> JsonDict:
    """Wrap an action as a log line object (``{"add": {...}}``)."""
    key = action.key if isinstance(action, UnknownAction) else action.KEY
    return {key: action.to_json()}


def parse_commit(data: bytes | str) -> list[Action]:
    """Parse a whole commit file (newline-delimited JSON). Raises ``ValueError`` on a broken line."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    actions: list[Action] = []
    for line in text.splitlines():
        if line.strip():
            actions.append(action_from_json(json.loads(line)))
    return actions


def serialize_commit(actions: list[Action]) -> bytes:
    """Serialize actions as a commit file (commitInfo first, as delta-spark does)."""
    ordered = [a for a in actions if isinstance(a, CommitInfo)] + [
        a for a in actions if not isinstance(a, CommitInfo)
    ]
    lines = [json.dumps(action_to_json(a), separators=(",", ":"), ensure_ascii=False) for a in ordered]
    return ("\n".join(lines) + "\n").encode("utf-8")
