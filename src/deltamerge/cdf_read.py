"""Change data feed reads: ``deltamerge.read_changes`` (Delta's ``readChangeFeed`` / ``table_changes``).

Per commit version ``v`` in the (inclusive) range, as delta-spark's ``CDCReader.changesToDF``:

* the commit has ``cdc`` actions: exactly those files describe its changes. They hold the data columns
  minus partition columns plus ``_change_type``; partition values come from the ``cdc`` action.
* otherwise its ``add`` (``dataChange=true``) rows are ``insert``s and its ``remove`` rows ``delete``s,
  each honouring the deletion vector the action carries. A ``remove`` and an ``add`` of the same path
  are a DV-only change: rows in the new DV but not the old are ``delete``d, rows in the old DV but not
  the new are re-``insert``ed (``generateFileActionsWithInlineDv``).
* a MERGE whose metrics report no inserted, updated or deleted row contributes nothing
  (``shouldSkipFileActionsInCommit``).

``_commit_version`` is ``v``; ``_commit_timestamp`` is ``commitInfo.inCommitTimestamp`` when present,
else the commit's (monotonized) file modification time, the timestamps ``DeltaLog.commit_infos``
reports. Rows come out in the schema of the ending version.

Everything on the data path is a Spark scan; the driver handles file lists and DV bitmaps only.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from zoneinfo import ZoneInfo

from pyroaring import BitMap64
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from deltamerge.config import TableProperties
from deltamerge.deletion_vectors import read_dv
from deltamerge.errors import (
    ChangeDataNotRecordedError,
    InvalidArgumentError,
    TableNotFoundError,
    VersionNotFoundError,
)
from deltamerge.log import column_mapping, filenames
from deltamerge.log.actions import AddCDCFile, AddFile, CommitInfo, Metadata, RemoveFile
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.dv_filter import filter_row_positions
from deltamerge.spark.scan import (
    FILE_COL,
    ROW_INDEX_COL,
    absolute_file_path,
    scan,
    spark_file_uri,
)
from deltamerge.spark.session import internal_plan, session_time_zone
from deltamerge.spark.types import quote_name, to_spark_schema

__all__ = ["CDC_COLUMNS", "CDC_COMMIT_TIMESTAMP", "CDC_COMMIT_VERSION", "CDC_TYPE", "read_changes"]

CDC_TYPE = "_change_type"
CDC_COMMIT_VERSION = "_commit_version"
CDC_COMMIT_TIMESTAMP = "_commit_timestamp"
CDC_COLUMNS = (CDC_TYPE, CDC_COMMIT_VERSION, CDC_COMMIT_TIMESTAMP)

_LK_TYPE = "__dm_cdc_type"
_LK_VERSION = "__dm_cdc_version"
_LK_TS = "__dm_cdc_ts"

Timestamp = str | int | float | dt.datetime | dt.date


@dataclass(frozen=True)
class _Piece:
    """One file of one version to read: ``cdc`` file, ``data`` file (DV applied) or chosen ``positions``."""

    kind: str
    file: AddFile
    version: int
    timestamp_ms: int
    change_type: str | None = None  # None for cdc files: the type is a column of the file
    positions: BitMap64 | None = None


# --- range resolution ------------------------------------------------------------------------------


def _to_ms(value: Timestamp, tz: str) -> int:
    """A timestamp argument as epoch ms; zone-less values are in the session time zone (as Delta)."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"Invalid timestamp {value!r}.")
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgumentError(
                f"Invalid timestamp {value!r}: use an ISO-8601 timestamp such as '2024-01-31 12:00:00'.",
                error_class="DELTA_INVALID_TIMESTAMP_FORMAT",
            ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=ZoneInfo(tz))
    return int(parsed.timestamp() * 1000)


