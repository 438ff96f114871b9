"""One clock reading per MERGE (Delta's MergeIntoTimestampConsistencySuite): ``now()`` in the ON
condition, clause conditions and assigned values equals ``current_timestamp()`` computed in the
source, although deltamerge runs the merge as several Spark queries."""

from __future__ import annotations

import json
import re

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark


@pytest.fixture(params=["cow", "dv"])
def clock_tables(request, spark, tmp_path):  # type: ignore[no-untyped-def]
    path = str(tmp_path / "target")
    target = (
        spark.range(0, 5)
        .withColumn("updated", F.lit(False))
        .withColumn("timestampOne", F.timestamp_seconds(F.lit(1)))
        .withColumn("timestampTwo", F.timestamp_seconds(F.lit(1337)))
        .coalesce(1)
    )
    props = {"delta.enableDeletionVectors": "true"} if request.param == "dv" else None
    deltamerge.write(target, path, configuration=props)
    deltamerge.register_table(spark, "clock_target", path)
    (
        spark.range(0, 10)
        .withColumn("updated", F.lit(True))
        .withColumn("timestampOne", F.current_timestamp())
        .withColumn("timestampTwo", F.current_timestamp())
        .createOrReplaceTempView("clock_source")
    )
    yield path
    deltamerge.unregister_table(spark, "clock_target")
    spark.catalog.dropTempView("clock_source")


def _all_updated(spark, path):  # type: ignore[no-untyped-def]
    return deltamerge.read(spark, path).where("NOT updated").count() == 0


def _all_inserted(spark, path):  # type: ignore[no-untyped-def]
    ids = {r.id for r in deltamerge.read(spark, path).select("id").collect()}
    return ids == set(range(10))


def _one_instant(spark, path):  # type: ignore[no-untyped-def]
    rows = deltamerge.read(spark, path).where("updated").select("timestampOne", "timestampTwo").distinct()
    got = rows.collect()
    return len(got) == 1 and got[0][0] == got[0][1]


CASES = {
    "on_condition": (
        "ON s.id = t.id AND s.timestampOne = now() WHEN MATCHED THEN UPDATE SET *",
        _all_updated,
    ),
    "matched_condition": (
        "ON s.id = t.id WHEN MATCHED AND s.timestampOne = now() AND s.timestampTwo = now() "
        "THEN UPDATE SET *",
        _all_updated,
    ),
    "update_set": (
        "ON s.id = t.id WHEN MATCHED THEN UPDATE SET updated = s.updated, "
        "t.timestampOne = s.timestampOne, t.timestampTwo = now()",
        _one_instant,
    ),
    "not_matched_condition": (
        "ON s.id = t.id WHEN NOT MATCHED AND s.timestampOne = now() AND s.timestampTwo = now() "
        "THEN INSERT *",
        _all_inserted,
    ),
    "insert_values": (
        "ON s.id = t.id WHEN NOT MATCHED THEN INSERT (id, updated, timestampOne, timestampTwo) "
        "VALUES (s.id, s.updated, s.timestampOne, now())",
        _one_instant,
    ),
    # current_timestamp() in the source and CURRENT_TIMESTAMP in a condition, plus the same
    # instant as a date.
    "date_and_timestamp": (
        "ON s.id = t.id WHEN MATCHED AND s.timestampOne = CURRENT_TIMESTAMP "
        "AND CAST(s.timestampTwo AS DATE) = current_date() THEN UPDATE SET *",
        _all_updated,
    ),
}


@pytest.mark.sampled
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_instant_per_merge(spark, clock_tables, case):  # type: ignore[no-untyped-def]
    clauses, check = CASES[case]
    deltamerge.sql(spark, f"MERGE INTO clock_target t USING clock_source s {clauses}")
    assert check(spark, clock_tables)


def test_subquery_in_source_view(spark, clock_tables):  # type: ignore[no-untyped-def]
    spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW clock_source_sq AS "
        "SELECT * FROM clock_source WHERE timestampOne IN (SELECT now())"
    )
    try:
        deltamerge.sql(
            spark,
            "MERGE INTO clock_target t USING clock_source_sq s ON s.id = t.id WHEN MATCHED THEN UPDATE SET *",
        )
    finally:
        spark.catalog.dropTempView("clock_source_sq")
    assert _all_updated(spark, clock_tables)


