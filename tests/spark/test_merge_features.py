"""MERGE behaviour beyond the shared conformance cases: errors, explain, materialization,
builder validation, idempotent writes, history parameters and read predicates."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import AnalysisError, MultipleSourceRowMatchingTargetRowError

pytestmark = pytest.mark.spark


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.createDataFrame([(i, i * 10) for i in range(6)], "key int, value int").coalesce(1), path
    )
    return DeltaTable.forPath(spark, path)


def _rows(dt):
    return sorted(tuple(r) for r in dt.toDF().collect())


def test_multiple_match_error_names_offending_rows(spark, table):
    before = table.version()
    src = spark.createDataFrame([(1, 1), (1, 2), (2, 3), (2, 4), (3, 5)], "key int, value int")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError) as info:
        table.alias("t").merge(src.alias("s"), "t.key = s.key").whenMatchedUpdateAll().execute()
    msg = str(info.value)
    assert "[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE]" in msg
    assert "2 target row(s) are matched by more than one source row" in msg
    assert "key=1" in msg and "key=2" in msg
    assert table.version() == before


@pytest.mark.parametrize(
    "condition, clauses, error_class",
    [
        ("t.key = s.nope", lambda b: b.whenMatchedDelete(), "DELTA_MERGE_UNRESOLVED_EXPRESSION"),
        ("key = key", lambda b: b.whenMatchedDelete(), "AMBIGUOUS_REFERENCE"),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedDelete("max(t.value) > 0"),
            "DELTA_AGGREGATION_NOT_SUPPORTED",
        ),
        ("t.key = s.key", lambda b: b.whenMatchedDelete("s.key IN (SELECT 1)"), "DELTA_UNSUPPORTED_SUBQUERY"),
        # A subquery's aggregate or window belongs to the subquery's plan: the error is the subquery.
        (
            "t.key = s.key",
            lambda b: b.whenMatchedDelete("s.key > (SELECT max(1))"),
            "DELTA_UNSUPPORTED_SUBQUERY",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenNotMatchedInsertAll("s.key IN (SELECT row_number() OVER (ORDER BY 1))"),
            "DELTA_UNSUPPORTED_SUBQUERY",
        ),
        # The subquery is resolved on its own (as Spark does before Delta sees it): an alias is no table.
        (
            "t.key = s.key",
            lambda b: b.whenMatchedDelete("s.value IN (SELECT value FROM t)"),
            "TABLE_OR_VIEW_NOT_FOUND",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenNotMatchedBySourceDelete("t.value IN (SELECT value FROM t)"),
            "TABLE_OR_VIEW_NOT_FOUND",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedUpdate(set={"value": "max(s.value)"}),
            "UNSUPPORTED_EXPR_FOR_OPERATOR",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedDelete("row_number() OVER (ORDER BY s.key) > 1"),
            "UNSUPPORTED_EXPR_FOR_OPERATOR",
        ),
        (
            "t.key = s.key AND rand() > 0.5",
            lambda b: b.whenMatchedDelete(),
            "DELTA_NON_DETERMINISTIC_FUNCTION",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenNotMatchedInsert(values={"key": "t.key", "value": "s.value"}),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenNotMatchedBySourceUpdate(set={"value": "s.value"}),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedUpdate(set={"value": "1", "t.value": "2"}),
            "DELTA_CONFLICT_SET_COLUMN",
        ),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedUpdate(set={"nope": "1"}),
            "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        ),
        ("t.key = s.key", lambda b: b, "DELTA_MERGE_MISSING_WHEN"),
        (
            "t.key = s.key",
            lambda b: b.whenMatchedDelete().whenMatchedUpdateAll(),
            "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        ),
    ],
)
def test_analysis_errors_leave_table_unchanged(spark, table, condition, clauses, error_class):
    before, rows = table.version(), _rows(table)
    src = spark.createDataFrame([(1, 100)], "key int, value int")
    with pytest.raises(AnalysisError) as info:
        clauses(table.alias("t").merge(src.alias("s"), condition)).execute()
    assert error_class in str(info.value)
    if error_class == "UNSUPPORTED_EXPR_FOR_OPERATOR":
        # Delta's tests match Spark's wording of this error.
        assert re.search(r"(?is)unsupported.*Invalid expressions", str(info.value))
    assert table.version() == before and _rows(table) == rows


def test_sql_duplicate_insert_columns_and_clause_order(spark, table):
    deltamerge.register_table(spark, "tgt", table.path)
    spark.createDataFrame([(9, 9)], "key int, value int").createOrReplaceTempView("src")
    with pytest.raises(AnalysisError, match="DELTA_DUPLICATE_COLUMNS_ON_INSERT"):
        deltamerge.sql(
            spark,
            "MERGE INTO tgt t USING src s ON t.key = s.key "
            "WHEN NOT MATCHED THEN INSERT (key, key) VALUES (1, 2)",
        )
    with pytest.raises(AnalysisError, match=r"(?i)syntax error"):
        deltamerge.sql(
            spark,
            "MERGE INTO tgt t USING src s ON t.key = s.key WHEN NOT MATCHED THEN INSERT * "
            "WHEN MATCHED THEN DELETE",
        )
    deltamerge.unregister_table(spark, "tgt")


def test_builder_argument_validation(spark, table):
    src = spark.createDataFrame([(1, 1)], "key int, value int")
    with pytest.raises(ValueError, match="'source' in merge cannot be None"):
        table.merge(None, "t.key = s.key")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Type of 'source' in merge must be DataFrame"):
        table.merge([1], "t.key = s.key")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'condition' in merge cannot be None"):
        table.merge(src, None)  # type: ignore[arg-type]
    builder = table.alias("t").merge(src.alias("s"), "t.key = s.key")
    with pytest.raises(ValueError, match="'set' in whenMatchedUpdate cannot be None"):
        builder.whenMatchedUpdate()
    with pytest.raises(TypeError, match="must be a dict"):
        builder.whenNotMatchedInsert(values=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Keys of dict"):
        builder.whenMatchedUpdate(set={1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="Values of dict"):
        builder.whenMatchedUpdate(set={"value": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        builder.whenMatchedDelete(condition=1)  # type: ignore[arg-type]
    # builders are immutable: a dropped clause does not change the original
    assert builder.whenMatchedUpdate(set={}) is builder


def test_column_arguments_and_interleaved_clauses(spark, table):
    src = spark.createDataFrame([(1, 7), (2, 8), (50, 9)], "key int, value int").alias("s")
    (
        table.alias("t")
        .merge(src, F.col("t.key") == F.col("s.key"))
        .whenNotMatchedInsert(values={"key": F.col("s.key"), "value": F.col("s.value") * 2})
        .whenMatchedUpdate(condition=F.col("s.key") == 1, set={"value": F.col("s.value") + F.lit(1)})
        .whenMatchedDelete()
        .execute()
    )
    assert _rows(table) == [(0, 0), (1, 8), (3, 30), (4, 40), (5, 50), (50, 18)]


def test_explain_reports_plan_without_writing(spark, table):
    before = table.version()
    src = spark.createDataFrame([(1, 1)], "key int, value int")
    plan = (
        table.alias("t").merge(src.alias("s"), "t.key = s.key AND t.key > 100").whenMatchedDelete().explain()
    )
    assert "executor: classic" in plan
    assert "target files after skipping: 0" in plan
    assert "source materialized" in plan
    deltamerge.register_table(spark, "tgt", table.path)
    src.createOrReplaceTempView("src")
    text = deltamerge.sql(
        spark, "EXPLAIN MERGE INTO tgt t USING src s ON t.key = s.key WHEN NOT MATCHED THEN INSERT *"
    )
    assert "executor: insertOnly" in text.collect()[0][0]
    assert table.version() == before
    deltamerge.unregister_table(spark, "tgt")


def test_non_deterministic_source_is_materialized(spark, table):
    # A source whose rows change on each evaluation must give both jobs the same rows.
    src = spark.range(0, 6).select(
        F.col("id").cast("int").alias("key"), (F.rand() * 1000).cast("int").alias("value")
    )
    result = (
        table.alias("t").merge(src.alias("s"), "t.key = s.key").whenMatchedUpdateAll().execute().collect()[0]
    )
    assert tuple(result) == (6, 6, 0, 0)
    metrics = table.history(1).collect()[0]["operationMetrics"]
    assert metrics["numSourceRows"] == "6" and metrics["numTargetRowsUpdated"] == "6"


def test_history_parameters_and_read_predicate(spark, table):
    src = spark.createDataFrame([(1, 5), (99, 1)], "key int, value int")
    (
        table.alias("t")
        .merge(src.alias("s"), "t.key = s.key AND t.key < 10")
        .whenMatchedUpdate("s.value > 0", {"value": "s.value"})
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceDelete("t.key = 5")
        .execute()
    )
    h = table.history(1).collect()[0]
    params = h["operationParameters"]
    assert json.loads(params["predicate"]) == ["t.key = s.key AND t.key < 10"]
    assert json.loads(params["matchedPredicates"]) == [{"predicate": "s.value > 0", "actionType": "update"}]
    assert json.loads(params["notMatchedPredicates"]) == [{"actionType": "insert"}]
    assert json.loads(params["notMatchedBySourcePredicates"]) == [
        {"predicate": "t.key = 5", "actionType": "delete"}
    ]
    assert h["isBlindAppend"] is False and h["readVersion"] == 0
    assert set(h["operationMetrics"]) >= {
        "numSourceRows",
        "numTargetRowsCopied",
        "executionTimeMs",
        "rewriteTimeMs",
    }


def test_idempotent_merge_with_txn_app_id(spark, table):
    src = spark.createDataFrame([(100, 1)], "key int, value int")
    spark.conf.set("spark.databricks.delta.write.txnAppId", "etl-job")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "7")
    try:
        for _ in range(2):
            table.alias("t").merge(src.alias("s"), "t.key = s.key").whenNotMatchedInsertAll().execute()
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    assert _rows(table).count((100, 1)) == 1
    assert table.version() == 1


def test_merge_commit_retries_follow_max_commit_attempts(spark, table, monkeypatch, spark_conf):
    """MERGE's transaction reads the session's maxCommitAttempts: losing more races than it allows
    fails the MERGE with the table as the winners left it and none of the MERGE's files behind;
    within the limit the MERGE commits after the winners."""
    from deltamerge.errors import MaxCommitAttemptsError
    from deltamerge.log import filenames
    from deltamerge.log.store import LocalLogStore

    races = {"left": 0}
    real = LocalLogStore.write_exclusive

    def racing(self, name, data):  # type: ignore[no-untyped-def]
        # A concurrent writer takes the version first with a commit that conflicts with nothing.
        if races["left"] > 0 and filenames.commit_version(name) is not None:
            races["left"] -= 1
            winner = {"commitInfo": {"operation": "WRITE", "isBlindAppend": True, "operationParameters": {}}}
            real(self, name, (json.dumps(winner) + "\n").encode())
        real(self, name, data)

    monkeypatch.setattr(LocalLogStore, "write_exclusive", racing)
    root = table.detail().collect()[0]["location"].removeprefix("file:")

    def data_files() -> list[str]:
        return sorted(p.name for p in Path(root).glob("*.parquet"))

    before_rows, before_files = _rows(table), data_files()
    src = spark.createDataFrame([(1, -1), (100, 1)], "key int, value int")

    def upsert():  # type: ignore[no-untyped-def]
        b = table.alias("t").merge(src.alias("s"), "t.key = s.key")
        return b.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    spark_conf({"spark.databricks.delta.maxCommitAttempts": "2"})
    races["left"] = 3
    with pytest.raises(MaxCommitAttemptsError, match="maxCommitAttempts"):
        upsert()
    assert table.version() == 2  # the two winners, no MERGE
    assert _rows(table) == before_rows and data_files() == before_files

    races["left"] = 1
    upsert()
    assert table.version() == 4 and table.history(1).collect()[0]["operation"] == "MERGE"
    assert (1, -1) in _rows(table) and (100, 1) in _rows(table)


def test_data_skipping_limits_touched_files(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 100, 1, 5).selectExpr("cast(id as int) as key", "0 as value"), path)
    dt = DeltaTable.forPath(spark, path)
    src = spark.createDataFrame([(3, 1)], "key int, value int")
    dt.alias("t").merge(src.alias("s"), "t.key = s.key AND t.key < 20").whenMatchedUpdateAll().execute()
    m = dt.history(1).collect()[0]["operationMetrics"]
    assert m["numTargetFilesRemoved"] == "1" and m["numTargetRowsCopied"] == "19"


def test_wide_merge_runs_without_constraint_propagation(spark, tmp_path, monkeypatch, spark_conf):
    """A MERGE over many columns runs its queries with Spark's constraint propagation off (quadratic
    in a plan's aliases; a MERGE's output has one CASE per column), restores the setting after, and
    leaves a value the user set alone."""
    from deltamerge.merge import command

    key = "spark.sql.constraintPropagation.enabled"
    seen: list[str | None] = []
    real = command._execute

    def spy(ctx, plan):  # type: ignore[no-untyped-def]
        seen.append(spark.conf.get(key, None))
        return real(ctx, plan)

    monkeypatch.setattr(command, "_execute", spy)
    n = command.WIDE_PLAN_COLUMNS // 2
    cols = [F.col("id")] + [(F.col("id") * i).alias(f"c{i}") for i in range(1, n)]
    path = str(tmp_path / "wide")
    deltamerge.write(spark.range(4).select(*cols), path)
    source = spark.range(2, 6).select(*cols[:1], *[(-F.col("id")).alias(f"c{i}") for i in range(1, n)])

    def upsert() -> tuple:
        m = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
        return tuple(m.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0])

    assert upsert()[1:4] == (2, 0, 2)  # updated, deleted, inserted
    assert seen == ["false"] and spark.conf.get(key, None) is None
    rows = {r["id"]: r for r in deltamerge.read(spark, path).collect()}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    assert rows[1][f"c{n - 1}"] == n - 1 and rows[3]["c1"] == -3 and rows[5][f"c{n - 1}"] == -5

    narrow = str(tmp_path / "narrow")  # a narrow merge keeps Spark's default
    deltamerge.write(spark.range(3), narrow)
    DeltaTable.forPath(spark, narrow).delete("id = 1")
    assert seen[1:] == [None]

    spark_conf({key: "true"})  # the user's choice wins
    upsert()
    assert seen[2:] == ["true"]


@pytest.mark.sampled
@pytest.mark.parametrize("change_feed", [False, True])
def test_scalar_subqueries_in_values(spark, tmp_path, change_feed):
    """A subquery in an UPDATE SET or INSERT value is evaluated by Spark (conditions reject them, as
    Delta does): its own columns resolve inside it (``value`` below is the view's column, although
    target and source have one too), a column qualified by the target or source alias is a
    correlated reference. DML UPDATE takes them too."""
    path = str(tmp_path / "t")
    # With the change feed on, the values also feed the change rows (an explode Spark refuses
    # subqueries in): they are projected below it.
    conf = (
        {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"} if change_feed else {}
    )
    deltamerge.write(
        spark.createDataFrame([(1, 10), (2, 20), (3, 30)], "key int, value int"), path, configuration=conf
    )
    spark.createDataFrame([(5,), (7,)], "value int").createOrReplaceTempView("sq_other")
    spark.createDataFrame([(2, 0), (3, 0), (4, 0)], "key int, value int").createOrReplaceTempView("sq_src")
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING sq_src s ON t.key = s.key "
        "WHEN MATCHED AND t.key = 2 THEN UPDATE SET value = (SELECT max(value) FROM sq_other) "
        "WHEN MATCHED THEN UPDATE SET value = (SELECT count(*) FROM sq_other o WHERE o.value < t.value / 5) "
        "WHEN NOT MATCHED THEN INSERT (key, value) VALUES (s.key, s.key + (SELECT min(value) FROM sq_other))",
    )
    assert _rows(DeltaTable.forPath(spark, path)) == [(1, 10), (2, 7), (3, 1), (4, 9)]
    table = DeltaTable.forPath(spark, path)
    table.alias("t").merge(spark.table("sq_src").alias("s"), "t.key = s.key").whenMatchedUpdate(
        set={"value": "t.value * 100 + (SELECT sum(value) FROM sq_other)"}
    ).execute()
    assert _rows(table) == [(1, 10), (2, 712), (3, 112), (4, 912)]
    deltamerge.sql(
        spark, f"UPDATE delta.`{path}` SET value = (SELECT max(value) FROM sq_other) WHERE key = 1"
    )
    assert _rows(table) == [(1, 7), (2, 712), (3, 112), (4, 912)]
    if change_feed:
        changes = deltamerge.read_changes(spark, path, starting_version=1).where(
            "_change_type != 'update_preimage'"
        )
        assert sorted((r.key, r.value, r._change_type) for r in changes.collect()) == [
            (1, 7, "update_postimage"), (2, 7, "update_postimage"), (2, 712, "update_postimage"),
            (3, 1, "update_postimage"), (3, 112, "update_postimage"), (4, 9, "insert"),
            (4, 912, "update_postimage"),
        ]  # fmt: skip
    # ``st.a`` in the subquery is its own struct column's field: only the merge's aliases are outer.
    spark.createDataFrame([((3,),)], "st struct<a:int>").createOrReplaceTempView("sq_struct")
    table.alias("t").merge(spark.table("sq_src").alias("s"), "t.key = s.key").whenMatchedUpdate(
        condition="t.key = 4", set={"value": "(SELECT max(st.a) FROM sq_struct) + s.value"}
    ).execute()
    assert _rows(table) == [(1, 7), (2, 712), (3, 112), (4, 3)]
    spark.catalog.dropTempView("sq_struct")
    spark.catalog.dropTempView("sq_other")
    spark.catalog.dropTempView("sq_src")


@pytest.mark.parametrize("statement", ["merge", "update", "delete"])
def test_commit_row_counts_are_validated(spark, table, monkeypatch, spark_conf, caplog, statement):
    """Delta's numRecordsValidation: a writer bug that would commit rows the statement cannot
    produce (simulated: the executor loses its remove actions, or its adds) fails before the
    commit, with the table and its directory as they were; with the check off it only logs."""
    from deltamerge.errors import NumRecordsMismatchError
    from deltamerge.log.actions import RemoveFile
    from deltamerge.merge import command

    real = command._execute
    # Each statement rewrites the table's one file; without its remove action the rows it keeps
    # or changes would appear twice.
    monkeypatch.setattr(
        command, "_execute", lambda ctx, plan: [a for a in real(ctx, plan) if not isinstance(a, RemoveFile)]
    )
    root = table.detail().collect()[0]["location"].removeprefix("file:")

    def data_files() -> list[str]:
        return sorted(p.name for p in Path(root).glob("*.parquet"))

    def run() -> None:
        if statement == "merge":
            src = spark.createDataFrame([(1, -1), (2, -2)], "key int, value int")
            table.alias("t").merge(src.alias("s"), "t.key = s.key").whenMatchedUpdateAll().execute()
        elif statement == "update":
            table.update("key = 1", {"value": "-1"})
        else:
            table.delete("key = 1 AND value > 0")

    before_rows, before_files, version = _rows(table), data_files(), table.version()
    with pytest.raises(NumRecordsMismatchError) as info:
        run()
    shown = {"merge": "MERGE without INSERT clauses", "update": "UPDATE", "delete": "DELETE"}[statement]
    assert f"in {shown}. Added " in str(info.value) and "nothing was committed" in str(info.value)
    assert (_rows(table), data_files(), table.version()) == (before_rows, before_files, version)

    spark_conf({"spark.databricks.delta.numRecordsValidation.enabled": "false"})
    with caplog.at_level("WARNING", logger="deltamerge.merge.command"):
        run()
    assert table.version() == version + 1
    assert any("Failed to validate the number of records" in r.getMessage() for r in caplog.records)


def test_a_source_with_two_columns_of_one_name(spark, table):
    """A join's output may hold two ``value`` columns: referring to that name (by ``s.value``, or
    through ``UPDATE SET *`` / ``INSERT *``) is Spark's AMBIGUOUS_REFERENCE, as in Delta (the first
    one was taken silently); the source's other columns stay usable."""
    left = spark.createDataFrame([(1, 100), (9, 900)], "key int, value int")
    right = spark.createDataFrame([(1, -1), (9, -9)], "key int, value int")
    source = left.join(right, "key")  # key, value, value
    before = (table.version(), _rows(table))

    def merge(clauses):
        return clauses(table.alias("t").merge(source.alias("s"), "t.key = s.key")).execute()

    for clauses in (
        lambda b: b.whenMatchedUpdate(set={"value": "s.value"}),
        lambda b: b.whenMatchedUpdateAll(),
        lambda b: b.whenNotMatchedInsertAll(),
    ):
        with pytest.raises(AnalysisError, match=r"AMBIGUOUS_REFERENCE.*\[`s`\.`value`, `s`\.`value`\]"):
            merge(clauses)
    assert (table.version(), _rows(table)) == before
    merge(
        lambda b: b.whenMatchedUpdate(set={"value": "s.key * 7"}).whenNotMatchedInsert(
            values={"key": "s.key"}
        )
    )
    assert _rows(table) == [(0, 0), (1, 7), (2, 20), (3, 30), (4, 40), (5, 50), (9, None)]


