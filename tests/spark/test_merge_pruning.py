"""Dynamic file pruning by source keys and DV-mode output without a copy branch.

Pruning must never change a MERGE's result: every case runs with the optimisation on and off and
compares rows and result counters; ``summarize_source_keys`` is checked directly for which files
it keeps.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import pathlib
import uuid

import pytest
from pyspark.sql import functions as F

import deltamerge
import merge_variants
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

DFP = "spark.databricks.optimizer.dynamicFilePruning"


def _table(spark, path, n=1000, files=10, dv=False, with_nulls=False, partition_by=None):
    df = spark.range(0, n, numPartitions=files).select(
        F.col("id"),
        (F.col("id") % 7).cast("int").alias("v"),
        F.date_add(F.lit(dt.date(2024, 1, 1)), F.col("id").cast("int")).alias("d"),
    )
    if with_nulls:
        df = df.withColumn("id", F.when(F.col("id") % 97 == 0, F.lit(None)).otherwise(F.col("id")))
    conf = {"delta.enableDeletionVectors": "true"} if dv else None
    deltamerge.write(df, path, configuration=conf, partition_by=partition_by)


def _rows(spark, path):
    return sorted((tuple(r) for r in deltamerge.read(spark, path).collect()), key=repr)


def _run(spark, path, source, cond, clauses):
    m = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), cond)
    for c in clauses:
        m = getattr(m, c[0])(*c[1:])
    return tuple(m.execute().collect()[0])


def _both_ways(spark, tmp_path, source_factory, cond, clauses, table=None, **table_kw):
    """The merge's result and rows with dynamic file pruning on and off (they must agree);
    ``table(path)`` creates the target (default: ``_table`` with ``table_kw``)."""
    results = []
    for flag in ("true", "false"):
        path = str(tmp_path / f"t_{flag}")
        if table is not None:
            table(path)
        else:
            _table(spark, path, **table_kw)
        spark.conf.set(DFP, flag)
        try:
            res = _run(spark, path, source_factory(), cond, clauses)
        finally:
            spark.conf.unset(DFP)
        results.append((res, _rows(spark, path)))
    assert results[0] == results[1]
    return results[0]


UPSERT = [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)]


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_upsert_one_file_same_result(spark, tmp_path, monkeypatch, dv):
    from deltamerge.merge.context import MergeContext

    scanned: list[int] = []
    real = MergeContext.target

    def spy(self, files, **kw):  # type: ignore[no-untyped-def]
        scanned.append(len(files))
        return real(self, files, **kw)

    monkeypatch.setattr(MergeContext, "target", spy)

    def source():
        return (
            spark.range(300, 320)
            .select(F.col("id"), F.lit(-1).alias("v"), F.lit(dt.date(2000, 1, 1)).alias("d"))
            .union(
                spark.range(5000, 5005).select(
                    F.col("id"), F.lit(-2).alias("v"), F.lit(None).cast("date").alias("d")
                )
            )
        )

    res, rows = _both_ways(spark, tmp_path, source, "t.id = s.id", UPSERT, dv=dv)
    assert res == (25, 20, 0, 5)
    assert len(rows) == 1005
    # With pruning every target scan reads the one file holding ids 300-319; without it, all 10.
    assert scanned and max(scanned) == 10 and scanned.count(10) == len(scanned) - scanned.count(1)
    assert 1 in scanned


def test_null_safe_keys_and_nulls(spark, tmp_path):
    def source():
        return spark.createDataFrame(
            [(None, 9, None), (195, 9, None), (100000, 9, None)], "id long, v int, d date"
        )

    res, _rows_after = _both_ways(
        spark,
        tmp_path,
        source,
        "t.id <=> s.id",
        [("whenMatchedUpdate", None, {"v": "s.v"}), ("whenNotMatchedInsertAll",)],
        with_nulls=True,
    )
    # 11 target rows have a null id (0, 97, ..., 970); each matches the null source row.
    assert res[1] == 12 and res[3] == 1


def test_date_key_and_matched_only(spark, tmp_path):
    def source():
        return spark.createDataFrame([(dt.date(2024, 1, 5), 3), (dt.date(2030, 1, 1), 4)], "d date, v int")

    res, _ = _both_ways(spark, tmp_path, source, "t.d = s.d", [("whenMatchedDelete",)])
    assert res == (1, 0, 1, 0)


def test_insert_only_with_pruning(spark, tmp_path):
    def source():
        return spark.range(990, 1010).select(
            F.col("id"), F.lit(1).alias("v"), F.lit(None).cast("date").alias("d")
        )

    res, rows = _both_ways(spark, tmp_path, source, "t.id = s.id", [("whenNotMatchedInsertAll",)])
    assert res == (10, 0, 0, 10)
    assert len(rows) == 1010


def test_multiple_matches_still_detected(spark, tmp_path):
    from deltamerge.errors import MultipleSourceRowMatchingTargetRowError

    path = str(tmp_path / "t")
    _table(spark, path)
    src = spark.createDataFrame([(5, 1, None), (5, 2, None)], "id long, v int, d date")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError):
        _run(spark, path, src, "t.id = s.id", UPSERT)


def test_prune_keeps_only_matching_files(spark, tmp_path):
    from deltamerge.merge.analysis import analyze
    from deltamerge.merge.clauses import MergeSpec
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import equi_keys, summarize_source_keys
    from deltamerge.spark.types import to_spark_schema

    path = str(tmp_path / "t")
    _table(spark, path)
    snap = DeltaLog.for_table(path).update()
    src = spark.createDataFrame([(150, 1, None), (151, 1, None), (9999, 1, None)], "id long, v int, d date")
    builder = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.v = s.v AND t.id = s.id")
    spec: MergeSpec = builder.whenMatchedUpdateAll()._spec()
    rm = analyze(spec, to_spark_schema(snap.metadata.schema_string), case_sensitive=False, evolve=False)
    assert [(k.target_index, k.source_index) for k in equi_keys(rm)] == [(1, 1), (0, 0)]
    # v is an int column of every file's range 0..6: the id key is the selective one, but the first
    # equi key is used; pruning on v keeps every file.
    kept = summarize_source_keys(rm, renamed_source(src), snap.files, prune=True, check_unique=False).files
    assert len(kept) == len(snap.files)
    builder = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
    spec = builder.whenMatchedUpdateAll()._spec()
    rm = analyze(spec, to_spark_schema(snap.metadata.schema_string), case_sensitive=False, evolve=False)
    summary = summarize_source_keys(rm, renamed_source(src), snap.files, prune=True, check_unique=False)
    kept = summary.files
    assert len(kept) == 1 and summary.note
    assert {f.path for f in kept} == {
        f.path for f in snap.files if '"id":100,' in (f.stats or "") or '"id":100}' in (f.stats or "")
    }


def test_candidates_statistics_are_read_once_per_merge(spark, tmp_path, monkeypatch):
    """A merge whose source is a Delta table with sparse keys tries the summary from the source's
    statistics, then runs the summary job: both prune by the same key ranges, computed once (a
    pass over every candidate's statistics, ~0.35 s per 8,000 files)."""
    from deltamerge.merge import pruning

    path, src_path = str(tmp_path / "t"), str(tmp_path / "s")
    _table(spark, path, dv=True)
    src = spark.createDataFrame([(150, 1, None), (905, 2, None)], "id long, v int, d date")
    deltamerge.write(src.coalesce(1), src_path)  # one file, keys 150..905: sparse
    calls: list[int] = []
    jobs: list[bool] = []
    real, real_job = pruning._file_ranges, pruning.summarize_source_keys

    def counting(files, name, t):  # type: ignore[no-untyped-def]
        calls.append(len(files))
        return real(files, name, t)

    def job(*args, **kwargs):  # type: ignore[no-untyped-def]
        jobs.append(True)
        return real_job(*args, **kwargs)

    monkeypatch.setattr(pruning, "_file_ranges", counting)
    monkeypatch.setattr(pruning, "summarize_source_keys", job)
    res = _run(spark, path, deltamerge.read(spark, src_path), "t.id = s.id", UPSERT)
    assert res == (2, 2, 0, 0)
    assert jobs == [True]  # the statistics could not answer: the job ran after them
    assert calls == [10]
    got = {r[0]: r[1] for r in deltamerge.read(spark, path).where("id IN (150, 905, 151)").collect()}
    assert got == {150: 1, 905: 2, 151: 151 % 7}


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_prune_keys_spanning_the_whole_long_range(spark, tmp_path, dv):
    """Hashed keys span more than 2^63: the summary's bucket arithmetic must not overflow (Spark's
    ANSI mode raised ARITHMETIC_OVERFLOW and the MERGE failed). Pruning still keeps only the file
    holding the matched key, and the merge gives the rows it gives without pruning."""
    from deltamerge.merge import pruning

    big = 9_000_000_000_000_000_000
    groups = [[-big, -big + 5], [0, 7], [big - 5, big], [-(1 << 63), (1 << 63) - 1]]
    results = []
    for flag in ("true", "false"):
        path = str(tmp_path / f"t_{flag}")
        conf = {"delta.enableDeletionVectors": "true"} if dv else None
        for ids in groups:
            df = spark.createDataFrame([(x, 1, None) for x in ids], "id long, v int, d date").coalesce(1)
            deltamerge.write(df, path, mode="append", configuration=conf)
        keys = [(big, 2, None), (3, 3, None), (-(1 << 63), 4, None)]
        src = spark.createDataFrame(keys, "id long, v int, d date")
        kept: list = []

        def spy(*a, real=pruning.summarize_source_keys, kept=kept, **k):  # type: ignore[no-untyped-def]
            out = real(*a, **k)
            kept.append(len(out.files))
            return out

        with _settings(spark, {DFP: flag}), pytest.MonkeyPatch.context() as mp:
            mp.setattr(pruning, "summarize_source_keys", spy)
            res = _run(spark, path, src, "t.id = s.id", UPSERT)
        results.append((res, _rows(spark, path)))
        if flag == "true":  # the files holding 3, big and -2^63 are kept; -big..-big+5 is pruned
            assert kept[0] == 3
    assert results[0] == results[1]
    assert results[0][0] == (3, 2, 0, 1)


def test_bucket_grid_covers_the_range_with_stable_numbers():
    """The summary's bucket grid covers [lo, hi] in at most 1024 power-of-two buckets, fits in a
    long, and stays the same while the range grows inside its window (same generated code)."""
    from deltamerge.merge.pruning import _BUCKETS, _bucket_grid

    for lo, hi in [(0, 0), (0, 5_000_000), (-7, 3), (-(1 << 63), (1 << 63) - 1), (10**18, 10**18 + 12345)]:
        base, end, width = _bucket_grid(lo, hi)
        assert base <= lo and end >= hi and end <= (1 << 63) - 1 and base >= -(1 << 63)
        assert width & (width - 1) == 0 and base % width == 0
        assert (hi - base) // width < _BUCKETS
    assert _bucket_grid(0, 4_999_999) == _bucket_grid(0, 5_000_100) == _bucket_grid(1, 5_000_100)


def test_dv_update_without_copy_branch_prunes_target_columns(spark, tmp_path):
    """DV mode: the UPDATE * / INSERT * projection refers to no target column (so Spark reads only
    the key column of the target); a partial SET still keeps the unchanged target values."""
    from deltamerge.merge.analysis import analyze
    from deltamerge.merge.output import output_columns
    from deltamerge.spark.types import to_spark_schema

    path = str(tmp_path / "t")
    _table(spark, path, dv=True)
    snap = DeltaLog.for_table(path).update()
    src = spark.createDataFrame([(5, 1, None), (7000, 2, None)], "id long, v int, d date")
    schema = to_spark_schema(snap.metadata.schema_string)

    def projection(builder, copies):
        rm = analyze(builder._spec(), schema, case_sensitive=False, evolve=False)
        return " ".join(str(c) for c in output_columns(rm, has_target=True, copies=copies))

    base = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
    full = base.whenMatchedUpdateAll().whenNotMatchedInsertAll()
    assert "__t" not in projection(full, copies=False)
    assert "__t" in projection(full, copies=True)
    partial = base.whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll()
    assert "__t2" in projection(partial, copies=False)

    res = _run(
        spark,
        path,
        src,
        "t.id = s.id",
        [("whenMatchedUpdate", None, {"v": "s.v"}), ("whenNotMatchedInsertAll",)],
    )
    assert res == (2, 1, 0, 1)
    rows = _rows(spark, path)
    assert (5, 1, dt.date(2024, 1, 6)) in rows and (7000, 2, None) in rows and len(rows) == 1001


def _resolved(spark, path, src, cond):
    from deltamerge.merge.analysis import analyze
    from deltamerge.spark.types import to_spark_schema

    snap = DeltaLog.for_table(path).update()
    builder = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), cond).whenMatchedUpdateAll()
    rm = analyze(
        builder._spec(), to_spark_schema(snap.metadata.schema_string), case_sensitive=False, evolve=False
    )
    return rm, snap


