"""Deterministic benchmark data: target tables and merge sources, all derived from ``spark.range``
with hash-based column values (same input -> same rows, every run, every machine).

Target rows: ``id`` (0..N-1), ``cat``, ``amount``, ``qty``, ``label``, ``ts`` and, for the
partitioned table, ``day`` (10 partitions over contiguous id ranges). ``spark.range`` hands each
Spark partition a contiguous id range, so every data file holds one id range: touching "1 of 100
files" means keys from one range. Sources are Delta tables too (written by deltamerge), the way a
staging/bronze table feeds a MERGE.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import deltamerge

DAYS = 10
BASE_TS = 1_700_000_000


@dataclass(frozen=True)
class Scale:
    name: str
    target_rows: int
    target_files: int
    source_rows: int  # spread upsert / insert-only / replace sources
    one_file_rows: int  # source of the "1 of 100 files" upsert
    partitioned_source_rows: int


SCALES = {
    "tiny": Scale("tiny", 100_000, 20, 10_000, 500, 4_000),
    "small": Scale("small", 500_000, 100, 50_000, 2_500, 20_000),
    "5M": Scale("5M", 5_000_000, 100, 500_000, 5_000, 200_000),
    "20M": Scale("20M", 20_000_000, 100, 500_000, 5_000, 200_000),
}


def _h(col: Column, seed: int) -> Column:
    return F.abs(F.xxhash64(col, F.lit(seed)))


def row_columns(id_col: Column, seed: int, n_target: int) -> list[Column]:
    """The table columns for ids ``id_col``; ``seed`` varies the non-key values (an update)."""
    return [
        id_col.cast("bigint").alias("id"),
        (_h(id_col, seed + 1) % 1000).cast("int").alias("cat"),
        ((_h(id_col, seed + 2) % 10_000_000) / 100.0).alias("amount"),
        (_h(id_col, seed + 3) % 500).cast("int").alias("qty"),
        F.concat(F.lit("item-"), F.hex(_h(id_col, seed + 4) % 1_000_000_000_000)).alias("label"),
        F.timestamp_seconds(F.lit(BASE_TS) + (_h(id_col, seed + 5) % 30_000_000)).alias("ts"),
    ]


def day_column(id_col: Column, n_target: int) -> Column:
    day = F.least(F.floor(id_col * DAYS / F.lit(n_target)), F.lit(DAYS - 1)).cast("int") + 1
    return F.format_string("2024-01-%02d", day).alias("day")


def target_frame(spark: SparkSession, n: int, files: int, partitioned: bool) -> DataFrame:
    ids = spark.range(0, n, numPartitions=files)
    cols = row_columns(F.col("id"), 0, n)
    if partitioned:
        cols.append(day_column(F.col("id"), n))
    return ids.select(*cols)


def _source_ids(spark: SparkSession, rows: int, updates: int, n_target: int, lo: int = 0, hi: int | None = None,
                new_base: int | None = None) -> DataFrame:
    """``updates`` distinct existing ids spread evenly over ``[lo, hi)``, then ``rows - updates`` new ids."""
    hi = n_target if hi is None else hi
    stride = max(1, (hi - lo) // max(updates, 1))
    new_base = n_target if new_base is None else new_base
    i = F.col("id")
    existing = F.lit(lo) + i * stride + F.pmod(i * 7919, F.lit(stride))
    return spark.range(0, rows, numPartitions=4).select(
        F.when(i < updates, existing).otherwise(F.lit(new_base) + i - updates).alias("sid")
    )


def source_frame(spark: SparkSession, kind: str, scale: Scale) -> DataFrame:
    n = scale.target_rows
    if kind in ("upsert_spread", "cdc"):
        ids = _source_ids(spark, scale.source_rows, int(scale.source_rows * 0.8), n)
    elif kind == "upsert_one_file":
        per_file = n // scale.target_files
        k = scale.target_files * 37 // 100
        ids = _source_ids(
            spark, scale.one_file_rows, int(scale.one_file_rows * 0.8), n, lo=k * per_file, hi=(k + 1) * per_file
        )
    elif kind == "insert_only":
        ids = _source_ids(spark, scale.source_rows, scale.source_rows // 2, n)
    elif kind == "replace":
        ids = _source_ids(spark, scale.source_rows, int(scale.source_rows * 0.9), n)
    elif kind == "erase":
        # Existing keys only, spread over every file; a key list, nothing else.
        ids = _source_ids(spark, scale.one_file_rows, scale.one_file_rows, n)
        return ids.select(F.col("sid").cast("bigint").alias("id"))
    elif kind == "dv_1pct":
        ids = _source_ids(spark, n // 100, n // 100, n)
    elif kind == "partitioned":
        # Updates in the last two days' id range, inserts too (new ids, dated the last day).
        lo = n * (DAYS - 2) // DAYS
        ids = _source_ids(spark, scale.partitioned_source_rows, int(scale.partitioned_source_rows * 0.75), n, lo=lo)
    else:
        raise ValueError(kind)
    cols = row_columns(F.col("sid"), 100, n)
    if kind == "partitioned":
        cols.append(day_column(F.least(F.col("sid"), F.lit(n - 1)), n))
    if kind == "cdc":
        # A change feed's operation: one row in ten a delete (of an existing or an unknown key).
        cols.append(F.when(_h(F.col("sid"), 200) % 10 == 0, F.lit("D")).otherwise(F.lit("U")).alias("op"))
    return ids.select(*cols)


DV_CONF = {"delta.enableDeletionVectors": "true"}


def _done(path: str, meta: dict) -> bool:
    marker = os.path.join(path, "_bench_meta.json")
    try:
        with open(marker) as f:
            return json.load(f) == meta
    except (OSError, ValueError):
        return False


def _mark(path: str, meta: dict) -> None:
    with open(os.path.join(path, "_bench_meta.json"), "w") as f:
        json.dump(meta, f)


def ensure_table(spark: SparkSession, path: str, df_factory, meta: dict, partition_by=None, dv: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Write a Delta table once (reused while its generation parameters are unchanged)."""
    meta = {**meta, "dv": dv, "partition_by": partition_by, "version": 2}
    if _done(path, meta):
        return
    shutil.rmtree(path, ignore_errors=True)
    deltamerge.write(df_factory(), path, partition_by=partition_by, configuration=DV_CONF if dv else None)
    _mark(path, meta)