def _fmt(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _resolve_range(
    latest: int,
    timestamps: dict[int, int],
    starting_version: int | None,
    ending_version: int | None,
    start_ts: int | None,
    end_ts: int | None,
) -> tuple[int, int] | None:
    """Inclusive ``(start, end)`` versions, or None when a timestamp range falls between two commits."""
    ordered = sorted(timestamps.items())
    if start_ts is not None:
        start = next((v for v, ts in ordered if ts >= start_ts), None)
        if start is None:
            last_v, last_ts = ordered[-1]
            raise VersionNotFoundError(
                f"The provided timestamp ({_fmt(start_ts)}) is after the latest version available to this "
                f"table ({_fmt(last_ts)}, version {last_v}). Use a timestamp before or at {_fmt(last_ts)}.",
                error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
            )
    else:
        assert starting_version is not None
        start = starting_version
    if start < 0:
        raise InvalidArgumentError(f"Invalid starting version {start}: versions start at 0.")
    if start > latest:
        raise VersionNotFoundError(
            f"Provided Start version({start}) for reading change data is invalid. Start version cannot be "
            f"greater than the latest version of the table({latest}). Provide a version <= {latest}.",
            error_class="DELTA_CDC_START_VERSION_AFTER_LATEST",
            sql_state="22003",
        )
    if end_ts is not None:
        before = [v for v, ts in ordered if ts <= end_ts]
        end = before[-1] if before else ordered[0][0] - 1
    else:
        end = latest if ending_version is None else min(ending_version, latest)
    if start_ts is not None and end_ts is not None:
        if start_ts > end_ts:
            raise InvalidArgumentError(
                f"CDC range from start {start} to end {end} was invalid. End cannot be before start.",
                error_class="DELTA_INVALID_CDC_RANGE",
            )
        if end == start - 1:
            return None  # both timestamps fall between the same two commits
    if end < start:
        raise InvalidArgumentError(
            f"CDC range from start {start} to end {end} was invalid. End cannot be before start.",
            error_class="DELTA_INVALID_CDC_RANGE",
        )
    return start, end


def _cdf_enabled(metadata: Metadata) -> bool:
    try:
        return bool(TableProperties.ENABLE_CDF.get(metadata.configuration))
    except ValueError:
        return False


def _not_recorded(version: int, start: int, end: int) -> ChangeDataNotRecordedError:
    return ChangeDataNotRecordedError(
        f"Error getting change data for range [{start}, {end}] as change data was not recorded for version "
        f"[{version}]. If you've enabled change data feed on this table, use `DESCRIBE HISTORY` to see "
        "when it was first enabled. Otherwise, to start recording change data, use "
        "`ALTER TABLE table_name SET TBLPROPERTIES (delta.enableChangeDataFeed=true)`."
    )


# --- collecting the files of each version ----------------------------------------------------------


def _skip_noop_merge(info: CommitInfo | None) -> bool:
    # delta-spark's hotfix: a MERGE reporting 0 inserted, updated and deleted rows yields no changes.
    if info is None or info.operation != "MERGE":
        return False
    metrics = info.raw.get("operationMetrics") or {}
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return all(str(metrics.get(k)) == "0" for k in keys)


def _removed_as_add(r: RemoveFile) -> AddFile:
    return AddFile(
        path=r.path,
        partition_values=dict(r.partition_values or {}),
        size=r.size or 0,
        modification_time=0,
        data_change=True,
        deletion_vector=r.deletion_vector,
    )


def _version_pieces(root: str, version: int, ts: int, actions: Sequence[Any]) -> list[_Piece]:
    cdcs = [a for a in actions if isinstance(a, AddCDCFile)]
    if cdcs:
        return [
            _Piece("cdc", AddFile(c.path, dict(c.partition_values), c.size, 0, False), version, ts)
            for c in cdcs
        ]
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    if _skip_noop_merge(info):
        return []
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.data_change}
    removes = {r.path: r for r in actions if isinstance(r, RemoveFile) and r.data_change}
    pieces = [_Piece("data", a, version, ts, "insert") for p, a in adds.items() if p not in removes]
    pieces += [
        _Piece("data", _removed_as_add(r), version, ts, "delete") for p, r in removes.items() if p not in adds
    ]
    for path in [p for p in adds if p in removes]:
        add, rem = adds[path], removes[path]
        old = read_dv(root, rem.deletion_vector) if rem.deletion_vector else BitMap64()
        new = read_dv(root, add.deletion_vector) if add.deletion_vector else BitMap64()
        physical = replace(add, deletion_vector=None)
        deleted, readded = new - old, old - new
        if len(deleted):
            pieces.append(_Piece("positions", physical, version, ts, "delete", deleted))
        if len(readded):
            pieces.append(_Piece("positions", physical, version, ts, "insert", readded))
    return pieces


def _batches(root: str, pieces: list[_Piece]) -> list[list[tuple[str, _Piece]]]:
    """Split pieces into scans in which every file appears once (a path may change in several versions)."""
    batches: list[tuple[set[str], list[tuple[str, _Piece]]]] = []
    for p in pieces:
        uri = spark_file_uri(absolute_file_path(root, p.file.path))
        for seen, items in batches:
            if uri not in seen:
                seen.add(uri)
                items.append((uri, p))
                break
        else:
            batches.append(({uri}, [(uri, p)]))
    return [items for _, items in batches]


