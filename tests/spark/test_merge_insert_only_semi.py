"""Insert-only MERGE against the matched target rows only (merge/insert_only.py ``_target_side``):
``candidates LEFT SEMI JOIN broadcast(source)`` replaces the candidates in the anti join. Every ON
condition, NULL and NaN key, duplicate source row and deletion vector gives the same table, counters
and history as Delta's anti join against every candidate row; a source that may give other rows
when read again never takes it (nor the source-key pruning that also reads it again)."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import functions as F
from test_merge_one_job import _state
from test_merge_pruning import _run, _settings

import deltamerge
from deltamerge import DeltaTable

SEMI = "spark.deltamerge.merge.insertOnly.semiJoinMinRows"
MATCHED_MAX = "spark.deltamerge.merge.deletionVectors.broadcastMatchedMaxBytes"
DV = {"delta.enableDeletionVectors": "true"}
INSERT = [("whenNotMatchedInsertAll",)]


def _target(spark, path, *, dv, extra=None):
    df = spark.range(0, 600, numPartitions=4).selectExpr(
        "id", "CAST(id % 7 AS INT) AS v", "CAST(id / 10 AS DOUBLE) AS d", "CAST(id AS STRING) AS k"
    )
    if extra is not None:
        df = df.unionByName(extra)
    deltamerge.write(df, path, configuration=DV if dv else None)


def _source(spark, extra=None):
    df = spark.range(0, 900, 9).selectExpr(
        "id", "CAST(id * 3 % 11 AS INT) AS v", "CAST(id / 10 AS DOUBLE) AS d", "CAST(id AS STRING) AS k"
    )
    df = df.unionByName(df.where("id % 45 = 0"))  # duplicates, new and matching
    return df if extra is None else df.unionByName(extra)


def _spy(monkeypatch):
    """Record what each insert-only merge anti-joined with: ``semi`` (the matched target rows) or
    ``plain`` (every candidate row)."""
    from deltamerge.merge import insert_only

    seen: list[str] = []
    real = insert_only._target_side

    def spy(ctx, files):  # type: ignore[no-untyped-def]
        df = real(ctx, files)
        seen.append("semi" if "LeftSemi" in df._jdf.queryExecution().logical().toString() else "plain")
        return df

    monkeypatch.setattr(insert_only, "_target_side", spy)
    return seen


def _both(
    spark, tmp_path, monkeypatch, source, cond, clauses=INSERT, *, dv, prepare=None, extra=None, conf=None
):
    """(what the merge anti-joined with when the semi-join may run, its result and state, the plain
    merge's)."""
    seen = _spy(monkeypatch)
    results, ways = [], []
    for name, semi in (("semi", "0"), ("plain", "-1")):
        path = str(tmp_path / name)
        _target(spark, path, dv=dv, extra=extra)
        if prepare is not None:
            prepare(path)
        seen.clear()
        with _settings(spark, {SEMI: semi, **(conf or {})}):
            res = _run(spark, path, source, cond, clauses)
        ways.append(list(seen))
        rows, dvs, metrics = _state(spark, path)
        # repr: NaN is not equal to itself in a tuple comparison.
        results.append((res, sorted(map(repr, rows)), dvs, metrics))
    assert ways[1] == ["plain"]
    return ways[0], results[0], results[1]


CONDITIONS = {
    "keys": "t.id = s.id",
    "source_only": "t.id = s.id AND s.v > 5",
    "target_only": "t.id = s.id AND t.v < 4",
    "mixed": "t.id = s.id AND t.v < s.v",
    "two_keys": "t.id = s.id AND t.v = s.v",
    "double_key": "t.d = s.d",
    "string_key": "t.k = s.k",
}


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("cond", sorted(CONDITIONS))
def test_semi_join_same_as_anti_join_of_every_row(spark, tmp_path, monkeypatch, cond, dv):
    way, ours, plain = _both(spark, tmp_path, monkeypatch, _source(spark), CONDITIONS[cond], dv=dv)
    assert way == ["semi"]
    assert ours == plain
    assert ours[0][3] > 0  # rows inserted
    assert ours[0][3] < 120  # and some source rows matched


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("null_safe", [False, True], ids=["eq", "null_safe"])
def test_null_and_nan_keys(spark, tmp_path, monkeypatch, null_safe, dv):
    """A NULL key matches nothing with ``=`` and a NULL with ``<=>``; NaN matches NaN in joins."""
    nulls = "SELECT CAST(NULL AS BIGINT) AS id, 1 AS v, CAST('NaN' AS DOUBLE) AS d, CAST(NULL AS STRING) AS k"
    extra_t = spark.sql(nulls)
    extra_s = spark.sql(f"{nulls} UNION ALL SELECT 5000, 2, CAST('NaN' AS DOUBLE), '5000'")
    for cond in (f"t.id {'<=>' if null_safe else '='} s.id", "t.d = s.d"):
        sub = tmp_path / cond.replace(" ", "").replace(".", "").replace("<=>", "ns").replace("=", "eq")
        way, ours, plain = _both(spark, sub, monkeypatch, _source(spark, extra_s), cond, dv=dv, extra=extra_t)
        assert way == ["semi"]
        assert ours == plain
        null_rows = [r for r in ours[1] if r.startswith("(None,")]
        if cond.startswith("t.id"):
            assert len(null_rows) == (1 if null_safe else 2)


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_deleted_target_rows_do_not_match(spark, tmp_path, monkeypatch, dv):
    """Rows a deletion vector (or a rewrite) removed are no match: their keys are inserted again."""

    def prepare(path):
        DeltaTable.forPath(spark, path).delete("id % 8 = 4")

    way, ours, plain = _both(
        spark, tmp_path, monkeypatch, _source(spark), "t.id = s.id", dv=dv, prepare=prepare
    )
    assert way == ["semi"]
    assert ours == plain
    assert any(r.startswith("(36,") for r in ours[1])  # deleted, then inserted by the merge


def test_insert_conditions_and_several_clauses(spark, tmp_path, monkeypatch):
    clauses = [
        ("whenNotMatchedInsert", "s.v > 8", {"id": "s.id", "v": "s.v + 100", "d": "s.d"}),
        ("whenNotMatchedInsert", "s.v < 3", {"id": "s.id", "v": "s.v", "d": "s.d"}),
    ]
    way, ours, plain = _both(spark, tmp_path, monkeypatch, _source(spark), "t.id = s.id", clauses, dv=True)
    assert way == ["semi"]
    assert ours == plain
    one = [("whenNotMatchedInsert", "s.v > 8", {"id": "s.id", "v": "s.v", "d": "s.d"})]
    way, ours, plain = _both(
        spark, tmp_path / "one", monkeypatch, _source(spark), "t.id = s.id", one, dv=False
    )
    assert way == ["semi"]
    assert ours == plain


@pytest.mark.parametrize("limit", [None, "0"], ids=["broadcast", "too_large"])
def test_matched_rows_broadcast_within_the_limit(spark, tmp_path, monkeypatch, limit):
    """The matched rows are broadcast when even every candidate row would fit
    ``broadcastMatchedMaxBytes``, else shuffled with the source; the rows are the same."""
    from deltamerge.merge import insert_only

    hinted: list[bool] = []
    real = insert_only._target_side

    def spy(ctx, files):  # type: ignore[no-untyped-def]
        df = real(ctx, files)
        hinted.append(df._jdf.queryExecution().analyzed().getClass().getSimpleName() == "ResolvedHint")
        return df

    monkeypatch.setattr(insert_only, "_target_side", spy)
    conf = {} if limit is None else {MATCHED_MAX: limit}
    way, ours, plain = _both(spark, tmp_path, monkeypatch, _source(spark), "t.id = s.id", dv=True, conf=conf)
    assert way == ["semi"]
    assert hinted == [limit is None, False]  # the second merge is the plain anti join
    assert ours == plain


@pytest.mark.parametrize(
    ("case", "conf"),
    [
        ("non_equi", {}),
        ("off", {SEMI: "-1"}),
        ("few_rows", {SEMI: "100000"}),
        ("no_broadcast", {"spark.deltamerge.merge.broadcastSourceMaxBytes": "0"}),
        ("source_too_large", {"spark.deltamerge.merge.broadcastSourceMaxBytes": "100"}),
    ],
)
def test_not_taken(spark, tmp_path, monkeypatch, case, conf):
    seen = _spy(monkeypatch)
    path = str(tmp_path / "t")
    _target(spark, path, dv=False)
    cond = "t.id < s.id - 1000" if case == "non_equi" else "t.id = s.id"
    with _settings(spark, {SEMI: "0", **conf}):
        _run(spark, path, _source(spark), cond, INSERT)
    assert seen == ["plain"]


def test_source_not_read_again_when_it_may_change(spark, tmp_path, monkeypatch, caplog):
    """Delta reads an insert-only merge's source once. A source with a non-deterministic UDF may
    give other keys when read again, so neither the source-key pruning nor the semi-join (both
    read it again) runs: a key whose file was pruned, or that the semi-join did not see, would be
    inserted twice."""
    import random

    seen = _spy(monkeypatch)
    pick = F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
    # Every row, but Spark cannot know it; the same rows without the UDF are read again.
    for name, source in (("changing", _source(spark).where(pick() >= 0)), ("fixed", _source(spark))):
        path = str(tmp_path / name)
        _target(spark, path, dv=False)
        seen.clear()
        caplog.clear()
        with _settings(spark, {SEMI: "0"}), caplog.at_level(logging.INFO, logger="deltamerge.merge.command"):
            res = _run(spark, path, source, "t.id = s.id", INSERT)
        pruned = [r for r in caplog.records if "dynamic file pruning" in r.getMessage()]
        assert (seen, bool(pruned)) == ((["plain"], False) if name == "changing" else (["semi"], True))
    assert res[3] == 33 + 6  # the new keys (603..891 step 9) and their duplicates (630, 675, ...)
    rows = deltamerge.read(spark, path).groupBy("id").count().where("count > 1").count()
    assert rows == 6


def test_changing_source_key_is_not_inserted(spark, tmp_path):
    """Every key such a source yields exists in the target, so nothing is inserted. When the
    summary read the source again, its keys (another draw) pruned the files holding the anti
    join's keys, and those were inserted as new rows (every time, before the fix)."""
    import random

    path = str(tmp_path / "t")
    target = spark.range(1000).repartitionByRange(10, "id").sortWithinPartitions("id")
    deltamerge.write(target.selectExpr("id", "0 AS v", "0D AS d", "CAST(id AS STRING) AS k"), path)
    pick = F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
    source = spark.range(3).select(
        (pick() * 1000).cast("long").alias("id"),
        F.lit(1).alias("v"),
        F.lit(1.0).alias("d"),
        F.lit("").alias("k"),
    )
    with _settings(spark, {SEMI: "0"}):
        res = _run(spark, path, source, "t.id = s.id", INSERT)
    assert res[3] == 0
    assert deltamerge.read(spark, path).count() == 1000


def test_source_plan_too_large_to_inspect(spark, tmp_path, monkeypatch):
    """A source plan beyond the inspection limit is materialized by the classic path (auto mode) and
    counts as not repeatable here: the insert-only merge reads it once."""
    from deltamerge.merge import planner

    monkeypatch.setattr(planner, "_MAX_PLAN_NODES", 1)
    assert planner.source_materialization_reason(spark, _source(spark)) == planner.NON_DELTA
    seen = _spy(monkeypatch)
    path = str(tmp_path / "t")
    _target(spark, path, dv=False)
    with _settings(spark, {SEMI: "0"}):
        res = _run(spark, path, _source(spark), "t.id = s.id", INSERT)
    assert seen == ["plain"]
    assert res[3] == 33 + 6


@pytest.mark.parametrize("least", ["0", "1000000"], ids=["possible", "too_few_rows"])
def test_source_counted_only_for_the_semi_join(spark, tmp_path, monkeypatch, least):
    """A string key prunes nothing, so the source-key summary would run no job; it counts the
    source only when the semi-join may follow (the count sizes its broadcast)."""
    from deltamerge.merge import pruning

    asked: list[bool] = []
    real = pruning.summarize_source_keys

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        asked.append(bool(k.get("count_rows")))
        return real(*a, **k)

    monkeypatch.setattr(pruning, "summarize_source_keys", spy)
    seen = _spy(monkeypatch)
    path = str(tmp_path / "t")
    _target(spark, path, dv=False)
    with _settings(spark, {SEMI: least}):
        res = _run(spark, path, _source(spark), "t.k = s.k", INSERT)
    assert (asked, seen) == (([True], ["semi"]) if least == "0" else ([False], ["plain"]))
    assert res[3] == 33 + 6
