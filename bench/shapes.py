"""Table shapes: merges whose cost grows with the table's shape rather than its size.

The scale scenarios (``bench/data.py``) use 100 files of six columns. These three tables stress what
those do not, each an upsert run three ways like the others (``run.run_scenario``):

- **many files**: a deletion-vector table of thousands of small files, with a source whose keys touch
  every file (per-file costs: the file list, statistics, the scan's planning, one DV per file);
- **many partitions**: a table of ~1,000 partitions, two files each, keys interleaved across
  partitions (each file's key range spans the table), with an upsert into 5% of the partitions and
  the partition column in ON (partition pruning, the per-file match estimate);
- **wide**: 300 columns (per-column costs: analysis, planning, statistics, the source plan's walk).

Data is deterministic (``spark.range`` and arithmetic on the id). Generated once per root and reused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from bench import data
from bench.scenarios import Scenario


@dataclass(frozen=True)
class Shape:
    name: str
    title: str
    files: int  # target files (many_partitions: two per partition)
    rows: int  # target rows
    source_rows: int
    columns: int = 4
    partitions: int = 0
    dv: bool = False

    def about(self) -> str:
        parts = f" in {self.partitions:,} partitions" if self.partitions else ""
        dv = ", deletion vectors on" if self.dv else ""
        return (f"{self.rows:,} rows, {self.columns} columns, {self.files:,} files{parts}{dv}; "
                f"source {self.source_rows:,} rows")


SIZES: dict[str, list[Shape]] = {
    "small": [
        Shape("many_files", "many small files (DV), upsert touching every file", 800, 200_000, 4_000, dv=True),
        Shape("many_partitions", "many partitions, upsert into 5% of them", 400, 200_000, 4_000, partitions=200),
        Shape("wide", "wide table (300 columns), small upsert", 4, 20_000, 1_000, columns=300),
    ],
    "full": [
        Shape("many_files", "many small files (DV), upsert touching every file", 8_000, 2_000_000, 20_000, dv=True),
        Shape("many_partitions", "many partitions, upsert into 5% of them", 2_000, 2_000_000, 20_000, partitions=1_000),
        Shape("wide", "wide table (300 columns), small upsert", 10, 100_000, 2_000, columns=300),
    ],
}


def _column_exprs(shape: Shape, seed: int) -> list[str]:
    """SQL for the table columns over ``id``; ``seed`` changes every non-key value (an update)."""
    if shape.columns == 4:
        cols = [f"CAST((id * 7 + {seed}) % 97 AS INT) AS cat", f"CAST(id * 1.5 + {seed} AS DOUBLE) AS amount",
                f"CONCAT('v{seed}-', CAST(id % 1000 AS STRING)) AS label"]
    else:
        # Two numbers to one text, as wide fact tables tend to be.
        cols = [f"CAST((id * {i} + {seed}) % 1000 AS BIGINT) AS c{i}" if i % 3 else f"CAST(id + {i + seed} AS STRING) AS c{i}"
                for i in range(1, shape.columns)]
    if shape.partitions:
        cols.insert(0, f"CAST(id % {shape.partitions} AS INT) AS p")
    return ["id", *cols]


def column_names(shape: Shape) -> tuple[str, ...]:
    return tuple(e.rsplit(" AS ", 1)[-1] for e in _column_exprs(shape, 0))


def _target(spark: SparkSession, shape: Shape) -> DataFrame:
    if shape.partitions:
        # Two tasks, each writing one file per partition: two files per partition, ids interleaved.
        return spark.range(0, shape.rows, numPartitions=2).selectExpr(*_column_exprs(shape, 0))
    # One contiguous id range per file.
    return spark.range(0, shape.rows, numPartitions=shape.files).selectExpr(*_column_exprs(shape, 0))


def _source(spark: SparkSession, shape: Shape) -> DataFrame:
    """80% updates spread evenly over the key space (or over the first 5% of partitions), 20% new keys."""
    updates = shape.source_rows * 4 // 5
    new = shape.source_rows - updates
    if shape.partitions:
        # Keys whose partition (id % partitions) is below 5% of them, evenly through the id range.
        hot = max(1, shape.partitions // 20)
        per_round = shape.rows // shape.partitions
        step = max(1, per_round // max(1, updates // hot))
        ids = spark.range(0, updates).selectExpr(
            f"(id % {hot}) + {shape.partitions} * ((id DIV {hot}) * {step} % {per_round}) AS id")
        fresh = spark.range(0, new).selectExpr(f"{shape.rows} + (id DIV {hot}) * {shape.partitions} + (id % {hot}) AS id")
    else:
        step = max(1, shape.rows // updates)
        ids = spark.range(0, updates).selectExpr(f"id * {step} + (id * 7919) % {step} AS id")
        fresh = spark.range(shape.rows, shape.rows + new).selectExpr("id")
    return ids.union(fresh).coalesce(1).selectExpr(*_column_exprs(shape, 100))


def scenario(shape: Shape) -> Scenario:
    cond = "t.p = s.p AND t.id = s.id" if shape.partitions else "t.id = s.id"
    return Scenario(
        f"shape_{shape.name}", shape.title, f"shape_{shape.name}", "upsert", cond,
        partitioned=bool(shape.partitions), dv=shape.dv, table=f"shape_{shape.name}",
        cols=column_names(shape), partition_col="p", about=shape.about(),
    )


def prepare(spark: SparkSession, root: str, size: str) -> tuple[list[Scenario], dict[str, str]]:
    """The shape scenarios of ``size`` and their pristine tables (name -> path), generated once."""
    base = os.path.join(root, f"shapes_{size}")
    os.makedirs(base, exist_ok=True)
    paths: dict[str, str] = {}
    out = []
    for shape in SIZES[size]:
        sc = scenario(shape)
        meta = {"shape": shape.about(), "generator": 1}
        target = os.path.join(base, sc.target)
        data.ensure_table(spark, target, lambda s=shape: _target(spark, s), meta,
                          partition_by=["p"] if shape.partitions else None, dv=shape.dv)
        source = os.path.join(base, f"source_{sc.source}")
        data.ensure_table(spark, source, lambda s=shape: _source(spark, s), meta)
        paths[sc.target] = target
        paths[f"source_{sc.source}"] = source
        out.append(sc)
    return out, paths
