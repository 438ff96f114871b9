"""DV mode's upsert whose UPDATE and INSERT write alike (merge/uniform_upsert.py): the source rows
are written without a join while the matched positions are found beside them. Same table, counters,
deletion vectors and history as the Delta-shaped path; the one job (or Delta's error) takes over
when a source row matches two target rows (or a target row two source rows), leaving no file of
the discarded write behind; merges whose clauses do not write alike never take it."""

from __future__ import annotations

import pathlib

import pytest
from pyspark.sql import functions as F
from test_merge_one_job import _state
from test_merge_pruning import _run, _settings, _spy_broadcast

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog
from merge_variants import UNIFORM, VARIANTS

DELTA_SHAPED = VARIANTS["delta-shaped"]
UPSERT = [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)]
REPLACE = [*UPSERT, ("whenNotMatchedBySourceDelete",)]  # "replace the target with the source"
DV = {"delta.enableDeletionVectors": "true"}


def _target(spark, path, *, partitioned=False, extra_rows=None, configuration=None, dv=True):
    df = spark.range(0, 600, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v", "id % 3 AS p")
    if extra_rows is not None:
        df = df.unionByName(extra_rows)
    conf = {**(DV if dv else {}), **(configuration or {})}
    deltamerge.write(df, path, configuration=conf, partition_by=["p"] if partitioned else None)


def _source(spark, extra_rows=None):
    df = spark.range(300, 900, 4).selectExpr("id", "CAST(id * 3 AS INT) AS v", "id % 3 AS p")
    return df if extra_rows is None else df.unionByName(extra_rows)


def _orphans(path):
    """Data files on disk that no version of the log ever added."""
    log = DeltaLog.for_table(path)
    known = set()
    for version in range(log.update().version + 1):
        known |= {f.path.split("/")[-1] for f in log.snapshot(version).files}
    files = [p for p in pathlib.Path(path).rglob("*.parquet") if "_change_data" not in p.parts]
    return sorted(p.name for p in files if p.name not in known)


def _both(spark, tmp_path, monkeypatch, make_target, source, clauses, cond="t.id = s.id"):
    """(outcomes, results) of the merge with the default executions and the Delta-shaped one."""
    outcomes = _spy_broadcast(monkeypatch)
    results, seen = [], []
    for name, conf in (("default", {}), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / name)
        make_target(path)
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, source, cond, clauses)
        seen.append(list(outcomes))
        results.append((res, *_state(spark, path)))
        assert _orphans(path) == []
    return seen[0], results


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize(
    "shape",
    ["plain", "partitioned", "existing_dvs", "column_mapping", "explicit_maps"],
)
def test_uniform_upsert_same_as_delta_shaped(spark, tmp_path, monkeypatch, shape, dv):
    def make(path):
        conf = {"delta.columnMapping.mode": "name"} if shape == "column_mapping" else None
        _target(spark, path, partitioned=shape == "partitioned", configuration=conf, dv=dv)
        if shape == "existing_dvs":
            DeltaTable.forPath(spark, path).delete("id % 10 = 4")

    clauses = UPSERT
    if shape == "explicit_maps":
        values = {"id": "s.id", "v": "s.v + 1", "p": "s.p"}
        clauses = [("whenMatchedUpdate", None, values), ("whenNotMatchedInsert", None, values)]
    outcomes, (ours, delta) = _both(spark, tmp_path, monkeypatch, make, _source(spark), clauses)
    assert outcomes == ["uniform"]
    assert ours == delta
    assert bool(ours[2]) == dv  # deletion vectors written
    if shape != "existing_dvs":
        assert ours[0] == (150, 75, 0, 75)


def test_uniform_upsert_with_schema_evolution(spark, tmp_path, monkeypatch):
    source = _source(spark).withColumn("note", F.concat(F.lit("n"), F.col("id").cast("string")))
    results = []
    outcomes = _spy_broadcast(monkeypatch)
    for name, conf in (("default", {}), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / name)
        _target(spark, path)
        outcomes.clear()
        with _settings(spark, conf):
            builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
            res = builder.whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
        results.append((tuple(res.first()), *_state(spark, path)))
        if name == "default":
            assert outcomes == ["uniform"]
    assert results[0] == results[1]
    assert "note" in deltamerge.read(spark, str(tmp_path / "default")).columns