@pytest.mark.parametrize(
    ("rows", "cond", "unique"),
    [
        ([(1, 1), (2, 1)], "t.id = s.id", True),
        ([(1, 1), (1, 2)], "t.id = s.id", False),
        ([(None, 1), (None, 2), (3, 1)], "t.id = s.id", True),  # NULL keys match nothing
        ([(None, 1), (None, 2)], "t.id <=> s.id", False),
        ([(1, 1), (1, 2)], "t.id = s.id AND t.v = s.v", True),
        ([(1, 1), (1, 1)], "t.id = s.id AND t.v > s.v", False),
        ([(1, 1), (2, 1)], "t.id + 0 = s.id", False),  # no plain equi-join column: unknown
    ],
)
def test_source_uniqueness(spark, tmp_path, rows, cond, unique):
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import summarize_source_keys

    path = str(tmp_path / "t")
    _table(spark, path, n=100, files=4)
    src = spark.createDataFrame([(i, v, None) for i, v in rows], "id long, v int, d date")
    rm, snap = _resolved(spark, path, src, cond)
    for prune in (False, True):
        s = summarize_source_keys(rm, renamed_source(src), snap.files, prune=prune, check_unique=True)
        assert s.unique is unique


def test_duplicate_source_keys_that_match_nothing_are_fine(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    src = spark.createDataFrame([(5, 1, None), (9000, 2, None), (9000, 3, None)], "id long, v int, d date")
    assert _run(spark, path, src, "t.id = s.id", UPSERT) == (3, 1, 0, 2)


# Every execution but the shuffled one job (covered in test_merge_one_job.py) and the guessed single
# pass (only for copy-on-write merges without NOT MATCHED clauses: GUESSED below).
VARIANTS = {
    k: v for k, v in merge_variants.VARIANTS.items() if k not in ("one-job-shuffled", "guessed-single-pass")
}
GUESSED = merge_variants.VARIANTS["guessed-single-pass"]


@contextlib.contextmanager
def _settings(spark, conf):
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k in conf:
            spark.conf.unset(k)


CLAUSE_SETS = {
    "upsert": UPSERT,
    "partial_update_insert_cond": [
        ("whenMatchedUpdate", "t.v < 3", {"v": "s.v + 100"}),
        ("whenMatchedDelete", "t.v >= 5"),
        ("whenNotMatchedInsert", "s.id % 2 = 0", {"id": "s.id", "v": "s.v", "d": "s.d"}),
    ],
    "matched_only_cond": [("whenMatchedUpdate", "s.v = 1", {"v": "t.v * 10"})],
    "delete_only": [("whenMatchedDelete",)],
}


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("clauses", sorted(CLAUSE_SETS))
def test_broadcast_variant_same_result(spark, tmp_path, monkeypatch, dv, clauses):
    """The broadcast variant (merge/broadcast.py) against the Delta-shaped path, incl. a table whose
    files already carry deletion vectors."""
    calls = _spy_broadcast(monkeypatch)

    def source():
        return spark.range(0, 60).select(
            (F.col("id") * 37 % 1400).alias("id"),
            (F.col("id") % 3).cast("int").alias("v"),
            F.lit(None).cast("date").alias("d"),
        )

    results = []
    variants = dict(VARIANTS)
    if not dv and not any(c[0].startswith("whenNotMatched") for c in CLAUSE_SETS[clauses]):
        variants["guessed-single-pass"] = GUESSED
    for variant, conf in merge_variants.compared(variants).items():
        path = str(tmp_path / f"t-{variant}")
        _table(spark, path, dv=dv)
        if dv:  # existing deletion vectors on some files
            DeltaTable.forPath(spark, path).delete("id % 50 = 7")
        with _settings(spark, conf):
            res = _run(spark, path, source(), "t.id = s.id", CLAUSE_SETS[clauses])
        results.append((res, _rows(spark, path)))
    assert all(r == results[0] for r in results)
    assert calls  # the two-job variant ran (and the single pass, unless it had to retry, in its run)


def test_small_result_query_restores_settings(spark):
    from deltamerge.spark.session import small_result_query

    spark.conf.set("spark.sql.shuffle.partitions", "7")
    before_aqe = spark.conf.get("spark.sql.adaptive.enabled")
    try:
        with small_result_query(spark):
            assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
            assert 1 <= int(spark.conf.get("spark.sql.shuffle.partitions")) <= 7
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
        assert spark.conf.get("spark.sql.adaptive.enabled") == before_aqe
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [True, False], ids=["dv", "cow"])
def test_broadcast_variant_partitioned_table(spark, tmp_path, monkeypatch, dv):
    """Partitioned target: touched partitions rewritten (or masked), inserts routed by partition."""
    calls = _spy_broadcast(monkeypatch)

    def source():
        return spark.range(0, 40).select(
            (F.col("id") * 53 % 1300).alias("id"),
            (F.col("id") % 7).cast("int").alias("v"),
            F.lit(dt.date(2030, 1, 1)).alias("d"),
        )

    results = []
    for variant, conf in merge_variants.compared(VARIANTS).items():
        path = str(tmp_path / f"t-{variant}")
        _table(spark, path, files=2, dv=dv, partition_by=["v"])  # 14 files: two per partition
        with _settings(spark, conf):
            res = _run(spark, path, source(), "t.id = s.id AND t.v = s.v", UPSERT)
        results.append((res, _rows(spark, path)))
        snap = DeltaLog.for_table(path).update()
        assert all(set(f.partition_values) == {"v"} for f in snap.files)
    assert all(r == results[0] for r in results)
    assert calls  # the two-job variant ran (and the single pass, unless it had to retry, in its run)


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_sql_text_expressions_quote_odd_column_names(spark, tmp_path, monkeypatch, dv):
    """The per-row expressions are SQL text (merge/output.py): column names with dots and backticks
    must reach Spark quoted, on the broadcast variant and on the Delta-shaped path alike."""
    calls = _spy_broadcast(monkeypatch)
    cols = ["id", "a.b", "c`d"]

    def frame(lo, hi, bump):
        return spark.range(lo, hi, numPartitions=4).select(
            F.col("id"), (F.col("id") + bump).alias("a.b"), F.concat(F.lit("x"), F.col("id")).alias("c`d")
        )

    results = []
    for variant, conf in merge_variants.compared(VARIANTS).items():
        path = str(tmp_path / f"t-{variant}")
        props = {"delta.enableDeletionVectors": "true"} if dv else None
        deltamerge.write(frame(0, 400, 0), path, configuration=props)
        with _settings(spark, conf):
            src = frame(390, 420, 1000).alias("s")
            m = DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id")
            m = m.whenMatchedUpdate("s.`a.b` > 1395", {"`c``d`": "concat(s.`c``d`, '!')"})
            res = tuple(m.whenNotMatchedInsertAll().execute().collect()[0])
        rows = _rows(spark, path)
        assert deltamerge.read(spark, path).columns == cols
        results.append((res, rows))
    assert all(r == results[0] for r in results)
    assert calls  # the two-job variant ran (and the single pass, unless it had to retry, in its run)
    res, rows = results[0]
    assert res == (24, 4, 0, 20)  # 390..395 fail the update's condition: matched, left as they are
    by_id = {r[0]: r for r in rows}
    assert by_id[395] == (395, 395, "x395") and by_id[396] == (396, 396, "x396!")
    assert by_id[410] == (410, 1410, "x410") and len(rows) == 420


