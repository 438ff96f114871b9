"""Dynamic file pruning: drop candidate files that no source key can match (beyond Delta OSS).

Static data skipping (the ``skipping`` package) only sees the ON condition's target-only conjuncts, so an
upsert on ``t.id = s.id`` reads every file even when the source touches one of them. When the ON
condition equates a target column that has min/max statistics with a source column of the same
type, a file can hold a matching row only if some source key lies within the file's ``[min, max]``.

One small aggregation over the source's key column (no target scan) summarises the keys inside
the candidates' overall key range as at most ``_BUCKETS`` sorted ``[min, max]`` ranges; the driver
keeps the files whose range meets one of them (a binary search per file). Source keys outside
every file's range are dropped by the aggregation itself, so a source of mostly new rows stays
cheap. The setting ``spark.databricks.optimizer.dynamicFilePruning`` (default true) turns it off.

Keys are compared as numbers that keep their order (``merge/key_numbers.py``): integers, dates as
day numbers, decimals as their floor, timestamps as microseconds, strings as a window of their UTF-8
bytes after the prefix every candidate's statistics share.

Partition columns have no statistics: a file's partition value is its min and max. A key on an
integer or date partition column prunes when no data column key has statistics. Beside a data
key, a key on a partition column (integer, date or string) contributes the source's distinct
values, collected by the same aggregation: a file is kept only if both keys may match.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from sqlglot import exp

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.log.char_varchar import TYPE_STRING as CHAR_VARCHAR_TYPE
from deltamerge.log.column_mapping import PHYSICAL_NAME
from deltamerge.merge import key_numbers
from deltamerge.merge.analysis import ResolvedMerge, scol
from deltamerge.predicates import split_conjuncts, unparen
from deltamerge.spark.session import estimated_size_bytes, setting, small_result_query
from deltamerge.stats import parse_stats

_BUCKETS = 1024
#: Below this many candidate files the extra job costs more than it can save.
MIN_FILES = 2


@dataclass(frozen=True)
class EquiKey:
    """An ON conjunct ``target column = source column`` (``<=>`` when ``null_safe``)."""

    target_index: int
    source_index: int
    null_safe: bool


def _internal_index(node: exp.Expr, prefix: str) -> int | None:
    if not isinstance(node, exp.Column) or node.table:
        return None
    name = node.name
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        return None
    return int(name[len(prefix) :])


_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _bounded(t: DataType) -> bool:
    # Exact bounds in Delta stats: integers and dates (strings may be truncated, timestamps are
    # rounded to milliseconds, floats have NaN).
    return isinstance(t, (*_INTEGRAL, DateType))


def _prunable(t: DataType) -> bool:
    # Strings of the default collation too (byte order), as numbers of a window of their bytes,
    # decimals (exact statistics), as their floor (the integers a CDC feed's NUMBER keys are), and
    # timestamps, as microseconds (their statistics' cut to milliseconds widens each max).
    return _bounded(t) or t == StringType() or isinstance(t, (DecimalType, TimestampType, TimestampNTZType))


def _preference(t: DataType) -> int:
    # Integer, date and decimal keys are their numbers; a timestamp's statistics are cut, a
    # string's numbers are a window of its bytes.
    return 2 if t == StringType() else 1 if isinstance(t, (TimestampType, TimestampNTZType)) else 0


def _atomic(t: DataType) -> bool:
    return not isinstance(t, (ArrayType, MapType, StructType))


def _same_values(t: DataType, s: DataType) -> bool:
    """Whether Spark's ``t = s`` compares the values themselves: the same type, or two integer
    types (the narrower widened, which keeps every value and so the keys' distinctness and order:
    an INT literal or DataFrame column against a BIGINT key)."""
    return t == s or (isinstance(t, _INTEGRAL) and isinstance(s, _INTEGRAL))


def equi_keys(rm: ResolvedMerge, *, bounded_only: bool = True) -> list[EquiKey]:
    """ON conjuncts that equate a top-level target column with a source column of the same type
    or both of integer types (when ``bounded_only``, of a type statistics prune by: integers,
    dates and decimals, whose bounds are exact, timestamps and default-collation strings; else
    any atomic type)."""
    accept = _prunable if bounded_only else _atomic
    out = []
    n_target, n_source = len(rm.target_schema.fields), len(rm.source_schema.fields)
    for conj in split_conjuncts(rm.condition):
        node = unparen(conj)
        if not isinstance(node, (exp.EQ, exp.NullSafeEQ)):
            continue
        a, b = unparen(node.this), unparen(node.expression)
        for t_side, s_side in ((a, b), (b, a)):
            ti, si = _internal_index(t_side, "__t"), _internal_index(s_side, "__s")
            if ti is None or si is None or ti >= n_target or si >= n_source:
                continue
            t_type = rm.target_schema.fields[ti].dataType
            if accept(t_type) and _same_values(t_type, rm.source_schema.fields[si].dataType):
                out.append(EquiKey(ti, si, isinstance(node, exp.NullSafeEQ)))
                break
    return out


@dataclass(frozen=True)
class _FileRange:
    file: AddFile
    lo: int | None  # None: unknown bounds (the file is always kept)
    hi: int | None
    may_null: bool
    prefix: bytes | None = None  # a string key's numbers: the bytes they start after (key_numbers)


#: The equi-join key that prunes files (None: none can) and every candidate's range of it.
PruneKey = tuple[EquiKey | None, list[_FileRange]]


def _is_partition_column(files: Sequence[AddFile], name: str) -> bool:
    return bool(files) and all(name in f.partition_values for f in files)


def _partition_ranges(files: Sequence[AddFile], name: str, t: DataType) -> list[_FileRange]:
    """A partition column's value is the file's min and max (the log holds it; no statistics)."""
    out = []
    for f in files:
        raw = f.partition_values.get(name)
        if raw is None or raw == "":
            out.append(_FileRange(f, 0, -1, True))  # only NULLs: no value can match
            continue
        value = key_numbers.of_value(raw, t)
        out.append(_FileRange(f, value, value, False))
    return out


def _file_ranges(files: Sequence[AddFile], name: str, t: DataType) -> list[_FileRange]:
    if _is_partition_column(files, name):
        return _partition_ranges(files, name, t)
    bounds = [_stat_bounds(f, name) for f in files]
    prefix: bytes | None = None
    if isinstance(t, StringType):
        # A string key's numbers start after the bytes every file's bounds share (key_numbers).
        pairs = [_texts(b[0], b[1]) for b in bounds if b is not None]
        prefix = key_numbers.shared_prefix([x for pair in pairs if pair is not None for x in pair])
    out = []
    for f, b in zip(files, bounds, strict=True):
        if b is None:
            out.append(_FileRange(f, None, None, True, prefix))
            continue
        raw_lo, raw_hi, may_null, only_nulls = b
        lo: int | None
        hi: int | None
        if prefix is None:
            lo, hi = key_numbers.statistic(raw_lo, t), key_numbers.statistic(raw_hi, t, is_max=True)
        elif (pair := _texts(raw_lo, raw_hi)) is not None:
            cut = len(pair[1]) >= key_numbers.MAYBE_CUT  # the max may be a cut prefix of the values
            lo, hi = key_numbers.number(pair[0], prefix), key_numbers.number(pair[1], prefix, ceiling=cut)
        else:
            lo = hi = None
        if lo is None or hi is None:
            # No value can match a file of only NULLs; other unknown bounds keep the file.
            out.append(
                _FileRange(f, 0, -1, True, prefix) if only_nulls else _FileRange(f, None, None, True, prefix)
            )
        else:
            out.append(_FileRange(f, lo, hi, may_null, prefix))
    return out


def _stat_bounds(f: AddFile, name: str) -> tuple[object, object, bool, bool] | None:
    """``(min, max, may hold NULLs, holds only NULLs)`` of a column in a file's statistics, as
    written; None without statistics."""
    st = parse_stats(f.stats)
    if st is None:
        return None
    nulls = st.lookup("null", (name,))
    counted = isinstance(nulls, int) and not isinstance(nulls, bool)
    only_nulls = counted and st.num_records is not None and nulls >= st.num_records
    return st.lookup("min", (name,)), st.lookup("max", (name,)), not counted or nulls > 0, only_nulls


def _texts(lo: object, hi: object) -> tuple[str, str] | None:
    """Both bounds when they are text in UTF-8 (a cut may leave half a surrogate pair: unknown)."""
    if not (isinstance(lo, str) and isinstance(hi, str)):
        return None
    try:
        lo.encode("utf-8"), hi.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return lo, hi


def _bucket_grid(lo: int, hi: int) -> tuple[int, int, int]:
    """``(base, end, width)``: ``_BUCKETS`` buckets of a power-of-two ``width`` from ``base`` (a
    multiple of it) to ``end``, covering ``[lo, hi]``. The numbers become literals in Spark's
    generated code, so they are kept stable: a table whose key range grows within the same
    power-of-two window yields the same text and reuses the compiled code (~25 ms per summary)."""
    width = 1
    while width * (_BUCKETS - 1) < hi - lo:
        width <<= 1
    base = (lo // width) * width
    return base, min(base + width * _BUCKETS - 1, key_numbers.LONG_MAX), width


@dataclass(frozen=True)
class SourceKeySummary:
    """What one aggregation of the source's join keys tells before the target is read."""

    files: tuple[AddFile, ...]  # the candidates some source key may match
    unique: bool  # no two source rows can match the same target row
    note: str | None = None  # how the candidates were pruned (None: not pruned)
    rows: int | None = None  # source rows, when the aggregation ran
    # The fewest source keys any kept file is expected to match (``_expected_matches``); None when
    # some file's bounds or row count are unknown.
    min_expected_matches: float | None = None