def test_source_columns_keep_the_qualifiers_of_an_alias_or_table_under_other_operators(spark, table):
    """``spark.table("u").where(...)``, ``df.alias("s").dropDuplicates(...)``, ``spark.sql("SELECT ...
    FROM u")`` and a join of aliased DataFrames have no alias at the top of their plan, yet Spark
    resolves ``u.key``, ``s.key`` and ``y.value`` against them by the qualifiers their columns keep,
    and so does Delta's MERGE; deltamerge knew only an alias at the top (unresolved reference)."""
    spark.createDataFrame([(1, 11), (1, 11), (9, 99)], "key int, value int").createOrReplaceTempView(
        "qual_src"
    )

    def merge(source, on, value):
        builder = table.alias("t").merge(source, on).whenMatchedUpdate(set={"value": value})
        key = on.split(" = ")[1]
        return tuple(builder.whenNotMatchedInsert(values={"key": key, "value": value}).execute().first())

    source = spark.table("qual_src").where("value > 0").distinct()
    assert merge(source, "t.key = qual_src.key", "qual_src.value") == (2, 1, 0, 1)
    assert _rows(table) == [(0, 0), (1, 11), (2, 20), (3, 30), (4, 40), (5, 50), (9, 99)]
    source = spark.table("qual_src").alias("s").dropDuplicates(["key"])
    assert merge(source, "t.key = s.key", "s.value + 1") == (2, 2, 0, 0)
    source = spark.sql("SELECT DISTINCT key, value * 2 AS doubled FROM qual_src")
    assert merge(source, "t.key = qual_src.key", "doubled") == (2, 2, 0, 0)
    assert _rows(table) == [(0, 0), (1, 22), (2, 20), (3, 30), (4, 40), (5, 50), (9, 198)]
    # A join's two ``key`` and two ``value`` columns, told apart by their qualifiers.
    left = spark.createDataFrame([(2, -2), (7, -7)], "key int, value int")
    right = spark.createDataFrame([(2, 2), (7, 7)], "key int, value int")
    joined = left.alias("x").join(right.alias("y"), F.col("x.key") == F.col("y.key"))
    assert merge(joined, "t.key = x.key", "y.value * 100") == (2, 1, 0, 1)
    assert _rows(table)[2] == (2, 200) and _rows(table)[-2] == (7, 700)
    # An alias over the table replaces its qualifier and a computed column has none (as in Spark);
    # a struct column named like a qualifier is read as the column.
    version = table.version()
    for source, on, value, unresolved in (
        (spark.table("qual_src").alias("z"), "t.key = qual_src.key", "1", "qual_src.key"),
        (spark.table("qual_src").distinct(), "t.key = nope.key", "1", "nope.key"),
        (
            spark.sql("SELECT key, value + 1 AS value FROM qual_src"),
            "t.key = qual_src.key",
            "qual_src.value",
            "qual_src.value",
        ),
    ):
        with pytest.raises(AnalysisError, match=rf"DELTA_MERGE_UNRESOLVED_EXPRESSION.*{unresolved}"):
            merge(source, on, value)
    assert table.version() == version
    nested = spark.sql("SELECT named_struct('key', 3) AS qual_src, 5 AS v FROM qual_src LIMIT 1")
    assert merge(nested, "t.key = qual_src.key", "v") == (1, 1, 0, 0)
    assert _rows(table)[3] == (3, 5)