def test_builder_and_history_keep_the_written_expression(spark, clock_tables):  # type: ignore[no-untyped-def]
    src = spark.table("clock_source")
    (
        DeltaTable.forPath(spark, clock_tables)
        .alias("t")
        .merge(src.alias("s"), "s.id = t.id AND s.timestampOne = now()")
        .whenMatchedUpdate(set={"updated": "s.updated", "timestampTwo": "current_timestamp()"})
        .execute()
    )
    assert _all_updated(spark, clock_tables)
    assert deltamerge.read(spark, clock_tables).where("timestampTwo = timestamp_seconds(1337)").count() == 0
    params = DeltaTable.forPath(spark, clock_tables).history(1).collect()[0].operationParameters
    assert json.loads(params["predicate"]) == ["s.id = t.id AND s.timestampOne = NOW()"]


def test_statement_clock_becomes_one_literal(spark, tmp_path):  # type: ignore[no-untyped-def]
    """No clock in the source: every clock function of the statement becomes the same literal (the
    jobs of a merge evaluate them separately otherwise) and the source is used as it is."""
    from deltamerge.merge.current_time import pin_clock
    from deltamerge.predicates import to_sql
    from deltamerge.sql_frontend import parse_merge

    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 3).withColumn("ts", F.lit(None).cast("timestamp")), path)
    parsed = parse_merge(
        spark,
        f"MERGE INTO delta.`{path}` t USING (SELECT 1 AS id) s ON s.id = t.id AND t.ts IS NULL "
        "WHEN MATCHED AND now() > t.ts THEN UPDATE SET ts = current_timestamp() "
        "WHEN NOT MATCHED THEN INSERT (id, ts) VALUES (s.id, CAST(current_date() AS TIMESTAMP))",
    )
    assert parsed is not None
    spec = parsed[1]
    pinned, source = pin_clock(spark, spec)
    assert source is None
    texts = [to_sql(c.condition) for c in pinned.clauses if c.condition is not None]
    texts += [to_sql(a.value) for c in pinned.clauses for a in c.assignments or ()]
    joined = " ".join(texts).upper()
    assert "NOW(" not in joined and "CURRENT_" not in joined
    assert len(set(re.findall(r"TIMESTAMP_MICROS\((\d+)\)", joined))) == 1
    assert len(re.findall(r"TIMESTAMP_MICROS", joined)) == 3
    # The written statement is untouched (history records it).
    assert "NOW()" in to_sql(spec.clauses[0].condition).upper()


def test_clock_reading_source_is_pinned(spark, tmp_path):  # type: ignore[no-untyped-def]
    """A source whose plan reads the clock (here through a view) is materialized once: two reads
    give the same stamp, and the statement's now() is that stamp."""
    from deltamerge.merge.current_time import pin_clock, source_reads_clock
    from deltamerge.predicates import to_sql
    from deltamerge.sql_frontend import parse_merge

    assert not source_reads_clock(spark, spark.range(3))
    spark.range(3).withColumn("ts", F.current_timestamp()).createOrReplaceTempView("clock_view")
    try:
        assert source_reads_clock(spark, spark.table("clock_view"))
        path = str(tmp_path / "t")
        deltamerge.write(spark.range(0, 3).withColumn("ts", F.lit(None).cast("timestamp")), path)
        parsed = parse_merge(
            spark,
            f"MERGE INTO delta.`{path}` t USING clock_view s ON s.id = t.id "
            "WHEN MATCHED AND s.ts = now() THEN UPDATE SET ts = s.ts",
        )
        assert parsed is not None
        pinned, source = pin_clock(spark, parsed[1])
    finally:
        spark.catalog.dropTempView("clock_view")
    assert source is not None and source.columns == ["id", "ts"]
    first = source.selectExpr("unix_micros(ts)").distinct().collect()
    again = source.selectExpr("unix_micros(ts)").distinct().collect()
    assert len(first) == 1 and first == again
    literal = re.findall(r"TIMESTAMP_MICROS\((\d+)\)", to_sql(pinned.clauses[0].condition).upper())
    assert literal == [str(first[0][0])]
