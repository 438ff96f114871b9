"""The session-level helpers of ``deltamerge.spark.session`` that change how results travel."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

import deltamerge
from deltamerge.spark import session
from py4j_trips import round_trips

pytestmark = pytest.mark.spark


def _py4j_sockets(spark):
    jvm = spark.sparkContext._jvm
    field = jvm.java.lang.Class.forName("py4j.GatewayServer").getDeclaredField("connections")
    field.setAccessible(True)
    live = field.get(spark.sparkContext._gateway.java_gateway_server)
    connections = jvm.java.util.ArrayList(live)  # a copy: an ending thread removes its own
    sockets = [connections.get(i).getSocket() for i in range(connections.size())]
    return [s for s in sockets if not s.isClosed()]


def test_quick_replies_turns_off_nagle_on_every_py4j_socket(spark, tmp_path):
    """A read, a write or a merge leaves every py4j socket of the session with TCP_NODELAY, also
    the connection a new Python thread opens; replies over 8 KiB still arrive whole."""
    for sock in _py4j_sockets(spark):
        sock.setTcpNoDelay(False)
    session._QUICK_THREADS.clear()
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3), path)
    assert all(s.getTcpNoDelay() for s in _py4j_sockets(spark))

    before = {s.getPort() for s in _py4j_sockets(spark)}  # the Python end's port: one per connection
    opened: list = []

    def in_thread() -> None:  # py4j pins a connection per thread (closed when the thread ends)
        assert deltamerge.read(spark, path).count() == 3
        opened.extend(s.getTcpNoDelay() for s in _py4j_sockets(spark) if s.getPort() not in before)

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert opened and all(opened), "the thread's own py4j connection kept Nagle's algorithm"
    big = spark.sparkContext._jvm.org.apache.commons.lang3.StringUtils.repeat("ab", 50_000)
    assert big == "ab" * 50_000


def test_observed_text_reads_a_joined_list(spark):
    """``observed_text`` returns an observation's one string as is (here 20k numbers, ~110 KB, in
    the order the partitions' lists were merged, which Spark does not fix); an empty input gives
    an empty string."""
    obs, empty = Observation("text_all"), Observation("text_none")
    df = spark.range(20_000).observe(obs, F.expr("array_join(collect_list(id * 3), ',') AS s"))
    df = df.observe(empty, F.expr("array_join(collect_list(CASE WHEN id < 0 THEN id END), ',') AS s"))
    df.write.format("noop").mode("overwrite").save()
    text = session.observed_text(obs)
    assert text is not None and sorted(int(v) for v in text.split(",")) == [i * 3 for i in range(20_000)]
    assert session.observed_text(empty) == ""


def test_listed_metric_reads_back_as_text(spark):
    """``listed_metric`` observes the bare list on a classic session (no ``array_join`` in the
    query) and ``observed_text`` joins it on the JVM: the same text as the joined list; a list of
    nothing gives an empty string, a NULL list None."""
    obs, empty = Observation("listed_all"), Observation("listed_none")
    metric = session.listed_metric(spark, "CASE WHEN id % 3 <> 0 THEN id * 2 END", "v")
    assert "array_join" not in str(metric)
    df = spark.range(20_000).observe(obs, metric)
    df = df.observe(empty, session.listed_metric(spark, "CASE WHEN id < 0 THEN id END", "v"))
    df.write.format("noop").mode("overwrite").save()
    text = session.observed_text(obs)
    expected = [i * 2 for i in range(20_000) if i % 3]
    assert text is not None and sorted(int(v) for v in text.split(",")) == expected
    assert session.observed_text(empty) == ""
    nothing = Observation("listed_null")
    spark.range(3).observe(nothing, F.expr("CAST(NULL AS ARRAY<BIGINT>) AS v"), F.count("id")).collect()
    assert session.observed_text(nothing) is None


@pytest.mark.parametrize("row_api", [True, False], ids=["getRow", "spark-4.0-map"])
def test_observations_read_alike_with_and_without_get_row(spark, monkeypatch, row_api):
    """Spark 4.0's Observation has no ``getRow``: values come from its name -> value map, written
    as JSON on the JVM, after the listener bus has delivered them. Both ways read numbers, lists and
    text alike; an observation Spark dropped (its subtree optimised away) reads as nothing instead of
    waiting forever."""
    if not row_api:
        monkeypatch.setattr(session, "_HAS_GET_ROW", False)
    values, listed, dropped = Observation("v"), Observation("l"), Observation("d")
    df = spark.range(10).observe(values, F.count("id").alias("n"), F.expr("collect_set(id % 3) AS s"))
    df = df.observe(listed, session.listed_metric(spark, "id * 2", "v"))
    df.write.format("noop").mode("overwrite").save()
    got = session.observed_values(values)
    assert got["n"] == 10 and sorted(got["s"]) == [0, 1, 2]
    assert sorted(int(v) for v in (session.observed_text(listed) or "").split(",")) == list(range(0, 20, 2))
    empty = spark.range(5).observe(dropped, F.count("id").alias("n")).limit(0)
    empty.write.format("noop").mode("overwrite").save()
    assert session.observed_values(dropped) in ({}, {"n": 0})
    assert session.observed_text(dropped) in (None, "0")


def test_entry_points_build_plans_without_recording_call_sites(spark, tmp_path, monkeypatch):
    """PySpark records the Python call site of every Column function (five py4j round trips each on
    a classic session). deltamerge's write, merge, delete, update and read turn that off while they
    build their plans, and put PySpark's setting back after, also when nested, in threads, and when
    the operation fails; the user's own Column calls outside keep their call sites."""
    import os
    import traceback

    import pyspark.errors.utils as origin

    package = os.path.dirname(deltamerge.__file__)
    recorded: list[bool] = []  # per recorded call site: was deltamerge's code on the stack?
    real = origin._capture_call_site

    def spy(depth: int) -> str:
        recorded.append(any(f.filename.startswith(package) for f in traceback.extract_stack()))
        return real(depth)

    monkeypatch.setattr(origin, "_capture_call_site", spy)
    monkeypatch.setattr(origin, "_enable_debugging_cache", True)  # PySpark's default, as evaluated

    path = str(tmp_path / "t")
    src = spark.range(6).select("id", (F.col("id") * 10).alias("v"))
    deltamerge.write(src, path, configuration={"delta.enableDeletionVectors": "true"})
    table = deltamerge.DeltaTable.forPath(spark, path)
    source = spark.range(3, 9).select("id", F.lit(-1).cast("long").alias("v"))
    recorded.clear()
    table.alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    table.delete("id = 1")
    table.update("id = 2", {"v": "0"})
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(0, 0), (2, 0), (3, -1), (4, -1), (5, -1), (6, -1), (7, -1), (8, -1)]
    assert not any(recorded)
    assert origin._enable_debugging_cache is True

    F.col("x")  # outside deltamerge the recording is on again
    assert recorded

    # Nested and from several threads: the setting comes back once the last one leaves.
    errors: list[BaseException] = []

    def nested() -> None:
        try:
            with session.without_call_sites(), session.without_call_sites():
                assert origin._enable_debugging_cache is False
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=nested) for _ in range(4)]
    with session.without_call_sites():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert origin._enable_debugging_cache is False
    assert not errors and origin._enable_debugging_cache is True

    with pytest.raises(deltamerge.DeltaMergeError):  # a failing merge restores it too
        table.alias("t").merge(source.alias("s"), "t.nope = s.id").whenMatchedDelete().execute()
    assert origin._enable_debugging_cache is True


