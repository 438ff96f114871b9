"""CONVERT TO DELTA: a directory of Parquet files becomes a Delta table (Delta's
``ConvertToDeltaCommand``) without rewriting a byte of data.

The files stay where they are; version 0 of the log adds each of them, with partition values
parsed from its Hive-style directory (``col=value/...``) and statistics from its footer. The schema
is what Spark infers from the footers (merged), with the declared partition columns at the end.
Converting a table that already has a log does nothing, as in Delta.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from deltamerge.config import SessionConf
from deltamerge.errors import (
    AnalysisError,
    DeltaMergeError,
    InvalidArgumentError,
    ParseError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.identifiers import QUALIFIED, lookup_table, name_parts
from deltamerge.log import column_mapping
from deltamerge.log.actions import AddFile, Metadata
from deltamerge.log.paths import HIVE_DEFAULT_PARTITION, encode_add_path, table_root, unescape_path_name
from deltamerge.log.protocol import DELETION_VECTORS, writer_features
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import (
    case_sensitive,
    conf_getter,
    read_parquet_files,
    session_time_zone,
    table_property_defaults,
)
from deltamerge.spark.types import as_nullable, schema_string
from deltamerge.spark.write import now_ms
from deltamerge.stats import stats_from_parquet_metadata
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = ["convert_identifier", "convert_to_delta"]

_HIDDEN = ("_", ".")


def _list_files(root: str) -> list[str]:
    """Data files under ``root``, recursively, in a stable order. Hidden names are skipped, except
    directories with ``=``: Delta allows partition columns named ``_c`` or ``.c``."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(_HIDDEN) or "=" in d)
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if not f.startswith(_HIDDEN)]
    return out


def _parse_dir(rel_dir: str) -> list[tuple[str, str | None]]:
    """Spark's ``parsePartition`` without type inference: ``col=value`` segments read upward from
    the file, ending at the first plain directory above them; values Hive-unescaped."""
    parsed: list[tuple[str, str | None]] = []
    for segment in reversed([s for s in rel_dir.split("/") if s]):
        if "=" not in segment:
            if parsed:
                break
            continue
        key, raw = segment.split("=", 1)
        if not key or not raw:
            raise AnalysisError(f"Empty partition column name or value in '{segment}' ({rel_dir}).")
        parsed.append(
            (unescape_path_name(key), None if raw == HIVE_DEFAULT_PARTITION else unescape_path_name(raw))
        )
    return parsed[::-1]


def _columns(names: Sequence[str]) -> str:  # Delta's formatColumnList
    return "[" + ", ".join(f"`{n}`" for n in names) + "]"


def _partition_values(
    file: str, rel: str, fields: Sequence[StructField], sensitive: bool
) -> list[str | None]:
    """The file's partition values in declared order, checked against the declared columns."""
    parsed = _parse_dir(os.path.dirname(rel))
    expected = [f.name for f in fields]
    if len(parsed) != len(expected):
        found = [k for k, _ in parsed]
        raise AnalysisError(
            f"Expecting {len(expected)} partition column(s): {_columns(expected)}, but found {len(found)} "
            f"partition column(s): {_columns(found)} from parsing the file name: {file}",
            error_class="DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME",
            sql_state="KD009",
        )
    for (key, _), want in zip(parsed, expected, strict=True):
        if key != want and (sensitive or key.lower() != want.lower()):
            raise AnalysisError(
                f"Expecting partition column `{want}`, but found partition column `{key}` from parsing "
                f"the file name: {file}",
                error_class="DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME",
                sql_state="KD009",
            )
    return [v for _, v in parsed]


