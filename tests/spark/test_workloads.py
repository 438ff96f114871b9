"""The MERGE workloads users run, batch after batch, against DuckDB's MERGE INTO on the same data.

* CDC upsert: a change feed with inserts, updates and deletes, several changes per key in a batch,
  reduced to the latest change per key with a window, then applied (DV table with the change data
  feed on).
* SCD type 2: a dimension keeps every address a customer had; a changed address closes the current
  row and inserts a new one, through the staged-updates source (the union of the updates keyed by
  customer and, with a NULL key, the rows to insert) that reads the target itself.
* Deduplicating insert: an event log receives batches with retried (duplicate) events; an
  insert-only MERGE adds the new ones and rewrites nothing.
* Streaming CDC: Structured Streaming's foreachBatch runs an upsert per micro-batch, idempotent
  through Delta's txnAppId / txnVersion settings.

Each batch is generated from a fixed seed; after every batch the CDC and SCD tables must hold what
DuckDB's table holds after the same MERGE INTO, and the event log every distinct event once.
"""

from __future__ import annotations

import datetime as dt
import random

import duckdb
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1)


def _rows(spark, path: str, cols: list[str]) -> list[tuple]:
    return sorted((tuple(r) for r in deltamerge.read(spark, path).select(*cols).collect()), key=repr)


def _duck_rows(con, table: str, cols: list[str]) -> list[tuple]:
    return sorted(con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)


def _history(spark, path: str):
    return DeltaTable.forPath(spark, path).history(1).collect()[0]


# --- CDC upsert ------------------------------------------------------------------------------------

CUSTOMER = "id bigint, name string, city string, updated_at timestamp"
CUSTOMER_COLS = ["id", "name", "city", "updated_at"]
CHANGE = "id bigint, op string, name string, city string, ts timestamp"


def _changes(rng: random.Random, batch: int) -> list[tuple]:
    out = []
    for i in range(60):
        key = rng.randrange(0, 130)
        op = rng.choice("IUUD")
        ts = T0 + dt.timedelta(days=batch, seconds=i)  # distinct per key within a batch
        out.append((key, op, f"n{batch}_{i}", rng.choice(["Oslo", "Lima", "Pune", None]), ts))
    return out