def _one_task(source: DataFrame) -> bool:
    """Whether the summary reads ``source`` in one task: a small source's aggregation then needs
    no shuffle (a coalesced single partition already has every key together), which saves a stage
    (two with the uniqueness check) of a small merge's ~0.1 s summary. Spark's estimate is the
    input's bytes, an upper bound, so a source it cannot bound keeps the parallel aggregation."""
    limit = int(setting(source.sparkSession, SessionConf.SUMMARY_ONE_TASK_MAX_BYTES))
    if limit <= 0:
        return False
    size = estimated_size_bytes(source)
    return size is not None and size <= limit


def summarize_source_keys(
    rm: ResolvedMerge,
    source: DataFrame,
    candidates: Sequence[AddFile],
    *,
    prune: bool,
    check_unique: bool,
    count_rows: bool = False,
    key_ranges: PruneKey | None = None,
) -> SourceKeySummary:
    """Prune ``candidates`` by the source's keys and/or check that the source is unique on them.

    Uniqueness: every source row matching a target row equals it on each equi-join column of the
    ON condition, so when no two source rows share that tuple (rows with a NULL in a ``=`` key
    match nothing and are ignored), no target row can match twice. Both answers come from one
    Spark job: count per key tuple, then min/max/max-count per bucket of the pruning key. The
    row count comes with every aggregation; ``count_rows`` asks for it when nothing else runs.
    """
    all_keys = equi_keys(rm, bounded_only=False)
    if not check_unique or not all_keys:
        all_keys = []
    prune_key, ranges = (key_ranges or pruning_key(rm, candidates)) if prune else (None, [])
    if prune_key is None and not all_keys:
        if not count_rows:
            return SourceKeySummary(tuple(candidates), False)
        one = source.coalesce(1) if _one_task(source) else source
        with small_result_query(source.sparkSession):
            return SourceKeySummary(tuple(candidates), False, rows=int(one.count()))

    keys = all_keys or ([prune_key] if prune_key is not None else [])
    if prune_key is not None and prune_key not in keys:
        keys = [*keys, prune_key]
    part = _partition_key(rm, candidates, prune_key) if prune_key is not None else None
    if part is not None and part.key not in keys:
        keys = [*keys, part.key]
    names = ", ".join(dict.fromkeys(scol(k.source_index) for k in keys))
    src = "(SELECT /*+ COALESCE(1) */ * FROM {src})" if _one_task(source) else "{src}"
    # One SQL text over the source: one analysis, a few Python->JVM round trips (each DataFrame
    # operation or Column object would cost its own).
    # Rows with a NULL in a ``=`` key match nothing: they never make the source non-unique.
    valid = " AND ".join(f"{scol(k.source_index)} IS NOT NULL" for k in keys if not k.null_safe) or "true"
    if all_keys:
        counted = f"SELECT {names}, count(1) AS count FROM {src} GROUP BY {names}"
    else:
        counted = f"SELECT {names}, 1 AS count FROM {src}"
    valid_count = f"CASE WHEN {valid} THEN count END"
    spark = source.sparkSession
    if prune_key is None:
        query = f"SELECT max({valid_count}) AS n, sum(count) AS rows FROM ({counted})"
        with small_result_query(spark):
            row = spark.sql(query, src=source).collect()[0]
        return SourceKeySummary(tuple(candidates), int(row["n"] or 0) <= 1, rows=int(row["rows"] or 0))

    field = rm.target_schema.fields[prune_key.target_index]
    known = [r for r in ranges if r.lo is not None and r.hi is not None and r.lo <= r.hi]
    t_lo = min(r.lo for r in known if r.lo is not None)
    t_hi = max(r.hi for r in known if r.hi is not None)
    base, end, width = _bucket_grid(t_lo, t_hi)
    if isinstance(field.dataType, StringType):
        prefix = next((r.prefix for r in ranges if r.prefix is not None), b"")
        num = key_numbers.number_sql(scol(prune_key.source_index), prefix)
    else:
        num = key_numbers.sql_of(scol(prune_key.source_index), field.dataType)
    # The arithmetic is in DOUBLE: a BIGINT difference overflows (an ANSI error) when the keys
    # span more than 2^63 (hashed keys). The buckets only group keys; each bucket's exact min/max
    # is what prunes, so rounding costs no correctness.
    bucket = (
        "CASE WHEN k IS NULL THEN -1 "
        f"WHEN NOT (k BETWEEN {base} AND {end}) THEN -2 "  # matches no candidate file
        f"ELSE CAST(floor((CAST(k AS DOUBLE) - {base}D) / {width}D) AS INT) END"
    )
    # A partition column among the keys: its distinct source values come along (the data key's
    # buckets cannot tell partitions apart).
    part_cols = ", collect_set(pk) AS pks, max(CAST(pk IS NULL AS INT)) AS pk_null" if part else ""
    part_value = f", {part.value_sql(scol(part.key.source_index))} AS pk" if part else ""
    # The number once per row, then its bucket: Spark keeps two projections apart when merging them
    # would repeat an expression that is not cheap (a string key's number, four times).
    numbered = f"SELECT {num} AS k, {valid_count} AS n, count{part_value} FROM ({counted})"
    inner = f"SELECT k, {bucket} AS b, n, count{', pk' if part else ''} FROM ({numbered})"
    aggregates = f"min(k) AS lo, max(k) AS hi, max(n) AS n, sum(count) AS rows{part_cols}"
    query = f"SELECT b, {aggregates} FROM ({inner}) GROUP BY b"
    with small_result_query(spark):
        rows = spark.sql(query, src=source).collect()  # at most _BUCKETS + 2 aggregate rows
    unique = bool(all_keys) and all(int(r["n"] or 0) <= 1 for r in rows)
    total = sum(int(r["rows"] or 0) for r in rows)
    has_null = any(r["b"] == -1 for r in rows)
    buckets = [
        (int(r["lo"]), int(r["hi"]), int(r["rows"] or 0)) for r in rows if r["b"] >= 0 and r["lo"] is not None
    ]
    summary = pruned_summary(candidates, ranges, field, prune_key.null_safe, buckets, has_null, unique, total)
    if part is not None:
        summary = part.prune(summary, rows)
    return summary