def _check_casts(spark: SparkSession, fields: Sequence[StructField], rows: list[list[str | None]]) -> None:
    """Every non-null partition value must cast to its declared type (one query over the distinct
    values). ``try_cast`` is stricter than Delta's legacy cast ("1.5" is no int): the raw string is
    what the log stores, and readers must parse it as the declared type."""
    typed = [i for i, f in enumerate(fields) if not isinstance(f.dataType, StringType)]
    values = sorted({(i, r[i]) for r in rows for i in typed if r[i] is not None})
    if not values:
        return
    failed = F.lit(False)
    for i in typed:
        failed = F.when(F.col("i") == i, F.col("v").try_cast(fields[i].dataType).isNull()).otherwise(failed)
    hit = spark.createDataFrame(values, "i int, v string").where(failed).first()
    if hit is not None:
        raise AnalysisError(
            f"Failed to cast partition value `{hit['v']}` to {_type_name(fields[hit['i']].dataType)}",
            error_class="DELTA_FAILED_CAST_PARTITION_VALUE",
            sql_state="22018",
        )


def _type_name(t: DataType) -> str:
    return repr(t).removesuffix("()")  # Scala's DataType.toString: IntegerType, DecimalType(10,2)


def _footer(path: str) -> pq.FileMetaData:
    try:
        return pq.read_metadata(path)
    except Exception as e:  # not a Parquet file, or a damaged one
        raise DeltaMergeError(
            f"Could not read footer for file: {path}",
            error_class="DELTA_FAILED_READ_FILE_FOOTER",
            sql_state="KD001",
        ) from e


def _data_schema(spark: SparkSession, files: list[str]) -> StructType:
    """Spark's merged footer schema. File paths, not the directory: Spark then discovers no
    partitions. When the footers do not merge, a bisection over prefixes names the first file
    that does not fit the ones before it (log2(n) schema reads, on the failure path only)."""

    def read(paths: list[str]) -> StructType:
        return read_parquet_files(spark, spark.read.option("mergeSchema", "true"), paths).schema

    try:
        return read(files)
    except Exception as e:
        ok, bad = 0, len(files)
        while bad - ok > 1:
            mid = (ok + bad) // 2
            try:
                read(files[:mid])
                ok = mid
            except Exception:
                bad = mid
        culprit = files[bad - 1]
        try:
            tree = read([culprit]).treeString()
        except Exception:  # the file alone does not read: no merge problem
            raise SchemaMismatchError(
                f"Failed to infer schema from the given list of files: Spark cannot read {culprit}.",
                error_class="DELTA_FAILED_INFER_SCHEMA",
                sql_state="42KD9",
            ) from e
        raise SchemaMismatchError(
            f"Failed to merge schema of file {culprit}:\n{tree}",
            error_class="DELTA_FAILED_MERGE_SCHEMA_FILE",
            sql_state="42KDA",
        ) from e


def _table_schema(data: StructType, parts: StructType, sensitive: bool) -> StructType:
    """Spark's ``mergeDataAndPartitionSchema``: a partition column also found in the files keeps
    its place with the declared type; the others go at the end."""
    key = (lambda n: n) if sensitive else str.lower
    declared = {key(f.name): f for f in parts.fields}
    fields = [declared.pop(key(f.name), f) for f in data.fields]
    fields += [f for f in parts.fields if key(f.name) in declared]
    return as_nullable(StructType(fields))  # type: ignore[return-value]


