"""MERGE with deletion vectors (merge-on-read; Delta's ``writeDVs`` path).

Job 1 finds the touched files and, in the same aggregation, the row indexes each file loses (rows
an UPDATE or DELETE clause changes). Job 2 writes only updated and inserted rows as new files. Each
touched file then gets a new deletion vector (its old one united with the changed rows) or, when
every row is gone, is removed whole. Unchanged rows are never rewritten.

With a broadcastable source the two jobs are one: the single pass for few candidate rows
(``single_pass.py``), the one job beyond (``one_job.py``); the two-job broadcast variant
(``broadcast.py``) remains when either cannot trust its output, and the Delta-shaped path
(``classic.py``) for everything else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from pyroaring import BitMap64

from deltamerge.deletion_vectors import dv_file_path, read_dv, write_dv_file
from deltamerge.log.actions import Action, AddFile, RemoveFile
from deltamerge.merge.classic import (
    changed_rows_join,
    every_file_touched,
    every_row_changes,
    find_touched_files,
    inserts_without_matches,
    removed_whole,
    replace_whole_files,
    write_all_changes,
)
from deltamerge.merge.context import MergeContext
from deltamerge.merge.positions import Positions
from deltamerge.spark.write import now_ms


def _loose_stats(stats: str | None) -> str | None:
    # A file behind a deletion vector keeps its physical stats, but its bounds are no longer tight.
    if not stats:
        return stats
    # Without a parse where the text shows the top-level key's place: as the last member (a nested
    # one would close its own object first), or absent from the text altogether (~40 us a file).
    text = stats.strip()
    if text.endswith(',"tightBounds":true}'):
        return text[: -len("true}")] + "false}"
    if text.startswith("{") and text.endswith("}") and len(text) > 2 and '"tightBounds"' not in text:
        return text[:-1] + ',"tightBounds":false}'
    data = json.loads(stats)
    data["tightBounds"] = False
    return json.dumps(data, separators=(",", ":"))


def _covers_every_row(ctx: MergeContext, f: AddFile, masked: int) -> bool:
    """Whether ``masked`` rows are all of ``f``'s rows. The statistics' ``numRecords`` is checked
    against the file's own footer before the file is removed whole: statistics that understate the
    rows would otherwise drop rows no clause touched."""
    physical = f.num_records
    if physical is None or masked < physical:
        return False
    import pyarrow.parquet as pq

    from deltamerge.log.paths import absolute_file_path

    try:
        return masked >= pq.read_metadata(absolute_file_path(ctx.table_root, f.path)).num_rows
    except OSError:
        return False  # unreadable footer: a deletion vector is always correct


def deletion_vector_actions(
    ctx: MergeContext, files: Sequence[AddFile], modified: Mapping[str, Positions]
) -> list[Action]:
    """Remove/re-add actions that mask ``modified`` rows of ``files`` (or remove whole files)."""
    m = ctx.metrics
    ts = now_ms()
    actions: list[Action] = []
    pending: list[tuple[AddFile, BitMap64]] = []
    for f in files:
        rows = modified.get(f.path)
        if rows is None or len(rows) == 0:
            continue
        # From a list: BitMap64 iterates an array's numpy scalars (4x slower for 5M positions).
        bitmap = BitMap64(rows.tolist() if isinstance(rows, np.ndarray) else rows)
        if f.deletion_vector is not None:
            bitmap |= read_dv(ctx.table_root, f.deletion_vector)
        if _covers_every_row(ctx, f, len(bitmap)):
            actions.append(f.remove(ts))
            m.numTargetFilesRemoved += 1
            m.numTargetBytesRemoved += f.size
            if f.deletion_vector is not None:
                m.numTargetDeletionVectorsRemoved += 1
            continue
        pending.append((f, bitmap))
    if pending:
        descriptors = write_dv_file(ctx.table_root, [bm for _, bm in pending])
        if descriptors:
            ctx.written_paths.append(dv_file_path(ctx.table_root, descriptors[0]))
        for (f, _bm), dv in zip(pending, descriptors, strict=False):
            actions.append(f.remove(ts))
            actions.append(replace(f, deletion_vector=dv, stats=_loose_stats(f.stats), data_change=True))
            if f.deletion_vector is not None:
                m.numTargetDeletionVectorsUpdated += 1
            else:
                m.numTargetDeletionVectorsAdded += 1
    if ctx.partition_columns:
        removed = [a for a in actions if isinstance(a, RemoveFile)]
        m.numTargetPartitionsRemovedFrom = len(
            {tuple(sorted((a.partition_values or {}).items())) for a in removed}
        )
    return actions


def _job1_suffices(ctx: MergeContext) -> bool:
    """A merge that only deletes matched rows (``one_job.erases_only``) writes no rows: the
    positions of job 1 are all it needs, unless change data is written (the deleted rows' images)
    or ``merge.failIfSourceChanged`` compares job 2's source count with job 1's."""
    from deltamerge.config import SessionConf
    from deltamerge.merge.one_job import erases_only
    from deltamerge.spark.session import setting

    return (
        erases_only(ctx.rm)
        and not ctx.cdf_enabled
        and not setting(ctx.spark, SessionConf.FAIL_IF_SOURCE_CHANGED)
    )


def run_with_deletion_vectors(ctx: MergeContext, candidates: Sequence[AddFile]) -> list[Action]:
    """DV-mode MERGE: returns the commit's file actions."""
    from deltamerge.merge import broadcast, one_job, single_pass, uniform_upsert

    replaced = uniform_upsert.try_replace(ctx, candidates, deletion_vectors=True)
    if replaced is not None:
        return [*removed_whole(ctx, replaced.touched), *replaced.adds]
    known = every_file_touched(ctx, candidates) if every_row_changes(ctx) else None
    if known is not None:
        return replace_whole_files(ctx, candidates, known, deletion_vectors=True)
    # The one job first (every candidate row broadcast when they are few, else semi-joined with the
    # source), then the single pass (two broadcasts and a union), which it beat at every size
    # measured (merge/one_job.py).
    done = uniform_upsert.try_write(ctx, candidates)
    if done is None:
        done = one_job.try_write(ctx, candidates)
    if done is None:
        done = single_pass.try_write(ctx, candidates, deletion_vectors=True)
    if done is not None:
        assert done.modified_rows is not None
        return [*deletion_vector_actions(ctx, done.touched, done.modified_rows), *done.adds]
    found = broadcast.try_find_matches(ctx, candidates, deletion_vectors=True)
    if found is not None:
        files, modified, matched = found
        if not files:
            matched.unpersist()
            # Source rows job 1 left to job 2 are counted by the inserts' scan.
            counted = not broadcast.job_two_counts_source(ctx, deletion_vectors=True)
            return list(inserts_without_matches(ctx, counted))
        adds, cdc = broadcast.write_changes(ctx, files, matched, deletion_vectors=True)
        assert modified is not None
        dv_actions = deletion_vector_actions(ctx, files, modified)
        return [*dv_actions, *adds, *cdc]
    touched = find_touched_files(ctx, candidates, collect_modified_rows=True) if candidates else None
    if touched is None or not touched.files:
        return list(inserts_without_matches(ctx, bool(candidates)))
    assert touched.modified_rows is not None
    if _job1_suffices(ctx):
        # Job 1 found every row the merge deletes: job 2 would only count them again.
        deleted = sum(len(rows) for rows in touched.modified_rows.values())
        ctx.metrics.add_clause_counts(ctx.rm, {f"clause_{ctx.rm.clauses[0].index}": deleted})
        return deletion_vector_actions(ctx, touched.files, touched.modified_rows)
    adds, cdc = write_all_changes(ctx, touched, join_type=changed_rows_join(ctx))
    dv_actions = deletion_vector_actions(ctx, touched.files, touched.modified_rows)
    return [*dv_actions, *adds, *cdc]
