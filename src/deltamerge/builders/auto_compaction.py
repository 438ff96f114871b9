"""Auto compaction (Delta's ``AutoCompact`` post-commit hook).

A write that adds files (an append, CREATE ... AS SELECT, MERGE, UPDATE, DELETE) to a table with
``delta.autoOptimize.autoCompact`` (or the legacy ``delta.autoOptimize``) set, or with the session
setting ``spark.databricks.delta.autoCompact.enabled`` (which wins over the table), is followed by
an OPTIMIZE of the partitions it wrote to that hold at least ``autoCompact.minNumFiles`` (50) small
files: files below ``autoCompact.minFileSize`` (half of ``autoCompact.maxFileSize``, 128 MiB), or
with many deleted rows. They are binned up to ``autoCompact.maxFileSize``. The compaction is its own
commit (``OPTIMIZE`` with ``auto`` = true); as Delta's hooks, it never fails the write before it:
a failure (a concurrent writer, say) is logged and the partitions stay eligible next time.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import SparkSession

from deltamerge.builders.compaction import AutoCompaction, PartitionKey, compactable, optimize, partition_key
from deltamerge.config import SessionConf, TableProperties
from deltamerge.log.actions import Action, AddFile, CommitInfo, Metadata
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter
from deltamerge.txn.transaction import OptimisticTransaction


def enabled(get: Callable[[str], str | None], configuration: Mapping[str, str]) -> bool:
    """Whether writes to a table with ``configuration`` are auto-compacted (the session setting
    first, then the legacy ``delta.autoOptimize``, then ``delta.autoOptimize.autoCompact``)."""
    session = SessionConf.AUTO_COMPACT.get(get)
    if session is not None:
        return session
    return bool(
        TableProperties.AUTO_OPTIMIZE.get(configuration) or TableProperties.AUTO_COMPACT.get(configuration)
    )


def register(spark: SparkSession, txn: OptimisticTransaction) -> None:
    """Have ``txn`` auto-compact after its commit when the table asks for it (the check runs then,
    against the committed metadata)."""
    txn.register_post_commit_hook(functools.partial(_after_commit, spark, txn.log))


def _blind_append(log: DeltaLog, version: int) -> bool:
    info = next((a for a in log.read_commit(version) if isinstance(a, CommitInfo)), None)
    return bool(info is not None and info.raw.get("isBlindAppend"))


def _after_commit(
    spark: SparkSession, log: DeltaLog, version: int, actions: Sequence[Action], metadata: Metadata
) -> None:
    get = conf_getter(spark)
    if not enabled(get, metadata.configuration):
        return
    written = {partition_key(a) for a in actions if isinstance(a, AddFile) and a.data_change}
    if not written:
        return
    if SessionConf.AUTO_COMPACT_NON_BLIND_APPEND.get(get) and _blind_append(log, version):
        return  # only writes that read the table are compacted
    request = plan(spark, log.snapshot(version).files, written)
    if request is not None:
        optimize(spark, log.table_root, auto=request)


def plan(spark: SparkSession, files: Sequence[AddFile], written: set[PartitionKey]) -> AutoCompaction | None:
    """The compaction a commit that wrote to the partitions ``written`` calls for, given the table's
    ``files`` after it; None when no partition holds ``autoCompact.minNumFiles`` small files."""
    get = conf_getter(spark)
    max_size = SessionConf.AUTO_COMPACT_MAX_FILE_SIZE.get(get)
    min_size = SessionConf.AUTO_COMPACT_MIN_FILE_SIZE.get(get) or max_size // 2
    ratio = SessionConf.OPTIMIZE_MAX_DELETED_ROWS_RATIO.get(get)
    min_files = SessionConf.AUTO_COMPACT_MIN_NUM_FILES.get(get)

    counts = Counter(partition_key(f) for f in files if compactable(f, min_size, ratio))
    if SessionConf.AUTO_COMPACT_MODIFIED_PARTITIONS_ONLY.get(get):
        chosen = frozenset(k for k in written if counts[k] >= min_files)
        return AutoCompaction(chosen, min_size, max_size) if chosen else None
    if max(counts.values(), default=0) < min_files:
        return None
    return AutoCompaction(None, min_size, max_size)  # the whole table