@pytest.mark.parametrize(
    "case",
    [
        "condition",
        "reads_target",
        "different_values",
        "delete_clause",
        "row_tracking",
        "cdf",
        "off",
        # The replace form: NOT MATCHED BY SOURCE clauses that keep target rows, or CDF / off.
        "nmbs_conditional_delete",
        "nmbs_update",
        "replace_cdf",
        "replace_off",
    ],
)
def test_merges_that_do_not_write_alike_take_another_execution(spark, tmp_path, monkeypatch, case):
    clauses = {
        "condition": [("whenMatchedUpdateAll", "s.v > 0"), ("whenNotMatchedInsertAll",)],
        "reads_target": [
            ("whenMatchedUpdate", None, {"v": "t.v + s.v"}),
            ("whenNotMatchedInsert", None, {"id": "s.id", "v": "s.v", "p": "s.p"}),
        ],
        "different_values": [
            ("whenMatchedUpdate", None, {"id": "s.id", "v": "s.v", "p": "s.p"}),
            ("whenNotMatchedInsert", None, {"id": "s.id", "v": "0", "p": "s.p"}),
        ],
        "delete_clause": [("whenMatchedDelete", "s.v < 0"), *UPSERT],
        "nmbs_conditional_delete": [*UPSERT, ("whenNotMatchedBySourceDelete", "t.v > 2")],
        "nmbs_update": [*UPSERT, ("whenNotMatchedBySourceUpdate", None, {"v": "-1"})],
        "replace_cdf": REPLACE,
        "replace_off": REPLACE,
    }.get(case, UPSERT)
    conf = {
        "row_tracking": {"delta.enableRowTracking": "true"},
        "cdf": {"delta.enableChangeDataFeed": "true"},
        "replace_cdf": {"delta.enableChangeDataFeed": "true"},
    }.get(case)
    settings = {UNIFORM: "false"} if case.endswith("off") else {}
    outcomes = _spy_broadcast(monkeypatch)
    with _settings(spark, settings):
        outcomes_, (ours, delta) = _both(
            spark,
            tmp_path,
            monkeypatch,
            lambda p: _target(spark, p, configuration=conf),
            _source(spark),
            clauses,
        )
    assert "uniform" not in outcomes_ and "replace" not in outcomes_
    assert ours == delta
    del outcomes


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("clauses", ["upsert", "replace"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_source_row_matching_two_target_rows_falls_back_without_leftovers(
    spark, tmp_path, monkeypatch, dv, clauses
):
    """Delta updates both target rows: two output rows for one source row, which the join-free
    write cannot give. Another execution runs; the discarded write leaves no file."""
    twins = spark.range(300, 310).selectExpr("id", "CAST(-1 AS INT) AS v", "id % 3 AS p")
    outcomes, (ours, delta) = _both(
        spark,
        tmp_path,
        monkeypatch,
        lambda p: _target(spark, p, extra_rows=twins, dv=dv),
        _source(spark),
        UPSERT if clauses == "upsert" else REPLACE,
    )
    assert "uniform" not in outcomes and "replace" not in outcomes
    assert "one-job" in outcomes or not dv or clauses == "replace"
    assert ours == delta
    assert ours[0][1] == 75 + 3  # ids 300, 304 and 308 are updated twice


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("clauses", ["upsert", "replace"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_two_source_rows_matching_one_target_row_is_delta_error_and_table_unchanged(
    spark, tmp_path, dv, clauses
):
    path = str(tmp_path / "t")
    _target(spark, path, dv=dv)
    before = _state(spark, path)
    dupes = spark.range(500, 502).selectExpr("id", "CAST(1 AS INT) AS v", "id % 3 AS p")
    merge = UPSERT if clauses == "upsert" else REPLACE
    with pytest.raises(DeltaMergeError, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        _run(spark, path, _source(spark, extra_rows=dupes), "t.id = s.id", merge)
    assert _state(spark, path) == before
    assert _orphans(path) == []


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("clauses", ["upsert", "replace"])
@pytest.mark.parametrize("error", ["cast_overflow", "not_null"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_write_error_leaves_the_table_unchanged(spark, tmp_path, monkeypatch, dv, error, clauses):
    """A value that does not fit its column, or a NULL for a NOT NULL column, fails the write
    (beside job 1): Delta's error, no commit, no file left."""
    path = str(tmp_path / "t")
    if error == "not_null":
        props = " TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')" if dv else ""
        columns = "id BIGINT, v INT NOT NULL, p BIGINT"
        deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` ({columns}) USING delta{props}")
        deltamerge.write(
            spark.range(0, 600, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v", "id % 3 AS p"),
            path,
            mode="append",
        )
        source = _source(spark).withColumn("v", F.expr("IF(id = 304, NULL, v)"))
        expected = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    else:
        _target(spark, path, dv=dv)
        source = _source(spark).withColumn("v", F.col("id") * 10_000_000_000)  # BIGINT into INT
        expected = "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"
    before = _state(spark, path)
    outcomes = _spy_broadcast(monkeypatch)
    with pytest.raises(DeltaMergeError, match=expected):
        _run(spark, path, source, "t.id = s.id", UPSERT if clauses == "upsert" else REPLACE)
    assert "uniform" not in outcomes and "replace" not in outcomes
    assert _state(spark, path) == before
    assert _orphans(path) == []


@pytest.mark.parametrize("guess", ["right", "wrong"])
def test_copy_on_write_guess_that_every_candidate_is_touched(spark, tmp_path, monkeypatch, guess):
    """The rewrite of every candidate runs beside job 1 when each is expected to be touched; when
    one is not, that write is deleted and the touched files are rewritten alone."""
    top = 900 if guess == "right" else 100  # every file holds a key of the first, one of the second
    source = spark.range(0, top, 4).selectExpr("id", "CAST(id * 3 AS INT) AS v", "id % 3 AS p")
    with _settings(spark, {"spark.deltamerge.merge.singlePassExpectedMatches": "1e-9"}):
        outcomes, (ours, delta) = _both(
            spark, tmp_path, monkeypatch, lambda p: _target(spark, p, dv=False), source, UPSERT
        )
    assert outcomes == ["uniform"]
    assert ours == delta
    removed = int(ours[3]["numTargetFilesRemoved"])
    assert removed == (4 if guess == "right" else 1)


# --- "replace the target with the source": the upsert plus WHEN NOT MATCHED BY SOURCE THEN DELETE


@pytest.mark.sampled(stride=3)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize(
    "shape",
    [
        "plain",
        "partitioned",
        "existing_dvs",
        "target_predicate_in_on",
        "partition_predicate_in_on",
        "empty_source",
        "column_mapping",
    ],
)
def test_replace_same_as_delta_shaped(spark, tmp_path, monkeypatch, shape, dv):
    """Every target file goes whole and the source rows are the new table: the same rows,
    counters, removed files and history as the Delta-shaped path."""

    def make(path):
        conf = {"delta.columnMapping.mode": "name"} if shape == "column_mapping" else None
        partitioned = shape in ("partitioned", "partition_predicate_in_on")
        _target(spark, path, partitioned=partitioned, configuration=conf, dv=dv)
        if shape == "existing_dvs":
            DeltaTable.forPath(spark, path).delete("id % 10 = 4")

    source = _source(spark)
    if shape == "empty_source":
        source = source.where("id < 0")
    # A target-only predicate in ON: the target rows it rejects are not matched, so deleted.
    # On a partition column it must not prune the partition it rejects: those rows are deleted too.
    cond = "t.id = s.id AND t.p <> 1" if "predicate_in_on" in shape else "t.id = s.id"
    outcomes, (ours, delta) = _both(spark, tmp_path, monkeypatch, make, source, REPLACE, cond=cond)
    assert outcomes == ["replace"]
    assert ours == delta
    assert ours[2] == []  # no deletion vector: every file was removed whole
    if shape == "plain":
        assert ours[0] == (675, 75, 525, 75)  # affected, updated, deleted, inserted
        assert int(ours[3]["numTargetFilesRemoved"]) == 4
    if shape == "empty_source":
        assert ours[0] == (600, 0, 600, 0)
