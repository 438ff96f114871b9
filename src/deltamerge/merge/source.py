"""Source materialization (Delta's ``MergeIntoMaterializeSource``).

The classic path reads the source twice (find touched files, then rewrite). A source that can
change between the reads (files, non-deterministic expressions) would make the two jobs disagree,
so it is pinned with an eager local checkpoint, keeping only the columns the merge uses.

The checkpoint's blocks live on the executors' disks until they are dropped: ``release`` drops
them when the merge ends, as Delta does (otherwise only a JVM garbage collection lets Spark's
ContextCleaner drop them, and a MERGE per micro-batch piles them up until then). An executor
lost mid-merge takes its blocks with it; ``blocks_lost`` recognises Spark's error for that, and
the command runs the merge again with more replicas.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

_LOST = "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND"


class SourceBlocksLost(Exception):
    """An attempt of the merge lost blocks of its materialized source (the cause is Spark's error)."""


def storage_level(source: DataFrame, attempt: int) -> StorageLevel:
    """The storage level of attempt ``attempt``'s materialized source: Delta's settings
    ``merge.materializeSource.rddStorageLevel`` (first attempt, DISK_ONLY),
    ``...FirstRetry`` (DISK_ONLY_2) and ``...Retry`` (later, DISK_ONLY_3). A name PySpark does not
    know keeps the default."""
    from deltamerge.config import SessionConf
    from deltamerge.spark.session import setting

    key = (
        SessionConf.MATERIALIZE_LEVEL
        if attempt <= 1
        else (
            SessionConf.MATERIALIZE_LEVEL_FIRST_RETRY if attempt == 2 else SessionConf.MATERIALIZE_LEVEL_RETRY
        )
    )
    name = str(setting(source.sparkSession, key)).strip().upper()
    level = getattr(StorageLevel, name, None) if name.isidentifier() else None
    return level if isinstance(level, StorageLevel) else getattr(StorageLevel, key.default)


def materialize(source: DataFrame, attempt: int = 1) -> DataFrame:
    """Pin ``source`` (on executor disks by default, more replicas on retries, as Delta does)."""
    level = storage_level(source, attempt)
    try:
        return source.localCheckpoint(eager=True, storageLevel=level)
    except TypeError:  # older signature without storageLevel
        return source.localCheckpoint(eager=True)


def _checkpoint_rdd(df: DataFrame) -> Any | None:
    """The RDD under a DataFrame ``materialize`` returned (or a projection of one), on a classic
    session; None on Spark Connect, whose server drops the checkpoint with the DataFrame."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    with contextlib.suppress(Exception):
        leaves = jdf.queryExecution().logical().collectLeaves()
        if leaves.size() == 1:
            leaf = leaves.apply(0)
            if leaf.getClass().getSimpleName() == "LogicalRDD":
                return leaf.rdd()
    return None


def release(df: DataFrame) -> None:
    """Drop the blocks of a source ``materialize`` pinned (best effort: never fails the merge)."""
    rdd = _checkpoint_rdd(df)
    if rdd is not None:
        with contextlib.suppress(Exception):
            rdd.unpersist(False)


def blocks_lost(error: BaseException, materialized: Sequence[DataFrame]) -> bool:
    """Whether ``error`` (or an error it wraps) is Spark's lost checkpoint block of one of the
    ``materialized`` sources (on Spark Connect, of any checkpoint: the ids are not visible)."""
    text = ""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text += f"\n{e}"
        e = e.__cause__ or e.__context__
    if _LOST not in text:
        return False
    ids = [rdd.id() for rdd in map(_checkpoint_rdd, materialized) if rdd is not None]
    if not ids:
        return True
    return any(re.search(rf"\brdd_{i}_\d+\b", text) for i in ids)