#: Above this many distinct source values of a partition key, its partitions are not pruned.
_MAX_PARTITION_VALUES = 10_000
_UNKNOWN = object()


@dataclass(frozen=True)
class _PartitionKey:
    """An equi-key on a partition column (integer, date or string) that is not the pruning key."""

    key: EquiKey
    name: str  # in ``partitionValues`` (physical under column mapping)
    t: DataType

    def value_sql(self, column: str) -> str:
        return column if isinstance(self.t, StringType) else key_numbers.sql_of(column, self.t)

    def file_value(self, f: AddFile) -> object:
        """The file's partition value as the source's values are collected; None for NULL,
        ``_UNKNOWN`` for a value that does not parse (the file is kept)."""
        raw = f.partition_values.get(self.name)
        if raw is None or raw == "":
            return None
        if isinstance(self.t, StringType):
            return raw
        value = key_numbers.of_value(raw, self.t)
        return _UNKNOWN if value is None else value

    def prune(self, summary: SourceKeySummary, rows: list) -> SourceKeySummary:  # type: ignore[type-arg]
        values: set[object] = set()
        for r in rows:
            values.update(r["pks"] or ())
        if len(values) > _MAX_PARTITION_VALUES:
            return summary
        source_null = any(int(r["pk_null"] or 0) for r in rows)

        def keep(f: AddFile) -> bool:
            v = self.file_value(f)
            if v is _UNKNOWN:
                return True
            if v is None:
                return self.key.null_safe and source_null
            return v in values

        kept = tuple(f for f in summary.files if keep(f))
        note = f"{summary.note}; {self.name}: {len(kept)} in the source's partitions"
        return replace(summary, files=kept, note=note)


