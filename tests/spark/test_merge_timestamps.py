"""One clock reading per MERGE (Delta's MergeIntoTimestampConsistencySuite): ``now()`` in the ON
condition, clause conditions and assigned values equals ``current_timestamp()`` computed in the
source, although deltamerge runs the merge as several Spark queries."""

from __future__ import annotations

import json

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


def test_clock_in_statement_only_is_one_instant(spark, tmp_path):  # type: ignore[no-untyped-def]
    """No clock in the source: the driver's instant, the same in every job (copy-on-write runs
    two), and the source is not materialized for it."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 6).withColumn("ts", F.lit(None).cast("timestamp")).repartition(3), path)
    src = spark.range(0, 6).withColumn("ts", F.lit(None).cast("timestamp"))
    row = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "s.id = t.id")
        .whenMatchedUpdate(set={"ts": "now()"})
        .whenNotMatchedInsert(values={"id": "s.id", "ts": "now()"})
        .execute()
        .collect()[0]
    )
    assert row.num_updated_rows == 6
    assert deltamerge.read(spark, path).select("ts").distinct().count() == 1
