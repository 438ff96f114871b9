"""Spark Connect fixtures: ``connect_spark``, a session-scoped ``SparkSession.builder.remote("local[2]")``.

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
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Static settings reach the local server at start-up; the Connect session then warns that it
    # cannot set them at runtime.
    config.addinivalue_line("filterwarnings", "ignore:Failed to set spark:UserWarning")
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


@pytest.fixture(scope="session")
def connect_spark():
    """A Spark Connect session on a local server started in this process."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None and os.environ.get("SPARK_LOCAL_REMOTE") != "1":
        pytest.skip("a classic SparkContext runs in this process; run tests/connect on its own")
    session = (
        SparkSession.builder.remote("local[2]")
        .appName("deltamerge-connect-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .getOrCreate()
    )
    assert type(session).__module__.startswith("pyspark.sql.connect")
    SparkContext._active_spark_context.setLogLevel("ERROR")  # the local server's context
    yield session
    session.stop()