def _partition_key(
    rm: ResolvedMerge, candidates: Sequence[AddFile], prune_key: EquiKey
) -> _PartitionKey | None:
    """An equi-key on a partition column besides ``prune_key``, when the candidates span several
    of its values."""
    for key in equi_keys(rm, bounded_only=False):
        if key == prune_key:
            continue
        field = rm.target_schema.fields[key.target_index]
        # Strings compare byte for byte only under the default collation.
        if not (_bounded(field.dataType) or field.dataType == StringType()):
            continue
        name = str((field.metadata or {}).get(PHYSICAL_NAME) or field.name)
        if not _is_partition_column(candidates, name):
            continue
        if len({f.partition_values.get(name) for f in candidates}) > 1:
            return _PartitionKey(key, name, field.dataType)
    return None


def pruned_summary(
    candidates: Sequence[AddFile],
    ranges: list[_FileRange],
    field: StructField,
    null_safe: bool,
    buckets: list[tuple[int, int, int]],
    has_null: bool,
    unique: bool,
    total: int,
) -> SourceKeySummary:
    """The summary from the source keys' ``(min, max, rows)`` groups (any overlap allowed) of the
    target column ``field`` and whether some source key is NULL."""
    buckets = sorted(buckets)
    starts = [lo for lo, _, _ in buckets]
    ends: list[int] = []  # running maximum of group ends (groups may overlap)
    for _, e, _ in buckets:
        ends.append(max(e, ends[-1]) if ends else e)

    def may_match(r: _FileRange) -> bool:
        if r.lo is None or r.hi is None:
            return True
        if null_safe and has_null and r.may_null:
            return True
        if r.lo > r.hi:
            return False
        # The groups starting at or before the file's max: one must end at or after its min.
        i = bisect.bisect_right(starts, r.hi) - 1
        return i >= 0 and ends[i] >= r.lo

    kept_ranges = [r for r in ranges if may_match(r)]
    kept = tuple(r.file for r in kept_ranges)
    note = f"{field.name}: {len(kept)} of {len(candidates)} candidate files may match the source keys"
    expected = _expected_matches(kept_ranges, buckets) if _density_known(candidates, field) else None
    return SourceKeySummary(kept, unique, note, rows=total, min_expected_matches=expected)


