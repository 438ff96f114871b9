"""Shared fixtures: one session-scoped local SparkSession for every Spark test."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py and tests/property helpers
warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*")

from spark_settings import interpreted_settings  # noqa: E402  (tests/, on sys.path now)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        # one warehouse per test process: pytest-xdist workers must not share managed tables
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .appName("deltamerge-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # PySpark records the call site of every Column call of the tests' own code (five py4j round
        # trips each; deltamerge's entry points turn it off for themselves: spark/session.py, tested
        # with it on in test_session_helpers.py). The tests build thousands of columns.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    for key, value in interpreted_settings().items():
        builder = builder.config(key, value)
    # DELTAMERGE_TEST_TABLE_DEFAULTS="columnMapping.mode=name,..." runs the suite with Delta's
    # defaults for new tables (e.g. every table column-mapped), a check of the features' reach.
    for item in filter(None, os.environ.get("DELTAMERGE_TEST_TABLE_DEFAULTS", "").split(",")):
        key, _, value = item.partition("=")
        builder = builder.config(f"spark.databricks.delta.properties.defaults.{key.strip()}", value.strip())
    # DELTAMERGE_TEST_SPARK_CONF="key=value,..." adds session settings (e.g. to time the suite under
    # other JVM or planner settings).
    for item in filter(None, os.environ.get("DELTAMERGE_TEST_SPARK_CONF", "").split(",")):
        key, _, value = item.partition("=")
        builder = builder.config(key.strip(), value.strip())
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# Settings deltamerge changes for a block of its own (spark/session.py ``temporary_settings``); a
# merge must leave them as it found them.
_BLOCK_SETTINGS = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")


@pytest.fixture(autouse=True)
def _session_settings_kept(request):
    """Every test using the shared session leaves the settings deltamerge changes for a block as
    they were (a write beside job 1 once left adaptive execution off for the rest of the session)."""
    if "spark" not in request.fixturenames:
        yield
        return
    spark = request.getfixturevalue("spark")
    before = {k: spark.conf.get(k, None) for k in _BLOCK_SETTINGS}
    yield
    after = {k: spark.conf.get(k, None) for k in _BLOCK_SETTINGS}
    if after != before:
        for k, v in before.items():  # the next tests start from the session's settings again
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
        pytest.fail(f"session settings changed by the test: {before} -> {after}")


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


@pytest.fixture(scope="module")
def dspark(spark):
    """``spark`` with ``deltamerge.configure`` applied (``format("delta")``, Delta SQL through
    ``spark.sql``) for one test module."""
    import deltamerge

    deltamerge.configure(spark)
    yield spark
    deltamerge.unconfigure()


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

from pyspark.logger import PySparkLogger  # noqa: E402

# PySpark logs every analysis error with its full JVM stack; expected-error tests would drown CI's output.
# PySpark's own logger class: a plain logging.Logger under these names breaks its exception() calls.
for _name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
    PySparkLogger.getLogger(_name).setLevel(logging.CRITICAL)


# --- Delta suite ports: a fixed share in `make test`, all with `make test-delta-ports` --------------
#
# tests/spark/test_merge_*_delta.py port Delta Lake's own MERGE suites (~1000 items, each a few Spark
# jobs). Run whole they would triple `make test`; the CI budget is 20 minutes. So `make test` runs
# every DELTA_PORTS_STRIDE-th item of each file (the same items every run; the first of each file
# included) and `make test-delta-ports` (DELTAMERGE_DELTA_PORTS=all) runs them all.

DELTA_PORTS_STRIDE = 80
# tests/spark/test_*_py_delta.py port delta-spark's Python suites (API-level, ~60 items of a
# second or two): `make test` runs every third.
PY_PORTS_STRIDE = 3


def _delta_port_stride() -> int:
    value = os.environ.get("DELTAMERGE_DELTA_PORTS", "")
    if value.lower() == "all":
        return 1
    return int(value) if value.isdigit() and int(value) > 0 else DELTA_PORTS_STRIDE


# Files of few but long tests, started first: `make test` runs with `--dist loadfile
# --no-loadscope-reorder`, so files are handed out in the order below. xdist's default order (most
# items first) left the generated differential test (one item, ~4 minutes) to the end, where it ran
# alone on one worker while the other sat idle.
LONG_FILES_FIRST = (
    "test_deltamerge_differential.py",
    "test_reliability_stress.py",
    "test_connect_subprocess.py",
    "test_reliability_crash.py",
)


def _schedule_order(items: list[pytest.Item]) -> None:
    """Long files first, then the others by item count (largest first), each file's items together."""
    count: dict[str, int] = {}
    for item in items:
        count[str(item.path)] = count.get(str(item.path), 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = os.path.basename(str(item.path))
        if name in LONG_FILES_FIRST:
            return (LONG_FILES_FIRST.index(name), 0)
        return (len(LONG_FILES_FIRST), -count[str(item.path)])

    items.sort(key=rank)  # stable: a file's items keep their order


# --- Sampled matrices -------------------------------------------------------------------------------
#
# Some tests run one check over a matrix (execution variants x table modes x clause sets). Items
# marked `sampled` run a fixed pseudo-random 1/SAMPLED_STRIDE of their test function's marked items
# in `make test`, chosen by a hash of the item id (the same items every run; at least one per
# function; a cow/dv pair keeps dv in some functions and cow in others); DELTAMERGE_SAMPLED=all
# (`make test-full`) runs every one. `@pytest.mark.sampled(stride=3)`: a smaller matrix, of which
# `make test` runs exactly a third (rounded up), the items with the lowest hashes.

SAMPLED_STRIDE = 16


def _sampled_stride() -> int:
    value = os.environ.get("DELTAMERGE_SAMPLED", "")
    if value.lower() == "all":
        return 1
    return int(value) if value.isdigit() and int(value) > 0 else SAMPLED_STRIDE


def _share(item: pytest.Item, port_stride: int, sampled_stride: int) -> tuple[str, int] | None:
    """The group an item is counted in and the stride of that group; None when it always runs."""
    name = os.path.basename(str(item.path))
    if name.startswith("test_merge_") and name.endswith("_delta.py"):
        return name, port_stride
    if name.endswith("_py_delta.py"):
        return name, 1 if port_stride == 1 else PY_PORTS_STRIDE
    marker = item.get_closest_marker("sampled")
    if marker is not None:
        group = f"{item.path}::{getattr(item, 'originalname', item.name)}"
        if sampled_stride != 1 and "stride" in marker.kwargs:
            return f"{group}#exact", int(marker.kwargs["stride"])
        return group, sampled_stride
    return None


def _hash(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    port_stride, sampled_stride = _delta_port_stride(), _sampled_stride()
    seen: dict[str, int] = {}
    chosen: dict[str, bool] = {}
    matrices: dict[str, list[pytest.Item]] = {}
    strides: dict[str, int] = {}
    for item in items:
        share = _share(item, port_stride, sampled_stride)
        if share is None:
            continue
        group, stride = share
        if group.endswith(".py"):  # a Delta port file: plain stride
            index = seen.get(group, 0)
            seen[group] = index + 1
            chosen[item.nodeid] = index % stride == 0
        else:
            chosen[item.nodeid] = stride == 1 or _hash(item.nodeid) % stride == 0
            matrices.setdefault(group, []).append(item)
            strides[group] = stride
    for group, members in matrices.items():
        if group.endswith("#exact"):  # a small matrix: exactly ceil(n / stride) items, by hash
            ranked = sorted(members, key=lambda m: _hash(m.nodeid))
            for k, m in enumerate(ranked):
                chosen[m.nodeid] = k < -(-len(members) // strides[group])
        elif not any(chosen[m.nodeid] for m in members):  # every matrix keeps at least one item
            chosen[min(members, key=lambda m: _hash(m.nodeid)).nodeid] = True
    keep = [i for i in items if chosen.get(i.nodeid, True)]
    drop = [i for i in items if not chosen.get(i.nodeid, True)]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _schedule_order(items)