# --- DataFrames ------------------------------------------------------------------------------------


def _lookup(spark: SparkSession, items: list[tuple[str, _Piece]]) -> DataFrame:
    schema = StructType(
        [
            StructField(FILE_COL, StringType(), False),
            StructField(_LK_TYPE, StringType(), True),
            StructField(_LK_VERSION, LongType(), False),
            StructField(_LK_TS, LongType(), False),
        ]
    )
    rows = [(uri, p.change_type, p.version, p.timestamp_ms) for uri, p in items]
    return spark.createDataFrame(rows, schema)


def _scan_batch(
    spark: SparkSession,
    root: str,
    schema_json: dict[str, Any],
    partition_columns: tuple[str, ...],
    kind: str,
    items: list[tuple[str, _Piece]],
    names: list[str],
) -> DataFrame:
    files = [p.file for _, p in items]
    if kind == "cdc":
        cdc_schema = dict(schema_json)
        cdc_schema["fields"] = [
            *schema_json["fields"],
            {"name": CDC_TYPE, "type": "string", "nullable": True, "metadata": {}},
        ]
        df = scan(spark, root, cdc_schema, partition_columns, files, with_file=True)
        change_type = F.col(CDC_TYPE)
    elif kind == "data":
        df = scan(spark, root, schema_json, partition_columns, files, with_file=True)
        change_type = F.col(_LK_TYPE)
    else:
        df = scan(
            spark,
            root,
            schema_json,
            partition_columns,
            files,
            with_file=True,
            with_row_index=True,
            apply_deletion_vectors=False,
        )
        positions = {uri: p.positions for uri, p in items if p.positions is not None}
        df = filter_row_positions(df, positions, keep=True, file_col=FILE_COL, row_col=ROW_INDEX_COL)
        change_type = F.col(_LK_TYPE)
    keys = {(p.change_type, p.version, p.timestamp_ms) for _, p in items}
    if len(keys) == 1:
        # One version (and type) in this scan: literals instead of a lookup join.
        ((ctype, version, ts),) = keys
        df = df.select(
            "*",
            F.lit(ctype).cast("string").alias(_LK_TYPE),
            F.lit(version).cast("long").alias(_LK_VERSION),
            F.lit(ts).cast("long").alias(_LK_TS),
        )
    else:
        df = df.join(F.broadcast(_lookup(spark, items)), on=FILE_COL, how="inner")
    return df.select(
        *[F.col(quote_name(n)) for n in names],
        change_type.alias(CDC_TYPE),
        F.col(_LK_VERSION).alias(CDC_COMMIT_VERSION),
        F.timestamp_millis(F.col(_LK_TS)).alias(CDC_COMMIT_TIMESTAMP),
    )


_UNSAFE_READ = "spark.databricks.delta.changeDataFeed.unsafeBatchReadOnIncompatibleSchemaChanges.enabled"


@dataclass(frozen=True)
class _SchemaChangeGuard:
    """Delta's ``checkBatchCdfReadSchemaIncompatibility`` for column-mapped tables: the change data
    of a range that spans a RENAME or DROP COLUMN cannot be read in the ending version's schema."""

    spark: SparkSession
    read: Metadata
    range: tuple[int, int]

    def check(self, metadata: Metadata, version: int) -> None:
        if not column_mapping.is_mapped(self.read.schema):
            return
        if column_mapping.renamed_or_dropped(metadata.schema, self.read.schema) is None:
            return
        if str(self.spark.conf.get(_UNSAFE_READ, "false")).strip().lower() == "true":
            return
        start, end = self.range
        raise InvalidArgumentError(
            f"Retrieving table changes between version {start} and {end} failed because of an "
            f"incompatible schema change. Your read schema is that of version {end}, but we found an "
            f"incompatible schema change (a column renamed or dropped) at version {version}. If possible, "
            f"query the table changes separately from version "
            f"{start} to {version} - 1, and from version {version} to {end}.",
            error_class="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE",
            sql_state="0AKDC",
        )