def test_without_adaptive_restores_setting(spark):
    from deltamerge.spark.session import without_adaptive

    before = spark.conf.get("spark.sql.adaptive.enabled")
    with without_adaptive(spark):
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == before


def test_job_two_reuses_job_one_scan(spark, tmp_path, monkeypatch):
    """Copy-on-write broadcast variant: when every candidate is touched, job 2 reads job 1's scan
    (the files' status is resolved once)."""
    from deltamerge.merge import context

    scans = []
    real = context.scan
    monkeypatch.setattr(context, "scan", lambda *a, **k: scans.append(len(a[4])) or real(*a, **k))
    path = str(tmp_path / "t")
    _table(spark, path, n=200, files=4)
    spark.conf.set(DFP, "false")
    try:
        src = spark.range(0, 200, 10).select(
            F.col("id"), F.lit(-1).alias("v"), F.lit(None).cast("date").alias("d")
        )
        res = _run(spark, path, src, "t.id = s.id", UPSERT)
    finally:
        spark.conf.unset(DFP)
    assert res == (20, 20, 0, 0)
    assert scans == [4]


def _spy_broadcast(monkeypatch):
    """Record the broadcast variant's steps: ``single`` (the one pass completed), ``one-job`` (DV
    mode's one job completed), ``retry`` (the single pass touched only some copy-on-write
    candidates, or either could not trust its output), ``matched`` / ``written`` (the two jobs
    completed), ``fallback`` (a target row matched twice: SourceNotUnique), ``uniform`` (DV mode's
    upsert written without a join, merge/uniform_upsert.py, completed), ``replace`` (its form
    with an unconditional NOT MATCHED BY SOURCE DELETE, completed), ``full`` (copy-on-write's job 2
    over every candidate without job 1 completed, merge/full_rewrite.py) or ``back`` (it ran and
    handed back: not every candidate was touched, or a target row matched twice)."""
    from deltamerge.merge import broadcast, full_rewrite, one_job, single_pass, uniform_upsert

    outcomes: list[str] = []

    def spy_on(module, name: str, done: str) -> None:
        real = getattr(module, name)

        def spy(*a, **k):  # type: ignore[no-untyped-def]
            try:
                out = real(*a, **k)
            except broadcast.SourceNotUnique:
                outcomes.append("fallback")
                raise
            except (single_pass._Retry, one_job.Retry):
                outcomes.append("retry")
                raise
            outcomes.append(done)
            return out

        monkeypatch.setattr(module, name, spy)

    spy_on(single_pass, "_write", "single")
    spy_on(one_job, "_write", "one-job")
    spy_on(broadcast, "find_matches", "matched")
    spy_on(broadcast, "write_changes", "written")
    real_full = full_rewrite.try_rewrite

    def full(*a, **k):  # type: ignore[no-untyped-def]
        out = real_full(*a, **k)
        outcomes.append("back" if out is None else "full")
        return out

    monkeypatch.setattr(full_rewrite, "try_rewrite", full)
    for name in ("try_write", "try_rewrite", "try_replace"):
        real_uniform = getattr(uniform_upsert, name)

        def uniform(*a, real=real_uniform, label="replace" if name == "try_replace" else "uniform", **k):  # type: ignore[no-untyped-def]
            out = real(*a, **k)
            if out is not None:
                outcomes.append(label)
            return out

        monkeypatch.setattr(uniform_upsert, name, uniform)
    return outcomes


def _data_files(path):
    return sorted(p.name for p in pathlib.Path(path).rglob("*.parquet"))