def test_many_file_paths_reach_the_reader_in_a_few_round_trips(spark, tmp_path, monkeypatch):
    """A scan of 40 files at a path with glob, space, percent and non-ASCII characters reads every
    row, and the file list costs a fixed number of py4j round trips (PySpark's own list conversion
    is one per path: a merge into 2,000 files spent 2,011 of them, ~0.6 s)."""
    from deltamerge.spark import scan

    path = str(tmp_path / "d [x]{1} 50% é'q")
    deltamerge.write(spark.range(400).repartition(40), path)
    dt = deltamerge.DeltaTable.forPath(spark, path)
    built: list[tuple[int, int]] = []
    real_read = session.read_parquet_files

    def spy(spark_, reader, paths):  # type: ignore[no-untyped-def]
        with round_trips() as calls:
            df = real_read(spark_, reader, paths)
        built.append((len(paths), len(calls)))
        return df

    monkeypatch.setattr(scan, "read_parquet_files", spy)
    assert sorted(r[0] for r in deltamerge.read(spark, path).collect()) == list(range(400))
    src = spark.range(390, 410).selectExpr("id", "id * 10 AS v")
    dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedDelete().whenNotMatchedInsert(
        values={"id": "s.id"}
    ).execute()
    assert sorted(r[0] for r in deltamerge.read(spark, path).collect()) == list(range(390)) + list(
        range(400, 410)
    )
    # The reads scan 40 files, the merge the files the source's keys may match (33 here): 8 round
    # trips each, where PySpark's conversion costs one more per path.
    many = [n for n, _ in built if n > 16]
    assert len(many) >= 2 and many[0] == 40, built
    assert all(trips <= 10 for n, trips in built if n > 16), built


