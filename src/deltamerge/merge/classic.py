"""Delta's ``ClassicMergeExecutor``: find the touched files, then rewrite them through one join.

Job 1 joins the source with the data-skipped target (carrying ``_metadata.file_path`` and
``_metadata.row_index``), aggregates per target row to a match count and per file to
(touched, max matches, over-count), and collects only those per-file rows: the touched-file set
and the multiple-match check come from one job, with no accumulator or UDF.
Job 2 joins the source with the touched files only and writes every row of them through the
per-row CASE projection of ``output``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deltamerge.errors import MultipleSourceRowMatchingTargetRowError
from deltamerge.log.actions import Action, AddCDCFile, AddFile
from deltamerge.merge import positions
from deltamerge.merge.analysis import tcol
from deltamerge.merge.clauses import ActionType, ClauseKind
from deltamerge.merge.context import MergeContext, observed_count, observed_metrics, timed_ms
from deltamerge.merge.output import (
    ACTION,
    COPY,
    DROP,
    SOURCE_PRESENT,
    TARGET_PRESENT,
    action_column,
    changes_target_row,
    count_actions,
    counter_columns,
    output_columns,
    touch_condition,
    written_rows,
)
from deltamerge.merge.positions import Positions
from deltamerge.spark.scan import FILE_COL, ROW_INDEX_COL, file_index
from deltamerge.spark.session import job_phase
from deltamerge.spark.write import now_ms

_USAGE = "https://docs.delta.io/latest/delta-update.html#upsert-into-a-table-using-merge"


@dataclass(frozen=True)
class TouchedFiles:
    """Result of job 1."""

    files: list[AddFile]
    over_count: int  # duplicate matches of an allowed unconditional DELETE, subtracted later
    modified_rows: dict[str, Positions] | None = None  # DV mode: add.path -> row indexes updated/deleted


def single_unconditional_delete(ctx: MergeContext) -> bool:
    """Delta allows duplicate matches only when the MATCHED clauses are one unconditional DELETE."""
    matched = ctx.rm.of_kind(ClauseKind.MATCHED)
    return len(matched) == 1 and matched[0].action is ActionType.DELETE and matched[0].condition is None


def _multiple_match_error(
    ctx: MergeContext, candidates: Sequence[AddFile]
) -> MultipleSourceRowMatchingTargetRowError:
    # Error path only: name a few offending target rows so the user can fix the source at once.
    target = ctx.target(candidates, with_file=True, with_row_index=True)
    joined = ctx.source.withColumn(SOURCE_PRESENT, F.lit(True)).join(target, on=ctx.condition(), how="inner")
    key_cols = ctx.condition_target_columns()
    shown_cols = [F.col(tcol(i)).alias(ctx.rm.target_schema.fields[i].name) for i in key_cols]
    dup = joined.groupBy(FILE_COL, ROW_INDEX_COL).agg(F.count(F.lit(1)).alias("n")).where("n > 1")
    n_rows = dup.count()
    examples = (
        joined.join(dup, on=[FILE_COL, ROW_INDEX_COL], how="left_semi")
        .select(*shown_cols)
        .distinct()
        .limit(5)
        .collect()
        if shown_cols
        else []
    )
    listed = "; ".join(", ".join(f"{k}={v!r}" for k, v in r.asDict().items()) for r in examples)
    detail = f"\n{n_rows} target row(s) are matched by more than one source row"
    if listed:
        detail += f", for example: {listed}"
    return MultipleSourceRowMatchingTargetRowError(
        "Cannot perform Merge as multiple source rows matched and attempted to modify the same\n"
        "target row in the Delta table in possibly conflicting ways. By SQL semantics of Merge,\n"
        "when multiple source rows match on the same target row, the result may be ambiguous\n"
        "as it is unclear which source row should be used to update or delete the matching\n"
        "target row. You can preprocess the source table to eliminate the possibility of\n"
        f"multiple matches. Please refer to\n{_USAGE}{detail}. "
        "Deduplicate the source on the merge key (e.g. with a window or groupBy) and retry."
    )


def find_touched_files(
    ctx: MergeContext, candidates: Sequence[AddFile], *, collect_modified_rows: bool = False
) -> TouchedFiles:
    """Job 1: the candidate files some source row matches, plus the multiple-match check.

    With ``collect_modified_rows`` (deletion-vector mode) it also returns, per touched file, the
    row indexes that an UPDATE or DELETE clause changes: the new deletion vectors, computed in the
    same job (aggregated on the executors; only row positions reach the driver).
    """
    rm = ctx.rm
    has_nmbs = bool(rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE))
    start = time.monotonic()
    # A source unique on the ON condition's equi-join columns matches each target row at most
    # once: no per-row aggregation (a shuffle of every matched row) is needed, only per file.
    unique = ctx.source_unique
    per_row_needed = collect_modified_rows or not unique
    source, source_rows = observed_count(ctx.source, "numSourceRows")
    source = source.withColumn(SOURCE_PRESENT, F.lit(True))
    target = ctx.target(candidates, with_file=True, with_row_index=per_row_needed).withColumn(
        TARGET_PRESENT, F.lit(True)
    )
    joined = source.join(target, on=ctx.condition(), how="right" if has_nmbs else "inner")

    touch = touch_condition(rm)
    if rm.is_matched_only:
        touch = F.col(SOURCE_PRESENT).isNotNull() & touch
    modified = F.lit(False)
    if collect_modified_rows:
        modified = changes_target_row(rm, action_column(rm, has_source=True, has_target=True))
    if unique:
        # At most one joined row per target row: the file-level aggregates come straight from it.
        per_row = joined.select(
            F.col(FILE_COL),
            *([F.col(ROW_INDEX_COL)] if collect_modified_rows else []),
            F.col(SOURCE_PRESENT).isNotNull().cast("int").alias("n"),
            touch.cast("int").alias("touch"),
            modified.cast("int").alias("modified"),
        )
    else:
        row_aggs = [
            F.count(SOURCE_PRESENT).alias("n"),
            F.max(touch.cast("int")).alias("touch"),
            F.max(modified.cast("int")).alias("modified"),
        ]
        per_row = joined.groupBy(FILE_COL, ROW_INDEX_COL).agg(*row_aggs)
    file_aggs = [
        F.max("n").alias("max_n"),
        F.sum(F.when(F.col("n") > 1, F.col("n") - 1).otherwise(0)).alias("over"),
        F.max("touch").alias("touched"),
    ]
    if collect_modified_rows:
        file_aggs.append(F.collect_list(F.when(F.col("modified") == 1, F.col(ROW_INDEX_COL))).alias("rows"))
    per_file = per_row.groupBy(FILE_COL).agg(*file_aggs)
    rows: list[Any]
    changed: dict[str, np.ndarray] = {}
    with job_phase(ctx.spark, "MERGE operation - scanning files for matches"):
        if collect_modified_rows:
            rows, changed = positions.fetch(per_file, FILE_COL, "rows")  # the positions as arrays
        else:
            rows = per_file.collect()  # one row per candidate file: metadata, not table data
    ctx.metrics.numSourceRows = source_rows()

    max_matches = max((int(r["max_n"] or 0) for r in rows), default=0)
    over = sum(int(r["over"] or 0) for r in rows)
    if max_matches > 1 and not single_unconditional_delete(ctx):
        raise _multiple_match_error(ctx, candidates)

    index = file_index(ctx.table_root, candidates)
    touched = [index.lookup(r[FILE_COL]) for r in rows if int(r["touched"] or 0) > 0]
    modified_rows: dict[str, Positions] | None = None
    if collect_modified_rows:
        modified_rows = {
            index.lookup(r[FILE_COL]).path: changed[r[FILE_COL]]
            for r in rows
            if int(r["touched"] or 0) > 0 and r[FILE_COL] in changed
        }
    ctx.metrics.scanTimeMs += timed_ms(start)
    return TouchedFiles(touched, over, modified_rows)


def joined_with_action(
    ctx: MergeContext, target: DataFrame, join_type: str
) -> tuple[DataFrame, Callable[[], int]]:
    """Job 2's join: the source (its rows counted as ``numSourceRowsInSecondScan``) joined with
    ``target`` by ``join_type``, each row with its action code; and the source count's getter."""
    source, source_rows = observed_count(ctx.source, "numSourceRowsInSecondScan")
    source = source.withColumn(SOURCE_PRESENT, F.lit(True))
    target = target.withColumn(TARGET_PRESENT, F.lit(True))
    joined = source.join(target, on=ctx.condition(), how=join_type)
    return joined.withColumn(ACTION, action_column(ctx.rm, has_source=True, has_target=True)), source_rows


