"""The broadcast variant as one Spark job, for candidate files of few rows (beyond Delta OSS).

After the source-key summary, a small merge (a CDC micro-batch, an upsert into one file) often has
a few candidate files left. Finding which of them are touched (job 1) then costs more than it
saves: its planning, broadcast and Spark job are a large part of the merge's time. When the
candidates hold at most ``spark.deltamerge.merge.singlePassMaxRows`` live rows, or a copy-on-write
merge is expected to touch every candidate (``expects_every_file_touched``: job 1 would only confirm
it; with NOT MATCHED clauses up to four times that many rows), one write does it all:

- ``candidates LEFT JOIN broadcast(source)``: copy-on-write writes every row (updated or copied),
  DV mode only the rows a clause changes;
- ``source LEFT ANTI JOIN broadcast(the candidates' ON-condition columns)``: the NOT MATCHED rows;
- ``observe()`` collects the touched files, in DV mode every matched row's position with a bit for
  "changed" (the new deletion vectors and the multiple-match check), and the clause counters.

Copy-on-write must rewrite exactly the touched files. The copies of an untouched candidate are
mixed into the output, so unless every candidate was touched the files are deleted again and the
two-job variant runs (``merge/broadcast.py``). DV mode writes no copies and keeps its output
whatever was touched. A target row matched twice discards the output as well
(``SourceNotUnique``): the Delta-shaped path reports it.

DV mode runs its one job (``merge/one_job.py``) first, which was faster at every size measured;
there the single pass is the fallback when the one job is off or cannot trust its output.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.merge import broadcast
from deltamerge.merge.analysis import tcol
from deltamerge.merge.clauses import ClauseKind
from deltamerge.merge.context import MergeContext, observed_metrics, timed_ms
from deltamerge.merge.output import (
    ACTION,
    COPY,
    DROP,
    SOURCE_PRESENT,
    TARGET_PRESENT,
    action_sql,
    changes_target_row_sql,
    count_actions,
    counter_columns,
    counter_names,
    output_exprs,
    target_side_rows,
    touch_sql,
)
from deltamerge.spark.scan import FILE_COL, ROW_INDEX_COL, FileIndex, file_index
from deltamerge.spark.session import (
    array_metric,
    is_connect,
    listed_metric,
    observed_text,
    observed_values,
    setting,
)
from deltamerge.spark.types import quote_name, sql_string


@dataclass(frozen=True)
class Written:
    """What the single pass wrote: the touched files, the new files, DV mode's changed rows."""

    touched: list[AddFile]
    adds: list[AddFile]
    modified_rows: dict[str, list[int]] | None  # DV mode: changed row positions per touched path


class _Retry(Exception):
    """Copy-on-write touched only some candidates: the two-job variant has to run."""


def applies(ctx: MergeContext, candidates: Sequence[AddFile], *, deletion_vectors: bool) -> bool:
    """Whether the broadcast variant applies and the candidates' live rows are few enough, or
    (copy-on-write) every candidate is expected to be touched (``expects_every_file_touched``)."""
    if not candidates or ctx.source_rows is None or not broadcast.usable(ctx):
        return False
    rows = broadcast.live_rows(candidates)
    if rows is None:
        return False
    limit = int(setting(ctx.spark, SessionConf.SINGLE_PASS_MAX_ROWS))
    if limit <= 0:
        return False
    if rows <= limit:
        return True
    if deletion_vectors or not expects_every_file_touched(ctx):
        return False
    return not ctx.rm.of_kind(ClauseKind.NOT_MATCHED) or rows <= _UNMATCHED_KEYS_FACTOR * limit


#: With NOT MATCHED clauses the single pass also broadcasts the candidates' ON-condition columns
#: (to find the unmatched source rows), a cost that grows with the candidates' rows. When every
#: candidate is expected to be touched it still pays up to this many times ``singlePassMaxRows``
#: (1M rows by default: 8 MB of long keys, about Spark's own broadcast threshold). Measured on
#: ``bench/``'s 5M-row tables, interleaved, median of 6: the partitioned upsert's 18 candidates
#: (900k rows) 2.89 s against the two jobs' 3.07 s; the spread upsert's 100 (5M rows) 7.1 s
#: against 5.6 s.
_UNMATCHED_KEYS_FACTOR = 4


