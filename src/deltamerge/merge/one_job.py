"""DV mode's broadcast variant as one Spark job, its first choice at any size (beyond Delta OSS).

The two-job variant (``merge/broadcast.py``) scans the candidates against the broadcast source,
persists the matched rows, collects the touched files and positions, then writes in a second job.
In DV mode nothing but the matched target rows is ever needed from the target, so one write does
it all:

- ``candidates LEFT SEMI JOIN broadcast(source)``: the matched target rows, found while the target
  streams (Spark prunes the broadcast to the ON condition's columns). Each keeps the target
  columns the merge reads and one number, its file's base plus twice its row position
  (``number_bases``), instead of a path string. The bases come from ``scan.file_values``: a CASE
  over few candidates' paths (no frame of paths to build, broadcast and join; the one-file upsert
  measured below, 50,000 rows: 0.69 s against 0.76 s), a broadcast frame of paths beyond.
  Candidates of few rows (``broadcastCandidatesMaxRows``) that fit the broadcast limit skip the
  semi-join: every candidate row is broadcast, and rows no source row matches simply find no
  partner (one broadcast instead of two). DV mode runs this job ahead of the single pass
  (``merge/single_pass.py``: two broadcasts and a union). Measured in one process (interleaved
  medians), a 5,000-row upsert into one file of a 5M-row table: 50,000 rows in the file, every
  row broadcast 0.76 s, semi-joined 0.82 s, the single pass 0.99 s; 100,000 rows, 0.86 s against
  0.81 s semi-joined; 250,000 rows with ten target columns read, semi-joined 0.93 s, every row
  1.23 s, the single pass ~1.3 s;
- ``source LEFT OUTER JOIN those rows``: the matched rows are broadcast when even every candidate
  row matching would fit (``broadcastMatchedMaxBytes``), so the source streams into the write;
  otherwise both sides are shuffled (the matched target rows only, never the whole target).
  Matched rows get their MATCHED clause, the others their NOT MATCHED clause; only updated and
  inserted rows are written;
- ``observe()`` brings every matched row's number (plus one for "changed") to the driver as one
  text, and the clause counters.

A merge with MATCHED clauses only has no source row to preserve: the candidates stream through one
``INNER JOIN broadcast(source)``, and no matched rows travel on to a second join. One that only
deletes (a GDPR erase: MATCHED ... DELETE clauses alone) writes no rows: its job reads only the
columns its conditions name and runs into Spark's ``noop`` sink for its observations. 5,000 keys
spread over a 5M-row, 100-file table: 0.86-0.98 s against 1.32-1.35 s through the left join and
an empty write (which kept every column alive down to the scan).

The driver decodes the numbers into the new deletion vectors. A position listed twice is a target
row matched by two source rows: the written files are deleted and the Delta-shaped path reports it
(``SourceNotUnique``). A row whose file is not among the candidates' paths (a path spelt
differently), a position at or beyond its file's row count (statistics that disagree with the
file) or a dropped observation discards the output too, and the two-job variant runs.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.merge import broadcast
from deltamerge.merge.analysis import ResolvedMerge, scol, tcol
from deltamerge.merge.classic import single_unconditional_delete
from deltamerge.merge.clauses import ActionType, ClauseKind
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
    output_exprs,
    written_rows,
)
from deltamerge.merge.single_pass import Written
from deltamerge.predicates import to_sql
from deltamerge.spark.scan import (
    ROW_INDEX_COL,
    ROW_TRACKING_COLS,
    file_index,
    file_values,
)
from deltamerge.spark.session import (
    is_connect,
    job_phase,
    listed_metric,
    observed_text,
    setting,
    temporary_settings,
)
from deltamerge.spark.types import quote_name

_BASE = "__dm_base"
_LIMIT = "__dm_rows"
#: Rows (source plus matched target rows) per reduce task of a shuffled join.
_ROWS_PER_TASK = 1_000_000
#: Without row counts in the statistics, each file's numbers start at a multiple of 2^42
#: (positions below 2^41, up to 2^21 files).
_SHIFT = 42
_MAX_FILES = 1 << 21


class Retry(Exception):
    """The output cannot be trusted (an unknown file path, a dropped observation): the two-job
    variant runs instead."""


def applies(ctx: MergeContext, candidates: Sequence[AddFile]) -> bool:
    """Whether the one-job variant is on and the broadcast variant applies."""
    if not candidates or len(candidates) >= _MAX_FILES or ctx.source_rows is None:
        return False
    return bool(setting(ctx.spark, SessionConf.DV_ONE_JOB)) and broadcast.usable(ctx)


def try_write(ctx: MergeContext, candidates: Sequence[AddFile]) -> Written | None:
    """The one job when it applies and completes, else None (nothing of it is left behind)."""
    if not applies(ctx, candidates):
        return None
    try:
        return _write(ctx, candidates)
    except broadcast.SourceNotUnique:
        ctx.source_unique = False
    except Retry:
        pass
    return None


def number_bases(candidates: Sequence[AddFile]) -> list[int]:
    """Where each candidate's numbers start: a matched row's number is ``base + position * 2 +
    changed``. With row counts, the bases are the running total of twice the files' physical rows,
    so the numbers stay as short as the candidates are large (they travel as text)."""
    counts = [f.num_records for f in candidates]
    if any(n is None for n in counts):
        return [i << _SHIFT for i in range(len(candidates))]
    bases, total = [], 0
    for n in counts:
        bases.append(total)
        total += 2 * int(n or 0)
    return bases


def _matched_side_bytes(ctx: MergeContext, candidates: Sequence[AddFile], texts: Sequence[str]) -> int | None:
    """The matched target rows' size if every candidate row matched (None without statistics): the
    number plus the target columns ``texts`` (the join's and the output's SQL) read, the columns
    Spark keeps after pruning."""
    rows = broadcast.live_rows(candidates)
    if rows is None:
        return None
    fields = ctx.rm.target_schema.fields
    used = _read_columns(texts, "__t")
    return rows * (8 + 8 + sum(broadcast.width(fields[i].dataType) for i in used if i < len(fields)))


def _texts(ctx: MergeContext) -> tuple[list[str], list[str]]:
    """The output expressions of matched rows (none when the merge only erases), and every SQL
    text that reads target columns."""
    rm = ctx.rm
    erasing = _erasing(ctx)
    outputs = [] if erasing else output_exprs(rm, has_target=True, copies=False, tracking=ctx.row_tracking)
    return outputs, [to_sql(rm.condition), action_sql(rm, has_source=True, has_target=True), *outputs]


def erases_only(rm: ResolvedMerge) -> bool:
    """Whether the merge writes no rows: MATCHED ... DELETE clauses only (a GDPR erase)."""
    matched = rm.of_kind(ClauseKind.MATCHED)
    return (
        bool(matched)
        and len(matched) == len(rm.clauses)
        and all(c.action is ActionType.DELETE for c in matched)
    )


def _erasing(ctx: MergeContext) -> bool:
    """Whether the one job runs an erase into the ``noop`` sink: classic sessions only (on Spark
    4.0's Connect server a ``noop`` write returns no observed metrics; the erase writes its empty
    Parquet output there, as other merges)."""
    return erases_only(ctx.rm) and not is_connect(ctx.spark)


def _read_columns(texts: Sequence[str], prefix: str) -> set[int]:
    """The internal columns (``__t3``, ``__s0``) that ``texts`` read."""
    return {int(i) for t in texts for i in re.findall(rf"\b{prefix}(\d+)\b", t)}


def _broadcasting(ctx: MergeContext, candidates: Sequence[AddFile], texts: Sequence[str]) -> bool:
    """Whether the target side is broadcast: even every candidate row matching would fit."""
    size = _matched_side_bytes(ctx, candidates, texts)
    return size is not None and size <= int(setting(ctx.spark, SessionConf.BROADCAST_MATCHED_MAX_BYTES))


def _few_rows(ctx: MergeContext, candidates: Sequence[AddFile]) -> bool:
    """Whether the candidates hold at most ``broadcastCandidatesMaxRows`` live rows."""
    rows = broadcast.live_rows(candidates)
    return rows is not None and rows <= int(setting(ctx.spark, SessionConf.BROADCAST_CANDIDATES_MAX_ROWS))


def _matched_targets(
    ctx: MergeContext,
    candidates: Sequence[AddFile],
    uris: list[str],
    *,
    semi: bool,
    pairs_with: DataFrame | None = None,
    only: set[int] | None = None,
) -> DataFrame:
    """The candidates' rows some source row matches (every row without ``semi``), each with its
    number (file and position). With ``pairs_with`` (the source), the matched pairs instead: each
    target row joined with every source row it matches, the source's columns beside its own.
    ``only``: the target columns to keep (all without), so that the scan reads no others."""
    target = ctx.target(candidates, with_file=True, with_row_index=True)
    matched = target
    if pairs_with is not None:
        matched = target.join(F.broadcast(pairs_with), on=ctx.condition(), how="inner")
    elif semi:
        matched = target.join(F.broadcast(ctx.source), on=ctx.condition(), how="left_semi")
    # A long per row instead of the path; a path not in ``uris`` gets none.
    limits = [(1 << (_SHIFT - 1)) if f.num_records is None else f.num_records for f in candidates]
    values = {_BASE: ("BIGINT", number_bases(candidates)), _LIMIT: ("BIGINT", limits)}
    matched, exprs = file_values(matched, uris, values, inner=False)
    base, limit = exprs[_BASE], exprs[_LIMIT]
    names = [tcol(i) for i in range(len(ctx.rm.target_schema.fields)) if only is None or i in only]
    names += list(ROW_TRACKING_COLS) if ctx.row_tracking and only is None else []
    names += [quote_name(c) for c in pairs_with.columns] if pairs_with is not None else []
    # The number doubles as the "target present" marker, one column fewer to broadcast or shuffle.
    # It is never null on a matched row: -2 when the row's file has no base, or when its position
    # is not below the file's row count (statistics that disagree with the file; the number would
    # name a row of the next file).
    number = f"CASE WHEN {ROW_INDEX_COL} < {limit} THEN {base} + {ROW_INDEX_COL} * 2 ELSE -2 END"
    return matched.selectExpr(*names, f"coalesce({number}, -2) AS {TARGET_PRESENT}")


def _write(ctx: MergeContext, candidates: Sequence[AddFile]) -> Written:
    rm = ctx.rm
    m = ctx.metrics
    start = time.monotonic()
    index = file_index(ctx.table_root, candidates)
    uris = list(index.by_spark_path)
    index_order = [index.by_spark_path[u] for u in uris]
    source = ctx.source.selectExpr("*", f"true AS {SOURCE_PRESENT}")
    outputs, texts = _texts(ctx)
    erasing = _erasing(ctx)
    if not rm.of_kind(ClauseKind.NOT_MATCHED):
        # Only matched rows can change anything (an UPDATE, a GDPR erase): the target streams past
        # the broadcast source once, and no matched rows travel on to a second join. An erase
        # writes nothing: only the columns its conditions read are read (the observation and the
        # write would otherwise keep every column alive down to the scan).
        only, pairs = None, source
        if erasing:
            only = _read_columns(texts, "__t")
            kept = {scol(i) for i in _read_columns(texts, "__s")} | {SOURCE_PRESENT}
            pairs = source.select(*[c for c in source.columns if c in kept])
        joined = _matched_targets(ctx, index_order, uris, semi=False, pairs_with=pairs, only=only)
    else:
        # Broadcast when even every candidate row matching would fit: the source then streams into
        # the write without a shuffle. Otherwise both sides shuffle (only matched target rows move).
        broadcasting = _broadcasting(ctx, candidates, texts)
        whole = broadcasting and _few_rows(ctx, candidates)
        matched = _matched_targets(ctx, index_order, uris, semi=not whole)
        if broadcasting:
            matched = F.broadcast(matched)
        joined = source.join(matched, on=ctx.condition(), how="left")
    joined = joined.selectExpr("*", f"{action_sql(rm, has_source=True, has_target=True)} AS {ACTION}")
    # Every matched row's number plus its "changed" bit (negative for a row whose file had no base).
    tp = quote_name(TARGET_PRESENT)
    number = f"{tp} + CAST({changes_target_row_sql(rm)} AS BIGINT)"
    positions = Observation(f"oneJobPositions_{time.monotonic_ns()}_{threading.get_ident()}")
    joined = joined.observe(
        positions, listed_metric(ctx.spark, f"CASE WHEN {tp} IS NOT NULL THEN {number} END", "positions")
    )
    # Only updated and inserted rows are written: the rest stays behind the new deletion vectors.
    joined = joined.where(f"{quote_name(ACTION)} NOT IN ({COPY}, {DROP})")
    out = joined.selectExpr(*outputs, quote_name(ACTION))
    out, get_counts = observed_metrics(out, counter_columns(rm), "mergeCounts")
    with (
        broadcast.undone_on_error(ctx),
        job_phase(ctx.spark, "MERGE operation - writing modified rows"),
        static_plan(ctx),
    ):
        if erasing:
            # Nothing to write: the query runs for its observations (positions, clause counters).
            out.write.format("noop").mode("overwrite").save()
            adds: list[AddFile] = []
        else:
            adds = ctx.write(written_rows(out, rm))
        counts = get_counts(lambda: count_actions(out, rm))
        try:
            text = observed_text(positions)
        except Exception as e:  # Spark dropped the observation: no positions, no commit from here
            raise Retry() from e
        if text is None:
            raise Retry()
        # A lone unconditional DELETE may match a target row more than once (Delta allows it): the
        # row is deleted once, and counted once.
        repeats = erasing and single_unconditional_delete(ctx)
        changed = changed_positions(text, index_order, repeats=repeats)
        if repeats:
            counts = {f"clause_{rm.clauses[0].index}": sum(len(v) for v in changed.values())}
    touched = [index_order[o] for o in changed]
    m.add_clause_counts(rm, counts)
    assert ctx.source_rows is not None
    m.numSourceRows = m.numSourceRowsInSecondScan = ctx.source_rows
    m.use_second_scan_source_rows = False
    m.rewriteTimeMs += timed_ms(start)
    return Written(touched, adds, {f.path: changed[o] for f, o in zip(touched, changed, strict=True)})


@contextlib.contextmanager
def static_plan(ctx: MergeContext) -> Iterator[None]:
    """Plan the job once, with whole waves of evenly sized reduce tasks.

    The broadcasts are built as the query starts and the join's size is known from the source-key
    summary, so adaptive execution has little to improve; its coalescing packed the shuffled join
    into 3 partitions on 2 cores (a lone last task: ~0.3 s of a 2 s merge). Without it, every shuffle
    (the join's when it is shuffled, a partitioned table's repartitioning before the write) has a
    multiple of the cores as partitions, about ``_ROWS_PER_TASK`` rows each, at most the session's
    shuffle partitions. Classic sessions only (on Connect each setting costs a round trip). Not with
    optimized writes: their rebalance before the write is one file per partition only under
    adaptive execution (Spark drops it without), as in ``broadcast.write_output``.
    """
    spark = ctx.spark
    if is_connect(spark) or ctx.optimize_write_bin_size:
        yield
        return
    cores = max(1, spark.sparkContext.defaultParallelism)
    try:
        configured = int(spark.conf.get("spark.sql.shuffle.partitions", None) or 200)
    except ValueError:
        configured = 200
    rows = 2 * (ctx.source_rows or 0)  # the source and at most as many matched target rows
    waves = max(2, -(-rows // (cores * _ROWS_PER_TASK)))
    partitions = max(1, min(configured, cores * waves))
    settings = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}
    with temporary_settings(spark, settings):
        yield


def changed_positions(text: str, files: Sequence[AddFile], *, repeats: bool = False) -> dict[int, list[int]]:
    """Decode the observed numbers (``number_bases``): candidate index -> sorted positions of its
    changed rows.

    Raises ``SourceNotUnique`` when a position is listed twice (a target row matched twice; with
    ``repeats``, a lone unconditional DELETE's, the repeats are dropped instead) and
    ``Retry`` for a negative number (a row whose file has no base, or beyond its row count).
    """
    if not text:
        return {}
    values = np.fromstring(text, dtype=np.int64, sep=",")  # C parsing: ~10 ms for 400k numbers
    return changed_positions_of(np.unique(values) if repeats else values, files)


def changed_positions_of(values: np.ndarray, files: Sequence[AddFile]) -> dict[int, list[int]]:
    """``changed_positions`` of the numbers as an array."""
    if values.size == 0:
        return {}
    values = np.sort(values)  # a copy: Arrow's arrays are read-only
    if int(values[0]) < 0:
        raise Retry()
    rows = values >> 1  # base / 2 + position, sorted
    if rows.size > 1 and bool((rows[1:] == rows[:-1]).any()):
        raise broadcast.SourceNotUnique()
    starts = np.array(number_bases(files), dtype=np.int64) >> 1
    changed = rows[(values & 1) == 1]
    cuts = np.searchsorted(changed, starts)
    ends = [*cuts[1:].tolist(), changed.size]
    out: dict[int, list[int]] = {}
    for i, (lo, hi) in enumerate(zip(cuts.tolist(), ends, strict=True)):
        if hi > lo:  # positions within the file's row count: Spark numbered only those
            out[i] = (changed[lo:hi] - starts[i]).tolist()
    return out