def _density_known(candidates: Sequence[AddFile], field: StructField) -> bool:
    """Whether the keys' numbers tell how many of a file's rows a source key range meets: not for a
    partition column (source keys per partition say nothing about a file's rows), nor for strings,
    timestamps or fractional decimals (their numbers say nothing of how densely keys fill a range)."""
    t = field.dataType
    stats_name = str((field.metadata or {}).get(PHYSICAL_NAME) or field.name)
    return not (
        _is_partition_column(candidates, stats_name)
        or isinstance(t, (StringType, TimestampType, TimestampNTZType))
        or (isinstance(t, DecimalType) and t.scale > 0)
    )


def _source_keys_between(buckets: Sequence[tuple[int, int, int]]) -> Callable[[int, int], float]:
    """``f(lo, hi)``: the source keys expected in ``[lo, hi]``, each bucket's rows spread evenly over
    its own ``[min, max]`` (buckets may overlap): the keys below ``hi + 1`` less those below ``lo``,
    two bisections per file, where summing the overlapping buckets per file cost files x buckets
    steps (2.2 s for a merge into 2,000 files whose key ranges all span the table).

    The rate between two points is summed afresh from the buckets open there, not carried along:
    a float left over after a dense bucket closes, times a sparse bucket's range of up to 2^64
    values, would be millions of keys off."""
    opening: dict[int, list[float]] = {}
    closing: dict[int, list[float]] = {}
    for lo, hi, count in buckets:
        if hi < lo or count <= 0:
            continue
        rate = count / (hi - lo + 1)
        opening.setdefault(lo, []).append(rate)
        closing.setdefault(hi + 1, []).append(rate)
    points = sorted(opening.keys() | closing.keys())
    below: list[float] = []  # keys below each point
    rates: list[float] = []  # keys per value from each point to the next
    open_rates: Counter[float] = Counter()
    total = rate = 0.0
    for i, point in enumerate(points):
        if i:
            total += rate * (point - points[i - 1])
        below.append(total)
        open_rates.subtract(closing.get(point, ()))
        open_rates.update(opening.get(point, ()))
        open_rates = +open_rates  # drops the closed rates
        rate = math.fsum(r * n for r, n in open_rates.items())
        rates.append(rate)

    def keys_below(x: int) -> float:
        i = bisect.bisect_right(points, x) - 1
        return 0.0 if i < 0 else below[i] + rates[i] * (x - points[i])

    return lambda lo, hi: keys_below(hi + 1) - keys_below(lo)