def test_a_target_opened_by_name_answers_to_its_full_name(spark, table, tmp_path):
    """A registered name is a session catalog table: Spark qualifies its columns
    ``spark_catalog.default.people``, so Delta resolves ``default.people.key`` (condition and SET key)
    on ``DeltaTable.forName(spark, "people")`` and in SQL; deltamerge knew only ``people``."""
    deltamerge.register_table(spark, "qual_people", str(tmp_path / "t"))
    try:
        for opened in ("qual_people", "default.qual_people", "spark_catalog.default.qual_people"):
            for q in ("qual_people", "default.qual_people", "spark_catalog.default.qual_people"):
                source = spark.createDataFrame([(1, 7)], "key int, value int").alias("s")
                merged = (
                    DeltaTable.forName(spark, opened)
                    .merge(source, f"{q}.key = s.key")
                    .whenMatchedUpdate(f"{q}.value >= 0", {f"{q}.value": f"{q}.value + s.value"})
                    .execute()
                )
                assert tuple(merged.first()) == (1, 1, 0, 0)
        assert _rows(table)[1] == (1, 10 + 9 * 7)
        deltamerge.sql(
            spark,
            "MERGE INTO qual_people USING (SELECT 2 AS key) s ON default.qual_people.key = s.key "
            "WHEN MATCHED THEN UPDATE SET spark_catalog.default.qual_people.value = -1",
        )
        assert _rows(table)[2] == (2, -1)
        # SQL UPDATE and DELETE on the name too (Spark resolves them against the catalog table).
        deltamerge.sql(
            spark,
            "UPDATE qual_people SET spark_catalog.default.qual_people.value = -3 "
            "WHERE default.qual_people.key = 3",
        )
        deltamerge.sql(spark, "DELETE FROM default.qual_people WHERE default.qual_people.key = 4")
        assert _rows(table)[3:5] == [(3, -3), (5, 50)]
        named = DeltaTable.forName(spark, "qual_people")
        named.update(
            "default.qual_people.key = 5", {"default.qual_people.value": "default.qual_people.value + 1"}
        )
        named.delete("spark_catalog.default.qual_people.key = 0")
        assert _rows(table)[0] == (1, 73) and _rows(table)[-1] == (5, 51)
        version = table.version()
        for q in ("other.qual_people", "spark_catalog.other.qual_people"):
            with pytest.raises(AnalysisError, match=rf"DELTA_MERGE_UNRESOLVED_EXPRESSION.*{q}\.key"):
                DeltaTable.forName(spark, "qual_people").merge(
                    spark.createDataFrame([(1,)], "key int").alias("s"), f"{q}.key = s.key"
                ).whenMatchedDelete().execute()
        assert table.version() == version
    finally:
        deltamerge.unregister_table(spark, "qual_people")


