"""DataFrames over a snapshot's files: one native Parquet scan, partition values from the log.

Partition values are those of ``add.partitionValues``. Spark parses them from Hive-style directory
names (``basePath``) only when every file's directories are checked to give exactly the log's
values (``_hive_layout``); otherwise (column mapping's random prefixes, other writers' escaping,
types whose parsing differs) they are attached by a broadcast join on the file path Spark reports
in ``_metadata.file_path``, which costs a string hash per row (~0.3 s per million rows here).
Files with deletion vectors are scanned separately and filtered on ``_metadata.row_index``
(``spark/dv_filter.py``).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from pyroaring import BitMap64
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from deltamerge.deletion_vectors import read_dv
from deltamerge.log import column_mapping, paths
from deltamerge.log.actions import AddFile
from deltamerge.spark.dv_filter import filter_row_positions
from deltamerge.spark.session import internal_plan, local_frame, read_parquet_files
from deltamerge.spark.types import (
    as_nullable,
    data_schema,
    is_collated,
    quote_name,
    sql_string,
    to_spark_schema,
)

FILE_COL = "__dm_file"
ROW_INDEX_COL = "__dm_row_index"
#: Row tracking (``txn/row_tracking.py``): a row's id and commit version, materialized or derived
#: from its file's ``baseRowId`` + position and ``defaultRowCommitVersion``.
ROW_ID_COL = "__dm_row_id"
ROW_VERSION_COL = "__dm_row_version"
ROW_TRACKING_COLS = (ROW_ID_COL, ROW_VERSION_COL)

_URI_KEEP = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-!.~'()*,;:$&+=/@")
_URI_PLAIN_RE = re.compile("[" + re.escape("".join(sorted(_URI_KEEP))) + "]*")
_GLOB_RE = re.compile(r"[{}\[\]*?\\]")


def _java_uriquote_name(path: str) -> str:
    # java.net.URI's multi-argument constructor (used by Hadoop's Path.toUri) keeps unreserved,
    # punctuation, '/', '@' and non-ASCII characters that are neither controls nor space
    # characters; everything else is percent-encoded as UTF-8.
    if _URI_PLAIN_RE.fullmatch(path):  # the usual path: one regex, not a loop per character
        return path
    out = []
    for ch in path:
        if ch in _URI_KEEP or (ord(ch) > 127 and unicodedata.category(ch) not in ("Zs", "Zl", "Zp", "Cc")):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def spark_file_uri(abs_path: str) -> str:
    """The string Spark reports as ``_metadata.file_path`` for a local absolute path."""
    return "file:" + _java_uriquote_name(os.path.normpath(abs_path))


def absolute_file_path(table_root: str, add_path: str) -> str:
    """The local path of a file named by ``add.path`` (URI-decoded once; absolute URIs allowed)."""
    # The log layer decodes; this layer reads local files only.
    if "://" in add_path and not add_path.startswith("file:"):
        raise NotImplementedError(f"only local tables are supported, got file {add_path!r}")
    return paths.absolute_file_path(table_root, add_path)


def _glob_escape(path: str) -> str:
    # Spark globs read paths that contain glob characters; a backslash makes them literal.
    if _GLOB_RE.search(path) is None:  # the usual case, without a loop per character
        return path
    return _GLOB_RE.sub(lambda m: "\\" + m.group(0), path)


@dataclass(frozen=True)
class FileIndex:
    """The files of one scan, keyed by the path Spark reports for them."""

    by_spark_path: dict[str, AddFile]

    def lookup(self, spark_path: str) -> AddFile:
        """The AddFile for a ``_metadata.file_path`` value; a path we did not scan is a bug."""
        found = self.by_spark_path.get(spark_path)
        if found is None:
            # Fall back to comparing decoded paths, in case Spark's encoding differs from ours.
            decoded = unquote(spark_path)
            for key, add in self.by_spark_path.items():
                if unquote(key) == decoded:
                    return add
            raise KeyError(f"file {spark_path!r} was read but is not part of the snapshot scan")
        return found


def file_index(table_root: str, files: Sequence[AddFile]) -> FileIndex:
    """Map Spark's file URIs to the scanned AddFiles."""
    return FileIndex({spark_file_uri(absolute_file_path(table_root, f.path)): f for f in files})