def expects_every_file_touched(ctx: MergeContext) -> bool:
    """The source-key summary expects each candidate file to match many source keys
    (``singlePassExpectedMatches``): copy-on-write then rewrites every candidate anyway, and the
    single pass saves job 1 (its planning, its broadcast, its scan of the candidates' keys and
    the matched rows' cache). A wrong guess costs one discarded write, never a wrong result.

    With NOT MATCHED clauses only up to ``_UNMATCHED_KEYS_FACTOR`` times ``singlePassMaxRows``:
    finding the unmatched source rows needs the candidates' keys, so the single pass scans and
    broadcasts them inside its write instead (measured on the 5M-row upsert of ``bench/``: 6.6 s
    against the two jobs' 6.1 s; a matched-only merge of the same source: 5.7 s against 6.1 s)."""
    threshold = float(setting(ctx.spark, SessionConf.SINGLE_PASS_EXPECTED_MATCHES))
    expected = ctx.min_expected_matches
    return threshold > 0 and expected is not None and expected >= threshold


def try_write(ctx: MergeContext, candidates: Sequence[AddFile], *, deletion_vectors: bool) -> Written | None:
    """The single pass when it applies and completes, else None (nothing of it is left behind)."""
    if not applies(ctx, candidates, deletion_vectors=deletion_vectors):
        return None
    try:
        return _write(ctx, candidates, deletion_vectors)
    except broadcast.SourceNotUnique:
        ctx.source_unique = False
    except _Retry:
        pass
    return None


#: Up to this many candidates, DV mode's matched positions travel as numbers tagged with the
#: file's ordinal (a list of longs is a fraction of the bytes of one of (path, position) structs).
_TAGGED_FILES = 64
_TAG_SHIFT = 42  # positions below 2^41 (times 2 plus the "changed" bit)


def _facts(
    ctx: MergeContext, joined: DataFrame, dv: bool, uris: Sequence[str], *, counters: bool
) -> tuple[DataFrame, Observation, Observation | None]:
    """Observe the touched files and (DV mode) every matched row's ``position * 2 + changed``;
    with ``counters`` the clause counters too: every observation is a step of its own in the
    write's pipeline, between two code-generated stages (a second one over the 5M rows of a
    100-file rewrite cost ~0.2 s of 2.7 s).

    With few candidates each position carries its file's ordinal in ``uris`` in the high bits,
    and the numbers travel as one comma-separated text (a second observation; reading it is
    several times faster than a JSON list); a row of a file not in ``uris`` (a path spelt
    differently) is counted in ``untagged``.
    """
    rm = ctx.rm
    sp = quote_name(SOURCE_PRESENT)
    text: Observation | None = None
    spark = joined.sparkSession
    touched = f"collect_set(CASE WHEN {sp} IS NOT NULL AND ({touch_sql(rm)}) THEN {FILE_COL} END)"
    aggs = [array_metric(spark, touched, "touched")]
    if dv:
        position = f"{ROW_INDEX_COL} * 2 + CAST({changes_target_row_sql(rm)} AS BIGINT)"
        if len(uris) <= _TAGGED_FILES:
            ordinal = f"array_position(array({', '.join(sql_string(u) for u in uris)}), {FILE_COL})"
            tag = f"({ordinal} - 1) * {1 << _TAG_SHIFT}"
            tagged = f"CASE WHEN {sp} IS NOT NULL AND {ordinal} > 0 THEN {tag} + {position} END"
            aggs.append(F.expr(f"count(CASE WHEN {sp} IS NOT NULL AND {ordinal} = 0 THEN 1 END) AS untagged"))
            text = Observation(f"singlePassTagged_{time.monotonic_ns()}_{threading.get_ident()}")
            joined = joined.observe(text, listed_metric(spark, tagged, "tagged"))
        else:
            matched = f"CASE WHEN {sp} IS NOT NULL THEN named_struct('f', {FILE_COL}, 'p', {position}) END"
            aggs.append(array_metric(spark, f"collect_list({matched})", "positions"))
    if counters:
        aggs += counter_columns(rm)
    obs = Observation(f"singlePass_{time.monotonic_ns()}_{threading.get_ident()}")
    return joined.observe(obs, *aggs), obs, text


