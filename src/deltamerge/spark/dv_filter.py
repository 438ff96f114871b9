"""Rows at given physical positions dropped or kept: deletion vectors applied without a JVM plugin.

Delta's own reader filters DV rows inside the Parquet reader with a broadcast bitmap per file. Without
a JVM plugin or Python UDFs we express the same filter in Spark SQL over ``_metadata.row_index``:

* Few deleted positions (the common case: a MERGE or DELETE touching a handful of rows per file):
  a predicate ``NOT (file = f AND (row_index IN (...) OR row_index BETWEEN a AND b ...))``. It needs no
  join and no extra stage; Spark turns long IN lists into a hash set (InSet), and the file equality
  short-circuits for rows of other files. Plan size and per-row cost grow with the number of files
  and runs, hence the thresholds below.
* Otherwise: each bitmap becomes 64-bit words, one per block of 64 positions holding a deleted one
  (numpy on the driver), shipped as one Arrow-backed DataFrame ``(file, block, word)`` with the file
  as an index into a second small frame of URIs (with a URI on every row, the former frame of
  5M single-position runs peaked the driver at 530 MiB, against 272 MiB now). The scan is
  left-joined on (file, row_index / 64) and keeps a row unless its bit is set: an equi hash join
  whose build side holds at most one row per deleted position and 1/64 of one per position for
  dense deletes (5M of 10M rows deleted: 156k words; exploded positions, as before, needed a
  shuffle of the whole scan: 10 s to count those 10M rows, now 2 s).
  Broadcast while that side is small, shuffled hash join beyond.

Files without DVs are scanned separately and unioned, so they pay for neither.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from deltamerge.spark.session import local_frame
from deltamerge.spark.types import quote_name

#: Largest number of DV files / multi-row runs / single positions handled with a predicate.
PREDICATE_MAX_FILES = 16
PREDICATE_MAX_RANGES = 64
PREDICATE_MAX_SINGLES = 4096
#: Largest number of words broadcast for the join; beyond it the join shuffles.
BROADCAST_MAX_WORDS = 2_000_000
_BLOCK = "__dm_block"
_WORD = "__dm_word"


def _runs(bitmap: BitMap64) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive ``(starts, ends)`` of the runs of consecutive positions of ``bitmap``."""
    arr = np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)
    if arr.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    breaks = np.flatnonzero(np.diff(arr) != 1)
    starts = arr[np.concatenate(([0], breaks + 1))]
    ends = arr[np.concatenate((breaks, [arr.size - 1]))]
    return starts, ends


def _position_predicate(
    runs: dict[str, tuple[np.ndarray, np.ndarray]], file_col: str, row_col: str
) -> Column:
    # One SQL text, parsed once: built from Column objects it took ~6 py4j round trips per term.
    # Each URI is a hex literal cast to a string, which reads the same under any setting of
    # spark.sql.parser.escapedStringLiterals (a quoted literal would not, for a root with ' or \).
    row, file = quote_name(row_col), quote_name(file_col)
    per_file: list[str] = []
    for uri, (starts, ends) in runs.items():
        single = starts == ends
        terms: list[str] = []
        if single.any():
            terms.append(f"{row} IN ({', '.join(str(int(v)) for v in starts[single])})")
        for a, b in zip(starts[~single].tolist(), ends[~single].tolist(), strict=True):
            terms.append(f"{row} BETWEEN {int(a)} AND {int(b)}")
        uri_sql = f"CAST(X'{uri.encode().hex()}' AS STRING)"
        per_file.append(f"({file} = {uri_sql} AND ({' OR '.join(terms)}))")
    return F.expr(" OR ".join(per_file))


def _words(bitmap: BitMap64) -> tuple[np.ndarray, np.ndarray]:
    """``(blocks, words)`` of ``bitmap``: for each block of 64 positions holding one, the block
    (position / 64) and the word whose bit ``position % 64`` is set for each position in it."""
    arr = np.frombuffer(bitmap.to_array(), dtype=np.uint64)  # sorted
    blocks = arr >> np.uint64(6)
    bits = np.left_shift(np.uint64(1), arr & np.uint64(63))
    starts = np.flatnonzero(np.concatenate(([True], blocks[1:] != blocks[:-1])))
    return blocks[starts].astype(np.int64), np.bitwise_or.reduceat(bits, starts).view(np.int64)


def _words_frame(
    spark: SparkSession, positions: Mapping[str, BitMap64], file_col: str
) -> tuple[DataFrame, int]:
    """``(file_col, block, word)`` of every bitmap (``_words``), and the number of words."""
    index: list[np.ndarray] = []
    blocks: list[np.ndarray] = []
    words: list[np.ndarray] = []
    for i, bm in enumerate(positions.values()):
        b, w = _words(bm)
        index.append(np.full(b.size, i, dtype=np.int32))
        blocks.append(b)
        words.append(w)
    ints = StructType(
        [
            StructField("__dm_i", IntegerType(), False),
            StructField(_BLOCK, LongType(), False),
            StructField(_WORD, LongType(), False),
        ]
    )
    table = pa.table(
        {
            "__dm_i": pa.array(np.concatenate(index), pa.int32()),
            _BLOCK: pa.array(np.concatenate(blocks), pa.int64()),
            _WORD: pa.array(np.concatenate(words), pa.int64()),
        }
    )
    frame = spark.createDataFrame(table, ints)  # type: ignore[call-overload]
    names_schema = StructType(
        [StructField("__dm_i", IntegerType(), False), StructField(file_col, StringType(), False)]
    )
    names = local_frame(spark, list(enumerate(positions)), names_schema)
    return frame.join(F.broadcast(names), on="__dm_i").select(file_col, _BLOCK, _WORD), table.num_rows


def filter_row_positions(
    df: DataFrame,
    positions: Mapping[str, BitMap64],
    *,
    keep: bool,
    file_col: str,
    row_col: str,
) -> DataFrame:
    """Drop (``keep=False``) or keep only (``keep=True``) the rows at the given physical positions.

    ``positions`` maps a Spark file URI (as in ``file_col``) to row indexes of that file (``row_col``).
    With ``keep=False`` rows of files not in ``positions`` pass; with ``keep=True`` they are dropped.
    The choice between a predicate and a join is explained in the module's docstring.
    """
    runs = {uri: _runs(bm) for uri, bm in positions.items() if len(bm)}
    if not runs:
        return df if not keep else df.limit(0)
    n_ranges = sum(int((s != e).sum()) for s, e in runs.values())
    n_singles = sum(int((s == e).sum()) for s, e in runs.values())
    small = n_ranges <= PREDICATE_MAX_RANGES and n_singles <= PREDICATE_MAX_SINGLES
    if len(runs) <= PREDICATE_MAX_FILES and small:
        cond = _position_predicate(runs, file_col, row_col)
        return df.filter(cond if keep else ~cond)
    words, n_words = _words_frame(df.sparkSession, {uri: positions[uri] for uri in runs}, file_col)
    words = F.broadcast(words) if n_words <= BROADCAST_MAX_WORDS else words.hint("shuffle_hash")
    keyed = df.withColumn(_BLOCK, F.shiftright(F.col(quote_name(row_col)), 6))
    bit = F.expr(f"shiftright({_WORD}, CAST({quote_name(row_col)} & 63 AS INT)) & 1")
    if keep:
        joined = keyed.join(words, on=[file_col, _BLOCK], how="inner").where(bit == 1)
    else:
        joined = keyed.join(words, on=[file_col, _BLOCK], how="left").where(
            F.col(_WORD).isNull() | (bit == 0)
        )
    return joined.select(*[F.col(quote_name(c)) for c in df.columns])