@pytest.mark.sampled
@pytest.mark.parametrize("variant", ["default", "single-pass", "one-job", "two-job"])
@pytest.mark.parametrize("stats", [True, False], ids=["stats", "no-stats"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_broadcast_variant_detects_multiple_matches(
    spark, tmp_path, monkeypatch, drop_stats, dv, stats, variant
):
    """No up-front uniqueness check: the single pass finds the duplicate in its write (copy-on-write:
    more joined rows than target rows; DV mode: a position listed twice), DV mode's one job in its
    write (a position listed twice), the two-job variant in job 1 (DV mode) or its write
    (copy-on-write: the files' statistics, or an observed count without them). Either way the
    written files are deleted, the Delta-shaped path raises Delta's error and the table is
    unchanged. Without statistics the single pass does not apply."""
    from deltamerge.errors import MultipleSourceRowMatchingTargetRowError

    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    _table(spark, path, dv=dv)
    if not stats:
        drop_stats(path)
    before = _rows(spark, path)
    files = _data_files(path)
    version = DeltaLog.for_table(path).update().version
    src = spark.createDataFrame([(5, 1, None), (5, 2, None), (700, 3, None)], "id long, v int, d date")
    with _settings(spark, VARIANTS[variant]), pytest.raises(MultipleSourceRowMatchingTargetRowError):
        _run(spark, path, src, "t.id = s.id", UPSERT)
    if variant == "default" and (dv or stats):
        assert outcomes == []  # merge/uniform_upsert.py's job 1 saw the position twice
    elif variant in ("default", "single-pass") and stats:
        assert outcomes == ["fallback"]
    else:
        assert outcomes == (["fallback"] if dv else ["matched", "fallback"])
    assert _rows(spark, path) == before and DeltaLog.for_table(path).update().version == version
    assert _data_files(path) == files  # nothing the failed write produced is left behind


@pytest.mark.sampled
@pytest.mark.parametrize("variant", ["default", "single-pass", "one-job", "two-job"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_job_one_duplicates_allowed_for_lone_unconditional_delete(spark, tmp_path, monkeypatch, dv, variant):
    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    _table(spark, path, dv=dv)
    src = spark.createDataFrame([(5, 1, None), (5, 2, None), (9, 3, None)], "id long, v int, d date")
    with _settings(spark, VARIANTS[variant]):
        res = _run(spark, path, src, "t.id = s.id", [("whenMatchedDelete",)])
    if dv and variant in ("default", "one-job"):
        expected = ["one-job"]  # DV mode's one job drops the repeated positions of an erase
    elif dv or variant in ("default", "single-pass"):
        expected = ["fallback"]
    else:
        expected = ["matched", "fallback"]
    assert outcomes == expected
    assert res[2] == 2  # Delta counts each deleted target row once
    ids = {r[0] for r in _rows(spark, path)}
    assert 5 not in ids and 9 not in ids and len(ids) == 998
    # The commit holds only the Delta-shaped path's files (the broadcast write's are deleted).
    snap = DeltaLog.for_table(path).update()
    live = {os.path.basename(f.path) for f in snap.files}
    assert set(_data_files(path)) - live <= {os.path.basename(p) for p in _removed(path)}


def _removed(path):
    log = DeltaLog.for_table(path)
    out = []
    for v in range(log.update().version + 1):
        out += [a.path for a in log.read_commit(v) if type(a).__name__ == "RemoveFile"]
    return out


def _completed(outcomes: list[str], variant: str, dv: bool) -> bool:
    """Whether the variant under test produced the commit (no multiple-match fallback)."""
    if variant == "delta-shaped":
        return outcomes == []
    if outcomes == ["uniform"]:  # an upsert whose clauses write alike (merge/uniform_upsert.py)
        return variant == "default"
    if variant == "two-job" or (variant == "one-job" and not dv):
        return outcomes == ["matched", "written"]
    if variant == "one-job" or (variant == "default" and dv):
        # By default DV mode's one job broadcasts every candidate row (the tests' few rows).
        return outcomes == ["one-job"]
    # One pass, or (copy-on-write, some candidate untouched) a retry with the two jobs.
    return outcomes in (["single"], ["retry", "matched", "written"])


@pytest.mark.sampled
@pytest.mark.parametrize("variant", ["single-pass", "one-job", "two-job"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_job_one_duplicate_keys_routed_to_different_rows(spark, tmp_path, monkeypatch, dv, variant):
    """Two source rows share a key but the rest of the ON condition sends them to different target
    rows: no target row matches twice. The broadcast variant's own checks (job 1's positions in DV
    mode, the write's row counts in copy-on-write mode) let it complete."""
    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 0, "a"), (1, 5, "b"), (2, 0, "c")], "id long, k int, s string")
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)
    src = spark.createDataFrame([(1, 0, "A"), (1, 5, "B"), (3, 0, "D")], "id long, k int, s string")
    # ``s.k + 0`` is no plain equi-join column: the key tuple is (id) alone, duplicated in the source.
    with _settings(spark, VARIANTS[variant]):
        res = _run(spark, path, src, "t.id = s.id AND t.k = s.k + 0", UPSERT)
    assert _completed(outcomes, variant, dv), outcomes
    assert res == (3, 2, 0, 1)
    assert _rows(spark, path) == [(1, 0, "A"), (1, 5, "B"), (2, 0, "c"), (3, 0, "D")]


@pytest.mark.sampled
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize(
    "cond", ["t.id = s.id AND t.k = s.k + 0", "t.id = s.id AND s.k < 3"], ids=["mixed", "source-only"]
)
def test_unmatched_source_row_sharing_a_matched_key_is_inserted(
    spark, tmp_path, monkeypatch, dv, variant, cond
):
    """A source row whose join key equals a matched row's key but which fails the rest of the ON
    condition matches nothing: it is inserted (the broadcast variant's anti join once dropped it)."""
    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 0, "a"), (2, 0, "c")], "id long, k int, s string")
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)
    src = spark.createDataFrame([(1, 0, "A"), (1, 5, "B"), (3, 0, "D")], "id long, k int, s string")
    with _settings(spark, VARIANTS[variant]):
        res = _run(spark, path, src, cond, UPSERT)
    assert _completed(outcomes, variant, dv), outcomes
    assert res == (3, 1, 0, 2)
    assert _rows(spark, path) == [(1, 0, "A"), (1, 5, "B"), (2, 0, "c"), (3, 0, "D")]


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [True, False], ids=["dv", "cow"])
def test_single_pass_with_untouched_candidates(spark, tmp_path, monkeypatch, dv):
    """Source keys that pass data skipping for 4 files but match rows of only 2 of them. DV mode
    keeps its one pass (it writes no copies); copy-on-write deletes its output and retries with
    the two jobs, which rewrite only the touched files. Same table and counters as the
    Delta-shaped path, and no file of the discarded write is left."""
    outcomes = _spy_broadcast(monkeypatch)
    results = []
    for variant, conf in merge_variants.compared(VARIANTS).items():
        path = str(tmp_path / variant)
        _table(spark, path, n=400, files=4, dv=dv)  # ids 0..399, 100 per file
        # 50 and 150 match; 260 and 390 fall in the other files' ranges but are odd keys that
        # do not exist there (the table's odd ids from 200 on are deleted first).
        DeltaTable.forPath(spark, path).delete("id >= 200 AND id % 2 = 0")
        src = spark.createDataFrame(
            [(50, 1, None), (150, 2, None), (260, 3, None), (390, 4, None)], "id long, v int, d date"
        )
        outcomes.clear()
        with _settings(spark, {DFP: "false", **conf}):
            res = _run(spark, path, src, "t.id = s.id", UPSERT)
        snap = DeltaLog.for_table(path).update()
        live = {os.path.basename(f.path) for f in snap.files}
        on_disk = set(_data_files(path))
        assert on_disk - live <= {os.path.basename(p) for p in _removed(path)}
        last = DeltaLog.for_table(path).read_commit(snap.version)
        removed = sorted(a.path for a in last if type(a).__name__ == "RemoveFile")
        if variant == "single-pass":
            assert outcomes == (["single"] if dv else ["retry", "matched", "written"])
        elif variant == "default":  # an upsert whose clauses write alike (merge/uniform_upsert.py)
            assert outcomes == ["uniform"]
        results.append((res, _rows(spark, path), len(removed)))
    assert all(r[:2] == results[0][:2] for r in results)
    assert results[0][0] == (4, 2, 0, 2)
    assert {r[2] for r in results} == {2}  # only the two touched files lose rows


def test_single_pass_limit(spark, tmp_path, monkeypatch):
    """Candidates with more live rows than ``singlePassMaxRows`` take the two jobs."""
    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    _table(spark, path, n=400, files=4)
    src = spark.createDataFrame([(5, 1, None), (305, 2, None), (999, 3, None)], "id long, v int, d date")
    with _settings(spark, {DFP: "false", merge_variants.SINGLE_PASS: "399", merge_variants.UNIFORM: "false"}):
        assert _run(spark, path, src, "t.id = s.id", UPSERT) == (3, 2, 0, 1)
    assert outcomes == ["matched", "written"]
    outcomes.clear()
    src = spark.createDataFrame([(6, 1, None), (306, 2, None)], "id long, v int, d date")
    # 401 live rows: 400 + the insert.
    with _settings(spark, {DFP: "false", merge_variants.SINGLE_PASS: "401", merge_variants.UNIFORM: "false"}):
        assert _run(spark, path, src, "t.id = s.id", UPSERT) == (2, 2, 0, 0)
    assert outcomes in (["single"], ["retry", "matched", "written"])


@pytest.mark.parametrize(
    "nmbs",
    [[("whenNotMatchedBySourceDelete",)], [("whenNotMatchedBySourceUpdate", None, {"v": "-1"})]],
    ids=["delete", "update"],
)
def test_unconditional_not_matched_by_source_skips_job_one(spark, tmp_path, monkeypatch, drop_stats, nmbs):
    """An unconditional NOT MATCHED BY SOURCE clause touches every file and a unique source matches
    no row twice: job 1 has nothing to find. Same table, counters and metrics as with job 1 (forced
    here by a table without statistics)."""
    from deltamerge.merge import classic

    scans = []
    real = classic.find_touched_files
    monkeypatch.setattr(classic, "find_touched_files", lambda *a, **k: scans.append(1) or real(*a, **k))
    clauses = [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",), *nmbs]
    results = []
    for stats in (True, False):
        path = str(tmp_path / f"t{stats}")
        _table(spark, path, n=400, files=4)
        if not stats:
            drop_stats(path)
        src = spark.createDataFrame([(5, 1, None), (305, 2, None), (999, 3, None)], "id long, v int, d date")
        res = _run(spark, path, src, "t.id = s.id", clauses)
        metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
        keep = ("numSourceRows", "numTargetFilesRemoved", "numTargetRowsCopied", "numTargetRowsDeleted",
                "numTargetRowsUpdated", "numTargetRowsInserted", "numOutputRows")  # fmt: skip
        results.append((res, _rows(spark, path), {k: metrics[k] for k in keep}))
    assert scans == [1]  # only the run without statistics ran job 1
    assert results[0] == results[1]
    assert results[0][2]["numTargetFilesRemoved"] == "4" and results[0][2]["numSourceRows"] == "3"


def test_not_matched_by_source_with_duplicate_source_keys_runs_job_one(spark, tmp_path):
    """A source with duplicate keys may match a row twice: job 1 runs and reports it."""
    from deltamerge.errors import MultipleSourceRowMatchingTargetRowError

    path = str(tmp_path / "t")
    _table(spark, path, n=400, files=4)
    src = spark.createDataFrame([(5, 1, None), (5, 2, None)], "id long, v int, d date")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError):
        _run(spark, path, src, "t.id = s.id", [("whenMatchedUpdateAll",), ("whenNotMatchedBySourceDelete",)])
    assert len(_rows(spark, path)) == 400


