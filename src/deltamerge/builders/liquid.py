"""OPTIMIZE on a clustered table: which files Delta's incremental clustering rewrites, and how the
new files are marked (``ClusteringStrategy`` in Delta's ``OptimizeTableStrategy.scala``).

Each OPTIMIZE run writes one ZCube: files tagged ``ZCUBE_ID`` (one id per run) and
``ZCUBE_ZORDER_BY`` (the clustering columns, JSON), with ``clusteringProvider`` = ``liquid``. A later
run rewrites the files no clustering wrote plus every ZCube still smaller than
``optimize.clustering.mergeStrategy.minCubeSize.threshold``, so new data merges into small cubes
until they are big enough to stay. Files clustered by other columns (after ``ALTER TABLE ...
CLUSTER BY``) or by another implementation are left alone unless ``FULL``, which rewrites them
with the rest. deltamerge orders the
rows by its Z-order curve (``builders/zorder.py``) where Delta uses a Hilbert curve: both keep rows
with close clustering values in the same files, which is what data skipping needs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace

from deltamerge.log.actions import AddFile

PROVIDER = "liquid"
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
MIN_CUBE_SIZE_KEY = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"


def _cube(f: AddFile) -> tuple[str, list[str]] | None:
    tags = f.tags or {}
    if ZCUBE_ID not in tags or ZCUBE_ZORDER_BY not in tags:
        return None
    try:
        columns = json.loads(tags[ZCUBE_ZORDER_BY])
    except ValueError:
        return None
    return tags[ZCUBE_ID], [str(c) for c in columns] if isinstance(columns, list) else []


def selection(
    files: Sequence[AddFile], columns: Sequence[str], min_cube_size: int, full: bool
) -> list[AddFile]:
    """The files an OPTIMIZE of a table clustered by ``columns`` (logical names) rewrites."""
    fresh: list[AddFile] = []
    cubes: dict[str, list[AddFile]] = {}
    skipped: list[AddFile] = []
    for f in files:
        cube = _cube(f)
        ours = f.clustering_provider in (None, PROVIDER)
        if not ours or (cube is not None and cube[1] != list(columns)):
            skipped.append(f)
        elif cube is None:
            fresh.append(f)
        else:
            cubes.setdefault(cube[0], []).append(f)
    small = [fs for fs in cubes.values() if sum(f.size for f in fs) < min_cube_size]
    chosen = fresh + [f for fs in small for f in fs]
    if full and skipped:
        return chosen + skipped
    if not fresh and len(small) <= 1:
        return []  # one cube alone is clustered already
    return chosen


def marked(files: Sequence[AddFile], columns: Sequence[str]) -> list[AddFile]:
    """``files`` (one OPTIMIZE run's output) as one new ZCube clustered by ``columns``."""
    tags = {ZCUBE_ID: str(uuid.uuid4()), ZCUBE_ZORDER_BY: json.dumps(list(columns), separators=(",", ":"))}
    return [replace(f, clustering_provider=PROVIDER, tags={**(f.tags or {}), **tags}) for f in files]