def test_a_source_read_from_a_catalog_table_answers_to_its_full_name(spark, table):
    """``spark.table("db.u")``'s columns are qualified ``spark_catalog.db.u``: ``db.u.key`` and
    ``spark_catalog.db.u.key`` resolve in Spark and in Delta's MERGE; deltamerge took the last part as
    the source's alias and stopped there."""
    spark.sql("CREATE DATABASE IF NOT EXISTS qual_db")
    spark.createDataFrame([(4, 44)], "key int, value int").write.mode("overwrite").saveAsTable("qual_db.u")
    try:
        for q in ("u", "qual_db.u", "spark_catalog.qual_db.u"):
            merged = (
                table.alias("t")
                .merge(spark.table("qual_db.u"), f"t.key = {q}.key")
                .whenMatchedUpdate(set={"value": f"{q}.value"})
                .execute()
            )
            assert tuple(merged.first()) == (1, 1, 0, 0)
        assert _rows(table)[4] == (4, 44)
    finally:
        spark.sql("DROP DATABASE qual_db CASCADE")


def test_struct_fields_of_an_aliased_source_ask_spark_nothing(spark, table, monkeypatch):
    """``info.flag`` (a struct field, no qualifier) on a source aliased ``s``: a one-part qualifier
    can name an aliased side only by its alias, so Spark is not asked to resolve ``info`` as one."""
    from deltamerge.spark import qualifiers

    asked: list[tuple[str, ...]] = []
    real = qualifiers._positions
    monkeypatch.setattr(qualifiers, "_positions", lambda df, q, n: asked.append(q) or real(df, q, n))
    source = spark.sql("SELECT 1 AS key, named_struct('flag', true, 'v', 5) AS info").alias("s")
    merged = (
        table.alias("t")
        .merge(source, "t.key = s.key AND info.flag")
        .whenMatchedUpdate(set={"value": "info.v"})
        .execute()
    )
    assert tuple(merged.first()) == (1, 1, 0, 0) and _rows(table)[1] == (1, 5) and asked == []