@pytest.mark.sampled
@pytest.mark.parametrize("encoding", ["tagged", "structs", "untagged"])
def test_single_pass_dv_position_encodings(spark, tmp_path, monkeypatch, encoding):
    """DV mode's single pass brings every matched row's position to the driver: as numbers tagged
    with the file's ordinal (few candidates), as (file, position) structs (many), and when a
    file's path is spelt differently from the candidates' (no ordinal), it retries and the two
    jobs run; by default the one job runs first and retries the same way (no base for the row's
    number), then the single pass. Same rows, counters and deletion vectors as the Delta-shaped
    path."""
    from deltamerge.merge import one_job, single_pass
    from deltamerge.spark import scan

    outcomes = _spy_broadcast(monkeypatch)
    if encoding == "structs":
        monkeypatch.setattr(single_pass, "_TAGGED_FILES", 0)
    if encoding == "untagged":
        real_index = scan.file_index

        def respelt(root, files):  # the same files, '-' percent-encoded: no literal matches
            index = real_index(root, files)
            return scan.FileIndex({k.replace("-", "%2D"): v for k, v in index.by_spark_path.items()})

        monkeypatch.setattr(single_pass, "file_index", respelt)
        monkeypatch.setattr(one_job, "file_index", respelt)
    results = []
    for variant in ("default", "single-pass", "delta-shaped"):
        path = str(tmp_path / variant)
        _table(spark, path, n=400, files=4, dv=True)
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")  # existing deletion vectors
        src = spark.createDataFrame(
            [(5, 1, None), (57, 9, None), (120, 2, None), (130, 3, None), (333, 4, None), (999, 5, None)],
            "id long, v int, d date",
        )
        outcomes.clear()
        with _settings(spark, VARIANTS[variant]):
            res = _run(
                spark,
                path,
                src,
                "t.id = s.id",
                [("whenMatchedDelete", "s.v = 2"), ("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)],
            )
        if variant == "single-pass":
            untagged = ["retry", "matched", "written"]  # the single pass, then the two jobs
            assert outcomes == (untagged if encoding == "untagged" else ["single"])
        elif variant == "default":  # the one job, then the single pass, then the two jobs
            untagged = ["retry", "retry", "matched", "written"]
            assert outcomes == (untagged if encoding == "untagged" else ["one-job"])
        snap = DeltaLog.for_table(path).update()
        dv_rows = sorted(f.deletion_vector.cardinality for f in snap.files if f.deletion_vector)
        results.append((res, _rows(spark, path), dv_rows))
    assert results[0] == results[1] == results[2]
    assert results[0][0] == (6, 3, 1, 2)  # 57 was deleted before: it is inserted again


@pytest.mark.sampled
@pytest.mark.parametrize("cdf", [False, True], ids=["plain", "cdf"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_replacing_every_row_removes_whole_files(spark, tmp_path, monkeypatch, dv, cdf):
    """Unconditional MATCHED and NOT MATCHED BY SOURCE clauses change every row the merge reads:
    with statistics (every file known to be touched) and a unique source, the candidates are
    removed whole and only changed and inserted rows are written, without job 1 and without
    deletion vectors. Same table, counters, metrics and change data as the path with job 1, in
    both table modes, on files already carrying deletion vectors (DV mode's job 1 finds every
    row changed and removes the files whole too)."""
    from deltamerge.cdf_read import read_changes
    from deltamerge.merge import classic
    from deltamerge.merge import dv as dv_mode

    scans, writes = [], []
    real = classic.find_touched_files
    real_write = classic.write_all_changes
    for module in (classic, dv_mode):
        monkeypatch.setattr(module, "find_touched_files", lambda *a, **k: scans.append(1) or real(*a, **k))

    def write_spy(ctx, touched, **k):  # which write ran: changed rows only ({}), copies (None)
        writes.append(touched.modified_rows)
        return real_write(ctx, touched, **k)

    for module in (classic, dv_mode):
        monkeypatch.setattr(module, "write_all_changes", write_spy)
    clauses = [
        ("whenMatchedDelete", "s.v = 2"),
        ("whenMatchedUpdateAll",),
        ("whenNotMatchedInsertAll",),
        ("whenNotMatchedBySourceUpdate", "t.v = 3", {"v": "-1"}),
        ("whenNotMatchedBySourceDelete",),
    ]
    results = []
    real_rule = classic.every_row_changes
    for shortcut in (True, False):
        path = str(tmp_path / f"t{shortcut}")
        _table(spark, path, n=400, files=4, dv=dv)
        for module in (classic, dv_mode):
            monkeypatch.setattr(module, "every_row_changes", real_rule if shortcut else lambda ctx: False)
        if cdf:
            prop = "'delta.enableChangeDataFeed' = 'true'"
            deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({prop})")
        if dv:
            DeltaTable.forPath(spark, path).delete("id % 50 = 7")
        version = DeltaLog.for_table(path).update().version
        src = spark.createDataFrame(
            [(5, 1, None), (10, 2, None), (305, 4, None), (999, 3, None)], "id long, v int, d date"
        )
        scans.clear()
        writes.clear()
        res = _run(spark, path, src, "t.id = s.id", clauses)
        assert scans == ([1] if dv and not shortcut else [])  # copy-on-write skips job 1 anyway
        if shortcut:
            assert writes == [{}]  # the changed rows only, the files removed whole
        else:
            assert len(writes) == 1 and (writes[0] is None) == (not dv)
        last = DeltaLog.for_table(path).read_commit(version + 1)
        adds = [a for a in last if type(a).__name__ == "AddFile"]
        assert not any(a.deletion_vector for a in adds)  # removed whole, no deletion vector
        metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
        metrics = {k: v for k, v in metrics.items() if not k.endswith("TimeMs")}
        changes = None
        if cdf:
            cols = ("id", "v", "d", "_change_type")
            changed = read_changes(spark, path, version + 1).select(*cols).collect()
            changes = sorted(map(tuple, changed), key=repr)
        results.append((res, _rows(spark, path), metrics, changes))
    assert results[0] == results[1]
    res, rows, metrics, _ = results[0]
    live = 400 - (8 if dv else 0)
    kept = 55 if dv else 56  # unmatched rows with v = 3 (id % 7 = 3, not 10, not deleted 157)
    assert res == (live + 1, 2 + kept, 1 + live - 3 - kept, 1)
    assert metrics["numTargetFilesRemoved"] == "4" and metrics["numTargetRowsCopied"] == "0"
    assert len(rows) == sum(1 for r in rows if r[1] == -1) + 3  # the updated rows, 5, 305 and 999


def test_expected_matches_per_candidate(spark, tmp_path):
    """The summary's guess of the fewest source keys a kept file matches: the source keys in the
    file's key range times the share of that range its rows fill."""
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import summarize_source_keys

    path = str(tmp_path / "t")
    _table(spark, path, n=1000, files=10, dv=True)  # ids 0..999, 100 per file
    every_other = spark.createDataFrame([(i, 1, None) for i in range(0, 1000, 2)], "id long, v int, d date")
    rm, snap = _resolved(spark, path, every_other, "t.id = s.id")
    s = summarize_source_keys(rm, renamed_source(every_other), snap.files, prune=True, check_unique=False)
    assert len(s.files) == 10 and s.min_expected_matches == pytest.approx(50, rel=0.05)
    # Half of each file's ids deleted (by deletion vectors: the files and their ranges stay): a
    # key in range is there half the time.
    DeltaTable.forPath(spark, path).delete("id % 4 = 1 OR id % 4 = 3")
    rm, snap = _resolved(spark, path, every_other, "t.id = s.id")
    s = summarize_source_keys(rm, renamed_source(every_other), snap.files, prune=True, check_unique=False)
    assert s.min_expected_matches == pytest.approx(25, rel=0.1)
    # One file's range only.
    few = spark.createDataFrame([(i, 1, None) for i in range(300, 340)], "id long, v int, d date")
    s = summarize_source_keys(rm, renamed_source(few), snap.files, prune=True, check_unique=False)
    assert len(s.files) == 1 and s.min_expected_matches == pytest.approx(20, rel=0.1)
    # No statistics to guess from: unknown.
    s = summarize_source_keys(rm, renamed_source(few), snap.files, prune=False, check_unique=True)
    assert s.min_expected_matches is None


def _history_metrics(spark, path):
    metrics = dict(DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"])
    return {k: v for k, v in metrics.items() if not k.endswith("TimeMs") and k != "numTargetBytesAdded"}


def test_guessed_single_pass_when_every_file_is_touched(spark, tmp_path, monkeypatch):
    """Copy-on-write candidates beyond ``singlePassMaxRows`` that each expect many matches are
    written in the single pass (no job 1) by a merge without NOT MATCHED clauses. Same table,
    counters and history metrics as the two jobs. With a NOT MATCHED clause job 2 runs over every
    candidate without job 1 (``full_rewrite``)."""
    outcomes = _spy_broadcast(monkeypatch)
    src = spark.createDataFrame(
        [(i, 100 + i % 5, None) for i in [*range(0, 400, 3), 1000, 1001]], "id long, v int, d date"
    )
    guess = {merge_variants.SINGLE_PASS: "1", merge_variants.EXPECTED: "20", merge_variants.UNIFORM: "false"}
    updates = [("whenMatchedUpdate", "s.v > 101", {"v": "s.v"}), ("whenMatchedDelete",)]
    results = []
    for variant, conf in (("guess", guess), ("two-job", VARIANTS["two-job"])):
        path = str(tmp_path / variant)
        _table(spark, path, n=400, files=4)  # ~33 of each file's 100 ids in the source
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, src, "t.id = s.id", updates)
        assert outcomes == (["single"] if variant == "guess" else ["matched", "written"])
        results.append((res, _rows(spark, path), _history_metrics(spark, path)))
        live = {os.path.basename(f.path) for f in DeltaLog.for_table(path).update().files}
        assert set(_data_files(path)) - live <= {os.path.basename(p) for p in _removed(path)}
    assert results[0] == results[1]
    assert results[0][0] == (134, 80, 54, 0)
    assert results[0][2]["numTargetFilesRemoved"] == "4"
    path = str(tmp_path / "upsert")
    _table(spark, path, n=400, files=4)
    outcomes.clear()
    with _settings(spark, guess):
        assert _run(spark, path, src, "t.id = s.id", UPSERT) == (136, 134, 0, 2)
    assert outcomes == ["full"]


def test_guessed_single_pass_with_inserts_up_to_four_times_the_limit(spark, tmp_path, monkeypatch):
    """With a NOT MATCHED clause the guessed single pass (every file expected touched) also runs,
    up to four times ``singlePassMaxRows`` live rows: its write then broadcasts the candidates'
    keys to find the unmatched source rows. Beyond that job 2 runs over every candidate without job 1;
    without the expectation, the two jobs one after the other. Same table, counters and history
    metrics every way."""
    outcomes = _spy_broadcast(monkeypatch)
    src = spark.createDataFrame(
        [(i, 100 + i % 5, None) for i in [*range(0, 400, 3), 1000, 1001]], "id long, v int, d date"
    )
    off = {merge_variants.UNIFORM: "false"}  # the upsert would be written without a join
    runs = {
        "within": ({merge_variants.SINGLE_PASS: "100", merge_variants.EXPECTED: "20", **off}, ["single"]),
        "beyond": (
            {merge_variants.SINGLE_PASS: "99", merge_variants.EXPECTED: "20", **off},
            ["full"],
        ),
        "no guess": (
            {merge_variants.SINGLE_PASS: "100", merge_variants.EXPECTED: "0", **off},
            ["matched", "written"],
        ),
    }
    results = []
    for name, (conf, expected) in runs.items():
        path = str(tmp_path / name.replace(" ", "_"))
        _table(spark, path, n=400, files=4)  # 400 live rows, ~33 of each file's ids in the source
        outcomes.clear()
        with _settings(spark, conf):
            res = _run(spark, path, src, "t.id = s.id", UPSERT)
        assert outcomes == expected, name
        metrics = _history_metrics(spark, path)
        # The file count is the write's layout: job 2 over every candidate shuffles (a full outer
        # join), the single pass and the two jobs' job 2 keep the scan's partitions.
        metrics.pop("numTargetFilesAdded")
        results.append((res, _rows(spark, path), metrics))
    assert results[0] == results[1] == results[2]
    assert results[0][0] == (136, 134, 0, 2)
    assert results[0][2]["numTargetFilesRemoved"] == "4"


def test_guessed_single_pass_wrong_guess_retries(spark, tmp_path, monkeypatch):
    """Keys that fall in every file's range but exist in one file only: the guess is wrong, the
    single pass's output is deleted and the two jobs rewrite the one touched file."""
    outcomes = _spy_broadcast(monkeypatch)
    path = str(tmp_path / "t")
    _table(spark, path, n=400, files=4)
    DeltaTable.forPath(spark, path).delete("id >= 100 AND id % 2 = 1")
    # Odd ids: in range of every file, present only in the first (ids 0..99).
    src = spark.createDataFrame([(i, 7, None) for i in range(1, 400, 2)], "id long, v int, d date")
    with _settings(spark, {merge_variants.SINGLE_PASS: "1", merge_variants.EXPECTED: "10"}):
        res = _run(spark, path, src, "t.id = s.id", [("whenMatchedUpdateAll",)])
    assert outcomes == ["retry", "matched", "written"]
    assert res == (50, 50, 0, 0)
    assert _history_metrics(spark, path)["numTargetFilesRemoved"] == "1"
    assert len(_rows(spark, path)) == 250
    live = {os.path.basename(f.path) for f in DeltaLog.for_table(path).update().files}
    assert set(_data_files(path)) - live <= {os.path.basename(p) for p in _removed(path)}


def test_expected_matches_of_an_all_null_file():
    """A file whose keys are all NULL (statistics min > max, kept for a null-safe match of NULLs)
    expects no key match, instead of dividing by its empty range."""
    from deltamerge.log.actions import AddFile
    from deltamerge.merge.pruning import _expected_matches, _FileRange

    def add(n):
        stats = f'{{"numRecords": {n}}}'
        return AddFile(path=f"f{n}.parquet", partition_values={}, size=1, modification_time=0, stats=stats)

    ranges = [_FileRange(add(10), 0, 9, False), _FileRange(add(3), 0, -1, True)]
    assert _expected_matches(ranges, [(0, 9, 10)]) == 0.0
    assert _expected_matches(ranges[:1], [(0, 9, 10)]) == pytest.approx(10)


@pytest.mark.sampled
@pytest.mark.parametrize("cond", ["t.id = s.id", "t.id <=> s.id", "t.id = s.id AND t.v = s.v"])
def test_one_task_summary_same_answer(spark, tmp_path, cond):
    """A source small by Spark's estimate (a Parquet read) is summarised in one task with no
    shuffle (``summaryOneTaskMaxBytes``); the answers equal the shuffled aggregation's."""
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import _one_task, summarize_source_keys

    path, src_path = str(tmp_path / "t"), str(tmp_path / "s")
    _table(spark, path, n=1000, files=10)
    rows = [(i, i % 3, None) for i in (*range(100, 160, 3), 955)]
    rows += [(640, 0, None), (640, 1, None), (None, 1, None)]
    deltamerge.write(spark.createDataFrame(rows, "id long, v int, d date").repartition(3), src_path)
    src = deltamerge.read(spark, src_path)
    rm, snap = _resolved(spark, path, src, cond)
    key = "spark.deltamerge.merge.summaryOneTaskMaxBytes"
    tracker = spark.sparkContext.statusTracker()
    answers, stages = [], []
    for limit in ("0", str(4 << 20)):
        with _settings(spark, {key: limit}):
            renamed = renamed_source(src)
            assert _one_task(renamed) is (limit != "0")
            for prune, unique in ((True, True), (True, False), (False, True)):
                group = f"one_task_{uuid.uuid4().hex}"
                spark.sparkContext.setJobGroup(group, group)
                try:
                    s = summarize_source_keys(
                        rm, renamed, snap.files, prune=prune, check_unique=unique, count_rows=True
                    )
                finally:
                    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
                stages.append(sum(len(j.stageIds) for j in jobs if j is not None))
                answers.append((limit, prune, unique, [f.path for f in s.files], s.unique, s.rows))
    half = len(answers) // 2
    # The shuffled aggregation has an exchange (two with the uniqueness check); one task has none.
    assert all(n >= 2 for n in stages[:half]) and stages[half:] == [1] * half, stages
    assert [a[1:] for a in answers[:half]] == [a[1:] for a in answers[half:]]
    pruned = answers[0]
    assert len(pruned[3]) == 3 and pruned[5] == len(rows)  # no NULL target keys: <=> prunes too
    assert pruned[4] is ("t.v" in cond)  # 640 twice: unique only with v in the key


def _summary(spark, path, source, cond, *, check_unique=False):
    """``summarize_source_keys`` of a merge of ``source`` into the table at ``path``."""
    from deltamerge.merge.analysis import analyze
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import summarize_source_keys
    from deltamerge.spark.types import to_spark_schema

    snap = DeltaLog.for_table(path).update()
    spec = (
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), cond).whenMatchedDelete()._spec()
    )
    rm = analyze(spec, to_spark_schema(snap.metadata.schema_string), case_sensitive=False, evolve=False)
    return summarize_source_keys(
        rm, renamed_source(source), snap.files, prune=True, check_unique=check_unique
    )


def test_partition_column_keys_prune_partitions(spark, tmp_path):
    """An equi-key on an integer partition column prunes by the files' partition values (no
    statistics exist for it) when no data column key has statistics; NULL partitions only for <=>."""

    def table(path):
        df = spark.range(0, 70, numPartitions=7).select(
            F.col("id").cast("string").alias("sid"), (F.col("id") % 7).cast("int").alias("v")
        )
        nulls = spark.createDataFrame([("n", None)], "sid string, v int")
        # No statistics for the data column ``sid`` (a string key would prune by them).
        conf = {"delta.dataSkippingNumIndexedCols": "0"}
        deltamerge.write(df.unionByName(nulls), path, partition_by=["v"], configuration=conf)

    def source():
        return spark.createDataFrame([("1", 1), ("8", 1), ("x", 3), ("n", None)], "sid string, v int")

    path = str(tmp_path / "t")
    table(path)
    for cond, parts in [
        ("t.v = s.v AND t.sid = s.sid", {"1", "3"}),
        ("t.v <=> s.v AND t.sid = s.sid", {"1", "3", None}),
    ]:
        summary = _summary(spark, path, source(), cond)
        assert {f.partition_values["v"] for f in summary.files} == parts, cond
        assert summary.min_expected_matches is None
    result, _ = _both_ways(spark, tmp_path, source, "t.v <=> s.v AND t.sid = s.sid", UPSERT, table=table)
    assert result[1] == 3  # 1/1, 8/1 and n/NULL updated


@pytest.mark.sampled
@pytest.mark.parametrize("kind", ["string", "date"])
def test_partition_key_beside_a_data_key_prunes_partitions(spark, tmp_path, kind):
    """ON t.id = s.id AND t.g = s.g on a table partitioned by g whose files all span the whole id
    range: the id buckets keep every file, the source's g values keep their partitions only."""
    g = (
        "concat('g', CAST(id % 3 AS STRING))"
        if kind == "string"
        else "date_add(DATE'2024-01-01', CAST(id % 3 AS INT))"
    )

    def table(path):
        df = spark.range(0, 300, numPartitions=2).selectExpr("id", f"{g} AS g", "CAST(id AS INT) AS v")
        deltamerge.write(df, path, partition_by=["g"])

    def source():
        rows = spark.createDataFrame([(30, -1), (33, -2), (1000, -3)], "id long, v int")
        return rows.selectExpr("id", f"{g} AS g", "v")

    path = str(tmp_path / "t")
    table(path)
    cond = "t.id = s.id AND t.g = s.g"
    summary = _summary(spark, path, source(), cond, check_unique=True)
    all_parts = {f.partition_values["g"] for f in DeltaLog.for_table(path).update().files}
    kept = {f.partition_values["g"] for f in summary.files}
    assert len(kept) == len({r.g for r in source().collect()}) < len(all_parts)
    assert summary.unique and "in the source's partitions" in (summary.note or "")
    result, _ = _both_ways(spark, tmp_path, source, cond, UPSERT, table=table)
    assert result[1:] == (2, 0, 1)


def test_pruned_candidates_are_logged(spark, tmp_path, caplog):
    # Delta's metrics keep the statically skipped counts; the files left by the source keys are
    # logged (INFO) with their count and bytes, for a user or a benchmark to see what was read.
    path = str(tmp_path / "t")
    _table(spark, path)
    files = {f.path: f.size for f in DeltaLog.for_table(path).update().files}
    source = spark.range(300, 320).select(
        F.col("id"), F.lit(-1).alias("v"), F.lit(None).cast("date").alias("d")
    )
    with caplog.at_level("INFO", logger="deltamerge.merge.command"):
        _run(spark, path, source, "t.id = s.id", [("whenMatchedUpdateAll",)])
    [record] = [r for r in caplog.records if hasattr(r, "files_after_pruning")]
    assert record.files_after_pruning == 1
    assert record.bytes_after_pruning in files.values()
    assert "1 of 10 candidate files" in record.getMessage()


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_integer_keys_of_other_widths_prune_and_take_the_broadcast_variants(spark, tmp_path, monkeypatch, dv):
    """``t.id = s.id`` with an INT source key against a BIGINT target key (an SQL literal, a
    DataFrame of Python ints typed int) compares the widened values: the source keys still prune
    files, count as unique and let the broadcast variants run (the Delta-shaped job 1 does not).
    A BIGINT source key against a narrower INT target key matches no row for values beyond INT."""
    from deltamerge.merge import classic
    from deltamerge.merge.context import renamed_source
    from deltamerge.merge.pruning import summarize_source_keys

    path = str(tmp_path / "t")
    _table(spark, path, dv=dv)
    src = spark.createDataFrame([(150, 1, None), (151, 1, None), (5000, 2, None)], "id int, v int, d date")
    rm, snap = _resolved(spark, path, src, "t.id = s.id")
    s = summarize_source_keys(rm, renamed_source(src), snap.files, prune=True, check_unique=True)
    assert len(s.files) == 1 and s.unique and s.rows == 3
    dup = spark.createDataFrame([(150, 1, None), (150, 2, None)], "id smallint, v int, d date")
    rm2, _ = _resolved(spark, path, dup, "t.id = s.id")
    dup_summary = summarize_source_keys(rm2, renamed_source(dup), snap.files, prune=True, check_unique=True)
    assert not dup_summary.unique

    job_one = []
    real = classic.find_touched_files
    monkeypatch.setattr(classic, "find_touched_files", lambda *a, **k: job_one.append(1) or real(*a, **k))
    res = _run(spark, path, src, "t.id = s.id", UPSERT)
    assert res == (3, 2, 0, 1) and not job_one
    rows = _rows(spark, path)
    assert (150, 1, None) in rows and (5000, 2, None) in rows and len(rows) == 1001

    # v is INT (0..6) in the table; a BIGINT source value 2^32 + 3 is not 3 (were it narrowed, both
    # source rows would match the target row id 10, v 3).
    wide = spark.createDataFrame([(2**32 + 3, 10), (3, 10)], "v long, w long")
    res = _run(spark, path, wide, "t.v = s.v AND t.id = s.w", [("whenMatchedDelete",)])
    assert res == (1, 0, 1, 0)
    assert len(_rows(spark, path)) == 1000 and (10, 3, dt.date(2024, 1, 11)) not in _rows(spark, path)


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_multiple_matches_reported_before_a_write_error(spark, tmp_path, dv):
    """Two source rows matching one target row and an inserted value overflowing its column: Delta's
    job 1 reports the matches before anything is written, so the merge fails with
    DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE (executions that write in the job that
    finds the matches met the overflow first) and the table is unchanged."""
    from deltamerge.errors import DeltaMergeError, MultipleSourceRowMatchingTargetRowError

    path = str(tmp_path / "t")
    conf = {"delta.enableDeletionVectors": str(dv).lower()}
    deltamerge.write(
        spark.createDataFrame([(i, 1) for i in range(100)], "k smallint, v smallint"),
        path,
        configuration=conf,
    )
    version, before = DeltaLog.for_table(path).update().version, _rows(spark, path)
    src = spark.createDataFrame([(5, 1), (5, 2), (1000, 2**40)], "k smallint, v bigint")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError):
        _run(
            spark,
            path,
            src,
            "t.k = s.k",
            [("whenMatchedUpdate", None, {"v": "s.v"}), ("whenNotMatchedInsertAll",)],
        )
    assert DeltaLog.for_table(path).update().version == version and _rows(spark, path) == before
    # without the duplicate, the overflow itself
    with pytest.raises(DeltaMergeError, match="DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"):
        _run(
            spark,
            path,
            src.where("v != 2"),
            "t.k = s.k",
            [("whenMatchedUpdate", None, {"v": "s.v"}), ("whenNotMatchedInsertAll",)],
        )
    assert not [
        n
        for n in os.listdir(path)
        if n.endswith(".parquet") and n not in {f.path for f in DeltaLog.for_table(path).update().files}
    ]


def _string_keyed(spark, path, dv):
    """1,000 rows ``CUSTOMER-000000`` ... in 10 files of consecutive keys; each file's last key is
    39 characters (``é`` x 24), so its statistics' max is a cut prefix with a tie-breaker."""
    key = "concat('CUSTOMER-', lpad(id, 6, '0'), CASE WHEN id % 100 = 99 THEN repeat('é', 24) ELSE '' END)"
    df = spark.range(0, 1000, numPartitions=10).selectExpr(f"{key} AS k", "CAST(id AS INT) AS v")
    conf = {"delta.enableDeletionVectors": str(dv).lower()}
    deltamerge.write(df, path, configuration=conf)


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_string_keys_prune_files(spark, tmp_path, dv):
    """A string join key prunes the candidates through numbers that keep the byte order (a window of
    bytes after the prefix every file's statistics share): keys in one file of ten leave one
    candidate, a key equal to a file's 39-character max (cut in the statistics) still matches, and
    keys before, after and between the files, NULLs and other prefixes match nothing; the results
    equal those without pruning."""
    last = "CUSTOMER-000399" + "é" * 24
    rows = [("CUSTOMER-000350", -1), (last, -2), ("CUSTOMER-000399", -3), (last + "x", -4), (None, -5)]
    rows += [("AAA", -6), ("CUSTOMER-", -7), ("CUSTOMER-0003", -8), ("ZZZ", -9), ("CUSTOMER-000350é", -10)]

    def source():
        return spark.createDataFrame(rows, "k string, v int")

    path = str(tmp_path / "probe")
    _string_keyed(spark, path, dv)
    summary = _summary(spark, path, source(), "t.k = s.k", check_unique=True)
    assert len(summary.files) == 1 and summary.unique and summary.min_expected_matches is None
    assert (
        "CUSTOMER-000300"
        in deltamerge.read(spark, path)
        .where(f"input_file_name() LIKE '%{summary.files[0].path}'")
        .agg(F.min("k"))
        .first()[0]
    )
    res, after = _both_ways(
        spark, tmp_path, source, "t.k = s.k", UPSERT, table=lambda p: _string_keyed(spark, p, dv)
    )
    assert res == (len(rows), 2, 0, len(rows) - 2)
    assert (last, -2) in after and ("CUSTOMER-000350", -1) in after and len(after) == 1000 + len(rows) - 2


def test_key_numbers_in_spark_equal_the_driver(spark):
    """The source's numbers (Spark SQL) are the ones the driver gives the files' statistics: strings
    (over the UTF-8 bytes' hex text) for every kind of character and each side of the prefix, and
    decimals (floor, saturated to BIGINT) of every sign and size."""
    from decimal import Decimal

    from pyspark.sql.types import DecimalType

    from deltamerge.merge import key_numbers

    texts = ["", "\x00", "a", "CUST", "CUST-", "CUST-0", "CUST-0001", "CUST-0001é😀x", "CUSU", "CUSTé", "ÿ",
             "\uffff", "😀", "\U0010ffff", "CUST-\U0010ffff\U0010ffffzz", None]  # fmt: skip
    for prefix in (b"", b"CUST-", "CUSTé".encode()):
        df = spark.createDataFrame([(t,) for t in texts], "k string")
        got = [r[0] for r in df.selectExpr(key_numbers.number_sql("k", prefix)).collect()]
        assert got == [None if t is None else key_numbers.number(t, prefix) for t in texts], prefix
    values = ["0", "-1", "1", "12345678901234567890123", "-12345678901234567890123", "9223372036854775807",
              "9223372036854775808", "-9223372036854775809", "-0.5", "2.75", "-2.75", None]  # fmt: skip
    for ddl, t in (("decimal(38,0)", DecimalType(38, 0)), ("decimal(30,2)", DecimalType(30, 2))):
        keep = [
            v for v in values if v is None or Decimal(v) == Decimal(v).quantize(Decimal(1).scaleb(-t.scale))
        ]
        df = spark.createDataFrame([(v,) for v in keep], "k string").selectExpr(f"CAST(k AS {ddl}) AS k")
        got = [r[0] for r in df.selectExpr(key_numbers.sql_of("k", t)).collect()]
        assert got == [None if v is None else key_numbers.of_value(v, t) for v in keep], ddl


def _decimal_keyed(spark, path, dv):
    """1,000 rows of DECIMAL(38,0) keys 10^12 + id in 10 files of consecutive keys."""
    df = spark.range(0, 1000, numPartitions=10).selectExpr(
        "CAST(id AS DECIMAL(38,0)) + CAST('1000000000000' AS DECIMAL(38,0)) AS k",
        "CAST(id AS INT) AS v",
    )
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": str(dv).lower()})


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_decimal_keys_prune_files(spark, tmp_path, dv):
    """DECIMAL(38,0) keys (a CDC feed's NUMBER columns): keys in one file of ten leave one candidate,
    keys beyond BIGINT (saturated) and below every file match nothing; the results equal those
    without pruning."""
    base = 10**12
    rows = [(str(base + 350), -1), (str(base + 399), -2), (str(10**20), -3), ("-7", -4), (None, -5)]

    def source():
        return spark.createDataFrame(rows, "k string, v int").selectExpr("CAST(k AS DECIMAL(38,0)) AS k", "v")

    path = str(tmp_path / "probe")
    _decimal_keyed(spark, path, dv)
    summary = _summary(spark, path, source(), "t.k = s.k", check_unique=True)
    assert len(summary.files) == 1 and summary.unique
    res, after = _both_ways(
        spark, tmp_path, source, "t.k = s.k", UPSERT, table=lambda p: _decimal_keyed(spark, p, dv)
    )
    assert res == (5, 2, 0, 3) and len(after) == 1003


def _timestamp_keyed(spark, path, dv, kind):
    """1,000 rows of ``kind`` keys a minute apart from 2024-03-10 00:00 plus a microsecond part
    (so every statistic is cut), in 10 files of consecutive keys."""
    df = spark.range(0, 1000, numPartitions=10).selectExpr(
        f"CAST(timestamp_micros(1710028800000000 + id * 60000000 + id * 997) AS {kind}) AS k",
        "CAST(id AS INT) AS v",
    )
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": str(dv).lower()})


@pytest.mark.parametrize(
    "kind,dv",
    [("TIMESTAMP", False), ("TIMESTAMP", True), ("TIMESTAMP_NTZ", False)],
    ids=["ltz-cow", "ltz-dv", "ntz"],
)
def test_timestamp_keys_prune_files(spark, tmp_path, kind, dv):
    """Timestamp keys (an event time in ON) prune as microseconds, the statistics' cut to the
    millisecond widening each file's max: keys in one file of ten (one equal to its last row, whose
    microseconds the max statistic lost) leave one candidate, keys before and after every file match
    nothing; the results equal those without pruning. In a session time zone with a DST gap inside
    the keys' range."""
    ids = [350, 399, 5000, -10]
    rows = [
        (f"CAST(timestamp_micros(1710028800000000 + {i}L * 60000000 + {i}L * 997) AS {kind})", -j)
        for j, i in enumerate(ids)
    ]

    def source():
        union = " UNION ALL ".join(f"SELECT {k} AS k, {v} AS v" for k, v in rows)
        return spark.sql(f"{union} UNION ALL SELECT CAST(NULL AS {kind}) AS k, -9 AS v")

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        path = str(tmp_path / "probe")
        _timestamp_keyed(spark, path, dv, kind)
        summary = _summary(spark, path, source(), "t.k = s.k", check_unique=True)
        assert len(summary.files) == 1 and summary.unique and summary.min_expected_matches is None
        res, after = _both_ways(
            spark, tmp_path, source, "t.k = s.k", UPSERT, table=lambda p: _timestamp_keyed(spark, p, dv, kind)
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert res == (5, 2, 0, 3) and len(after) == 1003


def test_timestamp_key_numbers_in_spark_equal_the_driver(spark):
    """A TIMESTAMP's number is its instant's microseconds; a TIMESTAMP_NTZ's its wall time's, read as
    UTC, in any session time zone (Spark's timestampdiff and casts go through the zone: a wall
    time in a DST gap moved an hour)."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    from deltamerge.merge import key_numbers
    from deltamerge.stats.values import parse_timestamp_micros

    walls = ["0001-01-01 00:00:00", "1582-10-10 12:00:00", "1969-12-31 23:59:59.999999",
             "1970-01-01 00:00:00", "2024-03-10 02:30:00.000001", "2024-11-03 01:30:00",
             "9999-12-31 23:59:59.999999"]  # fmt: skip
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for session in ("UTC", "America/New_York", "Asia/Kolkata"):
            spark.conf.set("spark.sql.session.timeZone", session)
            ntz = spark.sql(
                " UNION ALL ".join(f"SELECT TIMESTAMP_NTZ'{w}' AS k" for w in walls)
                + " UNION ALL SELECT NULL"
            )
            got = [r[0] for r in ntz.selectExpr(key_numbers.sql_of("k", TimestampNTZType())).collect()]
            assert got == [parse_timestamp_micros(w, ignore_offset=True) for w in walls] + [None], session
            ltz = spark.sql(" UNION ALL ".join(f"SELECT TIMESTAMP'{w}Z' AS k" for w in walls[2:]))
            got = [r[0] for r in ltz.selectExpr(key_numbers.sql_of("k", TimestampType())).collect()]
            assert got == [parse_timestamp_micros(w, "UTC") for w in walls[2:]], session
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


_KEY_CHARS = ["a", "b", "z", "é", "ÿ", "€", "\uffff", "😀", "\U0010ffff", "\x7f", "0", "9", "-", "\x00"]


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("seed", range(4))
def test_string_key_pruning_agrees_with_no_pruning_on_random_keys(spark, tmp_path, seed):
    """Random string keys (shared prefixes, every UTF-8 width, the tie-breakers, values past the
    statistics' 32 characters, NULLs) in a few files of sorted or mixed keys; an upsert of some of
    them, new keys and NULLs, by ``=`` or ``<=>``: the same result and rows with pruning on and off."""
    import random

    rng = random.Random(seed)
    prefixes = [[""], ["CUST-", "CUST-00", "CUSU"], ["x" * 35], ["a", "é", "😀"]][seed]

    def key():
        return rng.choice(prefixes) + "".join(
            rng.choice(_KEY_CHARS) for _ in range(rng.choice([0, 2, 5, 40]))
        )

    keys = [*sorted({key() for _ in range(60)}), None]
    source_keys = [*rng.sample(keys, 6), key(), key(), None]
    source_rows = [(k, -j) for j, k in enumerate(dict.fromkeys(source_keys))]
    sorted_layout = seed % 2 == 0

    def table(path):
        df = spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "k string, v int")
        deltamerge.write(df.repartitionByRange(5, "k") if sorted_layout else df.repartition(5), path)

    cond = "t.k <=> s.k" if seed == 3 else "t.k = s.k"
    _both_ways(
        spark,
        tmp_path,
        lambda: spark.createDataFrame(source_rows, "k string, v int"),
        cond,
        UPSERT,
        table=table,
    )
    if seed == 0:  # sorted keys the statistics tell apart (seed 2's share 35 characters: they cannot)
        path = str(tmp_path / "probe")
        table(path)
        assert (
            len(_summary(spark, path, spark.createDataFrame(source_rows[:1], "k string, v int"), cond).files)
            < 5
        )


@pytest.mark.parametrize("matching", [True, False], ids=["some-match", "none-match"])
def test_two_job_dv_upsert_counts_the_source_without_a_known_count(spark, tmp_path, monkeypatch, matching):
    """DV mode's two jobs with NOT MATCHED clauses leave the source's row count to job 2 (job 1's
    rows must carry no observation: job 2 unions two plans built on them); without the key
    summary's count, job 2 (or, when no file is touched, the inserts' scan) reports it."""
    from deltamerge.merge import broadcast

    path = str(tmp_path / "t")
    target = spark.range(0, 400, 2, 4).selectExpr("id", "cast(id % 7 AS int) AS v", "date'2024-01-01' AS d")
    deltamerge.write(target, path, configuration={"delta.enableDeletionVectors": "true"})
    real = broadcast.find_matches
    seen = []

    def unknown_count(ctx, candidates, **kw):  # type: ignore[no-untyped-def]
        ctx.source_rows = None  # as when no key summary ran
        seen.append(broadcast.job_two_counts_source(ctx, deletion_vectors=kw["deletion_vectors"]))
        return real(ctx, candidates, **kw)

    monkeypatch.setattr(broadcast, "find_matches", unknown_count)
    # Even keys match; odd ones fall inside the files' key ranges and match nothing.
    key = f"id * 4 + {0 if matching else 1} AS id"
    src = spark.range(0, 30).selectExpr(key, "-1 AS v", "date'2020-01-01' AS d")
    with _settings(spark, merge_variants.VARIANTS["two-job"]):
        result = _run(spark, path, src, "t.id = s.id", UPSERT)
    assert seen == [True]
    assert result == ((30, 30, 0, 0) if matching else (30, 0, 0, 30))
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numSourceRows"] == "30"
