"""Write DataFrames as Delta data files with Spark's native Parquet writer.

Spark writes into a hidden staging directory inside the table root; each finished file is then
moved (a same-filesystem rename, atomic) to its final place, so a crash leaves at most a staging
directory that readers never see and ``vacuum`` removes. AddFile statistics come from the Parquet
footers of the files just written (no second pass over the data).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, NullType, StringType, StructType, VariantType

from deltamerge.errors import AnalysisError
from deltamerge.log import column_mapping
from deltamerge.log.actions import AddCDCFile, AddFile, Metadata
from deltamerge.log.paths import encode_add_path
from deltamerge.spark.session import internal_plan, prepare_session, temporary_settings
from deltamerge.spark.types import as_nullable, is_collated, quote_if_needed, quote_name, to_spark_schema

STAGING_PREFIX = ".dm-staging-"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: The partition column of a write of data and change rows together (Delta's ``__is_cdc``): true
#: for change rows, which go below ``_change_data``. Not a table column; no file holds it.
CDC_PARTITION = "__is_cdc"


@dataclass(frozen=True)
class WrittenFile:
    """One file Spark wrote, moved to its final place."""

    relative_path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    change_data: bool = False  # a change-data file (below ``_change_data``)


def _unescape_dir_value(raw: str) -> str | None:
    if raw == HIVE_NULL:
        return None
    return unquote(raw)


def _utc_iso_timestamp(name: str) -> Column:
    """A timestamp column as Delta's partition value string, ``yyyy-MM-ddTHH:mm:ss.ffffffZ`` in UTC.

    Computed from the epoch microseconds, so it does not depend on the session time zone: Spark's
    own directory names use session-local wall-clock time, which is ambiguous when clocks go back
    (01:30 PDT and 01:30 PST name the same directory).
    """
    col = f"`{name.replace('`', '``')}`"
    us = f"unix_micros({col})"
    tod = f"pmod({us}, 86400000000)"
    return F.expr(
        f"CASE WHEN {col} IS NULL THEN NULL ELSE format_string('%sT%02d:%02d:%02d.%06dZ', "
        f"CAST(date_from_unix_date(CAST(({us} - {tod}) div 86400000000 AS INT)) AS STRING), "
        f"{tod} div 3600000000, ({tod} div 60000000) % 60, ({tod} div 1000000) % 60, {tod} % 1000000) END"
    )


def _data_dir(rel_dir: str, keys: Sequence[str]) -> bool:
    """Whether a staging directory holds the written data: one ``col=value`` level per partition
    column (``keys``, lower case), in order. A partition column's directory may start with "_" or
    "." (``_ingest_date=...``); anything else is Spark's own (``_temporary``)."""
    parts = [p.partition("=") for p in rel_dir.split(os.sep) if p]
    return len(parts) == len(keys) and all(
        eq and unquote(key).lower() == want for (key, eq, _), want in zip(parts, keys, strict=True)
    )


def _move_into_table(
    table_root: str, staging: str, partition_columns: Sequence[str], kind: str
) -> list[WrittenFile]:
    written: list[WrittenFile] = []
    keys = [c.lower() for c in partition_columns]
    for dirpath, _dirs, names in os.walk(staging):
        rel_dir = os.path.relpath(dirpath, staging)
        rel_dir = "" if rel_dir == "." else rel_dir
        if not _data_dir(rel_dir, keys):
            continue
        is_cdc = False
        if kind == "mixed":  # the first level, CDC_PARTITION=true|false, says where a file goes
            first, _, rel_dir = rel_dir.partition(os.sep)
            is_cdc = first == f"{CDC_PARTITION}=true"
        for name in sorted(names):
            if not name.endswith(".parquet") or name.startswith(("_", ".")):
                continue
            values: dict[str, str | None] = {}
            if rel_dir:
                for segment in rel_dir.split(os.sep):
                    key, _, raw = segment.partition("=")
                    key = unquote(key)
                    values[key] = _unescape_dir_value(raw)
            prefix = "_change_data" if is_cdc else ""
            final_rel = os.path.join(prefix, rel_dir, name) if (prefix or rel_dir) else name
            final_abs = os.path.join(table_root, final_rel)
            os.makedirs(os.path.dirname(final_abs), exist_ok=True)
            os.rename(os.path.join(dirpath, name), final_abs)
            st = os.stat(final_abs)
            written.append(
                WrittenFile(
                    final_rel.replace(os.sep, "/"), values, st.st_size, int(st.st_mtime * 1000), is_cdc
                )
            )
    return written