#: Up to this many files, per-file values (partition values, row tracking bases, the DV one job's
#: numbering) come from a CASE over the files' paths indexing array literals (per row, a comparison
#: per path), instead of a broadcast join with a frame of paths (a local relation, its broadcast job
#: and a join: ~0.1 s). See ``file_values``.
CASE_MAX_FILES = 8


def file_case_index(uris: Sequence[str]) -> str:
    """SQL giving each row's 1-based index of its ``FILE_COL`` among ``uris`` (NULL if absent)."""
    whens = " ".join(f"WHEN {sql_string(u)} THEN {i + 1}" for i, u in enumerate(uris))
    return f"CASE {FILE_COL} {whens} END"


def indexed_value(values: Sequence[str | int | None], sql_type: str, index: str) -> str:
    """SQL picking ``values[index - 1]`` (strings or integers, None for NULL) of type ``sql_type``.

    An array literal, not a CASE of values: Spark inlines a number literal into the generated Java
    source, so other values (the next merge's files) would compile the code anew (~15 ms a stage);
    an array literal is passed by reference.

    ``try_element_at``, not ``element_at``: Spark 4.3's generated code for ``element_at`` of an array
    literal skips the index's NULL check, so a row of a file not listed (a NULL index) got the
    previous row's value, or failed with INVALID_INDEX_OF_ZERO on a task's first row; the
    interpreter gives NULL. ``try_element_at`` gives NULL both ways."""

    def lit(v: str | int | None) -> str:
        if v is None:
            return f"CAST(NULL AS {sql_type})"
        return sql_string(v) if isinstance(v, str) else f"CAST({int(v)} AS {sql_type})"

    return f"try_element_at(array({', '.join(lit(v) for v in values)}), {index})"


_FRAME_TYPES: dict[str, DataType] = {"STRING": StringType(), "BIGINT": LongType()}


def file_values(
    df: DataFrame,
    uris: Sequence[str],
    columns: Mapping[str, tuple[str, Sequence[str | int | None]]],
    *,
    inner: bool,
) -> tuple[DataFrame, dict[str, str]]:
    """Per-file values for the rows of ``df`` (by its ``FILE_COL``): ``columns`` maps a name to
    (``STRING`` or ``BIGINT``, one value per URI of ``uris``). Returns ``df`` ready to read them and
    per name the SQL that reads them. Up to ``CASE_MAX_FILES`` files, a CASE over the paths indexes
    array literals (``indexed_value``); beyond (a CASE compares every path per row), a broadcast
    frame of paths is joined on the path. ``inner``: rows of files not listed are dropped, else
    their values are NULL."""
    if len(uris) <= CASE_MAX_FILES:
        index = file_case_index(uris)
        exprs = {name: indexed_value(values, t, index) for name, (t, values) in columns.items()}
        return (df.where(f"{index} IS NOT NULL") if inner else df), exprs
    fields = [StructField(FILE_COL, StringType(), False)]
    fields += [StructField(name, _FRAME_TYPES[t], True) for name, (t, _) in columns.items()]
    rows = list(zip(uris, *(values for _, values in columns.values()), strict=True))
    frame = local_frame(df.sparkSession, rows, StructType(fields))
    joined = df.join(F.broadcast(frame), on=FILE_COL, how="inner" if inner else "left")
    return joined, {name: quote_name(name) for name in columns}


def _uris(table_root: str, files: Sequence[AddFile]) -> list[str]:
    return [spark_file_uri(absolute_file_path(table_root, f.path)) for f in files]


