"""DV mode's one-job variant (merge/one_job.py): same table, counters and deletion vectors as the
Delta-shaped path, with the matched target rows broadcast or shuffled, or every candidate row
broadcast, on plain, partitioned and statistics-less tables; the decoding of the observed numbers."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType
from test_merge_pruning import _rows, _run, _settings, _spy_broadcast, _table

import deltamerge
import merge_variants
from deltamerge import DeltaTable
from deltamerge.log.actions import AddFile
from deltamerge.log.snapshot import DeltaLog
from merge_variants import VARIANTS

DELTA_SHAPED = VARIANTS["delta-shaped"]
# The matched rows broadcast after a semi-join with the source, shuffled, or (the default for few
# candidate rows) every candidate row broadcast without the semi-join.
SIDES = {
    "broadcast": VARIANTS["one-job"],
    "shuffled": VARIANTS["one-job-shuffled"],
    "candidates": {**VARIANTS["default"], merge_variants.UNIFORM: "false"},
}

CLAUSES = {
    "upsert": [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)],
    # Matched rows of every kind: updated, deleted, left as they are (COPY: not written, no DV bit).
    "mixed": [
        ("whenMatchedUpdate", "t.v < 3", {"v": "s.v + 100"}),
        ("whenMatchedDelete", "t.v >= 5"),
        ("whenNotMatchedInsert", "s.id % 2 = 0", {"id": "s.id", "v": "s.v", "d": "s.d"}),
    ],
    "matched_only": [("whenMatchedUpdate", "s.v = 1", {"v": "t.v * 10"})],
    "delete_only": [("whenMatchedDelete",)],
}


def _source(spark):
    return spark.range(0, 80).select(
        (F.col("id") * 37 % 1400).alias("id"),
        (F.col("id") % 3).cast("int").alias("v"),
        F.lit(None).cast("date").alias("d"),
    )


def _state(spark, path):
    snap = DeltaLog.for_table(path).update()
    dvs = sorted(f.deletion_vector.cardinality for f in snap.files if f.deletion_vector)
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    keep = ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsInserted", "numSourceRows",
            "numTargetFilesRemoved", "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsUpdated",
            "numTargetRowsCopied", "numOutputRows")  # fmt: skip
    return _rows(spark, path), dvs, {k: metrics.get(k) for k in keep}


@pytest.mark.sampled
@pytest.mark.parametrize("side", sorted(SIDES))
@pytest.mark.parametrize("clauses", sorted(CLAUSES))
def test_one_job_same_as_delta_shaped(spark, tmp_path, monkeypatch, clauses, side):
    """On files that already carry deletion vectors (their rows stay masked, their DVs grow)."""
    outcomes = _spy_broadcast(monkeypatch)
    results = []
    for variant, conf in (("one-job", SIDES[side]), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / variant)
        _table(spark, path, dv=True)
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, _source(spark), "t.id = s.id", CLAUSES[clauses])
        if variant == "one-job":
            assert outcomes == ["one-job"]
        results.append((res, *_state(spark, path)))
    assert results[0] == results[1]
    assert results[0][2]  # some file got a deletion vector
    assert int(results[0][3]["numTargetDeletionVectorsUpdated"]) > 0  # a DV united with the old one


@pytest.mark.sampled
@pytest.mark.parametrize("side", sorted(SIDES))
def test_one_job_partitioned_table(spark, tmp_path, monkeypatch, side):
    """Matched rows masked in their partitions' files, inserts routed to new partitions."""
    outcomes = _spy_broadcast(monkeypatch)
    results = []
    for variant, conf in (("one-job", SIDES[side]), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / variant)
        _table(spark, path, dv=True, partition_by=["v"])
        source = spark.range(0, 40).select(
            (F.col("id") * 53 % 1300).alias("id"), (F.col("id") % 7).cast("int").alias("v"),
            F.lit(None).cast("date").alias("d"),
        )  # fmt: skip
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, source, "t.id = s.id AND t.v = s.v", CLAUSES["upsert"])
        if variant == "one-job":
            assert outcomes == ["one-job"]
        snap = DeltaLog.for_table(path).update()
        assert all(set(f.partition_values) == {"v"} for f in snap.files)
        results.append((res, *_state(spark, path)))
    assert results[0] == results[1]


