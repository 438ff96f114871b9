"""``df.writeStream.format("delta")`` (after ``deltamerge.configure``): Delta's streaming sink, one
``STREAMING UPDATE`` commit per micro-batch, idempotent across restarts by the query id."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

SCHEMA = "id long, v string, p string"


@pytest.fixture
def configured(spark):  # type: ignore[no-untyped-def]
    deltamerge.configure(spark)
    try:
        yield spark
    finally:
        deltamerge.unconfigure()


def _drop(spark, inbox: str, rows: list[tuple]) -> None:  # type: ignore[no-untyped-def]
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.mode("append").json(inbox)


def _rows(spark, path: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted((tuple(r) for r in deltamerge.read(spark, path).collect()), key=str)


def _run(query) -> None:  # type: ignore[no-untyped-def]
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def _stream(spark, inbox: str):  # type: ignore[no-untyped-def]
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(inbox)


def test_append_sink_commits_each_batch_once_across_restarts(configured, tmp_path: Path) -> None:
    spark = configured
    path, inbox, cp = str(tmp_path / "t"), str(tmp_path / "in"), str(tmp_path / "cp")
    _drop(spark, inbox, [(1, "a", "x"), (2, "b", "y")])
    _drop(spark, inbox, [(3, "c", "x")])

    def start():  # type: ignore[no-untyped-def]
        return (
            _stream(spark, inbox)
            .writeStream.format("delta")
            .partitionBy("p")
            .option("checkpointLocation", cp)
            .option("userMetadata", "ingest")
            .trigger(availableNow=True)
            .start(path)
        )

    _run(start())
    with open(os.path.join(cp, "metadata"), encoding="utf-8") as f:
        query_id = json.loads(f.readline())["id"]
    snap = DeltaLog.for_table(path).update()
    assert snap.metadata.partition_columns == ("p",)
    assert snap.app_versions[query_id] == 1
    assert _rows(spark, path) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")]
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    assert [h["operation"] for h in history] == ["STREAMING UPDATE", "STREAMING UPDATE"]
    assert [dict(h["operationParameters"]) for h in history] == [
        {"outputMode": "Append", "queryId": query_id, "epochId": str(e)} for e in (0, 1)
    ]
    assert {h["userMetadata"] for h in history} == {"ingest"}

    # A restart after the table commit but before Spark's own: Spark replays batch 1, the sink
    # skips it (its txn version is recorded), then batch 2 (a new file) lands once.
    for name in ("1", ".1.crc"):
        if os.path.exists(os.path.join(cp, "commits", name)):
            os.remove(os.path.join(cp, "commits", name))
    _drop(spark, inbox, [(4, "d", "y")])
    _run(start())
    snap = DeltaLog.for_table(path).update()
    assert snap.version == 2 and snap.app_versions[query_id] == 2
    assert _rows(spark, path) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "x"), (4, "d", "y")]
    # delta-rs reads the table the sink wrote
    from deltalake import DeltaTable as RsTable

    assert len(RsTable(path).to_pyarrow_table()) == 4


def test_complete_mode_replaces_the_table_and_merge_schema(configured, tmp_path: Path) -> None:
    spark = configured
    path, inbox = str(tmp_path / "t"), str(tmp_path / "in")
    _drop(spark, inbox, [(1, "a", "x"), (2, "b", "x"), (3, "c", "y")])
    counts = _stream(spark, inbox).groupBy("p").count()
    query = (
        counts.writeStream.format("delta")
        .outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "cp1"))
        .trigger(availableNow=True)
        .start(path)
    )
    _run(query)
    _drop(spark, inbox, [(4, "d", "y")])
    _run(
        counts.writeStream.format("delta")
        .outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "cp1"))
        .trigger(availableNow=True)
        .start(path)
    )
    assert _rows(spark, path) == [("x", 2), ("y", 2)]
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operationParameters"]["outputMode"] == "Complete"
    assert last["operationMetrics"]["numFiles"] is not None

    # mergeSchema: a stream with one more column adds it to the table (toTable on a registered name)
    deltamerge.register_table(spark, "stream_sink_target", path)
    try:
        wider = _stream(spark, inbox).selectExpr("p", "id AS count", "v AS note")
        _run(
            wider.writeStream.option("checkpointLocation", str(tmp_path / "cp2"))
            .option("mergeSchema", "true")
            .trigger(availableNow=True)
            .toTable("stream_sink_target", format="delta")
        )
    finally:
        deltamerge.unregister_table(spark, "stream_sink_target")
    assert deltamerge.read(spark, path).columns == ["p", "count", "note"]
    assert len(_rows(spark, path)) == 2 + 4


def test_to_table_creates_a_new_table(configured, tmp_path: Path) -> None:
    spark = configured
    inbox = str(tmp_path / "in")
    _drop(spark, inbox, [(1, "a", "x"), (2, "b", "y")])
    try:
        _run(
            _stream(spark, inbox)
            .writeStream.format("delta")
            .partitionBy("p")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .toTable("stream_new_table")
        )
        table = DeltaTable.forName(spark, "stream_new_table")
        assert sorted(tuple(r) for r in table.toDF().collect()) == [(1, "a", "x"), (2, "b", "y")]
        history = [r["operation"] for r in table.history().orderBy("version").collect()]
        assert history == ["CREATE TABLE", "STREAMING UPDATE"]
        assert table.detail().collect()[0]["partitionColumns"] == ["p"]
    finally:
        deltamerge.unregister_table(spark, "stream_new_table")


def test_refusals_before_the_query_starts(configured, tmp_path: Path) -> None:
    spark = configured
    inbox = str(tmp_path / "in")
    _drop(spark, inbox, [(1, "a", "x")])
    with pytest.raises(DeltaMergeError, match="CHECKPOINT_LOCATION_NOT_SPECIFIED"):
        _stream(spark, inbox).writeStream.format("delta").start(str(tmp_path / "t"))
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_OUTPUT_MODE"):
        (
            _stream(spark, inbox)
            .writeStream.format("delta")
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .start(str(tmp_path / "t"))
        )
    with pytest.raises(DeltaMergeError, match="DELTA_NULL_SCHEMA_IN_STREAMING_WRITE"):
        (
            _stream(spark, inbox)
            .selectExpr("id", "NULL AS nothing")
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .start(str(tmp_path / "t"))
        )
    assert not os.path.exists(tmp_path / "t")
    # other formats are Spark's own
    query = (
        _stream(spark, inbox)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "cp3"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "pq"))
    )
    _run(query)
    assert spark.read.parquet(str(tmp_path / "pq")).count() == 1
