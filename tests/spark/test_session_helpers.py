"""The session-level helpers of ``deltamerge.spark.session`` that change how results travel."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

import deltamerge
from deltamerge.spark import session

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
    """``observed_text`` returns an observation's one string as is (here 20k numbers, ~110 KB);
    an empty input gives an empty string."""
    obs, empty = Observation("text_all"), Observation("text_none")
    df = spark.range(20_000).observe(obs, F.expr("array_join(collect_list(id * 3), ',') AS s"))
    df = df.observe(empty, F.expr("array_join(collect_list(CASE WHEN id < 0 THEN id END), ',') AS s"))
    df.write.format("noop").mode("overwrite").save()
    text = session.observed_text(obs)
    assert text is not None and [int(v) for v in text.split(",")] == [i * 3 for i in range(20_000)]
    assert session.observed_text(empty) == ""
