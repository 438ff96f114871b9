"""Copy-on-write's job 2 over every candidate without job 1 (``merge/full_rewrite.py``): when the
source-key summary expects every candidate file to be touched, ``source FULL OUTER JOIN candidates``
rewrites them all at once and its observed metrics check the guess (every candidate touched, no
target row matched twice). Same table, counters and history as the Delta-shaped path; a wrong
guess leaves no file of the discarded rewrite behind and job 1 and job 2 run."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from test_merge_one_job import _state
from test_merge_pruning import _run, _settings
from test_merge_uniform_upsert import _orphans

import deltamerge
from deltamerge.errors import DeltaMergeError
from merge_variants import BROADCAST, EXPECTED, SINGLE_PASS, UNIFORM, VARIANTS

# The guess made on any candidate a source key may match, and the single pass off (it would take
# merges without NOT MATCHED clauses under the guess, and few candidate rows).
GUESS = {SINGLE_PASS: "0", EXPECTED: "1e-9", UNIFORM: "false"}
VALUES = {"id": "s.id", "v": "s.v", "op": "s.op"}
CDC = [
    ("whenMatchedDelete", "s.op = 'D'"),
    ("whenMatchedUpdate", None, VALUES),
    ("whenNotMatchedInsert", "s.op <> 'D'", VALUES),
]


def _target(spark, path, extra=None):
    df = spark.range(0, 400, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v", "'I' AS op")
    deltamerge.write(df if extra is None else df.unionByName(extra), path)


def _source(spark, lo=0, hi=600, step=3):
    op = F.when(F.col("id") % 5 == 0, F.lit("D")).otherwise(F.lit("U"))
    return spark.range(lo, hi, step).select("id", (F.col("id") * 3).cast("int").alias("v"), op.alias("op"))


def _spy(monkeypatch):
    """Record ``full`` (job 2 over every candidate committed), ``back`` (it handed back: not every
    candidate was touched) and ``written`` (the two-job variant's job 2)."""
    from deltamerge.merge import broadcast, full_rewrite

    seen: list[str] = []
    real_full, real_write = full_rewrite.try_rewrite, broadcast.write_changes

    def full(*a, **k):  # type: ignore[no-untyped-def]
        out = real_full(*a, **k)
        seen.append("back" if out is None else "full")
        return out

    def write(*a, **k):  # type: ignore[no-untyped-def]
        seen.append("written")
        return real_write(*a, **k)

    monkeypatch.setattr(full_rewrite, "try_rewrite", full)
    monkeypatch.setattr(broadcast, "write_changes", write)
    return seen


def _compare(spark, tmp_path, monkeypatch, source, clauses, make=_target, guess=GUESS):
    """(what ran, (ours, the Delta-shaped path's)): result, rows, DVs and history metrics."""
    seen = _spy(monkeypatch)
    results, ran = [], []
    for name, conf in (("full", guess), ("delta-shaped", VARIANTS["delta-shaped"])):
        path = str(tmp_path / name)
        make(spark, path)
        seen.clear()
        with _settings(spark, conf):
            res = _run(spark, path, source, "t.id = s.id", clauses)
        ran.append(list(seen))
        results.append((res, *_state(spark, path)))
        assert _orphans(path) == []
    return ran[0], results


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize(
    "clauses",
    [
        CDC,
        [("whenMatchedUpdate", "t.v < 4", {"v": "s.v + t.v"}), ("whenNotMatchedInsert", None, VALUES)],
        [("whenMatchedDelete", None), ("whenNotMatchedInsert", "s.id % 2 = 0", VALUES)],
        [("whenMatchedUpdate", "s.v >= 0", {"v": "s.v + t.v"})],
    ],
    ids=["cdc", "conditional_update", "delete_insert", "matched_only"],
)
def test_every_file_touched_same_as_delta_shaped(spark, tmp_path, monkeypatch, clauses):
    ran, (ours, delta) = _compare(spark, tmp_path, monkeypatch, _source(spark), clauses)
    assert ran == ["full"]
    assert ours == delta
    assert ours[0][1] + ours[0][2] + ours[0][3] > 0


def test_wrong_guess_hands_over_to_job_2(spark, tmp_path, monkeypatch):
    """Even target keys; source keys that match in the first file only, and odd keys within the
    other files' ranges (so the summary keeps them): those candidates are not touched, so the
    rewrite (which copied them too) is deleted and job 1 and job 2 rewrite the touched file."""

    def make(spark, path):
        df = spark.range(0, 400, numPartitions=4).selectExpr(
            "id * 2 AS id", "CAST(id % 7 AS INT) AS v", "'I' AS op"
        )
        deltamerge.write(df, path)

    odd = spark.createDataFrame([(i, 1, "U") for i in (251, 403, 605, 799)], "id long, v int, op string")
    source = _source(spark, 0, 90, 3).unionByName(odd)
    ran, (ours, delta) = _compare(spark, tmp_path, monkeypatch, source, CDC, make)
    assert ran == ["back", "written"]
    assert ours == delta
    assert ours[3]["numTargetFilesRemoved"] == "1"


def test_partitioned_target(spark, tmp_path, monkeypatch):
    """The partitions added to (a metric of Delta's that the commit does not carry) are counted as
    the Delta-shaped path's write counts them."""
    from deltamerge.merge import metrics

    added: list[int] = []
    real = metrics.MergeMetrics.to_operation_metrics

    def record(self):  # type: ignore[no-untyped-def]
        added.append(self.numTargetPartitionsAddedTo)
        return real(self)

    monkeypatch.setattr(metrics.MergeMetrics, "to_operation_metrics", record)

    def make(spark, path):
        df = spark.range(0, 400, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v", "'I' AS op")
        deltamerge.write(df.withColumn("p", F.col("id") % 3), path, partition_by=["p"])

    source = _source(spark, 0, 600, 2).withColumn("p", F.col("id") % 3)
    values = {**VALUES, "p": "s.p"}
    clauses = [CDC[0], ("whenMatchedUpdate", None, values), ("whenNotMatchedInsert", "s.op <> 'D'", values)]
    ran, (ours, delta) = _compare(spark, tmp_path, monkeypatch, source, clauses, make)
    assert ran == ["full"]
    assert ours == delta
    assert added == [3, 3]


def test_target_rows_sharing_a_key(spark, tmp_path, monkeypatch):
    """A source row matching two target rows updates both (Delta's rule), here too."""

    def make(spark, path):
        _target(spark, path, spark.range(0, 400, 50).selectExpr("id", "-1 AS v", "'X' AS op"))

    ran, (ours, delta) = _compare(spark, tmp_path, monkeypatch, _source(spark), CDC, make)
    assert ran == ["full"]
    assert ours == delta


def test_duplicate_source_keys_raise_as_delta(spark, tmp_path, monkeypatch):
    """Two source rows matching one target row: the summary finds the source not unique, the
    Delta-shaped path reports it, and the table is as it was (no file left behind)."""
    path = str(tmp_path / "t")
    _target(spark, path)
    before = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    source = _source(spark).unionByName(_source(spark, 30, 33, 3))
    with _settings(spark, GUESS), pytest.raises(DeltaMergeError, match="MULTIPLE_SOURCE_ROW_MATCHING"):
        _run(spark, path, source, "t.id = s.id", CDC)
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == before
    assert _orphans(path) == []


@pytest.mark.parametrize("touched", ["every_file", "first_file_only"])
def test_source_too_large_to_broadcast(spark, tmp_path, monkeypatch, touched):
    """A source beyond the broadcast limit takes the Delta-shaped path, whose job 1 the guess
    saves as well: job 2 over every candidate, or, when the guess is wrong, job 1 and job 2 as
    Delta runs them. Same table, counters and history as the Delta-shaped path."""

    def make(spark, path):
        df = spark.range(0, 400, numPartitions=4).selectExpr(
            "id * 2 AS id", "CAST(id % 7 AS INT) AS v", "'I' AS op"
        )
        deltamerge.write(df, path)

    source = _source(spark)
    if touched == "first_file_only":
        odd = spark.createDataFrame([(i, 1, "U") for i in (251, 403, 605, 799)], "id long, v int, op string")
        source = _source(spark, 0, 90, 3).unionByName(odd)
    ran, (ours, delta) = _compare(
        spark, tmp_path, monkeypatch, source, CDC, make, guess={**GUESS, BROADCAST: "1"}
    )
    assert ran == (["full"] if touched == "every_file" else ["back"])
    assert ours == delta
    assert ours[3]["numTargetFilesRemoved"] == ("3" if touched == "every_file" else "1")  # 600+ pruned


@pytest.mark.parametrize("broadcastable", [True, False], ids=["broadcast", "large"])
def test_write_error_leaves_the_table_unchanged(spark, tmp_path, monkeypatch, broadcastable):
    """A NULL for a NOT NULL column fails the rewrite of every candidate: Delta's error, no commit,
    no file of the failed write left."""
    path = str(tmp_path / "t")
    deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` (id BIGINT, v INT NOT NULL, op STRING) USING delta")
    rows = spark.range(0, 400, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v", "'I' AS op")
    deltamerge.write(rows, path, mode="append")
    before = _state(spark, path)
    from deltamerge.merge import full_rewrite

    seen: list[str] = []
    original = full_rewrite.try_rewrite

    def entered(*a, **k):  # type: ignore[no-untyped-def]
        seen.append("entered")
        return original(*a, **k)

    monkeypatch.setattr(full_rewrite, "try_rewrite", entered)
    from deltamerge.merge import broadcast, classic

    for module, name in ((classic, "find_touched_files"), (broadcast, "find_matches")):
        monkeypatch.setattr(module, name, lambda *a, _n=name, **k: seen.append(_n))  # job 1: not reached
    source = _source(spark).withColumn("v", F.expr("IF(id = 303, NULL, v)"))
    guess = GUESS if broadcastable else {**GUESS, BROADCAST: "1"}
    with _settings(spark, guess), pytest.raises(DeltaMergeError, match="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"):
        _run(spark, path, source, "t.id = s.id", CDC)
    # The error came out of the rewrite of every candidate; job 1 only runs after it, to report
    # duplicate matches first, when the source was not checked unique (the broadcast case).
    assert seen == (["entered", "find_touched_files"] if broadcastable else ["entered"])
    assert _state(spark, path) == before
    assert _orphans(path) == []