def test_cdc_upsert_with_deletes_and_change_data_feed(spark, tmp_path) -> None:
    rng = random.Random(11)
    path = str(tmp_path / "customers")
    initial = [(i, f"c{i}", rng.choice(["Oslo", "Lima"]), T0 - dt.timedelta(days=1)) for i in range(100)]
    deltamerge.write(
        spark.createDataFrame(initial, CUSTOMER).repartition(3),
        path,
        configuration={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"},
    )
    con = duckdb.connect()
    con.execute(f"CREATE TABLE customers ({CUSTOMER.replace('bigint', 'BIGINT')})")
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", initial)
    latest = Window.partitionBy("id").orderBy(F.col("ts").desc())
    for batch in range(2):
        changes = _changes(rng, batch)
        source = (
            spark.createDataFrame(changes, CHANGE)
            .withColumn("rn", F.row_number().over(latest))
            .where("rn = 1")
            .drop("rn")
        )
        result = (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedDelete(condition="s.op = 'D'")
            .whenMatchedUpdate(
                condition="s.ts > t.updated_at",
                set={"name": "s.name", "city": "s.city", "updated_at": "s.ts"},
            )
            .whenNotMatchedInsert(
                condition="s.op != 'D'",
                values={"id": "s.id", "name": "s.name", "city": "s.city", "updated_at": "s.ts"},
            )
            .execute()
            .collect()[0]
        )
        con.execute(
            "CREATE OR REPLACE TABLE changes "
            "(id BIGINT, op VARCHAR, name VARCHAR, city VARCHAR, ts TIMESTAMP)"
        )
        con.executemany("INSERT INTO changes VALUES (?, ?, ?, ?, ?)", changes)
        con.execute(
            """MERGE INTO customers t
               USING (SELECT * FROM changes
                      QUALIFY row_number() OVER (PARTITION BY id ORDER BY ts DESC) = 1) s
               ON t.id = s.id
               WHEN MATCHED AND s.op = 'D' THEN DELETE
               WHEN MATCHED AND s.ts > t.updated_at
                 THEN UPDATE SET name = s.name, city = s.city, updated_at = s.ts
               WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT VALUES (s.id, s.name, s.city, s.ts)"""
        )
        assert _rows(spark, path, CUSTOMER_COLS) == _duck_rows(con, "customers", CUSTOMER_COLS), (
            f"batch {batch}"
        )
        # The change feed of the commit holds exactly the rows the result counts.
        version = _history(spark, path)["version"]
        kinds = {
            r["_change_type"]: r["count"]
            for r in deltamerge.read_changes(spark, path, version, version)
            .groupBy("_change_type")
            .count()
            .collect()
        }
        affected, updated, deleted, inserted = result
        assert affected == updated + deleted + inserted
        assert kinds.get("insert", 0) == inserted
        assert kinds.get("delete", 0) == deleted
        assert kinds.get("update_preimage", 0) == kinds.get("update_postimage", 0) == updated


# --- SCD type 2 ------------------------------------------------------------------------------------

DIM = "customer_id int, address string, is_current boolean, effective_date date, end_date date"
DIM_COLS = ["customer_id", "address", "is_current", "effective_date", "end_date"]
D0 = dt.date(2026, 1, 1)


def test_scd_type_2_history_through_staged_updates(spark, tmp_path) -> None:
    rng = random.Random(5)
    path = str(tmp_path / "dim")
    initial = [(i, f"street {i}", True, D0, None) for i in range(40)]
    deltamerge.write(spark.createDataFrame(initial, DIM).repartition(2), path, partition_by=["is_current"])
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE dim "
        "(customer_id INT, address VARCHAR, is_current BOOLEAN, effective_date DATE, end_date DATE)"
    )
    con.executemany("INSERT INTO dim VALUES (?, ?, ?, ?, ?)", initial)
    for batch in range(1, 4):
        day = D0 + dt.timedelta(days=30 * batch)
        keys = rng.sample(range(50), 15)  # some new customers, some unchanged addresses
        updates = [(k, f"street {k}" if rng.random() < 0.3 else f"avenue {k}.{batch}", day) for k in keys]
        upd = spark.createDataFrame(updates, "customer_id int, address string, effective_date date")
        current = deltamerge.read(spark, path).where("is_current")
        new_versions = (
            upd.alias("u")
            .join(current.alias("c"), "customer_id")
            .where("c.address <> u.address")
            .select(F.lit(None).cast("int").alias("merge_key"), "u.*")
        )
        staged = new_versions.unionByName(upd.select(F.col("customer_id").alias("merge_key"), "*"))
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(staged.alias("s"), "t.customer_id = s.merge_key")
            .whenMatchedUpdate(
                condition="t.is_current = true AND t.address <> s.address",
                set={"is_current": "false", "end_date": "s.effective_date"},
            )
            .whenNotMatchedInsert(
                values={
                    "customer_id": "s.customer_id",
                    "address": "s.address",
                    "is_current": "true",
                    "effective_date": "s.effective_date",
                    "end_date": "null",
                }
            )
            .execute()
        )
        con.execute("CREATE OR REPLACE TABLE upd (customer_id INT, address VARCHAR, effective_date DATE)")
        con.executemany("INSERT INTO upd VALUES (?, ?, ?)", updates)
        con.execute(
            """MERGE INTO dim t
               USING (
                 SELECT NULL::INT AS merge_key, u.* FROM upd u JOIN dim c
                   ON u.customer_id = c.customer_id AND c.is_current AND c.address <> u.address
                 UNION ALL SELECT customer_id AS merge_key, * FROM upd
               ) s
               ON t.customer_id = s.merge_key
               WHEN MATCHED AND t.is_current AND t.address <> s.address
                 THEN UPDATE SET is_current = false, end_date = s.effective_date
               WHEN NOT MATCHED
                 THEN INSERT VALUES (s.customer_id, s.address, true, s.effective_date, NULL)"""
        )
        got = _rows(spark, path, DIM_COLS)
        assert got == _duck_rows(con, "dim", DIM_COLS), f"batch {batch}"
        current_ids = [r[0] for r in got if r[2]]
        assert len(current_ids) == len(set(current_ids)), "one current row per customer"
        assert _history(spark, path)["operation"] == "MERGE"