def _partition_values(files: Sequence[AddFile], keys: Sequence[str]) -> list[list[str | None]]:
    """Per partition key (physical names under column mapping), each file's value (None for NULL)."""
    out: list[list[str | None]] = [[] for _ in keys]
    for f in files:
        pv = {k.lower(): v for k, v in f.partition_values.items()}
        for i, k in enumerate(keys):
            v = pv.get(k.lower())
            out[i].append(None if v == "" else v)
    return out


#: Types whose directory value Spark parses to the same value as the log's string, with the range
#: of the integral ones (Spark parses them with ``Integer.parseInt`` and narrows without a check).
_INTEGRAL_RANGE: dict[type, int] = {ByteType: 7, ShortType: 15, IntegerType: 31, LongType: 63}
_INTEGER = re.compile(r"-?[0-9]+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _parses_same(value: str, dtype: DataType) -> bool:
    """Whether Spark's partition parsing of the directory value ``value`` (already checked to
    unescape to the log's string) gives the value the log's string casts to."""
    if isinstance(dtype, StringType):
        return True
    bits = _INTEGRAL_RANGE.get(type(dtype))
    if bits is not None:
        return bool(_INTEGER.fullmatch(value)) and -(1 << bits) <= int(value) < (1 << bits)
    if isinstance(dtype, DateType) and _DATE.fullmatch(value):
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
        return True
    return False


def _hive_layout(
    table_root: str, schema: StructType, partition_columns: Sequence[str], files: Sequence[AddFile]
) -> list[StructField] | None:
    """The partition fields (schema names and types) when Spark's own directory parsing of every
    file gives exactly its ``partitionValues``; else None (the lookup join is needed).

    Each file must sit under the table root (a relative ``add.path``) at
    ``<col>=<value>/.../<file>``, one directory per partition column in order, named exactly as
    the schema names the column, each value unescaping (as Spark does) to the log's string, or
    ``__HIVE_DEFAULT_PARTITION__`` for a null one, with a type Spark parses the same way as the
    log's cast (strings, integers, dates). Each directory is parsed once.
    """
    by_lower = {f.name.lower(): f for f in schema.fields}
    found = [by_lower.get(c.lower()) for c in partition_columns]
    fields = [f for f in found if f is not None]
    if len(fields) != len(found) or _GLOB_RE.search(table_root):
        return None
    names = [f.name for f in fields]
    parsed: dict[str, list[str | None] | None] = {}
    for add in files:
        path = add.path
        if (":" in path or path.startswith("/")) and paths.is_absolute_path(path):
            return None
        directory = (paths.decode_add_path(path) if "%" in path else path).rpartition("/")[0]
        if directory not in parsed:
            parsed[directory] = _parse_partition_dirs(directory, fields)
        expected = parsed[directory]
        pv = add.partition_values
        try:
            logged = [pv[n] or None for n in names]
        except KeyError:  # keys spelt in another case
            lower = {k.lower(): v for k, v in pv.items()}
            logged = [lower.get(n.lower()) or None for n in names]
        if expected is None or logged != expected:
            return None
    # Spark's directory parsing cannot give a collated string: read plain, cast back in the select.
    return [StructField(f.name, _uncollated(f.dataType), True) for f in fields]


def _uncollated(dt: DataType) -> DataType:
    return StringType() if isinstance(dt, StringType) else dt


def _parse_partition_dirs(directory: str, fields: Sequence[StructField]) -> list[str | None] | None:
    """The values Spark parses from ``directory`` (relative to the table root) for ``fields``,
    as the log's strings (None for null); None when Spark would parse anything else."""
    dirs = directory.split("/") if directory else []
    if len(dirs) != len(fields):
        return None
    out: list[str | None] = []
    for d, field in zip(dirs, fields, strict=True):
        key, eq, raw = d.partition("=")
        if not eq or paths.unescape_path_name(key) != field.name:
            return None
        if raw == paths.HIVE_DEFAULT_PARTITION:
            out.append(None)
            continue
        value = paths.unescape_path_name(raw) if "%" in raw else raw
        if value == "" or not _parses_same(raw, field.dataType):
            return None
        out.append(value)
    return out


def partition_value_column(raw: Column, dtype_name: str, dtype) -> Column:  # type: ignore[no-untyped-def]
    """Cast a serialized partition value (protocol §6.4) to its column type."""
    if dtype_name == "timestamp":
        # Modern Delta writes UTC ISO-8601 with 'Z'; legacy writers a zone-less local timestamp.
        return F.coalesce(
            F.try_to_timestamp(raw, F.lit("yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX")), raw.try_cast(dtype)
        )
    if dtype_name == "binary":
        return F.encode(raw, "UTF-8")
    return raw.cast(dtype)


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
#: Up to this many files, their status is read on the driver instead of in a Spark job.
_DRIVER_LISTING_MAX = 10_000


@contextlib.contextmanager
def _driver_side_listing(spark: SparkSession, n_paths: int) -> Iterator[None]:
    """Classic PySpark resolves a file list when the DataFrame is created, in a Spark job of its
    own once there are more than 32 paths (~0.3-0.5 s per scan). The paths are explicit files
    of a local table, so reading their status on the driver is faster; Connect resolves the plan
    on the server later, where this session-level switch would not apply."""
    from deltamerge.spark.session import is_connect, temporary_settings

    if n_paths <= 32 or n_paths > _DRIVER_LISTING_MAX or is_connect(spark):
        yield
        return
    with temporary_settings(spark, {_LISTING_THRESHOLD: str(n_paths + 1)}):
        yield


@dataclass(frozen=True)
class _Physical:
    """A column-mapped table's file schema: the stored columns under their physical names and the
    partition columns' keys in ``partitionValues``."""

    stored: StructType
    keys: list[str]

    def logical_columns(self, logical: StructType) -> list[Column]:
        """The stored columns under their logical names (nested fields renamed by a cast)."""
        out = []
        for lf, pf in zip(logical.fields, self.stored.fields, strict=True):
            col = F.lit(None) if isinstance(pf.dataType, NullType) else F.col(quote_name(pf.name))
            if lf.dataType.simpleString() != pf.dataType.simpleString():
                # Nullable like any file read: a cast may not narrow a nested field to NOT NULL.
                col = col.cast(as_nullable(lf.dataType))
            out.append(col.alias(lf.name, metadata=lf.metadata) if lf.metadata else col.alias(lf.name))
        return out


def _physical(schema_json: Mapping, partition_columns: Sequence[str]) -> _Physical | None:
    if not column_mapping.is_mapped(schema_json):
        return None
    keys = [column_mapping.partition_key(schema_json, c, True) for c in partition_columns]
    physical = to_spark_schema(column_mapping.physical_schema(schema_json, field_ids=False))
    return _Physical(data_schema(physical, keys), keys)


def _void(f: StructField) -> bool:
    return isinstance(f.dataType, NullType)


def _read_column(f: StructField, from_directory: bool = False) -> str:
    if _void(f):
        return f"NULL AS {quote_name(f.name)}"
    if from_directory and is_collated(f.dataType):  # parsed from the directory as a plain string
        return f"CAST({quote_name(f.name)} AS {f.dataType.simpleString()}) AS {quote_name(f.name)}"
    return quote_name(f.name)


def _scan_group(
    spark: SparkSession,
    table_root: str,
    schema: StructType,
    stored: StructType,
    partition_columns: Sequence[str],
    files: Sequence[AddFile],
    with_file: bool,
    with_row_index: bool,
    mapping: _Physical | None = None,
    row_tracking: tuple[str, str] | None = None,
) -> DataFrame:
    """One native Parquet scan of ``files`` (no deletion vectors applied)."""
    file_paths = [_glob_escape(absolute_file_path(table_root, f.path)) for f in files]
    hive = (
        _hive_layout(table_root, schema, partition_columns, files)
        if partition_columns and mapping is None
        else None
    )
    # The materialized row tracking columns are read along (NULL in files that have none).
    hidden = [StructField(n, LongType(), True) for n in row_tracking] if row_tracking else []
    # Files hold no void columns (writers drop them) and Spark 4.0 cannot read one: left out of the
    # read, selected as NULL.
    read = [f for f in (stored if mapping is None else mapping.stored).fields if not _void(f)]
    if hive is not None:  # Spark reads the partition values from the directory names
        reader = spark.read.schema(StructType([*read, *hidden, *hive])).option("basePath", table_root)
    else:
        reader = spark.read.schema(StructType([*read, *hidden]))
    with _driver_side_listing(spark, len(file_paths)):
        df = read_parquet_files(spark, reader, file_paths)
    need_file = with_file or (bool(partition_columns) and hive is None) or bool(row_tracking)
    fields = [*(stored if mapping is None else mapping.stored).fields, *hidden, *(hive or [])]
    if any(f.name.lower() == "_metadata" for f in fields):
        # A data column named _metadata hides Spark's file metadata from SQL text.
        df = df.select("*", df.metadataColumn("_metadata").alias("__dm_metadata"))
        meta = "__dm_metadata"
    else:
        meta = "_metadata"
    extra = []
    if need_file:
        extra.append(f"{meta}.file_path AS {FILE_COL}")
    if with_row_index:
        extra.append(f"{meta}.row_index AS {ROW_INDEX_COL}")
    if row_tracking:
        extra += [quote_name(n) for n in row_tracking]
        extra.append(f"{meta}.row_index AS __dm_position")
    if hive is not None:
        parsed = {f.name for f in hive}
        df = df.selectExpr(*[_read_column(f, f.name in parsed) for f in schema.fields], *extra)
        return _with_row_tracking(spark, table_root, files, df, row_tracking, with_file)
    if mapping is None:
        # One selectExpr of SQL text: a Column per field would cost Python->JVM round trips per column.
        df = df.selectExpr(*[_read_column(f) for f in stored.fields], *extra)
    else:
        df = df.select(*mapping.logical_columns(stored), *[F.expr(e) for e in extra])
    if not partition_columns:
        return _with_row_tracking(spark, table_root, files, df, row_tracking, with_file)
    keys = mapping.keys if mapping is not None else partition_columns
    values = {f"__dm_pv_{i}": ("STRING", v) for i, v in enumerate(_partition_values(files, keys))}
    df, exprs = file_values(df, _uris(table_root, files), values, inner=True)
    raws = [F.expr(e) for e in exprs.values()]
    out: list[Column] = []
    pidx = {c.lower(): i for i, c in enumerate(partition_columns)}
    for f in schema.fields:
        if f.name.lower() in pidx:
            raw = raws[pidx[f.name.lower()]]
            out.append(partition_value_column(raw, f.dataType.typeName(), f.dataType).alias(f.name))
        else:
            out.append(F.col(quote_name(f.name)))
    if with_file or row_tracking:
        out.append(F.col(FILE_COL))
    if with_row_index:
        out.append(F.col(ROW_INDEX_COL))
    if row_tracking:
        out += [F.col(quote_name(n)) for n in row_tracking] + [F.col("__dm_position")]
    return _with_row_tracking(spark, table_root, files, df.select(*out), row_tracking, with_file)


def _with_row_tracking(
    spark: SparkSession,
    table_root: str,
    files: Sequence[AddFile],
    df: DataFrame,
    row_tracking: tuple[str, str] | None,
    with_file: bool,
) -> DataFrame:
    """``df`` with each row's id and commit version in place of the materialized columns: the
    materialized value, else the file's ``baseRowId`` + position / ``defaultRowCommitVersion``."""
    if not row_tracking:
        return df
    id_col, version_col = (quote_name(n) for n in row_tracking)
    keep = [
        c for c in df.columns if c not in (*row_tracking, "__dm_position") and (with_file or c != FILE_COL)
    ]
    values = {
        "__dm_base_row_id": ("BIGINT", [f.base_row_id for f in files]),
        "__dm_default_version": ("BIGINT", [f.default_row_commit_version for f in files]),
    }
    joined, exprs = file_values(df, _uris(table_root, files), values, inner=True)
    base, version = exprs.values()
    return joined.selectExpr(
        *[quote_name(c) for c in keep],
        f"coalesce({id_col}, {base} + __dm_position) AS {ROW_ID_COL}",
        f"coalesce({version_col}, {version}) AS {ROW_VERSION_COL}",
    )


# --- deletion vectors: rows of files with one are dropped by ``dv_filter.filter_row_positions`` ---------


def _deletion_masks(table_root: str, files: Sequence[AddFile]) -> dict[str, BitMap64]:
    """Spark file URI -> deleted row indexes, for the files whose DV deletes at least one row."""
    masks: dict[str, BitMap64] = {}
    for f in files:
        if f.deletion_vector is not None and f.deletion_vector.cardinality != 0:
            bm = read_dv(table_root, f.deletion_vector)
            if len(bm):
                masks[spark_file_uri(absolute_file_path(table_root, f.path))] = bm
    return masks


@internal_plan
def scan(
    spark: SparkSession,
    table_root: str,
    schema_json: dict,
    partition_columns: Sequence[str],
    files: Sequence[AddFile],
    *,
    with_file: bool = False,
    with_row_index: bool = False,
    apply_deletion_vectors: bool = True,
    row_tracking: tuple[str, str] | None = None,
) -> DataFrame:
    """A DataFrame over ``files`` with the table schema (plus file path / row index when asked).

    Rows deleted by a file's deletion vector are left out unless ``apply_deletion_vectors=False``
    (physical rows, e.g. for a MERGE that computes new DVs). ``with_row_index`` is always the physical
    Parquet row position. ``row_tracking`` (the materialized column names of a table with row
    tracking enabled) adds each row's id and commit version as ``ROW_TRACKING_COLS``.
    """
    mapping = _physical(schema_json, partition_columns)
    if mapping is not None:  # readers do not show the mapping's ids and physical names
        schema_json = column_mapping.without_mapping_metadata(schema_json)
    schema = to_spark_schema(schema_json)
    stored = data_schema(schema, tuple(partition_columns))
    extra: list[StructField] = []
    if with_file:
        extra.append(StructField(FILE_COL, StringType(), False))
    if with_row_index:
        extra.append(StructField(ROW_INDEX_COL, LongType(), False))
    if row_tracking:
        extra += [StructField(c, LongType(), True) for c in ROW_TRACKING_COLS]
    if not files:
        return spark.createDataFrame([], StructType(list(schema.fields) + extra))

    rt = row_tracking
    masks = _deletion_masks(table_root, files) if apply_deletion_vectors else {}
    if not masks:
        return _scan_group(
            spark,
            table_root,
            schema,
            stored,
            partition_columns,
            files,
            with_file,
            with_row_index,
            mapping,
            rt,
        )
    masked_files = [f for f in files if spark_file_uri(absolute_file_path(table_root, f.path)) in masks]
    plain_files = [f for f in files if spark_file_uri(absolute_file_path(table_root, f.path)) not in masks]
    masked = _scan_group(
        spark, table_root, schema, stored, partition_columns, masked_files, True, True, mapping, rt
    )
    masked = filter_row_positions(masked, masks, keep=False, file_col=FILE_COL, row_col=ROW_INDEX_COL)
    out = [F.col(quote_name(f.name)) for f in schema.fields]
    if with_file:
        out.append(F.col(FILE_COL))
    if with_row_index:
        out.append(F.col(ROW_INDEX_COL))
    if row_tracking:
        out += [F.col(c) for c in ROW_TRACKING_COLS]
    masked = masked.select(*out)
    if not plain_files:
        return masked
    plain = _scan_group(
        spark,
        table_root,
        schema,
        stored,
        partition_columns,
        plain_files,
        with_file,
        with_row_index,
        mapping,
        rt,
    )
    return plain.union(masked)