def _expected_matches(files: Sequence[_FileRange], buckets: list[tuple[int, int, int]]) -> float | None:
    """The fewest matches any of ``files`` is expected to get: the source keys inside its
    ``[min, max]`` (each bucket's rows spread evenly over the bucket's own ``[min, max]``) times
    the share of that range the file's rows fill (``numRecords / (max - min + 1)``, at most 1).

    An estimate, not a bound: it assumes the source's keys fall on the file's keys as often as
    the file's density says (true of dense keys, such as sequence ids, and of random keys). It
    only chooses an execution that is cheaper when every candidate is touched; a wrong guess costs
    time, never correctness (``merge/single_pass.py`` checks, and falls back)."""
    if not files:
        return None
    keys_between = _source_keys_between(buckets)
    fewest: float | None = None
    for r in files:
        n = r.file.num_records
        if r.lo is None or r.hi is None or n is None:
            return None
        if r.lo > r.hi:
            # No non-NULL key (kept for a null-safe match of NULLs): no key match to expect.
            return 0.0
        span = r.hi - r.lo + 1
        keys = keys_between(r.lo, r.hi)
        live = n - (r.file.deletion_vector.cardinality if r.file.deletion_vector is not None else 0)
        estimate = keys * min(1.0, live / span)
        fewest = estimate if fewest is None else min(fewest, estimate)
    return fewest


def pruning_key(rm: ResolvedMerge, candidates: Sequence[AddFile]) -> PruneKey:
    """The equi-join key pruning uses (the first one with exact statistics) and the candidates'
    ranges of it; no key when there are too few candidates or none has bounds for it. A merge
    computes it once for both summaries (a pass over every candidate's statistics)."""
    fields = rm.target_schema.fields
    bounded = sorted(equi_keys(rm), key=lambda k: _preference(fields[k.target_index].dataType))
    if len(candidates) < MIN_FILES or not bounded:
        return None, []
    fallback: PruneKey = (None, [])
    for key in bounded:
        field = rm.target_schema.fields[key.target_index]
        if CHAR_VARCHAR_TYPE in (field.metadata or {}):
            continue  # CHAR(n) compares padded values: not the statistics' bytes
        # Statistics and partition values name a column-mapped table's columns by physical names.
        stats_name = str((field.metadata or {}).get(PHYSICAL_NAME) or field.name)
        ranges = _file_ranges(candidates, stats_name, field.dataType)
        if not any(r.lo is not None and r.hi is not None and r.lo <= r.hi for r in ranges):
            continue
        if not _is_partition_column(candidates, stats_name):
            return key, ranges
        if fallback[0] is None and len({r.lo for r in ranges}) > 1:
            # A partition column prunes whole partitions; a data column with statistics, which
            # also separates the files within a partition, is preferred when there is one.
            fallback = (key, ranges)
    return fallback