def _mixed_merge_both_ways(spark, tmp_path, outcomes, created=None):
    """The mixed-clause merge into a DV table (with a deletion vector already) by the broadcast one
    job and by the Delta-shaped path: their (result, rows, DVs, metrics); ``created(path)`` runs on
    each new table."""
    results = []
    for variant, conf in (("one-job", SIDES["broadcast"]), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / variant)
        _table(spark, path, dv=True)
        if created is not None:
            created(path)
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, _source(spark), "t.id = s.id", CLAUSES["mixed"])
        if variant == "one-job":
            assert outcomes == ["one-job"]
        results.append((res, *_state(spark, path)))
    return results


@pytest.mark.parametrize("case_max_files", [0, 64])
def test_one_job_numbers_from_case_or_frame_of_paths(spark, tmp_path, monkeypatch, case_max_files):
    """Each matched row's number comes from a CASE over the candidates' paths (few candidates) or
    from a broadcast frame of paths (many): same table, counters and deletion vectors either way."""
    from deltamerge.spark import scan

    outcomes = _spy_broadcast(monkeypatch)
    monkeypatch.setattr(scan, "CASE_MAX_FILES", case_max_files)
    frames = []
    real = scan.local_frame
    monkeypatch.setattr(scan, "local_frame", lambda *a: frames.append(len(a[1])) or real(*a))
    results = _mixed_merge_both_ways(spark, tmp_path, outcomes)
    assert results[0] == results[1]
    assert frames == ([] if case_max_files else [10])  # ten candidate files


def test_one_job_without_statistics(spark, tmp_path, monkeypatch, drop_stats):
    """Files without row counts: each file's numbers start at a multiple of 2^42, and the matched
    rows are shuffled (no bound on how many there are)."""
    from deltamerge.merge import one_job

    outcomes = _spy_broadcast(monkeypatch)
    broadcasts = []
    real = one_job._matched_side_bytes
    monkeypatch.setattr(one_job, "_matched_side_bytes", lambda *a: broadcasts.append(real(*a)) or real(*a))
    results = _mixed_merge_both_ways(spark, tmp_path, outcomes, created=drop_stats)
    assert results[0][:3] == results[1][:3]  # result, rows and DVs (not the metrics)
    assert broadcasts == [None]


def test_one_job_restores_session_settings(spark, tmp_path, monkeypatch):
    """The job runs without adaptive execution and with its own shuffle partitions; the session's
    settings are back afterwards."""
    from deltamerge.merge import one_job

    seen = []
    real = one_job.observed_text

    def current():
        return spark.conf.get("spark.sql.adaptive.enabled"), spark.conf.get("spark.sql.shuffle.partitions")

    def spy(obs):  # runs inside the job's settings block
        seen.append(current())
        return real(obs)

    monkeypatch.setattr(one_job, "observed_text", spy)
    path = str(tmp_path / "t")
    _table(spark, path, dv=True)
    before = current()
    with _settings(spark, SIDES["shuffled"]):
        _run(spark, path, _source(spark), "t.id = s.id", CLAUSES["upsert"])
    assert seen and seen[0][0] == "false"
    assert 1 <= int(seen[0][1]) <= int(before[1])
    assert current() == before


def _files(*counts):
    return [AddFile(path=f"f{i}", partition_values={}, size=1, modification_time=0, data_change=True,
                    stats=None if n is None else f'{{"numRecords":{n}}}')
            for i, n in enumerate(counts)]  # fmt: skip


def test_number_bases():
    from deltamerge.merge import one_job

    assert one_job.number_bases(_files(3, 5, 2)) == [0, 6, 16]
    assert one_job.number_bases(_files(3, None)) == [0, 1 << 42]