def _write(ctx: MergeContext, candidates: Sequence[AddFile], dv: bool) -> Written:
    rm = ctx.rm
    m = ctx.metrics
    start = time.monotonic()
    source = ctx.source.selectExpr("*", f"true AS {SOURCE_PRESENT}")
    target = ctx.target(candidates, with_file=True, with_row_index=dv)
    joined = target.selectExpr("*", f"true AS {TARGET_PRESENT}").join(
        F.broadcast(source), on=ctx.condition(), how="left"
    )
    joined = joined.selectExpr("*", f"{action_sql(rm, has_source=True, has_target=True)} AS {ACTION}")
    index = file_index(ctx.table_root, candidates)
    uris = list(index.by_spark_path)
    # Copy-on-write with no row to insert: the candidates' rows are all the rows, and their
    # counters ride in ``facts`` (one observation fewer over every row). Not on Connect, where the
    # counters' fallback query is what delivers a write's observations (Spark 4.0's server).
    counted = not dv and not rm.of_kind(ClauseKind.NOT_MATCHED) and not is_connect(ctx.spark)
    joined, facts, tagged = _facts(ctx, joined, dv, uris, counters=counted)
    if dv:  # only the rows a clause changes: the rest stays behind the new deletion vectors
        joined = joined.where(f"{quote_name(ACTION)} NOT IN ({COPY}, {DROP})")
    outs = output_exprs(rm, has_target=True, copies=not dv, tracking=ctx.row_tracking)
    parts = [joined.selectExpr(*outs, quote_name(ACTION))]
    if rm.of_kind(ClauseKind.NOT_MATCHED):
        # A source row matches no candidate row exactly when the ON condition holds for none.
        on_columns = target.select(*[tcol(i) for i in ctx.condition_target_columns()])
        unmatched = ctx.source.join(F.broadcast(on_columns), on=ctx.condition(), how="left_anti")
        unmatched = unmatched.selectExpr(
            "*", f"{action_sql(rm, has_source=True, has_target=False)} AS {ACTION}"
        )
        outs = output_exprs(rm, has_target=False, tracking=ctx.row_tracking)
        parts.append(unmatched.selectExpr(*outs, quote_name(ACTION)))
    out = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    if not counted:
        out, get_counts = observed_metrics(out, counter_columns(rm), "mergeCounts")

    phase = (
        "MERGE operation - writing modified rows"
        if dv
        else f"MERGE operation - Rewriting {len(candidates)} files"
    )
    with broadcast.undone_on_error(ctx):
        adds = broadcast.write_output(ctx, out, phase)
        # The counters first: when their observation is missing, counting runs the query again,
        # which delivers the other observations too (Spark 4.0's Connect server sends none for a
        # write).
        counts = None if counted else get_counts(lambda: count_actions(out, rm))
        try:
            seen = observed_values(facts)
            if tagged is not None:
                text = observed_text(tagged)
                if text is None:  # not delivered (an empty list is an empty text)
                    raise _Retry()
                seen["tagged"] = text
        except Exception as e:  # Spark dropped the observation: no facts, no commit from here
            raise _Retry() from e
        if not seen:
            raise _Retry()
        if counts is None:
            counts = {k: int(seen.get(k) or 0) for k in counter_names(rm)}
        touched_uris = set(seen.get("touched") or [])
        modified: dict[str, list[int]] | None = None
        if dv:
            if int(seen.get("untagged") or 0):
                raise _Retry()
            modified = _modified_rows(seen, uris, touched_uris, index)
        elif target_side_rows(rm, counts) > (broadcast.live_rows(candidates) or 0):
            raise broadcast.SourceNotUnique()
        elif len(touched_uris) != len(candidates):
            raise _Retry()
    m.add_clause_counts(rm, counts)
    assert ctx.source_rows is not None
    m.numSourceRows = m.numSourceRowsInSecondScan = ctx.source_rows
    m.use_second_scan_source_rows = False
    m.rewriteTimeMs += timed_ms(start)
    return Written([index.lookup(u) for u in touched_uris], adds, modified)


def _modified_rows(
    seen: dict, uris: list[str], touched_uris: set[str], index: FileIndex
) -> dict[str, list[int]]:
    """Changed positions per touched file's path (``broadcast.decode_tagged`` decodes and checks
    them: a position listed twice is a multiple match)."""
    per_file: dict[str, list[int]] = {}
    if seen.get("tagged"):
        low = (1 << _TAG_SHIFT) - 1
        for v in map(int, seen["tagged"].split(",")):
            per_file.setdefault(uris[v >> _TAG_SHIFT], []).append(v & low)
    for r in seen.get("positions") or []:
        per_file.setdefault(r["f"], []).append(int(r["p"]))
    lists = broadcast.decode_tagged(per_file)
    return {index.lookup(u).path: rows for u, rows in lists.items() if u in touched_uris and rows}