def test_an_unresolved_qualifier_logs_no_spark_error(spark, table):
    """Resolving ``nope.key`` asks Spark whether the source's columns answer to ``nope``; PySpark
    logged its refusal at ERROR (with a Java stack trace) before deltamerge raised its own error."""
    from pyspark.logger import PySparkLogger

    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append  # type: ignore[method-assign]
    logger = PySparkLogger.getLogger("DataFrameQueryContextLogger")
    level = logger.level  # the suite's conftest silences it
    logger.setLevel(logging.ERROR)
    logger.addHandler(handler)
    try:
        source = spark.createDataFrame([(1, 1)], "key int, value int")
        for frame in (source.alias("s"), source.distinct()):
            with pytest.raises(AnalysisError, match="DELTA_MERGE_UNRESOLVED_EXPRESSION"):
                table.alias("t").merge(frame, "t.key = nope.key").whenMatchedDelete().execute()
        with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):  # the logger itself still works
            source.select(F.col("nope.key"))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [r.getMessage()[:40] for r in logged] == [logged[-1].getMessage()[:40]]


def test_register_table_refuses_a_database_and_keeps_nothing(spark, table, tmp_path):
    """deltamerge's names are session names (Spark temp views have one part): ``db.people`` is
    refused before anything is recorded. It was recorded, then the view failed, and every later
    commit to the table tried to refresh that view (TEMP_VIEW_NAME_TOO_MANY_NAME_PARTS)."""
    path = str(tmp_path / "t")
    with pytest.raises(deltamerge.DeltaMergeError, match="REQUIRES_SINGLE_PART_NAMESPACE"):
        deltamerge.register_table(spark, "qual_db2.people", path)
    source = spark.createDataFrame([(1, 5)], "key int, value int").alias("s")
    table.alias("t").merge(source, "t.key = s.key").whenMatchedUpdateAll().execute()
    assert _rows(table)[1] == (1, 5)
    deltamerge.register_table(spark, "default.qual_people2", path)
    deltamerge.register_table(spark, "`qual people-3`", path)  # a quoted name stays quoted
    try:
        assert DeltaTable.forName(spark, "qual_people2").toDF().count() == 6
        assert spark.table("qual_people2").count() == 6
        assert DeltaTable.forName(spark, "default.`qual people-3`").toDF().count() == 6
        assert spark.table("`qual people-3`").count() == 6
        merged = deltamerge.sql(
            spark,
            "MERGE INTO `qual people-3` t USING (SELECT 1 AS key, 9 AS value) s ON t.key = s.key "
            "WHEN MATCHED THEN UPDATE SET value = s.value",
        )
        assert tuple(merged.first()) == (1, 1, 0, 0) and _rows(table)[1] == (1, 9)
        assert spark.table("`qual people-3`").where("key = 1").first().value == 9  # the view follows
    finally:
        deltamerge.unregister_table(spark, "qual_people2")
        deltamerge.unregister_table(spark, "`qual people-3`")
    assert not spark.catalog.tableExists("`qual people-3`")


