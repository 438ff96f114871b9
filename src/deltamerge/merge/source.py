"""Source materialization (Delta's ``MergeIntoMaterializeSource``).

The classic path reads the source twice (find touched files, then rewrite). A source that can
change between the reads (files, non-deterministic expressions) would make the two jobs disagree,
so it is pinned with an eager local checkpoint, keeping only the columns the merge uses.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame


def materialize(source: DataFrame, attempt: int = 1) -> DataFrame:
    """Pin ``source`` on executor disks (DISK_ONLY, more replicas on retries, as Delta does)."""
    level = (
        StorageLevel.DISK_ONLY
        if attempt <= 1
        else (StorageLevel.DISK_ONLY_2 if attempt == 2 else StorageLevel.DISK_ONLY_3)
    )
    try:
        return source.localCheckpoint(eager=True, storageLevel=level)
    except TypeError:  # older signature without storageLevel
        return source.localCheckpoint(eager=True)