def write_all_changes(
    ctx: MergeContext, touched: TouchedFiles, *, join_type: str
) -> tuple[list[AddFile], list[AddCDCFile]]:
    """Job 2: join the source with the touched files and write the result.

    ``join_type`` follows the table of delta_merge_spec.md §1.5 step 7. In copy-on-write mode every
    row of the touched files is written (copied rows included); in deletion-vector mode
    (``touched.modified_rows`` set) only updated and inserted rows are, the rest stays in the old
    files behind their new deletion vectors.
    """
    rm = ctx.rm
    m = ctx.metrics
    start = time.monotonic()
    dv_mode = touched.modified_rows is not None
    dedupe = ctx.cdf_enabled and touched.over_count > 0
    target = ctx.target(touched.files, with_file=dedupe, with_row_index=dedupe)
    with_action, source_rows = joined_with_action(ctx, target, join_type)
    if dv_mode:
        # Only rows that change or are inserted: unchanged rows stay where they are.
        with_action = with_action.where(~F.col(ACTION).isin(COPY, DROP))
    with_action, get_counts = observed_metrics(with_action, counter_columns(rm), "mergeCounts")

    phase = (
        "MERGE operation - writing modified rows"
        if dv_mode
        else f"MERGE operation - Rewriting {len(touched.files)} files"
    )
    cdc: list[AddCDCFile] = []
    with job_phase(ctx.spark, phase):
        if ctx.cdf_enabled:
            from deltamerge.merge.cdc import write_with_changes

            adds, cdc = write_with_changes(ctx, with_action, dedupe_deletes=dedupe, copies=not dv_mode)
        else:
            outs = output_columns(rm, has_target=True, copies=not dv_mode, tracking=ctx.row_tracking)
            projected = with_action.select(*outs, F.col(ACTION))
            adds = ctx.write(written_rows(projected, rm))

    m.add_clause_counts(rm, get_counts(lambda: count_actions(with_action, rm)))
    m.numSourceRowsInSecondScan = source_rows()
    m.use_second_scan_source_rows = join_type in ("full", "left")
    if touched.over_count:
        m.numTargetRowsMatchedDeleted = max(0, m.numTargetRowsMatchedDeleted - touched.over_count)
    m.rewriteTimeMs += timed_ms(start)
    return adds, cdc