def test_changed_positions_decoding():
    from deltamerge.merge import broadcast, one_job

    files = _files(3, 5, 2)  # numbers: file 0 from 0, file 1 from 6, file 2 from 16

    def number(i, pos, changed):
        return one_job.number_bases(files)[i] + 2 * pos + changed

    text = ",".join(str(number(*t)) for t in [(1, 4, 1), (0, 2, 1), (1, 0, 0), (2, 1, 1), (1, 2, 1)])
    assert one_job.changed_positions(text, files) == {0: [2], 1: [2, 4], 2: [1]}
    assert one_job.changed_positions("", files) == {}
    # Only unchanged matches: no file is touched.
    assert one_job.changed_positions(str(number(1, 3, 0)), files) == {}
    # The same row twice (changed or not): a target row matched by two source rows.
    with pytest.raises(broadcast.SourceNotUnique):
        one_job.changed_positions(f"{number(1, 3, 0)},{number(1, 3, 1)}", files)
    # A row Spark could not number (no base for its file, or beyond its row count): not trusted.
    for bad in ("-1", "-2"):
        with pytest.raises(one_job.Retry):
            one_job.changed_positions(f"{number(0, 1, 1)},{bad}", files)
    shifted = _files(3, None)
    text = f"{(1 << 42) + 2 * 7 + 1},{2 * 1 + 1}"
    assert one_job.changed_positions(text, shifted) == {0: [1], 1: [7]}


def _shape_tables(spark, shape):
    """(target, source, ON condition, clauses, settings) for merges of other shapes."""
    if shape == "evolution":  # a new source column: schema evolution with UPDATE SET * / INSERT *
        target = spark.range(0, 300, numPartitions=3).selectExpr("id", "cast(id % 7 as int) as v")
        source = spark.range(0, 30).selectExpr("id * 17 % 400 as id", "cast(-id as int) as v", "'n' as extra")
        clauses = [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)]
        evolve = {"spark.databricks.delta.schema.autoMerge.enabled": "true"}
        return target, source, "t.id = s.id", clauses, evolve
    if shape == "string_key_nulls":  # string keys, NULL keys on both sides (never match)
        target = spark.range(0, 300, numPartitions=3).selectExpr(
            "CASE WHEN id % 50 = 0 THEN NULL ELSE concat('k', id) END as k", "cast(id as int) as v"
        )
        source = spark.range(0, 30).selectExpr(
            "CASE WHEN id % 10 = 0 THEN NULL ELSE concat('k', id * 13 % 400) END as k",
            "cast(-id as int) as v",
        )
        clauses = [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)]
        return target, source, "t.k = s.k", clauses, {}
    # Two key columns and a residual condition that sends some key matches to no row.
    target = spark.range(0, 300, numPartitions=3).selectExpr(
        "id % 100 as a", "id div 100 as b", "cast(id as int) as v"
    )
    source = spark.range(0, 40).selectExpr("id * 7 % 120 as a", "id % 3 as b", "cast(id as int) as v")
    clauses = [("whenMatchedUpdate", None, {"v": "t.v + s.v"}), ("whenNotMatchedInsertAll",)]
    return target, source, "t.a = s.a AND t.b = s.b AND t.v % 4 <> s.v % 4", clauses, {}


@pytest.mark.sampled
@pytest.mark.parametrize("side", sorted(SIDES))
@pytest.mark.parametrize("shape", ["evolution", "string_key_nulls", "composite_residual"])
def test_one_job_merge_shapes(spark, tmp_path, monkeypatch, shape, side):
    import deltamerge

    outcomes = _spy_broadcast(monkeypatch)
    results = []
    for variant, conf in (("one-job", SIDES[side]), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / variant)
        target, source, cond, clauses, extra = _shape_tables(spark, shape)
        deltamerge.write(target, path, configuration={"delta.enableDeletionVectors": "true"})
        outcomes.clear()
        with _settings(spark, {**conf, **extra}):
            res = _run(spark, path, source, cond, clauses)
        if variant == "one-job":
            assert outcomes == ["one-job"]
        results.append((res, *_state(spark, path)[:2], deltamerge.read(spark, path).columns))
    assert results[0] == results[1]
    assert results[0][0][1] > 0  # some rows were updated