@internal_plan
def read_changes(
    spark: SparkSession,
    path: str,
    starting_version: int | None = None,
    ending_version: int | None = None,
    *,
    starting_timestamp: Timestamp | None = None,
    ending_timestamp: Timestamp | None = None,
) -> DataFrame:
    """The change data feed of the table at ``path`` between two versions (both inclusive).

    Give the start as ``starting_version`` or ``starting_timestamp`` and optionally the end as
    ``ending_version`` or ``ending_timestamp`` (default: the latest version; a later version is
    clamped to it). A timestamp start is the first commit at or after it; a timestamp end the last
    commit at or before it. Timestamps are epoch milliseconds, ``datetime``/``date`` objects or
    ISO-8601 strings; zone-less values are read in the session time zone.

    Returns the table columns (schema of the ending version) plus ``_change_type`` (``insert``,
    ``delete``, ``update_preimage``, ``update_postimage``), ``_commit_version`` (long) and
    ``_commit_timestamp`` (timestamp).

    Raises ``ChangeDataNotRecordedError`` (``DELTA_MISSING_CHANGE_DATA``) when change data feed was
    not enabled at the starting version or was disabled within the range, and
    ``VersionNotFoundError`` when the start is after the latest version.
    """
    if starting_version is None and starting_timestamp is None:
        raise InvalidArgumentError(
            "No startingVersion or startingTimestamp provided for CDC read.",
            error_class="DELTA_NO_START_FOR_CDC_READ",
        )
    if starting_version is not None and starting_timestamp is not None:
        raise InvalidArgumentError(
            "Multiple starting arguments provided for CDC read. Please provide one of either "
            "starting_timestamp or starting_version.",
            error_class="DELTA_MULTIPLE_CDC_BOUNDARY",
        )
    if ending_version is not None and ending_timestamp is not None:
        raise InvalidArgumentError(
            "Multiple ending arguments provided for CDC read. Please provide one of either "
            "ending_timestamp or ending_version.",
            error_class="DELTA_MULTIPLE_CDC_BOUNDARY",
        )
    log = DeltaLog.for_table(path)  # normalizes file: URIs and relative paths
    root = log.table_root
    if not log.exists():
        raise TableNotFoundError(
            f"`{root}` is not a Delta table. Create it with deltamerge.write(...) first."
        )
    latest = log.update()
    versions, monotonized = log._commit_timestamps()
    timestamps = dict(zip(versions, monotonized, strict=True))
    tz = session_time_zone(spark)
    start_ts = None if starting_timestamp is None else _to_ms(starting_timestamp, tz)
    end_ts = None if ending_timestamp is None else _to_ms(ending_timestamp, tz)
    resolved = _resolve_range(latest.version, timestamps, starting_version, ending_version, start_ts, end_ts)

    read_snap = latest if resolved is None or resolved[1] == latest.version else log.snapshot(resolved[1])
    schema_json = read_snap.metadata.schema
    partition_columns = tuple(read_snap.metadata.partition_columns)
    table_schema = to_spark_schema(schema_json)
    names = [f.name for f in table_schema.fields]
    clash = [n for n in names if n.lower() in CDC_COLUMNS]
    if clash:
        raise InvalidArgumentError(
            f"Cannot read the change data feed: the table has columns {clash} whose names the change data "
            "feed reserves. Rename them first.",
            error_class="DELTA_CDC_COLUMNS_CONFLICT",
        )
    out_schema = StructType(
        [
            *table_schema.fields,
            StructField(CDC_TYPE, StringType(), True),
            StructField(CDC_COMMIT_VERSION, LongType(), True),
            StructField(CDC_COMMIT_TIMESTAMP, TimestampType(), True),
        ]
    )
    if resolved is None:
        return spark.createDataFrame([], out_schema)
    start, end = resolved
    start_metadata = log.snapshot(start).metadata
    if not _cdf_enabled(start_metadata):
        raise _not_recorded(start, start, end)

    guard = _SchemaChangeGuard(spark, read_snap.metadata, resolved)
    guard.check(start_metadata, start)
    pieces: list[_Piece] = []
    for v in range(start, end + 1):
        actions = log.read_commit(v)
        if any(isinstance(a, Metadata) and not _cdf_enabled(a) for a in actions):
            raise _not_recorded(v, start, end)
        for a in actions:
            if isinstance(a, Metadata):
                guard.check(a, v)
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        ts = info.in_commit_timestamp if info is not None else None
        if ts is None:
            ts = timestamps[v] if v in timestamps else log.store.mtime(filenames.commit_name(v))
        pieces += _version_pieces(root, v, ts, actions)

    dfs: list[DataFrame] = []
    for kind in ("cdc", "data", "positions"):
        for items in _batches(root, [p for p in pieces if p.kind == kind]):
            dfs.append(_scan_batch(spark, root, schema_json, partition_columns, kind, items, names))
    if not dfs:
        return spark.createDataFrame([], out_schema)
    return functools.reduce(DataFrame.union, dfs)