@internal_plan
def write_parquet(
    df: DataFrame,
    table_root: str,
    partition_columns: Sequence[str],
    *,
    kind: str = "data",
    timestamp_partition_columns: Sequence[str] = (),
    max_records_per_file: int | None = None,
    metadata: Metadata | None = None,
    optimize_write_bin_size: int | None = None,
    file_options: Mapping[str, str] | None = None,
) -> list[WrittenFile]:
    """Write ``df`` (table columns in order, partition columns included) below ``table_root``.

    ``metadata`` is the table's metadata as the commit will leave it: under column mapping the
    columns are written under their physical names (partition directories and values too), with
    Parquet field ids in ``id`` mode. ``optimize_write_bin_size`` (see
    :func:`optimized_write_bin_size`) writes files of about that many shuffle bytes, each table
    partition's rows in as few files as that allows. ``file_options`` are the Parquet writer options
    Delta passes on from a DataFrame write (see :func:`file_writer_options`).

    ``kind``: "data" writes data files; "mixed" writes data files and change-data files (below
    ``_change_data``) in one job, ``df`` carrying a boolean :data:`CDC_PARTITION` column that says
    which (as Delta writes a MERGE's data and change rows)."""
    spark = df.sparkSession
    prepare_session(spark)
    check_no_nested_void(df.schema)
    if metadata is not None and column_mapping.is_mapped(metadata.schema):
        df, partition_columns, timestamp_partition_columns = _to_physical(
            df,
            metadata.schema,
            column_mapping.mode_of(metadata.configuration) == "id",
            partition_columns,
            timestamp_partition_columns,
        )
    if timestamp_partition_columns:
        # Partition by the final UTC partition-value string instead of the timestamp itself (the
        # partition columns are not stored in the data files, so the files are unchanged).
        ts_cols = {c.lower() for c in timestamp_partition_columns}
        cols = [
            _utc_iso_timestamp(f.name) if f.name.lower() in ts_cols else F.col(quote_name(f.name))
            for f in df.schema.fields
        ]
        df = df.select(*[c.alias(f.name) for c, f in zip(cols, df.schema.fields, strict=True)])
    df = _without_void_columns(df, partition_columns)
    df = _uncollated_partitions(df, partition_columns)
    # Spark 4.1+ shreds the variants it writes (typed columns beside value / metadata), which only
    # a table with the variantShredding feature may hold: written unshredded, as the variantType
    # feature requires.
    settings = {_WRITE_SHREDDING: "false"} if _holds(df.schema, VariantType) else {}
    if optimize_write_bin_size:
        df, extra = _optimized(df, partition_columns, optimize_write_bin_size)
        settings.update(extra)
    staging = os.path.join(table_root, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    # Without a compression option Spark's session codec applies (spark.sql.parquet.compression.codec).
    writer = df.write.mode("overwrite").options(**(file_options or {}))
    if max_records_per_file:
        writer = writer.option("maxRecordsPerFile", str(max_records_per_file))
    if kind == "mixed":
        partition_columns = [CDC_PARTITION, *partition_columns]
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    try:
        with temporary_settings(spark, settings, on_connect=True):
            writer.parquet(staging)
        return _move_into_table(table_root, staging, partition_columns, kind)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


_WRITE_SHREDDING = "spark.sql.variant.writeShredding.enabled"


#: The DataFrame writer options Delta hands to the Parquet writer (TransactionalWrite.writeFiles).
_FILE_OPTIONS = ("compression", "maxRecordsPerFile")


def file_writer_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """The options of a DataFrame write that reach its Parquet files, as Delta passes them on: the
    codec (``compression``), ``maxRecordsPerFile`` (else ``spark.sql.files.maxRecordsPerFile``)."""
    wanted = {o.lower(): o for o in _FILE_OPTIONS}
    return {wanted[k.lower()]: str(v) for k, v in (options or {}).items() if k.lower() in wanted}


def _uncollated_partitions(df: DataFrame, partition_columns: Sequence[str]) -> DataFrame:
    """Collated string partition columns as plain strings: Spark's file writer refuses to partition
    by a collated string (INVALID_PARTITION_COLUMN_DATA_TYPE), and a partition value is the same
    UTF-8 text under any collation (the table schema keeps the collation)."""
    parts = {c.lower() for c in partition_columns}
    collated = [f.name for f in df.schema.fields if f.name.lower() in parts and is_collated(f.dataType)]
    if not collated:
        return df
    return df.withColumns({n: F.col(quote_name(n)).cast(StringType()) for n in collated})


def _holds(t: DataType, kind: type[DataType]) -> bool:
    """Whether ``t`` is or nests (in structs, arrays, maps) a type of ``kind``."""
    if isinstance(t, kind):
        return True
    if isinstance(t, StructType):
        return any(_holds(f.dataType, kind) for f in t.fields)
    if isinstance(t, ArrayType):
        return _holds(t.elementType, kind)
    if isinstance(t, MapType):
        return _holds(t.keyType, kind) or _holds(t.valueType, kind)
    return False


def optimized_write_bin_size(
    spark: Any, configuration: Mapping[str, str], options: Mapping[str, str] | None = None
) -> int | None:
    """The bin size in bytes when Delta's optimized writes apply to a write, else None.

    Delta's order: the writer option ``optimizeWrite``, else the session setting
    ``spark.databricks.delta.optimizeWrite.enabled``, else the table property
    ``delta.autoOptimize.optimizeWrite``; off by default. The bin size is
    ``spark.databricks.delta.optimizeWrite.binSize`` (MiB, default 512).
    """
    from deltamerge.config import SessionConf, TableProperties, parse_bool
    from deltamerge.spark.session import setting
    from deltamerge.txn.idempotency import writer_option

    option = writer_option(options, "optimizeWrite")
    enabled: bool | None = None
    if option is not None:
        with contextlib.suppress(ValueError):
            enabled = parse_bool(option)
    if enabled is None:
        enabled = setting(spark, SessionConf.OPTIMIZE_WRITE)
    if enabled is None:
        enabled = TableProperties.OPTIMIZE_WRITE.get(configuration)
    return int(setting(spark, SessionConf.OPTIMIZE_WRITE_BIN_SIZE)) if enabled else None


def _optimized(
    df: DataFrame, partition_columns: Sequence[str], bin_size: int
) -> tuple[DataFrame, dict[str, str]]:
    """Delta's optimized write in Spark terms: rows shuffled by the partition columns (every
    table partition's rows in few tasks), then adaptive execution splits and coalesces the shuffle
    output into tasks of about ``bin_size`` shuffle bytes, one file each, as Delta bin-packs its
    shuffle blocks."""
    rebalanced = df.hint("rebalance", *[F.col(quote_name(c)) for c in partition_columns])
    return rebalanced, {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(bin_size),
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    }


def _to_physical(
    df: DataFrame,
    table_schema: Mapping[str, Any],
    field_ids: bool,
    partition_columns: Sequence[str],
    timestamp_partition_columns: Sequence[str],
) -> tuple[DataFrame, list[str], list[str]]:
    """``df`` with the table's columns under their physical names (nested fields renamed by a
    cast to the physical type, which carries the field ids too), and the partition column lists
    in physical names. Columns that are not the table's (``_change_type`` of change data) keep
    their names."""
    physical = to_spark_schema(column_mapping.physical_schema(table_schema, field_ids=field_ids))
    logical = [str(f["name"]) for f in table_schema.get("fields", ())]
    by_name = {n.lower(): i for i, n in enumerate(logical)}
    cols: list[Column] = []
    for f in df.schema.fields:
        i = by_name.get(f.name.lower())
        col = F.col(quote_name(f.name))
        if i is None:
            cols.append(col)
            continue
        pf = physical.fields[i]
        if f.dataType.simpleString() != pf.dataType.simpleString() or field_ids:
            # Written columns are nullable anyway; a cast may not narrow a nested field to NOT NULL.
            col = col.cast(as_nullable(pf.dataType))
        cols.append(col.alias(pf.name, metadata=dict(pf.metadata)) if field_ids else col.alias(pf.name))

    def rename(names: Sequence[str]) -> list[str]:
        return [physical.fields[by_name[n.lower()]].name if n.lower() in by_name else n for n in names]

    return df.select(*cols), rename(partition_columns), rename(timestamp_partition_columns)


def check_no_nested_void(schema: StructType) -> None:
    """Delta writes no void (NullType) inside an array or a map (``SchemaUtils.dropNullTypeColumns``):
    such a column cannot be left out of the files as a top-level or struct field can."""

    def walk(t: DataType, path: list[str]) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                walk(f.dataType, [*path, f.name])
        elif isinstance(t, (ArrayType, MapType)) and _holds(t, NullType):
            name = ".".join(quote_if_needed(p) for p in path)
            kind = "ArrayType" if isinstance(t, ArrayType) else "MapType"
            raise AnalysisError(
                f"Found nested NullType in column {name} which is of {kind}. Delta doesn't support "
                "writing NullType in complex types: cast the column to a concrete type (e.g. "
                f"CAST({name} AS ARRAY<STRING>)) before writing it.",
                error_class="DELTA_COMPLEX_TYPE_COLUMN_CONTAINS_NULL_TYPE",
                sql_state="22005",
            )

    walk(schema, [])


def _without_void_columns(df: DataFrame, partition_columns: Sequence[str]) -> DataFrame:
    """Delta stores no data for void (NullType) columns, top-level or struct fields: readers fill
    them with nulls. Spark would write a BOOLEAN stand-in, which a reader meets as a type mismatch
    once schema evolution has widened the column (void -> string) and the old file is read again.
    Parquet cannot hold a struct without fields (nor a file without columns): one whose every
    field is void keeps them."""
    parts = {c.lower() for c in partition_columns}
    fields = [f for f in df.schema.fields if f.name.lower() not in parts]
    void = [f.name for f in fields if isinstance(f.dataType, NullType)]
    if len(void) == len(fields):
        return df
    if void:
        df = df.drop(*void)
    structs = [(f.name, f.dataType) for f in fields if isinstance(f.dataType, StructType)]
    nested = {n: paths for n, t in structs if (paths := _void_paths(t, []))}
    if not nested:
        return df
    # dropFields keeps a null struct null and the other fields' metadata (field ids).
    return df.withColumns({n: F.col(quote_name(n)).dropFields(*paths) for n, paths in nested.items()})


def _void_paths(st: StructType, prefix: list[str]) -> list[str]:
    """The dotted, quoted paths of ``st``'s void fields (nested in structs), except in a struct
    whose every field is void."""
    if all(isinstance(f.dataType, NullType) for f in st.fields):
        return []
    out: list[str] = []
    for f in st.fields:
        path = [*prefix, f.name]
        if isinstance(f.dataType, NullType):
            out.append(".".join(quote_name(p) for p in path))
        elif isinstance(f.dataType, StructType):
            out.extend(_void_paths(f.dataType, path))
    return out


def _footer(path: str) -> pq.FileMetaData:
    return pq.read_metadata(path)


def _non_empty(table_root: str, written: Sequence[WrittenFile]) -> list[tuple[WrittenFile, pq.FileMetaData]]:
    """The written files with rows, with their footers; files with no rows are deleted."""
    paths = [os.path.join(table_root, w.relative_path) for w in written]
    with ThreadPoolExecutor(max_workers=8) as pool:
        footers = list(pool.map(_footer, paths))
    kept = []
    for w, md, abs_path in zip(written, footers, paths, strict=True):
        if md.num_rows == 0:
            os.remove(abs_path)
        else:
            kept.append((w, md))
    return kept


def to_add_files(
    table_root: str,
    written: Sequence[WrittenFile],
    schema_json: dict,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    *,
    data_change: bool = True,
    tight_bounds: bool | None = None,
    tz: str = "UTC",
) -> list[AddFile]:
    """AddFiles with statistics read from the footers; files with no rows are deleted, not added."""
    from deltamerge.stats import stats_from_parquet_metadata

    adds: list[AddFile] = []
    for w, md in _non_empty(table_root, written):
        stats = stats_from_parquet_metadata(
            md, schema_json, partition_columns, configuration, tight_bounds=tight_bounds, session_tz=tz
        )
        adds.append(
            AddFile(
                path=encode_add_path(w.relative_path),
                partition_values=w.partition_values,
                size=w.size,
                modification_time=w.modification_time,
                data_change=data_change,
                stats=stats,
            )
        )
    return adds


def to_cdc_files(table_root: str, written: Sequence[WrittenFile]) -> list[AddCDCFile]:
    """AddCDCFiles for change-data files (no stats; always ``dataChange=false``); files with no rows
    are deleted, not added (a DV MERGE that changed no row recorded an empty one)."""
    return [
        AddCDCFile(path=encode_add_path(w.relative_path), partition_values=w.partition_values, size=w.size)
        for w, _md in _non_empty(table_root, written)
    ]


def now_ms() -> int:
    """Wall-clock milliseconds, the unit of every log timestamp."""
    return int(time.time() * 1000)