def test_one_job_broadcasts_every_candidate_row_when_few(spark, tmp_path, monkeypatch):
    """Candidates of at most ``broadcastCandidatesMaxRows`` live rows that fit the broadcast limit
    are broadcast whole, with no semi-join against the source. Above the limit the semi-join comes
    back; either way the one job runs ahead of the single pass, which runs when the one job is off.
    Same table, counters and deletion vectors as the Delta-shaped path each way."""
    from deltamerge.merge import one_job

    outcomes = _spy_broadcast(monkeypatch)
    semis: list[bool] = []
    real = one_job._matched_targets
    monkeypatch.setattr(
        one_job, "_matched_targets", lambda *a, semi: semis.append(semi) or real(*a, semi=semi)
    )
    cases = [
        ("default", {}, ["one-job"], [False]),
        # 1,000 rows in the table, ~980 live after the delete: above 500, the semi-join again.
        ("above", {merge_variants.CANDIDATES: "500"}, ["one-job"], [True]),
        ("off", {merge_variants.ONE_JOB: "false"}, ["single"], []),
        ("delta-shaped", DELTA_SHAPED, [], []),
    ]
    results = []
    for name, conf, expected, semi in cases:
        path = str(tmp_path / name)
        _table(spark, path, dv=True)
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")
        outcomes.clear()
        semis.clear()
        with _settings(spark, conf):
            res = _run(spark, path, _source(spark), "t.id = s.id", CLAUSES["mixed"])
        assert (outcomes, semis) == (expected, semi), name
        results.append((res, *_state(spark, path)))
    assert all(r == results[-1] for r in results)
    assert results[0][0][1] > 0 and results[0][0][3] > 0  # updated and inserted rows


def test_matched_side_estimate_counts_the_target_columns_the_merge_reads(spark, tmp_path, monkeypatch):
    """The broadcast decision's worst case: the key, the number, and every target column an update
    reads (here a string column), which the matched rows carry through the join."""
    import deltamerge
    from deltamerge.merge import one_job

    sizes = []
    real = one_job._matched_side_bytes
    monkeypatch.setattr(one_job, "_matched_side_bytes", lambda *a: sizes.append(real(*a)) or sizes[-1])
    df = spark.range(0, 300, numPartitions=3).selectExpr("id", "concat('x', id) as s", "cast(id as int) as v")
    source = spark.range(0, 30).selectExpr("id * 7 as id", "'y' as s", "cast(-id as int) as v")
    for clauses in (
        [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)],
        [("whenMatchedUpdate", None, {"s": "concat(t.s, s.s)"}), ("whenNotMatchedInsertAll",)],
    ):
        path = str(tmp_path / f"t{len(sizes)}")
        deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"})
        with _settings(spark, SIDES["broadcast"]):
            _run(spark, path, source, "t.id = s.id", clauses)
    # 300 rows x (row + number + id) against the same plus the string column's 20 bytes (and v,
    # which the partial update keeps).
    assert sizes == [300 * (8 + 8 + 8), 300 * (8 + 8 + 8 + 20 + 4)]


def _claim_rows(path, n):
    """Make the statistics of the table's first file (ids from 0) claim ``n`` rows."""
    import json
    import os

    log_file = os.path.join(path, "_delta_log", f"{0:020d}.json")
    with open(log_file) as f:
        lines = [json.loads(line) for line in f]
    for a in lines:
        stats = json.loads(a["add"]["stats"]) if "add" in a else None
        if stats and stats["minValues"]["id"] == 0:
            stats["numRecords"] = n
            a["add"]["stats"] = json.dumps(stats)
    with open(log_file, "w") as out:
        out.write("\n".join(json.dumps(a) for a in lines) + "\n")
    DeltaLog.clear_cache()


