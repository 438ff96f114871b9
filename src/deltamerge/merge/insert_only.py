"""Delta's ``InsertOnlyMergeExecutor``: write only inserted rows; never rewrite a target file.

Used for true insert-only merges (``filter_matched_rows=True``: source LEFT ANTI JOIN the
data-skipped target, so duplicate matches are irrelevant) and by the classic path when no target
file was touched (``filter_matched_rows=False``: every source row is unmatched). On large
candidates the anti join is against the target rows some source row matches, found by a semi-join
with the broadcast source (``_target_side``), instead of every candidate row.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.merge import broadcast
from deltamerge.merge.analysis import tcol
from deltamerge.merge.clauses import ClauseKind
from deltamerge.merge.context import MergeContext, observed_count, observed_metrics, timed_ms
from deltamerge.merge.output import (
    ACTION,
    DROP,
    count_actions,
    counter_columns,
    output_columns,
    project_output,
    sql_col,
)
from deltamerge.spark.session import job_phase, setting


def write_only_inserts(
    ctx: MergeContext, *, filter_matched_rows: bool, candidate_files: Sequence[AddFile] = ()
) -> list[AddFile]:
    """Insert the unmatched source rows; returns the new AddFiles and fills ``ctx.metrics``."""
    rm = ctx.rm
    m = ctx.metrics
    inserts = rm.of_kind(ClauseKind.NOT_MATCHED)
    start = time.monotonic()
    if not inserts and not filter_matched_rows:
        m.numSourceRowsInSecondScan = -1
        return []

    source, source_rows = observed_count(ctx.source, "numSourceRows")
    if len(inserts) == 1 and inserts[0].condition is not None:
        source = source.where(sql_col(inserts[0].condition))

    if filter_matched_rows and candidate_files:
        target = _target_side(ctx, candidate_files)
        prepared: DataFrame = source.join(target, on=ctx.condition(), how="left_anti")
    else:
        prepared = source

    if len(inserts) == 1:
        # Single clause: project directly, no CASE and no drop marker.
        projected = prepared.withColumn(ACTION, F.lit(inserts[0].index))
        out = projected.select(*output_columns(rm, has_target=False), F.col(ACTION))
    else:
        out = project_output(prepared, rm, has_source=True, has_target=False)
    out, get_counts = observed_metrics(out, counter_columns(rm), "insertCounts")
    final = out.where(F.col(ACTION) != F.lit(DROP)).drop(ACTION)

    with job_phase(ctx.spark, "MERGE operation - writing new files for only inserts"):
        adds = ctx.write(final)

    # No target side: no row has the COPY code, so "copied" counts 0.
    counts = get_counts(lambda: count_actions(out, rm))
    m.add_clause_counts(rm, counts)
    n_source = source_rows()
    if filter_matched_rows:
        m.numSourceRows = n_source
    else:
        m.numSourceRowsInSecondScan = n_source
    m.rewriteTimeMs += timed_ms(start)
    return adds


def _target_side(ctx: MergeContext, files: Sequence[AddFile]) -> DataFrame:
    """The target rows the source is anti-joined with: the candidates' rows, or (beyond Delta OSS)
    only those some source row matches.

    Delta's anti join shuffles every candidate row's keys (and the source). When the candidates are
    large against a source small enough to broadcast, ``candidates LEFT SEMI JOIN broadcast(source)``
    streams the target instead and keeps its matched rows (the ON condition's target columns). The
    anti join against them drops the same source rows for any ON condition: a source row matches a
    target row only if that row matched some source row. They are broadcast when even every
    candidate row would fit (``broadcastMatchedMaxBytes``), else both sides shuffle (only matched
    rows move). It reads the source again, so only a source that gives the same rows twice takes it.
    5M target rows, 500k source rows, half of them new (bench, raw Spark): 1.69 s against 2.21 s.
    """
    target = ctx.target(files)
    rows = broadcast.live_rows(files)
    if (
        rows is None
        or not semi_join_possible(ctx, files)
        or ctx.source_rows is None
        or rows < 3 * ctx.source_rows
        or not broadcast.fits(ctx)
    ):
        return target
    columns = ctx.condition_target_columns()
    fields = ctx.rm.target_schema.fields
    keys = target.select(*map(tcol, columns))
    matched = keys.join(F.broadcast(ctx.source), on=ctx.condition(), how="left_semi")
    size = rows * (8 + sum(broadcast.width(fields[i].dataType) for i in columns))
    fits = size <= int(setting(ctx.spark, SessionConf.BROADCAST_MATCHED_MAX_BYTES))
    return F.broadcast(matched) if fits else matched


def semi_join_possible(ctx: MergeContext, files: Sequence[AddFile]) -> bool:
    """Whether ``_target_side`` may semi-join ``files`` before the source is counted: enough live
    rows, a repeatable source, an equi-join key and broadcasting allowed (the source-key summary
    counts the source only then)."""
    least = int(setting(ctx.spark, SessionConf.INSERT_ONLY_SEMI_JOIN_MIN_ROWS))
    rows = broadcast.live_rows(files)
    return (
        least >= 0
        and rows is not None
        and rows >= least
        and ctx.source_repeatable
        and broadcast.joinable(ctx)
    )
