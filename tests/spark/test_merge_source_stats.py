"""A source that plainly reads a Delta table is summarised from its files' statistics.

Every case runs the merge with the statistics and with the Spark job (the setting off) and
compares the table, the result counters and the commit's metrics; a spy records whether the job
ran, so the cases that must fall back to it (a filter, a computed key, removed files, a deletion
vector, missing statistics) are checked too.
"""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

SETTING = "spark.deltamerge.merge.sourceStatistics"
UPSERT = ("whenMatchedUpdateAll", "whenNotMatchedInsertAll")


def _target(spark, path, n=400, files=4, dv=False):
    df = spark.range(0, n, numPartitions=files).select("id", (F.col("id") % 7).cast("int").alias("v"))
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)


def _source(spark, path, ids, files=2, dv=False):
    df = spark.createDataFrame([(i, 100 + i % 3) for i in ids], "id long, v int").repartition(files)
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)


def _spy(monkeypatch):
    from deltamerge.merge import pruning

    calls: list[int] = []
    real = pruning.summarize_source_keys
    monkeypatch.setattr(pruning, "summarize_source_keys", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _metrics(spark, path):
    m = dict(DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"])
    return {k: v for k, v in m.items() if not k.endswith("TimeMs") and "Bytes" not in k}


def _both(spark, tmp_path, monkeypatch, make_source, *, cond="t.id = s.id", clauses=UPSERT, dv=False):
    """Run the merge with statistics on and off; returns whether the on-run used them."""
    calls = _spy(monkeypatch)
    out = []
    used = None
    for flag in ("true", "false"):
        path = str(tmp_path / f"t_{flag}")
        _target(spark, path, dv=dv)
        calls.clear()
        spark.conf.set(SETTING, flag)
        try:
            b = DeltaTable.forPath(spark, path).alias("t").merge(make_source().alias("s"), cond)
            for c in clauses:
                b = getattr(b, c)()
            res = tuple(b.execute().collect()[0])
        finally:
            spark.conf.unset(SETTING)
        if flag == "true":
            used = not calls
        else:
            assert calls, "the job must run with the setting off"
        rows = sorted((tuple(r) for r in deltamerge.read(spark, path).collect()), key=repr)
        out.append((res, rows, _metrics(spark, path)))
    assert out[0] == out[1]
    return used, out[0]


def test_plain_delta_source_needs_no_job(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(380, 420))  # dense keys: 20 in the last file, 20 new
    used, (res, _, metrics) = _both(spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src))
    assert used
    assert res == (40, 20, 0, 20)
    assert metrics["numSourceRows"] == "40" and metrics["numTargetFilesRemoved"] == "1"


def test_sparse_source_keys_run_the_job(spark, tmp_path, monkeypatch):
    """Keys far apart (updates plus new keys past the end): the file's range would keep every
    file in between, so the job's finer groups prune instead."""
    src = str(tmp_path / "src")
    _source(spark, src, [5, 6, 1000, 1001], files=1)
    used, (res, _, metrics) = _both(spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src))
    assert not used and res == (4, 2, 0, 2) and metrics["numTargetFilesRemoved"] == "1"


def test_projections_and_aliases_pass_the_key_through(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(90, 110))

    def make():
        df = deltamerge.read(spark, src).alias("x")
        renamed = df.select(F.col("id").alias("k"), F.col("v")).select(F.col("v"), F.col("k").alias("id"))
        return renamed.alias("y")

    used, (res, _, _) = _both(spark, tmp_path, monkeypatch, make)
    assert used and res == (20, 20, 0, 0)


@pytest.mark.sampled
@pytest.mark.parametrize(
    "shape",
    ["filter", "computed_key", "negated_key", "limit", "union", "dataframe"],
)
def test_other_sources_run_the_job(spark, tmp_path, monkeypatch, shape):
    src = str(tmp_path / "src")
    _source(spark, src, range(95, 105))

    def make():
        df = deltamerge.read(spark, src)
        if shape == "filter":
            return df.where("id < 1000")
        if shape == "computed_key":
            return df.select((F.col("id") + 1).alias("id"), "v")
        if shape == "negated_key":
            return df.select((-F.col("id")).alias("id"), "v")
        if shape == "limit":
            return df.limit(2)
        if shape == "union":
            return df.unionByName(df.where("id = 100"))
        return spark.createDataFrame([(i, 1) for i in range(95, 105)], "id long, v int")

    if shape == "union":  # id 100 twice: the job's check reports the multiple match either way
        with pytest.raises(Exception, match="MULTIPLE_SOURCE_ROW"):
            _both(spark, tmp_path, monkeypatch, make)
        return
    used, _ = _both(spark, tmp_path, monkeypatch, make)
    assert not used


