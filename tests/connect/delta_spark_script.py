"""A delta-spark user's script, run unchanged but for two lines (marked ``# was:``).

Used by tests/spark/test_delta_spark_dropin.py (classic) and
tests/connect/test_delta_spark_dropin_connect.py (Spark Connect). ``run`` returns the list of steps it
could not run (UPDATE/DELETE before ``DeltaTable.update``/``delete`` exist), so the caller can skip
with a reason after everything else was checked.
"""

from __future__ import annotations

import shutil
import uuid
from collections import Counter

from pyspark.sql.functions import col, expr, lit

import deltamerge
from deltamerge import DeltaTable  # was: from delta.tables import DeltaTable


def run(spark, base_dir: str) -> list[str]:
    deltamerge.configure(spark)  # was: configure_spark_with_delta_pip(builder) / the Delta extension
    skipped: list[str] = []
    path = f"{base_dir}/events"

    # Create, with the change data feed on for new tables.
    spark.conf.set("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "true")
    try:
        data = spark.range(0, 5).selectExpr("cast(id as int) id", "cast(id * 10 as int) value", "'v0' tag")
        data.write.format("delta").save(path)
    finally:
        spark.conf.unset("spark.databricks.delta.properties.defaults.enableChangeDataFeed")
    assert DeltaTable.isDeltaTable(spark, path)
    assert spark.read.format("delta").load(path).count() == 5
    assert DeltaTable.forPath(spark, path, hadoopConf={"fs.s3a.connection.maximum": "8"}).toDF().count() == 5

    # Append (version 1).
    more = spark.range(5, 7).selectExpr("cast(id as int) id", "cast(id * 10 as int) value", "'v1' tag")
    more.write.format("delta").mode("append").save(path)

    # MERGE with every clause kind (version 2).
    deltaTable = DeltaTable.forPath(spark, path)  # the delta-spark docs' spelling
    updates = spark.createDataFrame(
        [(0, -1, "del"), (1, 111, "upd"), (2, 222, "all"), (7, 700, "ins"), (8, 800, "new")],
        "id int, value int, tag string",
    )
    (
        deltaTable.alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.tag = 'del'")
        .whenMatchedUpdate(condition="s.tag = 'upd'", set={"value": "s.value", "tag": lit("updated")})
        .whenMatchedUpdateAll()
        .whenNotMatchedInsert(
            condition="s.tag = 'ins'", values={"id": "s.id", "value": "s.value", "tag": "'inserted'"}
        )
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceUpdate(condition="t.id = 6", set={"tag": "'orphan'"})
        .whenNotMatchedBySourceDelete(condition=col("t.id") == 5)
        .execute()
    )
    expected = {
        1: (111, "updated"), 2: (222, "all"), 3: (30, "v0"), 4: (40, "v0"),
        6: (60, "orphan"), 7: (700, "inserted"), 8: (800, "new"),
    }  # fmt: skip
    operations = ["WRITE", "WRITE", "MERGE"]
    cdf = Counter({
        (2, "delete"): 2, (2, "update_preimage"): 3, (2, "update_postimage"): 3, (2, "insert"): 2,
    })  # fmt: skip

    # UPDATE (version 3) and DELETE (version 4).
    if hasattr(DeltaTable, "update") and hasattr(DeltaTable, "delete"):
        deltaTable.update(condition=expr("id % 2 = 0"), set={"value": expr("value + 1")})
        deltaTable.delete(col("tag") == "v0")
        for k in (2, 4, 6, 8):
            expected[k] = (expected[k][0] + 1, expected[k][1])
        del expected[3], expected[4]
        operations += ["UPDATE", "DELETE"]
        cdf.update({(3, "update_preimage"): 4, (3, "update_postimage"): 4, (4, "delete"): 2})
    else:
        skipped.append("DeltaTable.update/delete (not available yet)")

    current = spark.read.format("delta").load(path)
    assert sorted(tuple(r) for r in current.collect()) == sorted((k, *v) for k, v in expected.items())

    # History.
    history = deltaTable.history().select("version", "operation").orderBy("version").collect()
    assert [r.operation for r in history] == operations
    assert deltaTable.history(1).collect()[0].operation == operations[-1]

    # Time travel: by version and by timestamp.
    assert spark.read.format("delta").option("versionAsOf", 1).load(path).count() == 7
    ts = deltaTable.history().where("version = 2").selectExpr("cast(timestamp as string)").first()[0]
    assert spark.read.format("delta").option("timestampAsOf", ts).load(path).count() == 7

    # Change data feed.
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 2)
        .load(path)
    )
    got = Counter((r["_commit_version"], r["_change_type"]) for r in changes.collect())
    assert got == cdf, got
    first = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
    assert first.option("endingVersion", 0).load(path).count() == 5

    # The table by name, as spark.read.table / SQL users reach it.
    name = f"dropin_events_{uuid.uuid4().hex[:8]}"  # unique: test runs may share the warehouse
    data.write.format("delta").mode("overwrite").saveAsTable(name)
    try:
        assert spark.read.table(name).count() == 5
        assert spark.sql(f"SELECT count(*) FROM {name} WHERE tag = 'v0'").first()[0] == 5
        DeltaTable.forName(spark, name).alias("t").merge(
            updates.alias("s"), "t.id = s.id"
        ).whenNotMatchedInsertAll().execute()
        assert spark.table(name).count() == 7
    finally:
        location = deltamerge.catalog.path_for_name(name)
        deltamerge.unregister_table(spark, name)
        if location:
            shutil.rmtree(location, ignore_errors=True)
    return skipped
