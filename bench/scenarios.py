"""The MERGE scenarios and their three implementations: deltamerge, delta-rs and the raw-Spark floor.

The floor is the same physical work written by hand in PySpark with no transaction: it reads the
same source files and exactly the target files the merge has to rewrite (found beforehand, untimed),
runs one join of the same type on the same ON condition with the same per-row projection, and writes
Parquet with the same output-file policy (whatever partitions the join produces; repartitioned by the
partition column for a partitioned table, as deltamerge does). It writes no log, no statistics and
no deletion vectors, and it does not have to find the touched files: that is what makes it a floor.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from dataclasses import dataclass, replace

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltamerge
from deltamerge.log.snapshot import DeltaLog

COLUMNS = ["id", "cat", "amount", "qty", "label", "ts"]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    source: str  # source table kind (data.source_frame)
    clauses: str  # "upsert" | "insert" | "replace" | "cdc"
    condition: str
    partitioned: bool = False
    dv: bool = False
    # Table shapes (bench/shapes.py) name their own tables, columns and partition column.
    table: str = ""
    cols: tuple[str, ...] = ()
    partition_col: str = "day"
    about: str = ""  # what the tables hold, for the report

    @property
    def target(self) -> str:
        if self.table:
            return self.table
        return f"target{'_part' if self.partitioned else ''}{'_dv' if self.dv else ''}"

    @property
    def key(self) -> str:
        return f"{self.name}{'_dv' if self.dv else '_cow'}"

    @property
    def columns(self) -> list[str]:
        if self.cols:
            return list(self.cols)
        return COLUMNS + (["day"] if self.partitioned else [])

    @property
    def floor_join(self) -> str:
        """The join type deltamerge's rewriting job uses (delta_merge_spec.md §1.5 step 7)."""
        if self.clauses == "insert":
            return "left_anti"
        if self.clauses == "erase":
            # copy-on-write: the rows kept; DV mode: the erased rows' positions (nothing rewritten).
            return "left_semi" if self.dv else "left_anti"
        if self.dv:
            return "left" if self.clauses in ("upsert", "cdc") else "full"
        return "full"


PART_COND = "t.id = s.id AND t.day = s.day AND t.day >= '2024-01-09'"

BASE = [
    Scenario("upsert_spread", "upsert, source spread over all files", "upsert_spread", "upsert", "t.id = s.id"),
    Scenario("upsert_one_file", "upsert touching 1 of 100 files", "upsert_one_file", "upsert", "t.id = s.id"),
    Scenario("insert_only", "insert-only dedup (half new)", "insert_only", "insert", "t.id = s.id"),
    Scenario("replace", "replace target with source (NOT MATCHED BY SOURCE DELETE)", "replace", "replace", "t.id = s.id"),
    Scenario("partitioned", "partitioned target, partition predicate in ON", "partitioned", "upsert", PART_COND, partitioned=True),
    # The general path: clauses that an op column picks, so no shortcut for "UPDATE SET * / INSERT *".
    Scenario("cdc", "CDC: delete / update / insert by an op column (10% deletes)", "cdc", "cdc", "t.id = s.id"),
    # A GDPR erase: WHEN MATCHED THEN DELETE by a list of keys (the source holds only the key).
    Scenario("erase", "GDPR erase: delete by a key list spread over all files", "erase", "erase", "t.id = s.id"),
]

CDC_DELETE = "s.op = 'D'"
CDC_INSERT = "s.op <> 'D'"


def all_scenarios(names: list[str] | None = None) -> list[Scenario]:
    out = []
    for s in BASE:
        if names and s.name not in names:
            continue
        out.append(s)
        out.append(replace(s, dv=True))
    return out


# --- deltamerge ---------------------------------------------------------------------------------------


