"""Spark Connect fixtures: ``connect_spark``, a session-scoped Connect session on a local server.

A Connect session and a classic session cannot share one Python process: PySpark picks the
implementation of ``pyspark.sql.functions`` (and so of every ``F.col`` deltamerge and the tests
build) process-wide, from the ``SPARK_CONNECT_MODE_ENABLED`` environment variable that a Connect
session sets; classic DataFrames then receive Connect Columns and fail, and the other way round.

So when the test run also contains classic tests, the tests in this directory are skipped in that
process and ``test_connect_subprocess.py`` runs them in a child pytest (bounded in time) instead.
When only this directory is collected (``pytest tests/connect``) they run in-process. The child
run is marked by ``DELTAMERGE_CONNECT_TESTS=inprocess``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore:.*pandas >= 3.0.0:FutureWarning")


HERE = Path(__file__).resolve().parent
ENV = "DELTAMERGE_CONNECT_TESTS"
RUNNER = "test_connect_subprocess.py"


def _in_here(item: pytest.Item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents


def _inprocess(items: list[pytest.Item]) -> bool:
    if os.environ.get(ENV) == "inprocess":
        return True
    if os.environ.get(ENV) == "subprocess":
        return False
    return all(_in_here(i) for i in items)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    inprocess = _inprocess(items)
    for item in items:
        if not _in_here(item):
            continue
        is_runner = Path(str(item.path)).name == RUNNER
        if inprocess and is_runner:
            item.add_marker(pytest.mark.skip(reason="the Connect tests run in this process"))
        elif not inprocess and not is_runner:
            item.add_marker(
                pytest.mark.skip(
                    reason="runs in the Connect child process (tests/connect/test_connect_subprocess.py): "
                    "a classic session shares this process"
                )
            )


CONFIGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def start_local_connect(configs: dict[str, str]):  # type: ignore[no-untyped-def]
    """A Spark Connect session on a local server started in this process on a free port.

    What ``SparkSession.builder.remote("local[2]")`` does, except that the server binds an
    ephemeral port on the loopback interface instead of the fixed 15002 (which another process on
    the machine may hold, and whose server the client would then silently use).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession as ClassicSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    # Python workers the server starts (the streaming sink's foreachBatch) use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = SparkConf().setMaster("local[2]").setAppName("deltamerge-connect-tests")
    conf.setAll(list(configs.items()))
    conf.set("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", "0")
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    server = ClassicSession(sc)
    service = getattr(server._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    port = getattr(service, "MODULE$").localPort()
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql.functions now build Connect Columns
    return ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()


@pytest.fixture(scope="session")
def connect_spark():
    """A Spark Connect session on a local server started in this process."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        pytest.skip("a classic SparkContext runs in this process; run tests/connect on its own")
    from spark_settings import interpreted_settings  # tests/ (on sys.path: tests/conftest.py)

    session = start_local_connect({**CONFIGS, **interpreted_settings()})
    assert type(session).__module__.startswith("pyspark.sql.connect")
    yield session
    session.stop()