def test_one_job_distrusts_row_counts_below_the_positions(spark, tmp_path, monkeypatch):
    """A file whose statistics claim fewer rows than it holds: a matched position at or beyond the
    claimed count would name a row of the next file, so the one job discards its output and the
    two jobs (which do not number rows by the statistics) run. Same table as the Delta-shaped path."""
    outcomes = _spy_broadcast(monkeypatch)
    results = []
    for variant, conf in (("one-job", SIDES["broadcast"]), ("delta-shaped", DELTA_SHAPED)):
        path = str(tmp_path / variant)
        _table(spark, path, n=400, files=4, dv=True)  # ids 0..399 in order, 100 per file
        _claim_rows(path, 50)  # ids 50..99 lie beyond the claim
        rows = [(80, -1, None), (250, -2, None), (999, -3, None)]
        source = spark.createDataFrame(rows, "id long, v int, d date")
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, source, "t.id = s.id", CLAUSES["upsert"])
        if variant == "one-job":
            assert outcomes == ["retry", "matched", "written"]
        results.append((res, *_state(spark, path)[:2]))
    assert results[0] == results[1]
    assert results[0][0] == (3, 2, 0, 1)


@pytest.mark.sampled
@pytest.mark.parametrize("variant", ["default", "single-pass", "one-job", "two-job"])
def test_understated_row_count_never_removes_a_file_whole(spark, tmp_path, variant):
    """A file whose statistics claim 3 rows while it holds 100: masking 3 of its rows is a deletion
    vector, not the removal of the file (which would drop 97 rows no clause touched)."""
    path = str(tmp_path / "t")
    _table(spark, path, n=400, files=4, dv=True)  # ids 0..399 in order, 100 per file
    _claim_rows(path, 3)
    source = spark.createDataFrame([(0, 0, None), (1, 0, None), (2, 0, None)], "id long, v int, d date")
    with _settings(spark, VARIANTS[variant]):
        res = _run(spark, path, source, "t.id = s.id", [("whenMatchedDelete",)])
    assert res == (3, 0, 3, 0)
    assert sorted(r[0] for r in _rows(spark, path)) == list(range(3, 400))


def test_positions_fetched_as_arrays(spark):
    """The per-file summary with its lists of changed positions comes back as rows without the
    list and int64 arrays per file; files with an empty list have no entry."""
    from deltamerge.merge import positions

    summary = spark.createDataFrame(
        [("a", 1, [5, 3, (1 << 40) + 7]), ("b", 0, []), ("c", 2, [0])],
        "f string, touched int, rows array<bigint>",
    ).repartition(3)  # several Arrow batches
    rows, lists = positions.fetch(summary, "f", "rows")
    assert sorted(rows, key=lambda r: r["f"]) == [
        {"f": "a", "touched": 1},
        {"f": "b", "touched": 0},
        {"f": "c", "touched": 2},
    ]
    assert {k: sorted(v.tolist()) for k, v in lists.items()} == {"a": [3, 5, (1 << 40) + 7], "c": [0]}
    assert all(v.dtype.name == "int64" for v in lists.values())


def test_one_job_code_is_reused_by_merges_into_other_files(spark, tmp_path, monkeypatch):
    """The candidates' numbers stay out of the generated code: a merge into a file of another row
    count (other bases and limits) compiles nothing the previous merge did not."""
    from deltamerge.spark.session import local_frame, temporary_settings

    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    outcomes = _spy_broadcast(monkeypatch)
    schema = StructType([StructField("id", LongType()), StructField("v", IntegerType())])
    source = local_frame(spark, [(i, 7) for i in (10, 11, 12, 2000)], schema)
    counts = []
    for n, keep in ((1000, "true"), (1000, "id % 2 = 0 OR id = 999"), (1000, "id % 3 = 0 OR id = 999")):
        path = str(tmp_path / f"t{len(counts)}")
        rows = spark.range(0, n, numPartitions=1).selectExpr("id", "CAST(id % 7 AS INT) AS v").where(keep)
        deltamerge.write(rows, path, configuration={"delta.enableDeletionVectors": "true"})
        settings = {
            "spark.sql.codegen.wholeStage": "true",
            "spark.sql.codegen.factoryMode": "FALLBACK",
            merge_variants.UNIFORM: "false",
        }
        with temporary_settings(spark, settings):
            before = compiled.getCount()
            _run(spark, path, source, "t.id = s.id", CLAUSES["upsert"])
            counts.append(compiled.getCount() - before)
        assert outcomes[-1] == "one-job"
    assert counts[1:] == [0, 0], counts