def test_older_version_with_removed_files_runs_the_job(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(10, 20))
    _source(spark, src + "_2", [7])
    deltamerge.write(deltamerge.read(spark, src + "_2"), src, mode="overwrite")  # version 1
    used, (res, _, _) = _both(spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src, version=0))
    assert not used and res == (10, 10, 0, 0)


def test_source_with_deletion_vector_runs_the_job(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(10, 20), files=1, dv=True)
    DeltaTable.forPath(spark, src).delete("id = 12")
    used, (res, _, metrics) = _both(spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src))
    assert not used and res == (9, 9, 0, 0) and metrics["numSourceRows"] == "9"


def test_source_without_statistics_runs_the_job(spark, tmp_path, monkeypatch, drop_stats):
    src = str(tmp_path / "src")
    _source(spark, src, range(10, 20))
    drop_stats(src)
    used, (res, _, _) = _both(spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src))
    assert not used and res == (10, 10, 0, 0)


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_null_safe_keys_and_null_source_keys(spark, tmp_path, monkeypatch, dv):
    src = str(tmp_path / "src")
    df = spark.createDataFrame([(5, 1), (None, 2), (6, 3), (None, 4), (7, 5), (8, 6)], "id long, v int")
    deltamerge.write(df.repartition(2), src)
    used, (res, _, _) = _both(
        spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src), cond="t.id <=> s.id", dv=dv
    )
    assert used and res == (6, 4, 0, 2)


def test_insert_only_prunes_from_statistics(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(395, 420))
    inserts = ("whenNotMatchedInsertAll",)
    used, (res, rows, _) = _both(
        spark, tmp_path, monkeypatch, lambda: deltamerge.read(spark, src), clauses=inserts
    )
    assert used and res == (20, 0, 0, 20) and len(rows) == 420


def test_registered_name_source(spark, tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    _source(spark, src, range(380, 420))
    deltamerge.read(spark, src).createOrReplaceTempView("dm_stats_src")
    used, (res, _, _) = _both(spark, tmp_path, monkeypatch, lambda: spark.table("dm_stats_src"))
    assert used and res == (40, 20, 0, 20)


def test_partitioned_source_and_odd_column_names(spark, tmp_path, monkeypatch):
    """A partitioned source whose values Spark parses from the directories is a plain read: its
    statistics answer, for a data column key (a partition key has no statistics: the job runs).
    With the values joined in from the log it is no plain read: the job runs. A key column whose
    name has spaces passes through the plan text like any other."""
    from deltamerge.spark import scan

    src = str(tmp_path / "src")
    df = spark.createDataFrame([(i, 100 + i % 3, i % 2) for i in range(380, 420)], "id long, v int, p int")
    deltamerge.write(df, src, partition_by="p")
    used, (res, rows, _) = _both(
        spark, tmp_path / "a", monkeypatch, lambda: deltamerge.read(spark, src).drop("p")
    )
    assert used and res == (40, 20, 0, 20)
    by_key = str(tmp_path / "by_key")
    keys = spark.createDataFrame([(i, 5) for i in (398, 399, 400, 401)], "id long, v int")
    deltamerge.write(keys, by_key, partition_by="id")
    used, (res, _, _) = _both(spark, tmp_path / "b", monkeypatch, lambda: deltamerge.read(spark, by_key))
    assert not used and res == (4, 2, 0, 2)
    with monkeypatch.context() as m:
        m.setattr(scan, "_hive_layout", lambda *a: None)
        used, (res, joined, _) = _both(
            spark, tmp_path / "c", monkeypatch, lambda: deltamerge.read(spark, src).drop("p")
        )
    assert not used and res == (40, 20, 0, 20) and joined == rows

    # A name with a space: Delta wants column mapping for it, delta-rs writes it as it is.
    odd = str(tmp_path / "odd")
    ids = pa.array(range(380, 420), pa.int64())
    deltalake.write_deltalake(odd, pa.table({"my id": ids, "v": pa.array([7] * 40, pa.int32())}))
    calls = _spy(monkeypatch)
    path = str(tmp_path / "t_odd")
    _target(spark, path)
    res = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(deltamerge.read(spark, odd).alias("s"), "t.id = s.`my id`")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsert(values={"id": "s.`my id`", "v": "s.v"})
        .execute().collect()[0]
    )  # fmt: skip
    assert not calls and tuple(res) == (40, 20, 0, 20)