def test_temporary_settings_overlapping_in_two_threads(spark):
    """Blocks opened by two threads on one session (a write beside job 1): the latest open block's
    value holds, and when the last closes the value from before the first is back, whatever the
    order they close in."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    for closing_first in ("outer", "inner"):
        outer_open, inner_open, close_outer, outer_closed = (threading.Event() for _ in range(4))
        seen: dict[str, str] = {}

        def outer(opened: threading.Event, close: threading.Event, closed: threading.Event) -> None:
            with session.temporary_settings(spark, {key: "7"}):
                opened.set()
                close.wait(30)
            closed.set()

        thread = threading.Thread(target=outer, args=(outer_open, close_outer, outer_closed))
        thread.start()
        assert outer_open.wait(30)
        with session.temporary_settings(spark, {key: "9"}):
            inner_open.set()
            seen["both open"] = spark.conf.get(key)
            if closing_first == "outer":
                close_outer.set()
                assert outer_closed.wait(30)
                seen["inner alone"] = spark.conf.get(key)
        if closing_first == "inner":
            seen["outer alone"] = spark.conf.get(key)
            close_outer.set()
            assert outer_closed.wait(30)
        thread.join(30)
        assert seen["both open"] == "9"
        assert seen.get("inner alone", "9") == "9" and seen.get("outer alone", "7") == "7"
        assert spark.conf.get(key) == before


def test_settings_snapshot_reads_once_and_sees_its_own_changes(spark, tmp_path, monkeypatch):
    """Inside ``settings_snapshot`` settings come from one read (Spark Connect: one round trip
    instead of one per setting); ``temporary_settings`` inside it are seen while they last; the
    next merge reads the session again."""
    key = "spark.deltamerge.test.snapshotProbe"
    get = session.conf_getter(spark)
    spark.conf.set(key, "a")
    try:
        with session.settings_snapshot(spark):
            reads = []
            real = spark.conf.get
            monkeypatch.setattr(type(spark.conf), "get", lambda self, *a: reads.append(a) or real(*a))
            assert get(key) == "a" and get("spark.deltamerge.test.unset") is None
            with session.temporary_settings(spark, {key: "b"}, on_connect=True):
                assert get(key) == "b"
            assert get(key) == "a"
            monkeypatch.undo()
            assert [a for a in reads if a and a[0] == key] == [(key, None)]  # temporary_settings' own
        spark.conf.set(key, "c")
        assert get(key) == "c"
        path = str(tmp_path / "t")
        deltamerge.write(spark.range(4).selectExpr("id"), path)
        table = deltamerge.DeltaTable.forPath(spark, path)
        spark.conf.set("spark.databricks.delta.history.metricsEnabled", "false")
        table.alias("t").merge(spark.range(2).alias("s"), "t.id = s.id").whenMatchedDelete().execute()
        assert table.history(1).collect()[0]["operationMetrics"] in (None, {})
        spark.conf.unset("spark.databricks.delta.history.metricsEnabled")
        table.alias("t").merge(spark.range(3).alias("s"), "t.id = s.id").whenMatchedDelete().execute()
        assert table.history(1).collect()[0]["operationMetrics"]["numTargetRowsDeleted"] == "1"
    finally:
        spark.conf.unset(key)
        spark.conf.unset("spark.databricks.delta.history.metricsEnabled")