# --- Deduplicating insert --------------------------------------------------------------------------

EVENT = "event_id string, user_id int, ts timestamp, payload string"
EVENT_COLS = ["event_id", "user_id", "ts", "payload"]


def _events(start: int, n: int) -> list[tuple]:
    return [(f"e{i}", i % 17, T0 + dt.timedelta(minutes=i), f"p{i}") for i in range(start, start + n)]


def test_deduplicating_insert_rewrites_nothing(spark, tmp_path) -> None:
    rng = random.Random(3)
    path = str(tmp_path / "events")
    initial = _events(0, 80)
    deltamerge.write(spark.createDataFrame(initial, EVENT).repartition(2), path)
    seen = {r[0]: r for r in initial}
    for batch in range(3):
        fresh = _events(80 + 40 * batch, 40)
        retried = rng.sample(list(seen.values()), 15)
        rows = fresh + retried + rng.sample(fresh, 10)  # duplicates within the batch too
        rng.shuffle(rows)
        source = spark.createDataFrame(rows, EVENT).dropDuplicates(["event_id"])
        result = (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.event_id = s.event_id")
            .whenNotMatchedInsertAll()
            .execute()
            .collect()[0]
        )
        assert tuple(result) == (40, 0, 0, 40), f"batch {batch}"
        metrics = _history(spark, path)["operationMetrics"]
        assert metrics["numTargetFilesRemoved"] == "0" and metrics["numTargetRowsCopied"] == "0"
        seen.update({r[0]: r for r in fresh})
        assert _rows(spark, path, EVENT_COLS) == sorted(seen.values(), key=repr)


# --- Streaming CDC: MERGE in foreachBatch ----------------------------------------------------------


