"""Whole-table writes and reads: ``deltamerge.write`` and ``deltamerge.read``."""

from __future__ import annotations

import datetime as dt
import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from deltamerge import clustering_ddl
from deltamerge.column_defaults import CURRENT_DEFAULT, EXISTS_DEFAULT
from deltamerge.constraints import enforced_write
from deltamerge.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from deltamerge.generated import fill_missing
from deltamerge.identifiers import name_parts
from deltamerge.identity import explicit_insert_error, identity_columns, with_high_water_marks
from deltamerge.identity import extremes as identity_extremes
from deltamerge.identity import fill as fill_identity
from deltamerge.identity import observed as observed_identity
from deltamerge.identity import stored_names as identity_stored_names
from deltamerge.log.actions import Action, AddFile, DomainMetadata, Metadata
from deltamerge.log.column_mapping import is_mapped, physical_names
from deltamerge.log.data_types import reader_schema
from deltamerge.log.paths import table_root
from deltamerge.log.protocol import check_can_read, check_can_write
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.spark.scan import ROW_ID_COL, ROW_TRACKING_COLS, ROW_VERSION_COL, scan
from deltamerge.spark.session import (
    conf_getter,
    idempotent_skip,
    internal_plan,
    quick_replies,
    session_time_zone,
    table_property_defaults,
    user_properties,
)
from deltamerge.spark.types import (
    as_nullable,
    quote_name,
    same_shape,
    schema_string,
    to_delta_schema,
    to_spark_schema,
)
from deltamerge.spark.write import file_writer_options, optimized_write_bin_size, to_add_files, write_parquet
from deltamerge.txn.idempotency import data_change_false_error, rearranges_only, writer_option
from deltamerge.txn.operations import Operation
from deltamerge.txn.row_tracking import materialized_columns
from deltamerge.txn.transaction import OptimisticTransaction

_MODES = {
    "error": "ErrorIfExists",
    "errorifexists": "ErrorIfExists",
    "append": "Append",
    "overwrite": "Overwrite",
    "ignore": "Ignore",
}


def _check_names(schema: StructType, prefix: str = "") -> None:
    """Column names must be unique ignoring case, nested struct fields included (as delta-spark)."""
    from pyspark.sql.types import ArrayType, DataType, MapType

    seen: dict[str, str] = {}
    for f in schema.fields:
        if f.name.lower() in seen:
            raise SchemaMismatchError(
                f"Found duplicate column(s) in the data to save: {prefix}{f.name}. Rename one of them.",
                error_class="DELTA_DUPLICATE_COLUMNS_FOUND",
            )
        seen[f.name.lower()] = f.name
        pending: list[DataType] = [f.dataType]
        while pending:
            t = pending.pop()
            if isinstance(t, StructType):
                _check_names(t, f"{prefix}{f.name}.")
            elif isinstance(t, ArrayType):
                pending.append(t.elementType)
            elif isinstance(t, MapType):
                pending += [t.keyType, t.valueType]