def copy_on_write_join(ctx: MergeContext) -> str:
    """Job-2 join type in copy-on-write mode."""
    from deltamerge.config import SessionConf
    from deltamerge.spark.session import setting

    if ctx.rm.is_matched_only and setting(ctx.spark, SessionConf.OPTIMIZE_MATCHED_ONLY):
        return "right"
    return "full"


def every_file_touched(ctx: MergeContext, candidates: Sequence[AddFile]) -> TouchedFiles | None:
    """Job 1's answer without job 1, when it is known in advance: an unconditional NOT MATCHED BY
    SOURCE clause acts on every target row no source row matches, so every candidate file that
    has a row is touched, and a source unique on the equi-join columns cannot match a row twice.
    Needs every candidate's row count (statistics); None when job 1 has to run."""
    rm = ctx.rm
    unconditional = any(c.condition is None for c in rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE))
    if not (unconditional and ctx.source_unique and ctx.source_rows is not None):
        return None
    from deltamerge.merge.broadcast import live_rows

    counts = [live_rows([f]) for f in candidates]
    if any(n is None for n in counts):
        return None
    ctx.metrics.numSourceRows = ctx.source_rows
    return TouchedFiles([f for f, n in zip(candidates, counts, strict=True) if n], 0)


def _broadcast_variant(
    ctx: MergeContext, candidates: Sequence[AddFile]
) -> tuple[list[AddFile], list[AddFile]] | None:
    """``(touched files, new files)`` from the broadcast variant (one pass or two jobs), or None
    when it does not apply or a target row matched twice (the Delta-shaped path then reports it,
    or allows it for a lone unconditional DELETE; the variant's files are gone again). When every
    candidate is expected to be touched, job 2 runs over all of them without job 1
    (``full_rewrite``)."""
    from deltamerge.merge import broadcast, full_rewrite, single_pass, uniform_upsert

    done = uniform_upsert.try_rewrite(ctx, candidates)
    # A single pass that ran and handed back already found the guess below wrong.
    single = done is None and single_pass.applies(ctx, candidates, deletion_vectors=False)
    if done is None:
        done = single_pass.try_write(ctx, candidates, deletion_vectors=False)
    if done is not None:
        return done.touched, done.adds
    if not single and single_pass.expects_every_file_touched(ctx):
        # Also for a source too large to broadcast: the guess saves the Delta-shaped job 1.
        adds = full_rewrite.try_rewrite(ctx, candidates, copy_on_write_join(ctx))
        if adds is not None:
            return list(candidates), adds
    found = broadcast.try_find_matches(ctx, candidates, deletion_vectors=False)
    if found is None:
        return None
    files, _, matched = found
    if not files:
        matched.unpersist()
        return [], inserts_without_matches(ctx, True)
    try:
        adds, _ = broadcast.write_changes(ctx, files, matched, deletion_vectors=False)
    except broadcast.SourceNotUnique:
        ctx.source_unique = False
        return None
    return files, adds


