"""The classic executor's broadcast variant: no shuffle of the target (beyond Delta OSS).

Delta's job 2 is a full outer join of the source with the touched files, which shuffles every
target row with all its columns. When no target row matches twice and the source is small
enough to broadcast, the same rows come from two joins that stream the target instead:

- job 1 joins the broadcast source with the candidate files (inner) and keeps the matched rows'
  join keys, file, row position and action code (in DV mode also the new values of updated rows)
  in a persisted DataFrame; one aggregation of it gives the touched files, the new deletion
  vectors. In DV mode, where the matched row positions reach the driver anyway, they are the
  multiple-match check: a position listed twice means a target row matched by two source rows,
  and the merge goes to the Delta-shaped path, which reports it (the source-key summary then
  skips its per-key aggregation).
- job 2 writes ``touched files LEFT JOIN broadcast(source)`` (copy-on-write: matched and copied
  rows; in DV mode the matched rows come from the persisted DataFrame and the target is not read
  again) plus ``source LEFT ANTI JOIN matched keys`` (the NOT MATCHED rows), one projection. In
  copy-on-write mode the left join is the multiple-match check: it yields one row per target row
  unless a target row matched twice, so more rows out (the observed counters) than in (the
  files' statistics) discards the written files and takes the Delta-shaped path. Collecting row
  positions in job 1 instead would cost more than the write's free counters.

In copy-on-write mode, when the source-key summary expects every candidate to be touched, job 2
runs over every candidate without job 1 instead (``full_rewrite.py``).

Not used with NOT MATCHED BY SOURCE clauses or the change data feed; those take the Delta-shaped
path in ``classic.py``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddCDCFile, AddFile
from deltamerge.merge import positions
from deltamerge.merge.analysis import tcol
from deltamerge.merge.clauses import ClauseKind
from deltamerge.merge.context import MergeContext, observed_count, observed_metrics, timed_ms
from deltamerge.merge.output import (
    ACTION,
    COPY,
    SOURCE_PRESENT,
    TARGET_PRESENT,
    action_sql,
    changes_target_row,
    count_actions,
    counter_columns,
    output_exprs,
    output_sql,
    target_side_rows,
    touch_sql,
    tracking_sql,
    written_rows,
)
from deltamerge.merge.positions import Positions
from deltamerge.merge.pruning import equi_keys
from deltamerge.spark.scan import FILE_COL, ROW_INDEX_COL, file_index
from deltamerge.spark.session import conf_getter, job_phase, setting, small_result_query, without_adaptive
from deltamerge.spark.types import quote_name

_TOUCH = "__dm_touch"
_VALUE = "__dm_v"


def width(t: DataType) -> int:
    """Spark's default size of a value of ``t`` (its size estimate for a row)."""
    fixed: dict[type, int] = {
        BooleanType: 1, ByteType: 1, ShortType: 2, IntegerType: 4, LongType: 8, FloatType: 4,
        DoubleType: 8, DateType: 4, TimestampType: 8, TimestampNTZType: 8, StringType: 20,
        BinaryType: 100,
    }  # fmt: skip
    if isinstance(t, DecimalType):
        return 8 if t.precision <= 18 else 16
    if isinstance(t, StructType):
        return sum(width(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return 100 * width(t.elementType) // 10
    if isinstance(t, MapType):
        return 100 * (width(t.keyType) + width(t.valueType)) // 10
    return fixed.get(type(t), 64)


def eligible(ctx: MergeContext, *, not_matched_by_source: bool = False) -> bool:
    """Whether the broadcast variant can apply to this merge, before the source is summarised:
    no NOT MATCHED BY SOURCE clause (unless the caller handles them), no change data feed, an
    equi-join key, broadcasting allowed, and the source's rows counted on each read when they may
    change between reads (``merge.failIfSourceChanged`` on an unrepeatable, unmaterialized source)."""
    rm = ctx.rm
    if (
        not ctx.source_repeatable
        or ctx.cdf_enabled
        or (rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE) and not not_matched_by_source)
    ):
        return False
    return joinable(ctx)


def joinable(ctx: MergeContext) -> bool:
    """Whether the source can be broadcast into a hash join with the target: an equi-join key in
    the ON condition, and broadcasting allowed (by deltamerge's limit and by Spark's threshold)."""
    if not equi_keys(ctx.rm, bounded_only=False):
        return False
    limit = int(setting(ctx.spark, SessionConf.BROADCAST_SOURCE_MAX_BYTES))
    auto = conf_getter(ctx.spark)("spark.sql.autoBroadcastJoinThreshold")
    return limit > 0 and not (auto is not None and auto.strip().startswith("-"))


def fits(ctx: MergeContext) -> bool:
    """Whether the counted source is small enough to broadcast."""
    if ctx.source_rows is None:
        return False
    limit = int(setting(ctx.spark, SessionConf.BROADCAST_SOURCE_MAX_BYTES))
    row_bytes = 8 + sum(width(f.dataType) for f in ctx.rm.source_schema.fields)
    return ctx.source_rows * row_bytes <= limit


def usable(ctx: MergeContext, *, not_matched_by_source: bool = False) -> bool:
    """Whether the broadcast variant applies: eligible, small enough, and the source not known to
    hold duplicate keys (``source_unique`` None: job 1 checks the matches itself)."""
    return (
        ctx.source_unique is not False
        and eligible(ctx, not_matched_by_source=not_matched_by_source)
        and fits(ctx)
    )


class SourceNotUnique(Exception):
    """Job 1 found a target row matched by more than one source row: the caller takes the
    Delta-shaped path, which reports the error (or allows it, for a lone unconditional DELETE)."""


def decode_tagged(tagged: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """Per file: the positions of its changed rows, from every matched row's ``position * 2 +
    changed``; a position listed twice (a target row matched twice) raises ``SourceNotUnique``."""
    out: dict[str, list[int]] = {}
    for uri, values in tagged.items():
        if len({v >> 1 for v in values}) != len(values):
            raise SourceNotUnique()
        out[uri] = [v >> 1 for v in values if v & 1]
    return out


def find_matches(
    ctx: MergeContext, candidates: Sequence[AddFile], *, deletion_vectors: bool
) -> tuple[list[AddFile], dict[str, Positions] | None, DataFrame]:
    """Job 1: touched files (and DV row positions), plus the persisted matched rows."""
    rm = ctx.rm
    start = time.monotonic()
    # DV mode without an up-front uniqueness check: every matched row position goes to the driver
    # (with a bit for "changed") and must appear once.
    verify = deletion_vectors and ctx.source_unique is None
    source, source_rows = ctx.source, None
    if ctx.source_rows is None and not job_two_counts_source(ctx, deletion_vectors=deletion_vectors):
        source, source_rows = observed_count(ctx.source, "numSourceRows")
    source = source.selectExpr("*", f"true AS {SOURCE_PRESENT}")
    target = ctx.target(candidates, with_file=True, with_row_index=deletion_vectors).selectExpr(
        "*", f"true AS {TARGET_PRESENT}"
    )
    joined = F.broadcast(source).join(target, on=ctx.condition(), how="inner")
    # SQL text in selectExpr (fewer Python->JVM round trips than Column objects).
    joined = joined.selectExpr("*", f"{action_sql(rm, has_source=True, has_target=True)} AS {ACTION}")
    keep = [
        # The matched rows' target columns of the ON condition: a source row is unmatched when
        # the condition holds for none of them (``_unmatched_source``).
        *[tcol(i) for i in ctx.condition_target_columns()],
        FILE_COL,
        f"CAST(({touch_sql(rm)}) AS INT) AS {_TOUCH}",
        ACTION,
    ]
    if deletion_vectors:
        keep.append(ROW_INDEX_COL)
        outs = output_sql(rm, has_target=True, copies=False)
        if ctx.row_tracking:
            outs += tracking_sql(has_target=True)
        keep += [f"{c} AS {_VALUE}{j}" for j, c in enumerate(outs)]
    matched = joined.selectExpr(*keep).persist(StorageLevel.MEMORY_AND_DISK)
    aggs = [F.max(_TOUCH).alias("touched")]
    if deletion_vectors:
        modified = changes_target_row(rm, F.col(ACTION))
        if verify:
            # Every matched position with a bit for "changed": positions seen twice are counted
            # and the changed ones extracted in Spark (the reduce tasks), not in Python.
            listed = F.collect_list(F.col(ROW_INDEX_COL) * 2 + modified.cast("long"))
            seen = F.transform(listed, lambda v: F.shiftright(v, 1))
            aggs.append((F.size(listed) - F.size(F.array_distinct(seen))).alias("repeated"))
            changed = F.filter(listed, lambda v: v % 2 == 1)
            aggs.append(F.transform(changed, lambda v: F.shiftright(v, 1)).alias("rows"))
        else:
            aggs.append(F.collect_list(F.when(modified, F.col(ROW_INDEX_COL))).alias("rows"))
    try:
        with (
            job_phase(ctx.spark, "MERGE operation - scanning files for matches"),
            small_result_query(ctx.spark),
        ):
            per_file = matched.groupBy(FILE_COL).agg(*aggs)
            rows: list[Any]
            lists: dict[str, np.ndarray] = {}
            if deletion_vectors:  # the changed positions as arrays
                rows, lists = positions.fetch(per_file, FILE_COL, "rows")
            else:
                rows = per_file.collect()  # one row per file: metadata
        if verify and any(int(r["repeated"] or 0) for r in rows):
            raise SourceNotUnique()
    except BaseException:
        matched.unpersist()
        ctx.metrics.scanTimeMs += timed_ms(start)
        raise
    if ctx.source_rows is not None:
        ctx.metrics.numSourceRows = ctx.source_rows
    elif source_rows is not None:
        ctx.metrics.numSourceRows = source_rows()
    index = file_index(ctx.table_root, candidates)
    touched = [index.lookup(r[FILE_COL]) for r in rows if int(r["touched"] or 0) > 0]
    modified_rows: dict[str, Positions] | None = None
    if deletion_vectors:
        modified_rows = {
            index.lookup(r[FILE_COL]).path: lists[r[FILE_COL]]
            for r in rows
            if int(r["touched"] or 0) > 0 and r[FILE_COL] in lists
        }
    ctx.metrics.scanTimeMs += timed_ms(start)
    return touched, modified_rows, matched


def job_two_counts_source(ctx: MergeContext, *, deletion_vectors: bool) -> bool:
    """Whether job 2 (or, when no file is touched, the inserts' own scan), not job 1, counts the
    source rows: in a DV merge with NOT MATCHED clauses whose count the source-key summary did not
    give. That job reads every source row (the anti join) and unions two plans built on job 1's
    rows; PySpark 4.0's Connect client fails on a plan holding one observation twice (``dict() got
    multiple values``)."""
    return ctx.source_rows is None and deletion_vectors and bool(ctx.rm.of_kind(ClauseKind.NOT_MATCHED))


def try_find_matches(
    ctx: MergeContext, candidates: Sequence[AddFile], *, deletion_vectors: bool
) -> tuple[list[AddFile], dict[str, Positions] | None, DataFrame] | None:
    """``find_matches`` when the variant applies and no target row matched twice, else None (the
    caller takes the Delta-shaped path)."""
    if not candidates or not usable(ctx):
        return None
    try:
        return find_matches(ctx, candidates, deletion_vectors=deletion_vectors)
    except SourceNotUnique:
        ctx.source_unique = False
        return None


def _unmatched_source(ctx: MergeContext, matched: DataFrame, source: DataFrame) -> DataFrame:
    """Source rows no target row matched (the NOT MATCHED candidates), with their action code.

    Every target row a source row matches is among the matched rows, so the ON condition against
    their target columns decides it (the equi-join keys alone would not: a source row sharing a
    key with a matched one may still fail the rest of the condition).
    """
    rm = ctx.rm
    # Spark infers filters on these columns from the source's constraints (a source of literal
    # rows: ``k <=> NaN OR ...``), and a scan of the cached rows skips every batch whose column
    # statistics leave the literal out: they never count NaN. Behind ``nanvl`` (as in
    # ``MergeContext.target``) no filter reaches the cached column.
    opaque = set(ctx.float_keys(partitions=True))
    matched_targets = matched.selectExpr(
        *[f"nanvl({c}, {c}) AS {c}" if c in opaque else c for c in map(tcol, ctx.condition_target_columns())]
    )
    # The matched rows are at most the source's rows, which fit the broadcast limit.
    unmatched = source.join(F.broadcast(matched_targets), on=ctx.condition(), how="left_anti")
    return unmatched.selectExpr("*", f"{action_sql(rm, has_source=True, has_target=False)} AS {ACTION}")


def live_rows(files: Sequence[AddFile]) -> int | None:
    """Rows a scan of ``files`` yields, from their statistics (None when a file has none)."""
    total = 0
    for f in files:
        n = f.num_logical_records
        if n is None:
            return None
        total += n
    return total


@contextlib.contextmanager
def undone_on_error(ctx: MergeContext) -> Iterator[None]:
    """On an exception, delete the files written inside the block (they will not be committed)
    and restore the added-files metrics, so that another execution can take over."""
    mark = write_mark(ctx)
    try:
        yield
    except BaseException:
        undo_writes(ctx, mark)
        raise


def write_mark(ctx: MergeContext) -> tuple[int, int, int, int]:
    """Where ``ctx``'s writes stand: the written paths' count and the added-files metrics."""
    m = ctx.metrics
    return (
        len(ctx.written_paths),
        m.numTargetFilesAdded,
        m.numTargetBytesAdded,
        m.numTargetPartitionsAddedTo,
    )


def undo_writes(ctx: MergeContext, mark: tuple[int, int, int, int]) -> None:
    """Delete the files written since ``mark`` and restore the added-files metrics."""
    m = ctx.metrics
    for rel in ctx.written_paths[mark[0] :]:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(ctx.table_root, rel))
    del ctx.written_paths[mark[0] :]
    m.numTargetFilesAdded, m.numTargetBytesAdded, m.numTargetPartitionsAddedTo = mark[1:]


def write_output(ctx: MergeContext, out: DataFrame, phase: str) -> list[AddFile]:
    """Write the variant's output rows (with their action code). Every join in it is a broadcast,
    so AQE has nothing to re-plan; partitioned tables shuffle before the write and keep it, and so
    do optimized writes (Spark drops a rebalance without it)."""
    return write_output_rows(ctx, written_rows(out, ctx.rm), phase)


def write_output_rows(ctx: MergeContext, rows: DataFrame, phase: str) -> list[AddFile]:
    """``write_output`` of rows that are all written (no action code)."""
    keep = ctx.partition_columns or ctx.optimize_write_bin_size
    adaptive = contextlib.nullcontext() if keep else without_adaptive(ctx.spark)
    with job_phase(ctx.spark, phase), adaptive:
        return ctx.write(rows)


def write_changes(
    ctx: MergeContext, touched: list[AddFile], matched: DataFrame, *, deletion_vectors: bool
) -> tuple[list[AddFile], list[AddCDCFile]]:
    """Job 2 (see the module docstring); fills the row counters."""
    rm = ctx.rm
    m = ctx.metrics
    start = time.monotonic()
    final_names = [f.name for f in rm.final_schema.fields] + list(ctx.row_tracking or ())
    # Copy-on-write without an up-front uniqueness check: the left join yields one row per target
    # row unless a target row matched twice, so rows out > rows in is the multiple-match check.
    verify = not deletion_vectors and ctx.source_unique is None
    target_rows: Callable[[], int] = lambda: 0  # noqa: E731
    inserting = bool(rm.of_kind(ClauseKind.NOT_MATCHED))
    parts: list[DataFrame] = []
    if deletion_vectors:
        # Updated and deleted rows, values already computed in job 1; the target is not read.
        changed = matched.where(f"{ACTION} != {COPY}")
        values = [f"{_VALUE}{j} AS {quote_name(n)}" for j, n in enumerate(final_names)]
        parts.append(changed.selectExpr(*values, ACTION))
    else:
        source = ctx.source.selectExpr("*", f"true AS {SOURCE_PRESENT}")
        target = ctx.target(touched).selectExpr("*", f"true AS {TARGET_PRESENT}")
        if verify:
            known = live_rows(touched)
            if known is None:  # a file without statistics: count the rows as they are read
                target, target_rows = observed_count(target, "targetRows")
            else:
                target_rows = lambda: known  # noqa: E731
        rewritten = target.join(F.broadcast(source), on=ctx.condition(), how="left")
        rewritten = rewritten.selectExpr(
            "*", f"{action_sql(rm, has_source=True, has_target=True)} AS {ACTION}"
        )
        outs = output_exprs(rm, has_target=True, tracking=ctx.row_tracking)
        parts.append(rewritten.selectExpr(*outs, quote_name(ACTION)))
    source_rows: Callable[[], int] | None = None
    if inserting:
        read = ctx.source
        if job_two_counts_source(ctx, deletion_vectors=deletion_vectors):
            read, source_rows = observed_count(read, "numSourceRows")
        unmatched = _unmatched_source(ctx, matched, read)
        outs = output_exprs(rm, has_target=False, tracking=ctx.row_tracking)
        parts.append(unmatched.selectExpr(*outs, quote_name(ACTION)))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    out, get_counts = observed_metrics(out, counter_columns(rm), "mergeCounts")
    phase = (
        "MERGE operation - writing modified rows"
        if deletion_vectors
        else f"MERGE operation - Rewriting {len(touched)} files"
    )
    try:
        with undone_on_error(ctx):
            adds = write_output(ctx, out, phase)
            counts = get_counts(lambda: count_actions(out, rm))
            if source_rows is not None:
                m.numSourceRows = source_rows()
            if verify and target_side_rows(rm, counts) > target_rows():
                m.rewriteTimeMs += timed_ms(start)
                raise SourceNotUnique()
        m.add_clause_counts(rm, counts)
    finally:
        matched.unpersist()
    # Delta's second scan reads the source rows job 1 counted: the source is materialized or
    # repeatable, or merge.failIfSourceChanged is off (``eligible``), so the count is not compared.
    m.numSourceRowsInSecondScan = m.numSourceRows
    m.use_second_scan_source_rows = False
    m.rewriteTimeMs += timed_ms(start)
    return adds, []
