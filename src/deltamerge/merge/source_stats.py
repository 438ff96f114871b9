"""A source that is a plain read of Delta files: its statistics instead of a Spark job (beyond Delta OSS).

The source-key summary (``merge/pruning.py``) aggregates the source's join keys to prune the
candidate files and count the source's rows. A CDC batch is often itself a Delta table read with
``deltamerge.read`` or a registered name; its files' statistics already hold each file's key range
and row count, so the job (a sizeable part of a small merge) can be skipped.

That is only sound when the source yields every row of its files unchanged. The analysed plan is
read from the top: the positional renaming, then only aliases, views and projections (which never
change the row count; the key column must pass through them as a plain column), down to one
Parquet relation. Any other node (a filter, a join, a limit, a union, a checkpoint) and the job
runs. Every file read must be a live file of the enclosing Delta table's latest snapshot, with
statistics; a file's rows are its ``numRecords`` because no filter applies its deletion vector.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame
from pyspark.sql.types import StringType

from deltamerge.log.actions import AddFile
from deltamerge.merge import key_numbers
from deltamerge.merge.analysis import ResolvedMerge, scol
from deltamerge.merge.pruning import PruneKey, SourceKeySummary, pruned_summary, pruning_key
from deltamerge.spark.scan import absolute_file_path
from deltamerge.stats import parse_stats

_ITEM = re.compile(r"^(?P<name>.+?)#(?P<id>\d+)L?(?: AS (?P<alias>.+?)#(?P<alias_id>\d+)L?)?$")
_RELATION = re.compile(r"^\[(?P<cols>.*)\] parquet$")
_WRAPPERS = {"SubqueryAlias", "View"}


def _items(args: str) -> list[re.Match[str] | None]:
    from deltamerge.views import split_items

    body = args.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return []
    return [_ITEM.match(i) for i in split_items(body[1:-1])]


def key_column(source: DataFrame, source_index: int) -> tuple[str, list[str]] | None:
    """``(column name in the files, files read)`` when ``source`` (positionally renamed,
    ``__s<i>``) reads every row of Parquet files unchanged and its column ``source_index`` is one
    of theirs; None otherwise."""
    from deltamerge.views import plan_nodes

    nodes = plan_nodes(source)
    if not nodes or nodes[0][0] != "Project":
        return None
    wanted = scol(source_index)
    # (name, expression id) of the column a node's output item refers to; the next node down must
    # output exactly that (so ``-x#4 AS k#9`` is no reference to ``x#4``).
    tracked: tuple[str, str] | None = None
    for m in _items(nodes[0][1]):
        if m is not None and m.group("alias") == wanted:
            tracked = (m.group("name"), m.group("id"))
    if tracked is None:
        return None
    for node, args in nodes[1:]:
        if node in _WRAPPERS:
            continue
        if node == "Project":
            found = None
            for m in _items(args):
                if m is None:
                    continue
                if m.group("alias") is None and (m.group("name"), m.group("id")) == tracked:
                    found = tracked
                elif (m.group("alias"), m.group("alias_id")) == tracked:
                    found = (m.group("name"), m.group("id"))
            if found is None:
                return None
            tracked = found
            continue
        relation = _RELATION.match(args.strip()) if node == "Relation" else None
        if relation is None:
            return None
        for item in relation.group("cols").split(","):
            m = _ITEM.match(item.strip())
            if m is not None and m.group("alias") is None and (m.group("name"), m.group("id")) == tracked:
                return tracked[0], list(source.inputFiles())
        return None
    return None


def live_files(paths: Sequence[str]) -> list[AddFile] | None:
    """The AddFiles of ``paths`` (local file URIs, as ``inputFiles()`` gives them) in the latest
    snapshot of the one Delta table that holds them all; None when they are not all live files of
    one table."""
    from deltamerge.log.snapshot import DeltaLog
    from deltamerge.views import enclosing_table_root

    roots = {enclosing_table_root(p) for p in paths}
    root = roots.pop() if len(roots) == 1 else None
    if root is None or not paths:
        return None
    snapshot = DeltaLog.for_table(root).update()
    by_path = {os.path.normpath(absolute_file_path(root, f.path)): f for f in snapshot.files}
    out = []
    for p in paths:
        local = unquote(urlparse(p).path) if p.startswith("file:") else p
        add = by_path.get(os.path.normpath(local))
        if add is None:
            return None
        out.append(add)
    return out


#: A source file's keys are dense when its key range is at most this many values per row.
_DENSE = 4


def summarize_from_statistics(
    rm: ResolvedMerge, source: DataFrame, candidates: Sequence[AddFile], key_ranges: PruneKey | None = None
) -> SourceKeySummary | None:
    """``pruning.summarize_source_keys(prune=True, check_unique=False)`` without a Spark job, for a
    source that reads every row of live Delta files unchanged (see above): each file's
    ``[min, max]`` of the key column and its row count stand in for the aggregation's groups.
    Uniqueness is not known (``unique`` False).

    None when the source is not such a read, a file lacks the statistics, or a file's keys are
    sparse in their range (more than ``_DENSE`` values of range per row): a file of updated keys
    plus new keys past the table's end spans every file in between, where the job's 1024 groups
    would keep only the touched ones."""
    key, ranges = key_ranges or pruning_key(rm, candidates)
    if key is None or isinstance(rm.target_schema.fields[key.target_index].dataType, StringType):
        return None  # a string key's numbers need the job (its statistics may be cut)
    found = key_column(source, key.source_index)
    source_files = live_files(found[1]) if found is not None else None
    if found is None or source_files is None:
        return None
    column = found[0]
    field = rm.target_schema.fields[key.target_index]
    groups: list[tuple[int, int, int]] = []
    has_null = False
    total = 0
    for f in source_files:
        st = parse_stats(f.stats)
        n = None if st is None else st.num_records
        if st is None or n is None:
            return None
        total += n
        nulls = st.lookup("null", (column,))
        if not isinstance(nulls, int) or isinstance(nulls, bool):
            return None
        has_null = has_null or nulls > 0
        lo = key_numbers.statistic(st.lookup("min", (column,)), field.dataType)
        hi = key_numbers.statistic(st.lookup("max", (column,)), field.dataType, is_max=True)
        if lo is None or hi is None:
            if nulls >= n:
                continue  # only NULL keys
            return None
        if hi - lo + 1 > _DENSE * (n - nulls):
            return None  # sparse keys: the job's finer groups would prune files this range keeps
        groups.append((lo, hi, n - nulls))
    return pruned_summary(candidates, ranges, field, key.null_safe, groups, has_null, False, total)