def changed_rows_join(ctx: MergeContext) -> str:
    """Job-2 join when only changed and inserted rows are written (DV mode; delta_merge_spec.md
    §1.5 step 7)."""
    rm = ctx.rm
    if rm.is_matched_only:
        return "inner"
    if not rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE):
        return "left"
    if not rm.of_kind(ClauseKind.NOT_MATCHED):
        return "right"
    return "full"


def every_row_changes(ctx: MergeContext) -> bool:
    """Every target row the merge reads is updated or deleted: an unconditional MATCHED clause
    catches each matched row (every MATCHED action changes the row) and an unconditional NOT
    MATCHED BY SOURCE clause each other one."""
    rm = ctx.rm
    return any(c.condition is None for c in rm.of_kind(ClauseKind.MATCHED)) and any(
        c.condition is None for c in rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE)
    )


def replace_whole_files(
    ctx: MergeContext, candidates: Sequence[AddFile], touched: TouchedFiles, *, deletion_vectors: bool
) -> list[Action]:
    """The file actions of a merge that changes every row (``every_row_changes``) of the files
    known to be touched without job 1 (``every_file_touched``): a "replace the target with the
    source" merge.

    The write joins the files as DV mode does, writing only updated and inserted rows: nothing is
    copied, so the target's scan reads only the columns the clauses use. The files are removed
    whole: in DV mode their deletion vectors would cover every row, and such a file is removed
    whole there too.
    """
    if not touched.files:
        return list(inserts_without_matches(ctx, bool(candidates)))
    changed_only = TouchedFiles(touched.files, 0, modified_rows={})
    adds, cdc = write_all_changes(ctx, changed_only, join_type=changed_rows_join(ctx))
    if deletion_vectors:
        ctx.metrics.numTargetDeletionVectorsRemoved += sum(1 for f in touched.files if f.deletion_vector)
    return [*removed_whole(ctx, touched.files), *adds, *cdc]


def removed_whole(ctx: MergeContext, files: Sequence[AddFile]) -> list[Action]:
    """Remove actions of ``files`` (whole), with their metrics."""
    m = ctx.metrics
    m.numTargetFilesRemoved += len(files)
    m.numTargetBytesRemoved += sum(f.size for f in files)
    if ctx.partition_columns:
        m.numTargetPartitionsRemovedFrom = len({tuple(sorted(f.partition_values.items())) for f in files})
    ts = now_ms()
    return [f.remove(ts) for f in files]


def run_classic(ctx: MergeContext, candidates: Sequence[AddFile]) -> list[Action]:
    """Classic copy-on-write path: returns the commit's file actions."""
    from deltamerge.merge import uniform_upsert

    replaced = uniform_upsert.try_replace(ctx, candidates, deletion_vectors=False)
    if replaced is not None:
        return [*removed_whole(ctx, replaced.touched), *replaced.adds]
    known = every_file_touched(ctx, candidates)
    if known is not None and every_row_changes(ctx):
        return replace_whole_files(ctx, candidates, known, deletion_vectors=False)
    cdc: list[AddCDCFile] = []
    found = _broadcast_variant(ctx, candidates)
    if found is not None:
        files, adds = found
    else:
        touched = known
        if touched is None:
            touched = find_touched_files(ctx, candidates) if candidates else TouchedFiles([], 0)
        if not touched.files:
            return list(inserts_without_matches(ctx, bool(candidates)))
        adds, cdc = write_all_changes(ctx, touched, join_type=copy_on_write_join(ctx))
        files = touched.files
    return [*removed_whole(ctx, files), *adds, *cdc]


def inserts_without_matches(ctx: MergeContext, scanned: bool) -> list[AddFile]:
    """No target file was touched: every source row is unmatched (``writeOnlyInserts(false)``)."""
    from deltamerge.merge.insert_only import write_only_inserts

    m = ctx.metrics
    adds = write_only_inserts(ctx, filter_matched_rows=False)
    if not scanned:
        # No target file to join with: count the source on its own, as Delta does.
        n = m.numSourceRowsInSecondScan
        m.numSourceRows = n if n >= 0 else int(ctx.source.count())
    return adds