def convert_to_delta(
    spark: SparkSession, path: str, partition_schema: StructType | None = None, collect_stats: bool = True
) -> None:
    """Make the Parquet directory at ``path`` a Delta table in place (``CONVERT TO DELTA``).

    ``partition_schema`` declares the ``col=value`` directory levels (names in order, types the
    values must cast to); without it the directory must not be partitioned. ``collect_stats=False``
    is ``NO STATISTICS``. A directory that already holds a Delta table is left as it is.
    """
    root = table_root(path)
    if not os.path.exists(root):
        raise InvalidArgumentError(
            f"Path does not exist: {root}.", error_class="PATH_NOT_FOUND", sql_state="42K03"
        )
    conf = conf_getter(spark)
    txn = OptimisticTransaction(DeltaLog.for_table(root), conf=conf)
    if not txn.is_new_table:
        return  # Delta makes convert idempotent
    parts = partition_schema if partition_schema is not None else StructType([])
    files = _list_files(root)
    if not files:
        raise InvalidArgumentError(
            f"No file found in the directory: {root}.", error_class="DELTA_EMPTY_DIRECTORY", sql_state="42K03"
        )
    sensitive = case_sensitive(spark)
    rels = [os.path.relpath(f, root).replace(os.sep, "/") for f in files]
    values = [_partition_values(f, r, parts.fields, sensitive) for f, r in zip(files, rels, strict=True)]
    _check_casts(spark, parts.fields, values)
    with ThreadPoolExecutor(max_workers=8) as pool:
        footers = list(pool.map(_footer, files))
    schema = _table_schema(_data_schema(spark, files), parts, sensitive)

    defaults = table_property_defaults(spark)
    mode = column_mapping.mode_of(defaults)
    if mode != "none":  # the files carry no physical column names to map to
        raise UnsupportedOperationError(
            "The configuration 'spark.databricks.delta.properties.defaults.columnMapping.mode' cannot be "
            f"set to `{mode}` when using CONVERT TO DELTA.",
            error_class="DELTA_CONVERSION_UNSUPPORTED_COLUMN_MAPPING",
        )
    names = [f.name for f in parts.fields]
    txn.update_metadata(
        Metadata(
            id="",
            schema_string=schema_string(schema),
            partition_columns=tuple(names),
            configuration=defaults,
            created_time=now_ms(),
        )
    )
    meta, protocol = txn.metadata, txn.protocol
    assert meta is not None and protocol is not None
    with_stats = collect_stats and bool(SessionConf.STATS_COLLECT.get(conf))
    tight = True if DELETION_VECTORS in writer_features(protocol) else None
    tz = session_time_zone(spark)
    adds = []
    for file, rel, vals, md in zip(files, rels, values, footers, strict=True):
        st = os.stat(file)
        args = (md, meta.schema, names, meta.configuration)
        stats = stats_from_parquet_metadata(*args, tight_bounds=tight, session_tz=tz) if with_stats else None
        adds.append(
            AddFile(
                path=encode_add_path(rel),
                partition_values=dict(zip(names, vals, strict=True)),
                size=st.st_size,
                modification_time=st.st_mtime_ns // 1_000_000,
                data_change=True,
                stats=stats,
            )
        )
    params = {
        "numFiles": len(adds),
        "partitionedBy": names,
        "collectStats": with_stats,
        "sourceFormat": "parquet",
    }
    txn.commit(adds, Operation("CONVERT", params, {"numConvertedFiles": len(adds)}))


def convert_identifier(
    spark: SparkSession,
    identifier: str,
    partition_schema: StructType | None = None,
    collect_stats: bool = True,
) -> tuple[str, str | None]:
    """CONVERT TO DELTA on a table identifier as Delta takes it: ``parquet.`/path```, or
    ``delta.`/path``` / a registered name (already Delta: nothing to do). Returns (path, name)."""
    if re.fullmatch(rf"\s*{QUALIFIED}\s*", identifier) is None:
        raise ParseError(f"Cannot parse the table identifier {identifier!r}; write parquet.`/path/to/dir`.")
    parts = name_parts(identifier)
    registered = lookup_table(parts)
    if registered is not None:
        return registered
    if len(parts) == 1 and os.path.isabs(parts[0]):
        raise UnsupportedOperationError(
            "CONVERT TO DELTA only supports parquet tables. Please rewrite your target as "
            f"parquet.`{parts[0]}` if it's a parquet directory.",
            error_class="DELTA_MISSING_PROVIDER_FOR_CONVERT",
        )
    if len(parts) != 2:
        raise TableNotFoundError(
            f"The table or view `{'.'.join(parts)}` cannot be found.", error_class="TABLE_OR_VIEW_NOT_FOUND"
        )
    provider, path = parts
    if provider.lower() == "delta":
        return table_root(path), None
    if provider.lower() != "parquet":
        table_id = ".".join("`" + p.replace("`", "``") + "`" for p in parts)
        raise UnsupportedOperationError(
            "CONVERT TO DELTA only supports parquet tables, but you are trying to convert a "
            f"{provider} source: {table_id}",
            error_class="DELTA_CONVERT_NON_PARQUET_TABLE",
        )
    convert_to_delta(spark, path, partition_schema, collect_stats)
    return table_root(path), None
