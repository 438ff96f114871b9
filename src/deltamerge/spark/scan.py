"""DataFrames over a snapshot's files: one native Parquet scan, partition values from the log.

The directory layout is never trusted for partition values (delta-rs and Delta escape directory
names differently); they come from ``add.partitionValues`` and are attached by a broadcast join on
the file path Spark reports in ``_metadata.file_path``.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from deltamerge.log.actions import AddFile
from deltamerge.spark.types import data_schema, to_spark_schema

FILE_COL = "__dm_file"
ROW_INDEX_COL = "__dm_row_index"

_URI_KEEP = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-!.~'()*,;:$&+=/@")
_GLOB_CHARS = set("{}[]*?\\")


def _java_uri_quote(path: str) -> str:
    # java.net.URI's multi-argument constructor (used by Hadoop's Path.toUri) keeps unreserved,
    # punctuation, '/', '@' and non-ASCII characters that are neither controls nor space
    # characters; everything else is percent-encoded as UTF-8.
    out = []
    for ch in path:
        if ch in _URI_KEEP:
            out.append(ch)
        elif ord(ch) > 127 and not (unicodedata.category(ch) in ("Zs", "Zl", "Zp", "Cc")):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def spark_file_uri(abs_path: str) -> str:
    """The string Spark reports as ``_metadata.file_path`` for a local absolute path."""
    return "file:" + _java_uri_quote(os.path.normpath(abs_path))


def absolute_file_path(table_root: str, add_path: str) -> str:
    """The local path of a file named by ``add.path`` (URI-decoded once; absolute URIs allowed)."""
    if add_path.startswith("file:"):
        rest = add_path[len("file:") :]
        while rest.startswith("//"):
            rest = rest[1:]
        return unquote(rest)
    if "://" in add_path:
        raise NotImplementedError(f"only local tables are supported, got file {add_path!r}")
    return os.path.join(table_root, unquote(add_path))


def _glob_escape(path: str) -> str:
    # Spark globs read paths that contain glob characters; a backslash makes them literal.
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in path)


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


def _partition_lookup(
    spark: SparkSession, table_root: str, files: Sequence[AddFile], schema: StructType, partition_columns: Sequence[str]
) -> DataFrame:
    fields = [StructField(FILE_COL, StringType(), False)]
    fields += [StructField(f"__dm_pv_{i}", StringType(), True) for i in range(len(partition_columns))]
    rows = []
    for f in files:
        pv = {k.lower(): v for k, v in f.partition_values.items()}
        values = [pv.get(c.lower()) for c in partition_columns]
        rows.append((spark_file_uri(absolute_file_path(table_root, f.path)), *[None if v == "" else v for v in values]))
    return spark.createDataFrame(rows, StructType(fields))


def partition_value_column(raw: Column, dtype_name: str, dtype) -> Column:  # type: ignore[no-untyped-def]
    """Cast a serialized partition value (protocol §6.4) to its column type."""
    if dtype_name == "timestamp":
        # Modern Delta writes UTC ISO-8601 with 'Z'; legacy writers a zone-less local timestamp.
        return F.coalesce(F.to_timestamp(raw, "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX"), F.try_cast(raw, dtype))  # type: ignore[attr-defined]
    if dtype_name == "binary":
        return F.encode(raw, "UTF-8")
    return raw.cast(dtype)


def scan(
    spark: SparkSession,
    table_root: str,
    schema_json: dict,
    partition_columns: Sequence[str],
    files: Sequence[AddFile],
    *,
    with_file: bool = False,
    with_row_index: bool = False,
) -> DataFrame:
    """A DataFrame over ``files`` with the table schema (plus file path / row index when asked)."""
    schema = to_spark_schema(schema_json)
    stored = data_schema(schema, tuple(partition_columns))
    extra: list[StructField] = []
    if with_file:
        extra.append(StructField(FILE_COL, StringType(), False))
    if with_row_index:
        extra.append(StructField(ROW_INDEX_COL, LongType(), False))
    if not files:
        return spark.createDataFrame([], StructType(list(schema.fields) + extra))

    paths = [_glob_escape(absolute_file_path(table_root, f.path)) for f in files]
    reader = spark.read.schema(stored)
    df = reader.parquet(*paths)
    need_file = with_file or bool(partition_columns)
    cols: list[Column] = [F.col(f"`{f.name}`") for f in stored.fields]
    if need_file:
        cols.append(F.col("_metadata.file_path").alias(FILE_COL))
    if with_row_index:
        cols.append(F.col("_metadata.row_index").alias(ROW_INDEX_COL))
    df = df.select(*cols)
    if partition_columns:
        lookup = _partition_lookup(spark, table_root, files, schema, partition_columns)
        df = df.join(F.broadcast(lookup), on=FILE_COL, how="inner")
    out: list[Column] = []
    pidx = {c.lower(): i for i, c in enumerate(partition_columns)}
    for f in schema.fields:
        if f.name.lower() in pidx:
            raw = F.col(f"__dm_pv_{pidx[f.name.lower()]}")
            out.append(partition_value_column(raw, f.dataType.typeName(), f.dataType).alias(f.name))
        else:
            out.append(F.col(f"`{f.name}`"))
    if with_file:
        out.append(F.col(FILE_COL))
    if with_row_index:
        out.append(F.col(ROW_INDEX_COL))
    return df.select(*out)