def _builder(spark: SparkSession, table: str, source: str, sc: Scenario):  # type: ignore[no-untyped-def]
    from deltamerge import DeltaTable

    src = deltamerge.read(spark, source).alias("s")
    m = DeltaTable.forPath(spark, table).alias("t").merge(src, sc.condition)
    if sc.clauses == "erase":
        return m.whenMatchedDelete()
    if sc.clauses == "cdc":
        values = {c: f"s.{c}" for c in sc.columns}
        return m.whenMatchedDelete(CDC_DELETE).whenMatchedUpdate(set=values).whenNotMatchedInsert(CDC_INSERT, values)
    if sc.clauses in ("upsert", "replace"):
        m = m.whenMatchedUpdateAll()
    m = m.whenNotMatchedInsertAll()
    if sc.clauses == "replace":
        m = m.whenNotMatchedBySourceDelete()
    return m


class _PruningLog(logging.Handler):
    """Catches the merge's dynamic file pruning record: the files it left for the scan."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.files: tuple[int, int] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "files_after_pruning"):
            self.files = (record.files_after_pruning, record.bytes_after_pruning)


def run_deltamerge(spark: SparkSession, table: str, source: str, sc: Scenario) -> dict:
    """The merge's result row, plus ``_pruned``: (files, bytes) left by dynamic file pruning, or None."""
    DeltaLog.clear_cache()
    logger = logging.getLogger("deltamerge.merge.command")
    handler, level = _PruningLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        row = _builder(spark, table, source, sc).execute().collect()[0]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return {**row.asDict(), "_pruned": handler.files}


def deltamerge_candidates(spark: SparkSession, table: str, source: str, sc: Scenario) -> tuple[int, int, str]:
    """``(files, bytes)`` deltamerge's first job reads after data skipping, from its ``explain()``."""
    import re

    DeltaLog.clear_cache()
    text = _builder(spark, table, source, sc).explain()
    m = re.search(r"target files after skipping: (\d+) \((\d+) bytes\)", text)
    assert m, text
    return int(m.group(1)), int(m.group(2)), text


def deltamerge_commit_facts(
    table: str, candidates: tuple[int, int, str], insert_only: bool, pruned: tuple[int, int] | None = None
) -> dict:
    """What the MERGE commit says: metrics, and the files the merge read (job 1 + job 2).

    ``candidates`` are the files after static skipping (``explain()``); ``pruned``, when the source
    keys pruned them further at run time, what was left."""
    if pruned is not None:
        candidates = (pruned[0], pruned[1], candidates[2])
    DeltaLog.clear_cache()
    log = DeltaLog.for_table(table)
    v = log.update().version
    actions = log.read_commit(v)
    info = next(a for a in actions if type(a).__name__ == "CommitInfo")
    metrics = dict(info.raw.get("operationMetrics") or {})
    removes = [a for a in actions if type(a).__name__ == "RemoveFile"]
    # No job 1 (insert-only, the single pass, NOT MATCHED BY SOURCE skipping it: scanTimeMs 0):
    # the candidates are read once, by the write.
    once = insert_only or str(metrics.get("scanTimeMs", "")) == "0"
    files_read = candidates[0] + (0 if once else len(removes))
    bytes_read = candidates[1] + (0 if once else sum(r.size or 0 for r in removes))
    return {"metrics": metrics, "files_read": files_read, "bytes_read": bytes_read}


# --- delta-rs -----------------------------------------------------------------------------------------


def run_delta_rs(table: str, source: str, sc: Scenario) -> dict:
    from deltalake import DeltaTable

    src = DeltaTable(source).to_pyarrow_table()
    m = DeltaTable(table).merge(src, sc.condition, source_alias="s", target_alias="t")
    if sc.clauses == "erase":
        return m.when_matched_delete().execute()
    if sc.clauses == "cdc":
        values = {c: f"s.{c}" for c in sc.columns}
        m = m.when_matched_delete(CDC_DELETE).when_matched_update(values).when_not_matched_insert(values, CDC_INSERT)
        return m.execute()
    if sc.clauses in ("upsert", "replace"):
        m = m.when_matched_update_all()
    m = m.when_not_matched_insert_all()
    if sc.clauses == "replace":
        m = m.when_not_matched_by_source_delete()
    return m.execute()


