"""Merges that only delete matched rows (a GDPR erase: ``WHEN MATCHED [AND ...] THEN DELETE``
clauses and nothing else) on deletion-vector tables write no rows: DV mode's one job reads only the
columns the ON condition and the clause conditions name and writes nothing, and the Delta-shaped
path takes the deleted rows from job 1 without a job 2. Table, deletion vectors and metrics must be
those of the path that runs job 2."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from test_merge_one_job import _state
from test_merge_pruning import _run, _settings, _spy_broadcast, _table

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import MultipleSourceRowMatchingTargetRowError
from deltamerge.log.snapshot import DeltaLog
from merge_variants import VARIANTS

FAIL_IF_CHANGED = "spark.databricks.delta.merge.failIfSourceChanged"
CDF = "spark.databricks.delta.properties.defaults.enableChangeDataFeed"

ERASES = {
    "unconditional": [("whenMatchedDelete",)],
    # Two conditional DELETEs over source and target columns; rows neither picks stay.
    "conditional": [
        ("whenMatchedDelete", "s.v = 1 AND t.v < 4"),
        ("whenMatchedDelete", "t.d > '2024-02-15'"),
    ],
}


def _source(spark, repeat: bool = False):
    src = spark.range(0, 120).select(
        (F.col("id") * 7 % 1100).alias("id"), (F.col("id") % 3).cast("int").alias("v")
    )
    if repeat:  # every key of the first 20 rows twice
        src = src.unionByName(src.limit(20))
    return src.withColumn("d", F.lit(None).cast("date"))


def _spy_job2(monkeypatch):
    """Count the runs of job 2 (the Delta-shaped path's rewrite, DV mode: written rows only)."""
    from deltamerge.merge import dv

    calls: list[int] = []
    real = dv.write_all_changes

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(dv, "write_all_changes", spy)
    return calls


@pytest.mark.parametrize("clauses", sorted(ERASES))
def test_erase_same_as_the_path_with_job_two(spark, tmp_path, monkeypatch, clauses):
    """The one job, job 1 alone (Delta-shaped, no job 2) and Delta's two jobs (job 2 runs under
    failIfSourceChanged) leave the same rows, deletion vectors and metrics; nothing is written
    but deletion vectors."""
    outcomes = _spy_broadcast(monkeypatch)
    job2 = _spy_job2(monkeypatch)
    runs = {
        "one-job": ({**VARIANTS["default"]}, ["one-job"], 0),
        "job-1-only": ({**VARIANTS["delta-shaped"]}, [], 0),
        "two-jobs": ({**VARIANTS["delta-shaped"], FAIL_IF_CHANGED: "true"}, [], 1),
    }
    results = []
    for name, (conf, expected, job2_runs) in runs.items():
        path = str(tmp_path / name)
        _table(spark, path, dv=True)
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")  # some files already carry a DV
        outcomes.clear()
        job2.clear()
        with _settings(spark, conf):
            res = _run(spark, path, _source(spark), "t.id = s.id", ERASES[clauses])
        assert (outcomes, len(job2)) == (expected, job2_runs), name
        adds = [a for a in DeltaLog.for_table(path).read_commit(2) if type(a).__name__ == "AddFile"]
        assert all(a.deletion_vector is not None for a in adds)  # no data file written
        results.append((res, *_state(spark, path)))
    assert results[0] == results[1] == results[2]
    assert results[0][0][2] > 0  # rows were deleted
    assert int(results[0][3]["numTargetDeletionVectorsUpdated"]) > 0


@pytest.mark.parametrize("layout", ["partitioned", "column_mapping"])
def test_erase_on_partitioned_and_column_mapped_tables(spark, tmp_path, monkeypatch, layout):
    """A partitioned table (the clause condition reads the partition column) and a column-mapped one
    (physical names differ from the logical ones): the one job's erase against Delta's two jobs."""
    outcomes = _spy_broadcast(monkeypatch)
    clauses = [("whenMatchedDelete", "t.v < 3"), ("whenMatchedDelete", "s.v = 2")]
    results = []
    for name, conf in (("one-job", {}), ("two-jobs", {**VARIANTS["delta-shaped"], FAIL_IF_CHANGED: "true"})):
        path = str(tmp_path / name)
        if layout == "partitioned":
            _table(spark, path, dv=True, partition_by=["v"])
        else:
            df = spark.range(0, 1000, numPartitions=10).selectExpr(
                "id", "cast(id % 7 as int) AS v", "id * 2 AS w"
            )
            properties = {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name"}
            deltamerge.write(df, path, configuration=properties)
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, _source(spark).drop("d"), "t.id = s.id", clauses)
        assert outcomes == (["one-job"] if name == "one-job" else []), name
        results.append((res, *_state(spark, path)))
    assert results[0] == results[1]
    assert results[0][0][2] > 0


def test_erase_reads_only_the_columns_its_conditions_name(spark, tmp_path, monkeypatch):
    """The one job's target side keeps the ON condition's and the clause conditions' columns only
    (``d`` is never read) and the source side likewise (the observation and the write would
    otherwise keep every column alive down to the scan)."""
    from deltamerge.merge import one_job

    seen: list[list[str]] = []
    real = one_job._matched_targets

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        out = real(*a, **k)
        seen.append(out.columns)
        return out

    monkeypatch.setattr(one_job, "_matched_targets", spy)
    path = str(tmp_path / "t")
    _table(spark, path, dv=True)
    res = _run(spark, path, _source(spark), "t.id = s.id", [("whenMatchedDelete", "t.v < 4")])
    assert res[2] > 0
    (columns,) = seen
    assert [c for c in columns if c.startswith(("__t", "__s"))] == ["__t0", "__t1", "__s0"]


@pytest.mark.parametrize("variant", ["default", "delta-shaped"])
def test_erase_with_repeated_source_keys(spark, tmp_path, variant):
    """A lone unconditional DELETE may match a row twice (each row deleted and counted once); a
    conditional one may not: Delta's error, and the table is unchanged."""
    path = str(tmp_path / "t")
    _table(spark, path, dv=True)
    keys = {r[0] for r in _source(spark).collect()}
    with _settings(spark, VARIANTS[variant]):
        res = _run(spark, path, _source(spark, repeat=True), "t.id = s.id", [("whenMatchedDelete",)])
        assert res == (len(keys), 0, len(keys), 0)
        ids = {r[0] for r in DeltaTable.forPath(spark, path).toDF().collect()}
        assert ids == set(range(1000)) - keys
        fresh = str(tmp_path / "fresh")
        _table(spark, fresh, dv=True)
        with pytest.raises(MultipleSourceRowMatchingTargetRowError, match="DELTA_MULTIPLE_SOURCE_ROW"):
            _run(
                spark, fresh, _source(spark, repeat=True), "t.id = s.id", [("whenMatchedDelete", "s.v >= 0")]
            )
    assert DeltaLog.for_table(fresh).update().version == 0
    assert sorted(p.name for p in (tmp_path / "fresh").rglob("*.bin")) == []  # no deletion vector left


def test_erase_with_change_data_runs_job_two(spark, tmp_path, monkeypatch):
    """With the change data feed on, the deleted rows' images are written: job 2 runs."""
    job2 = _spy_job2(monkeypatch)
    path = str(tmp_path / "t")
    with _settings(spark, {CDF: "true"}):
        _table(spark, path, dv=True)
    with _settings(spark, VARIANTS["delta-shaped"]):
        res = _run(spark, path, _source(spark), "t.id = s.id", [("whenMatchedDelete",)])
    assert len(job2) == 1
    deleted = deltamerge.read_changes(spark, path, 1, 1).where("_change_type = 'delete'").count()
    assert deleted == res[2] > 0


@pytest.mark.parametrize("inserting", [False, True], ids=["erase", "upsert"])
def test_copy_on_write_single_pass_observes_its_rows_once(spark, tmp_path, monkeypatch, inserting):
    """Copy-on-write's single pass counts the clauses in the observation of the touched files: one
    observation over the candidates' rows (each is a step of its own between generated stages),
    plus one over the unmatched source rows when NOT MATCHED clauses insert them."""
    from deltamerge.merge import broadcast, single_pass

    plans: list[str] = []
    real = broadcast.write_output

    def spy(ctx, out, phase):  # type: ignore[no-untyped-def]
        plans.append(out._jdf.queryExecution().optimizedPlan().toString())
        return real(ctx, out, phase)

    monkeypatch.setattr(single_pass.broadcast, "write_output", spy)
    outcomes = _spy_broadcast(monkeypatch)
    clauses = [("whenMatchedDelete", "t.v < 4")]
    if inserting:
        clauses = [("whenMatchedUpdate", "t.v < 4", {"v": "s.v"}), ("whenNotMatchedInsertAll",)]
    results = []
    for variant in ("single-pass", "delta-shaped"):
        path = str(tmp_path / variant)
        _table(spark, path)
        with _settings(spark, VARIANTS[variant]):
            results.append((_run(spark, path, _source(spark), "t.id = s.id", clauses), *_state(spark, path)))
    assert outcomes == ["single"]
    assert len(plans) == 1 and plans[0].count("CollectMetrics") == (2 if inserting else 1)
    assert results[0] == results[1]
    assert int(results[0][3]["numTargetRowsCopied"]) > 0