def test_builder_expressions_with_an_alias_are_the_expression(spark, table):
    """Spark reads ``"t.key = s.key k"`` as ``t.key = s.key AS k`` and drops aliases outside a
    projection, so Delta merges with the expression; deltamerge put the alias into its generated
    SQL (PARSE_SYNTAX_ERROR naming internal columns)."""
    source = spark.createDataFrame([(1, 99), (7, 70)], "key int, value int").alias("s")
    (
        table.alias("t")
        .merge(source, "t.key = s.key k")
        .whenMatchedUpdate("s.value > 0 c", {"value": "s.value v"})
        .whenNotMatchedInsert(values={"key": F.expr("s.key AS x"), "value": "s.value"})
        .execute()
    )
    assert _rows(table) == [(0, 0), (1, 99), (2, 20), (3, 30), (4, 40), (5, 50), (7, 70)]
    table.update("key = 7 k", {"value": "0 v"})
    table.delete("key = 0 k")
    assert _rows(table)[0] == (1, 99) and _rows(table)[-1] == (7, 0)
    version = table.version()
    with pytest.raises(AnalysisError, match=r"PARSE_SYNTAX_ERROR.*one expression"):
        table.alias("t").merge(source, "t.key = s.key; DROP TABLE x").whenMatchedDelete().execute()
    assert table.version() == version