# --- the raw-Spark floor ------------------------------------------------------------------------------


def data_files(table: str) -> list[str]:
    """Absolute paths of a table's live data files (pristine tables have no removes)."""
    DeltaLog.clear_cache()
    snap = DeltaLog.for_table(table).update()
    from deltamerge.spark.scan import absolute_file_path

    return [absolute_file_path(table, f.path) for f in snap.files]


def touched_files(spark: SparkSession, table: str, source: str, sc: Scenario) -> list[str]:
    """The target files some source row matches on the ON condition (untimed set-up for the floor).

    For a NOT MATCHED BY SOURCE merge every file is touched (every row is matched or deleted); for
    insert-only, every candidate file is read by the anti join.
    """
    files = data_files(table)
    if sc.clauses in ("replace", "insert"):
        return files
    t = _read_target(spark, table, files).withColumn("__file", F.input_file_name())
    s = spark.read.parquet(*data_files(source))
    joined = s.alias("s").join(t.alias("t"), F.expr(sc.condition), "inner")
    found = {r[0] for r in joined.select("t.__file").distinct().collect()}
    by_uri = {"file:" + p: p for p in files}
    return sorted(by_uri.get(u, u.removeprefix("file:")) for u in found)


def _read_target(spark: SparkSession, table: str, files: list[str]) -> DataFrame:
    """The files as one DataFrame, read the fastest way deltamerge knows (the floor must not pay for
    a slower reader): their status listed on the driver, not in a Spark listing job, and the path
    list sent to the JVM as one text. Partition values come from the directory names (Hive layout)."""
    from deltamerge.spark.scan import _driver_side_listing
    from deltamerge.spark.session import read_parquet_files

    with _driver_side_listing(spark, len(files)):
        return read_parquet_files(spark, spark.read.option("basePath", table), files)


def run_floor(spark: SparkSession, table: str, files: list[str], source: str, sc: Scenario, out: str) -> dict:
    s = spark.read.parquet(*data_files(source)).withColumn("__sp", F.lit(True))
    cols = sc.columns
    if sc.clauses == "insert":
        t = _read_target(spark, table, files).select("id")
        result = s.alias("s").join(t.alias("t"), F.expr(sc.condition), "left_anti").select(*cols)
    elif sc.clauses == "erase":
        t = _read_target(spark, table, files)
        if sc.dv:  # the erased rows' file and position: what a deletion vector records
            t = t.select("id", F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r"))
            result = t.alias("t").join(s.alias("s"), F.expr(sc.condition), sc.floor_join).select("f", "r")
        else:  # the touched files' rows that stay
            result = t.alias("t").join(s.alias("s"), F.expr(sc.condition), sc.floor_join).select(*cols)
    else:
        t = _read_target(spark, table, files).withColumn("__tp", F.lit(True))
        joined = s.alias("s").join(t.alias("t"), F.expr(sc.condition), sc.floor_join)
        sp = F.col("s.__sp").isNotNull()
        if sc.clauses == "replace":
            # matched -> update, source only -> insert, target only -> delete: the source rows.
            joined = joined.where(sp)
        if sc.clauses == "cdc":
            # A delete writes nothing, matched or not; every other source row is written.
            joined = joined.where(~(sp & (F.col("s.op") == "D")))
        # copy-on-write: matched -> source values, target only -> copied; DV mode: only changed rows.
        result = joined.select(*[F.when(sp, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c) for c in cols])
    writer = (result.repartition(sc.partition_col) if sc.partitioned else result).write.mode("overwrite")
    if sc.partitioned:
        writer = writer.partitionBy(sc.partition_col)
    writer.parquet(out)
    return {"files_read": len(files), "bytes_read": sum(os.path.getsize(f) for f in files)}


def parquet_rows(paths: list[str]) -> int:
    return sum(pq.read_metadata(p).num_rows for p in paths)


def dir_parquet(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def delta_rs_facts(metrics: dict) -> dict:
    return {"files_read": metrics.get("num_target_files_scanned"), "metrics": json.loads(json.dumps(metrics, default=str))}