def _cast_to(df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` with each column cast to the type of the same field of ``schema`` (nested fields made
    nullable). Columns whose type already matches are left alone: on a wide table every Column
    built is a round trip to the JVM."""
    if all(f.dataType == t.dataType for f, t in zip(df.schema.fields, schema.fields, strict=True)):
        return df
    return df.select(*[F.col(quote_name(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])


#: Delta's OVERWRITE_REQUIRED part of a metadata mismatch, added when the write overwrites.
OVERWRITE_REQUIRED = (
    " To overwrite your schema or change partitioning, write with overwrite_schema=True (Delta's "
    "overwriteSchema option); the schema can't be overwritten when using replaceWhere."
)


def partitioning_mismatch(given: Sequence[str], table: Sequence[str], overwrite: bool) -> SchemaMismatchError:
    """Delta's ``DELTA_METADATA_MISMATCH`` for a write partitioned other than the table."""
    return SchemaMismatchError(
        "A metadata mismatch was detected when writing to the Delta table. Partition columns do not "
        f"match the partition columns of the table. Given: [{', '.join(given)}] Table: "
        f"[{', '.join(table)}]." + (OVERWRITE_REQUIRED if overwrite else " Omit partition_by when appending.")
    )


def _align(
    df: DataFrame, table: StructType, *, merge_schema: bool, overwrite: bool = False
) -> tuple[DataFrame, StructType]:
    """Order and cast ``df`` to the table schema by name (missing columns become NULL)."""
    by_name = {f.name.lower(): f for f in df.schema.fields}
    extra = [f for f in df.schema.fields if f.name.lower() not in {t.name.lower() for t in table.fields}]
    if extra and not merge_schema:
        raise SchemaMismatchError(
            "A metadata mismatch was detected when writing to the Delta table. A schema mismatch "
            f"detected: data columns not in the table: {', '.join(f.name for f in extra)}. To add "
            "them, write with merge_schema=True (Delta's mergeSchema option)."
            + (OVERWRITE_REQUIRED if overwrite else ""),
        )
    final = StructType(
        list(table.fields) + [StructField(f.name, as_nullable(f.dataType), True) for f in extra]
    )
    if [f.name for f in df.schema.fields] == [f.name for f in final.fields] and all(
        same_shape(f.dataType, t.dataType) for f, t in zip(df.schema.fields, final.fields, strict=True)
    ):
        return df, final  # already the table's columns in order: nothing to project
    cols = []
    for f in final.fields:
        src = by_name.get(f.name.lower())
        if src is None:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
            continue
        if same_shape(src.dataType, f.dataType):
            # Same type up to nested nullability: written as it is; NOT NULL is checked on write
            # (a cast to a non-nullable nested field is not allowed).
            cols.append(F.col(quote_name(src.name)).alias(f.name))
            continue
        if not _safe_cast(src.dataType, f.dataType):
            raise SchemaMismatchError(
                f"Failed to merge fields '{f.name}': the table has type {f.dataType.simpleString()} "
                f"and the data has {src.dataType.simpleString()}. Cast the column before writing.",
                error_class="DELTA_FAILED_TO_MERGE_FIELDS",
            )
        cols.append(F.col(quote_name(src.name)).cast(f.dataType).alias(f.name))
    return df.select(*cols), final


_WIDER = {
    "byte": {"short", "integer", "long", "double", "float"},
    "short": {"integer", "long", "double", "float"},
    "integer": {"long", "double"},
    "float": {"double"},
}


_DEFAULT_KEYS = (CURRENT_DEFAULT, EXISTS_DEFAULT)


def _without_defaults(schema: StructType) -> StructType:
    """``schema`` without column DEFAULT metadata on its top-level columns."""
    if not any(k in f.metadata for f in schema.fields for k in _DEFAULT_KEYS):
        return schema
    return StructType(
        [
            StructField(
                f.name,
                f.dataType,
                f.nullable,
                {k: v for k, v in f.metadata.items() if k not in _DEFAULT_KEYS},
            )
            for f in schema.fields
        ]
    )


def _shape(schema: StructType) -> list[tuple[str, str]]:
    """A schema's column names and types, without nullability or field metadata."""
    return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]


def _safe_cast(src, dst) -> bool:  # type: ignore[no-untyped-def]
    if src.typeName() == "null":
        return True
    return dst.typeName() in _WIDER.get(src.typeName(), set())


def _auto_compaction(spark: SparkSession, txn: OptimisticTransaction) -> None:
    from deltamerge.builders import auto_compaction  # the builders import this module

    auto_compaction.register(spark, txn)


@internal_plan
def write(
    df: DataFrame,
    path: str,
    mode: str = "error",
    partition_by: Sequence[str] | str | None = None,
    configuration: Mapping[str, str] | None = None,
    *,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    options: Mapping[str, str] | None = None,
    cluster_by: Sequence[str] | None = None,
    operation: tuple[str, dict[str, Any]] | None = None,
) -> int | None:
    """Write ``df`` as a Delta table at ``path``; returns the committed version (None if ignored).

    ``mode``: ``error`` (default, fail if the table exists), ``append``, ``overwrite`` or
    ``ignore``. ``configuration`` sets table properties when the table is created. ``options``
    carries Delta's writer options ``txnAppId`` + ``txnVersion`` (an idempotent write: skipped,
    returning None, when the table has seen that version of that application; the session
    settings ``spark.databricks.delta.write.txnAppId``/``txnVersion`` work too) and ``userMetadata``.
    ``cluster_by`` makes the table clustered by those columns when it is created or overwritten;
    an append naming them must name the table's own. ``operation`` (name, parameters) replaces the
    commit's ``WRITE`` operation (the streaming sink's ``STREAMING UPDATE``).
    """
    key = mode.lower()
    if key not in _MODES:
        raise InvalidArgumentError(f"Unknown save mode {mode!r}; use error, append, overwrite or ignore.")
    spark = df.sparkSession
    quick_replies(spark)
    properties = user_properties(spark, configuration)  # refused before anything is written
    root = table_root(path)
    parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    cluster = [name_parts(c) for c in cluster_by] if cluster_by is not None else None
    clustering_ddl.reject_partitioning(cluster, parts)
    log = DeltaLog.for_table(root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    _auto_compaction(spark, txn)
    exists = not txn.is_new_table
    if exists and key in ("error", "errorifexists"):
        raise TableAlreadyExistsError(
            f"Cannot write to already existent path {root} without setting mode 'append' or 'overwrite'."
        )
    if exists and key == "ignore":
        return None
    if idempotent_skip(spark, txn, options):
        return None
    if exists:
        # Refuse before any data is written (the commit checks again, against the final protocol).
        check_can_write(txn.protocol, txn.metadata)  # type: ignore[arg-type]
    _check_names(df.schema)
    overwrite = key == "overwrite"
    rearranging = rearranges_only(options)
    if rearranging and not exists:
        raise data_change_false_error("Create a Delta table")
    cluster_domain: DomainMetadata | None = None
    if not exists or (overwrite and overwrite_schema):
        schema = StructType(
            [StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in df.schema.fields]
        )
        lower = {f.name.lower(): f.name for f in schema.fields}
        missing = [p for p in parts if p.lower() not in lower]
        if missing:
            raise InvalidArgumentError(
                f"Partition column(s) {missing} not found in schema {schema.simpleString()}."
            )
        parts = [lower[p.lower()] for p in parts]
        if rearranging and (
            _shape(schema) != _shape(to_spark_schema(txn.metadata.schema_string))  # type: ignore[union-attr]
            or [p.lower() for p in parts] != [p.lower() for p in txn.metadata.partition_columns]  # type: ignore[union-attr]
        ):
            raise data_change_false_error("Overwrite the Delta table schema or change the partition schema")
        if parts and len(set(parts)) >= len(schema.fields):
            raise InvalidArgumentError(
                "Cannot use all columns for partition columns: the data files need at least one column.",
                error_class="DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION",
            )
        # A new table takes Delta's session defaults; the given properties win.
        conf = table_property_defaults(spark) if not exists else dict(txn.metadata.configuration)  # type: ignore[union-attr]
        conf.update(properties)
        if str(conf.get("delta.feature.allowColumnDefaults", "")).lower() != "supported":
            # A DataFrame read of a table with defaults carries them; a write is no CREATE TABLE
            # asking for them (Delta checks defaults on DDL only).
            schema = _without_defaults(schema)
        meta_id = str(uuid.uuid4()) if not exists else txn.metadata.id  # type: ignore[union-attr]
        txn.update_metadata(
            Metadata(
                id=meta_id,
                schema_string=schema_string(schema),
                partition_columns=tuple(parts),
                configuration=conf,
                created_time=int(time.time() * 1000),
            )
        )
        data = _cast_to(df, schema)
        if cluster is not None:
            cluster_domain = clustering_ddl.cluster(txn, cluster, conf_getter(spark))
    else:
        meta = txn.metadata
        assert meta is not None
        if cluster is not None and not overwrite:  # an append keeps the table's clustering
            clustering_ddl.check_matches(txn.protocol, txn.snapshot.domains, meta.schema, cluster)  # type: ignore[union-attr]
        if parts and [p.lower() for p in parts] != [p.lower() for p in meta.partition_columns]:
            raise partitioning_mismatch(parts, meta.partition_columns, overwrite)
        table_schema = to_spark_schema(meta.schema_string)
        data, final = _align(df, table_schema, merge_schema=merge_schema, overwrite=overwrite)
        data = fill_missing(data, final, df.columns)
        given = {c.lower() for c in df.columns}
        for _, ident in identity_columns(final):
            if ident.name.lower() in given and not ident.allow_explicit_insert:
                raise explicit_insert_error(ident.name)
        data = fill_identity(data, final)
        if len(final.fields) != len(table_schema.fields):
            if rearranging:
                raise data_change_false_error("Change the Delta table schema")
            txn.update_metadata(replace(meta, schema_string=schema_string(final)))
        parts = list(meta.partition_columns)
        schema = final
        if cluster is not None and overwrite:  # an overwrite sets the clustering, as in Delta
            clustering_ddl.reject_partitioning(cluster, parts)
            cluster_domain = clustering_ddl.cluster(txn, cluster, conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    ts_parts = [f.name for f in schema.fields if f.name in parts and f.dataType.typeName() == "timestamp"]
    data, identity_obs = observed_identity(data, schema)
    written = enforced_write(
        write_parquet,
        data,
        schema,
        meta.configuration,
        root,
        parts,
        timestamp_partition_columns=ts_parts,
        metadata=meta,
        optimize_write_bin_size=optimized_write_bin_size(spark, meta.configuration, options),
        file_options=file_writer_options(options),
    )
    # Under column mapping the committed schema holds the physical names the statistics use.
    stats_schema = meta.schema if is_mapped(meta.schema) else to_delta_schema(schema)
    adds = to_add_files(root, written, stats_schema, parts, meta.configuration, tz=session_time_zone(spark))
    if rearranging:
        adds = [replace(a, data_change=False) for a in adds]
    actions: list[Action] = list(adds)
    if cluster_domain is not None:
        actions.append(cluster_domain)
    stored = identity_stored_names(schema, physical_names(meta.schema) if is_mapped(meta.schema) else {})
    files = [os.path.join(root, w.relative_path) for w in written]
    marked = with_high_water_marks(schema, identity_extremes(identity_obs, files, stored))
    if marked is not None:
        txn.update_metadata(replace(meta, schema_string=schema_string(marked)))
    if exists and overwrite:
        now = int(time.time() * 1000)
        actions += [f.remove(now, data_change=not rearranging) for f in txn.snapshot.files]  # type: ignore[union-attr]
        txn.mark_read_whole_table()
    metrics = {
        "numFiles": len(adds),
        "numOutputRows": sum((a.num_records or 0) for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
    }
    params = {"mode": _MODES[key], "partitionBy": list(parts)}
    try:
        user_metadata = writer_option(options, "userMetadata")
        name, params = operation if operation is not None else ("WRITE", params)
        version = txn.commit(actions, Operation(name, params, metrics), user_metadata=user_metadata)
    except BaseException:
        import contextlib

        for w in written if txn.committed_version is None else ():  # a failed hook: the commit landed
            with contextlib.suppress(OSError):
                os.remove(os.path.join(root, w.relative_path))
        raise
    from deltamerge.catalog import refresh_views

    refresh_views(spark, root)
    return version


def snapshot_for(
    path: str,
    version: int | None = None,
    timestamp: str | int | dt.datetime | None = None,
    *,
    time_zone: str = "UTC",
) -> Snapshot:
    """The snapshot at a version, a timestamp (ms, a datetime or a timestamp string), or the latest.

    As delta-spark's ``timestampAsOf``: a timestamp without a zone is in ``time_zone`` (the session
    time zone), and a timestamp after the latest commit is an error, not the latest version.
    """
    log = DeltaLog.for_table(table_root(path))
    if not log.exists():
        raise TableNotFoundError(
            f"`{table_root(path)}` is not a Delta table. Create it with deltamerge.write(...) first."
        )
    if version is not None and timestamp is not None:
        raise InvalidArgumentError("Specify either version or timestamp for time travel, not both.")
    if timestamp is not None:
        version = log.version_at_timestamp(_timestamp_ms(timestamp, time_zone), strict=True)
    snap = log.snapshot(version) if version is not None else log.update()
    check_can_read(snap.protocol, snap.metadata)
    return snap


def _zone(name: str) -> dt.tzinfo:
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        pass
    # Spark also accepts offsets: "+08:00", "-0530", "UTC+8", "GMT-03:00".
    m = re.fullmatch(r"(?:UTC|GMT|UT)?\s*([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?", name.strip())
    if m is None:
        raise InvalidArgumentError(f"Unknown time zone {name!r} (spark.sql.session.timeZone).")
    sign = -1 if m.group(1) == "-" else 1
    delta = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0), seconds=int(m.group(4) or 0))
    return dt.timezone(sign * delta)


def _timestamp_ms(ts: str | int | float | dt.datetime, time_zone: str = "UTC") -> int:
    if isinstance(ts, (int, float)):
        return int(ts)
    if isinstance(ts, dt.datetime):
        parsed = ts
    else:
        text = str(ts).strip().replace("T", " ")
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgumentError(
                f"The provided timestamp ({ts!r}) cannot be converted to a valid timestamp; use "
                "'yyyy-MM-dd HH:mm:ss[.ffffff][zone]', a datetime or epoch milliseconds.",
                error_class="DELTA_TIMESTAMP_INVALID",
            )
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_zone(time_zone))
    return int(parsed.timestamp() * 1000)


@internal_plan
def read_snapshot(
    spark: SparkSession,
    snap: Snapshot,
    files: Sequence[AddFile] | None = None,
    *,
    row_tracking: bool = False,
) -> DataFrame:
    """A DataFrame over a snapshot (all its files, or the given subset).

    ``row_tracking=True`` adds Delta's ``_metadata.row_id`` and ``_metadata.row_commit_version`` (a
    ``_metadata`` struct column) on a table with row tracking enabled."""
    hidden = None
    if row_tracking:
        names = materialized_columns(snap.protocol, snap.metadata)
        if names is None:
            raise InvalidArgumentError(
                "Row tracking is not enabled on this table, so its rows have no row ids. Enable it "
                "with ALTER TABLE ... SET TBLPROPERTIES ('delta.enableRowTracking' = 'true').",
                error_class="DELTA_ROW_TRACKING_NOT_ENABLED",
            )
        hidden = names.names
    schema = snap.metadata.schema  # parsed from its JSON text on each access
    if not schema.get("fields"):
        return _without_columns(spark, snap.table_root)
    df = scan(
        spark,
        snap.table_root,
        reader_schema(schema),
        tuple(snap.metadata.partition_columns),
        snap.files if files is None else files,
        row_tracking=hidden,
    )
    if hidden is None:
        return df
    meta = F.struct(F.col(ROW_ID_COL).alias("row_id"), F.col(ROW_VERSION_COL).alias("row_commit_version"))
    return df.select(*[c for c in df.columns if c not in ROW_TRACKING_COLS], meta.alias("_metadata"))


def _without_columns(spark: SparkSession, root: str) -> DataFrame:
    """A table without columns (``CREATE TABLE t USING delta``): Delta lets it be named and its
    empty schema be seen, and refuses to scan it; the frame fails when it runs, not when built."""
    message = (
        f"[DELTA_READ_TABLE_WITHOUT_COLUMNS] You are trying to read a Delta table `delta`.`{root}` "
        "that does not have any columns. Write some new data with the option `mergeSchema = true` "
        "to be able to read the table."
    )
    return spark.range(1).where(F.raise_error(F.lit(message)).isNull()).select()


@internal_plan
def read(
    spark: SparkSession,
    path: str,
    version: int | None = None,
    timestamp: str | int | dt.datetime | None = None,
    *,
    row_tracking: bool = False,
) -> DataFrame:
    """Read a Delta table (latest, or as of ``version`` / ``timestamp``; zone-less timestamps are in
    the session time zone). ``row_tracking=True`` adds ``_metadata.row_id`` and
    ``_metadata.row_commit_version`` (row tracking enabled tables)."""
    quick_replies(spark)
    snap = snapshot_for(path, version, timestamp, time_zone=session_time_zone(spark))
    return read_snapshot(spark, snap, row_tracking=row_tracking)
