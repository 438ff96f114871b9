"""Shared fixtures: one session-scoped local SparkSession for every Spark test."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py and tests/property helpers
warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*")


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("deltamerge-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_conf(spark):
    """``spark_conf({key: value, ...})`` sets session confs for one test; they are restored after it."""
    saved: dict[str, str | None] = {}

    def set_conf(values: dict[str, str]) -> None:
        for key, value in values.items():
            saved.setdefault(key, spark.conf.get(key, None))
            spark.conf.set(key, value)

    yield set_conf
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture
def table_path(tmp_path):
    return str(tmp_path / "table")


@pytest.fixture
def drop_stats():
    """A function that removes the statistics from the add actions of a table's first commit, as if
    a writer that collects none had written it."""
    import json

    from deltamerge.log.snapshot import DeltaLog

    def drop(path: str) -> None:
        log_file = os.path.join(path, "_delta_log", f"{0:020d}.json")
        with open(log_file) as f:
            lines = [json.loads(line) for line in f]
        for a in lines:
            if "add" in a:
                a["add"].pop("stats", None)
        with open(log_file, "w") as out:
            out.write("\n".join(json.dumps(a) for a in lines) + "\n")
        DeltaLog.clear_cache()

    return drop


import logging  # noqa: E402

# PySpark logs every analysis error with its full JVM stack; expected-error tests would drown CI's output.
for _name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)