def test_streaming_upsert_in_foreach_batch_is_idempotent(spark, tmp_path) -> None:
    """Structured Streaming's foreachBatch hands each micro-batch to a MERGE; Delta's idempotent-write
    settings (txnAppId, txnVersion = the batch id) make a replayed batch a no-op."""
    path, inbox = str(tmp_path / "t"), str(tmp_path / "in")
    deltamerge.write(spark.createDataFrame([(i, "init") for i in range(5)], "id long, v string"), path)
    for b in range(2):  # one file per micro-batch
        rows = [(i, f"b{b}") for i in range(b * 3, b * 3 + 5)]
        spark.createDataFrame(rows, "id long, v string").coalesce(1).write.mode("append").json(inbox)

    def upsert(batch, batch_id: int) -> None:
        batch.sparkSession.conf.set("spark.databricks.delta.write.txnAppId", "cdc-stream")
        batch.sparkSession.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (
                DeltaTable.forPath(batch.sparkSession, path)
                .alias("t")
                .merge(batch.alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        finally:
            batch.sparkSession.conf.unset("spark.databricks.delta.write.txnAppId")
            batch.sparkSession.conf.unset("spark.databricks.delta.write.txnVersion")

    query = (
        spark.readStream.schema("id long, v string")
        .option("maxFilesPerTrigger", 1)
        .json(inbox)
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    expected = sorted({**dict.fromkeys(range(5), "b0"), **dict.fromkeys(range(3, 8), "b1")}.items())
    assert _rows(spark, path, ["id", "v"]) == expected
    table = DeltaTable.forPath(spark, path)
    assert table.version() == 2
    # The second micro-batch replayed (a restart after the commit, before the checkpoint): skipped.
    replay = spark.read.schema("id long, v string").json(inbox).where("v = 'b1'")
    upsert(replay.withColumn("v", F.lit("replayed")), 1)
    assert table.version() == 2 and _rows(spark, path, ["id", "v"]) == expected


# --- parallel pipelines on one session ----------------------------------------------------------


def _pipeline(spark, path: str, table: int) -> tuple[list[tuple], list[tuple]]:
    """Two merges into one table (an upsert, then CDC clauses by an op column): their results and
    the table's rows."""
    results = []
    for batch in range(2):
        lo = 90 * (table + 1) - 30 * (batch + 1)
        source = spark.range(lo, lo + 40 + 10 * table).selectExpr(
            "id", f"CAST(id * 3 + {batch} AS INT) AS v", "CASE WHEN id % 5 = 0 THEN 'D' ELSE 'U' END AS op"
        )
        merge = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
        if batch:
            merge = (
                merge.whenMatchedDelete("s.op = 'D'")
                .whenMatchedUpdate(set={"v": "s.v"})
                .whenNotMatchedInsert("s.op <> 'D'", values={"id": "s.id", "v": "s.v", "op": "s.op"})
            )
        else:
            merge = merge.whenMatchedUpdateAll().whenNotMatchedInsertAll()
        results.append(tuple(merge.execute().collect()[0]))
    return results, sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_pipelines_in_threads_on_one_session(spark, tmp_path, dv) -> None:
    """Users merge into several tables at once from a thread pool sharing one SparkSession: each
    table ends as it does when its merges run alone, with the same counters (observed metrics,
    background writes and the settings merges change for a block do not cross between threads;
    the session's settings are checked after every test by conftest)."""
    from concurrent.futures import ThreadPoolExecutor

    configuration = {"delta.enableDeletionVectors": "true"} if dv else None

    def make(root: str, table: int) -> str:
        path = str(tmp_path / root / f"t{table}")
        rows = spark.range(0, 90 * (table + 1), numPartitions=3).selectExpr(
            "id", "CAST(id % 7 AS INT) AS v", "'x' AS op"
        )
        deltamerge.write(rows, path, configuration=configuration)
        return path

    alone = {t: _pipeline(spark, make("alone", t), t) for t in range(3)}
    paths = {t: make("threads", t) for t in range(3)}
    with ThreadPoolExecutor(3) as pool:
        futures = {t: pool.submit(_pipeline, spark, paths[t], t) for t in range(3)}
        together = {t: f.result() for t, f in futures.items()}
    assert together == alone
    assert alone[2][0][1][2] > 0  # the CDC merge deleted rows


def test_threads_merging_disjoint_partitions_of_one_table_all_commit(spark, tmp_path) -> None:
    """Three threads of one session upsert into their own partition of one table (the partition in
    the ON condition), twice each: no conflict, every merge commits, the rows are the last batch's."""
    from concurrent.futures import ThreadPoolExecutor

    path = str(tmp_path / "t")
    rows = spark.range(0, 300).selectExpr("id", "CAST(id % 7 AS INT) AS v", "CAST(id % 3 AS STRING) AS p")
    deltamerge.write(rows, path, partition_by=["p"])

    def upserts(part: int) -> list[tuple]:
        out = []
        for batch in range(2):
            source = (
                spark.range(0, 400)
                .where(f"id % 3 = {part}")
                .selectExpr("id", f"CAST(id + {batch} AS INT) AS v", "CAST(id % 3 AS STRING) AS p")
            )
            merge = (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(source.alias("s"), f"t.id = s.id AND t.p = '{part}'")
            )
            out.append(tuple(merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0]))
        return out

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(upserts, range(3)))
    assert [r[1] for r in results] == [(134, 134, 0, 0), (133, 133, 0, 0), (133, 133, 0, 0)]
    assert sum(r[0][3] for r in results) == 100  # ids 300..399 inserted once
    assert DeltaTable.forPath(spark, path).history().count() == 7
    assert sorted((r.id, r.v) for r in deltamerge.read(spark, path).collect()) == [
        (i, i + 1) for i in range(400)
    ]