def prepare(spark: SparkSession, root: str, scale: Scale, needed: set[str] | None = None) -> dict[str, str]:
    """The pristine tables of one scale (all, or the ``needed`` names); returns name -> path."""
    base = os.path.join(root, scale.name)
    os.makedirs(base, exist_ok=True)
    paths: dict[str, str] = {}
    tmeta = {"rows": scale.target_rows, "files": scale.target_files}
    for partitioned in (False, True):
        for dv in (False, True):
            name = f"target{'_part' if partitioned else ''}{'_dv' if dv else ''}"
            path = os.path.join(base, name)
            if needed is not None and name not in needed:
                continue
            ensure_table(
                spark,
                path,
                lambda p=partitioned: target_frame(spark, scale.target_rows, scale.target_files, p),
                tmeta,
                partition_by=["day"] if partitioned else None,
                dv=dv,
            )
            paths[name] = path
    for kind in ("upsert_spread", "upsert_one_file", "insert_only", "replace", "partitioned", "dv_1pct", "cdc", "erase"):
        path = os.path.join(base, f"source_{kind}")
        if needed is not None and f"source_{kind}" not in needed:
            continue
        smeta = {**tmeta, "kind": kind, "src": [scale.source_rows, scale.one_file_rows, scale.partitioned_source_rows]}
        ensure_table(spark, path, lambda k=kind: source_frame(spark, k, scale), smeta)
        paths[f"source_{kind}"] = path
    return paths


def clone(src: str, dst: str) -> None:
    """A fresh copy of a pristine table for one run."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_bench_meta.json"))
