"""Delta's ``InsertOnlyMergeExecutor``: write only inserted rows; never rewrite a target file.

Used for true insert-only merges (``filter_matched_rows=True``: source LEFT ANTI JOIN the
data-skipped target, so duplicate matches are irrelevant) and by the classic path when no target
file was touched (``filter_matched_rows=False``: every source row is unmatched).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deltamerge.log.actions import AddFile
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
from deltamerge.spark.session import job_phase


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
        target = ctx.target(candidate_files)
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
