"""Session-level helpers: settings lookup, Classic vs Connect, job descriptions per MERGE phase.

Nothing here touches table data. Spark Connect sessions have no SparkContext, so everything that
Classic does through the context has a Connect fallback (job tags instead of descriptions).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import pyarrow as pa
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import IllegalArgumentException
from pyspark.sql import Column, DataFrame, DataFrameReader, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from deltamerge.config import SessionConf, Setting
from deltamerge.log import table_config

_F = TypeVar("_F", bound=Callable[..., Any])

# PySpark 4 records the Python call site of every Column and DataFrame function for its "DataFrame
# query context" in error messages (``spark.python.sql.dataFrameDebugging.enabled``). On a classic
# session that costs five py4j round trips per call (~3 ms here, against ~0.5 ms for the same
# expression as SQL text): a MERGE into a small table with deletion vectors made 1,736 round trips,
# ~700 of them for this. The call sites inside deltamerge name deltamerge's own lines, which tell
# a user nothing, so deltamerge's entry points turn the recording off while they build their plans.
# PySpark keeps the setting in a module-level cache; nesting and threads are counted so that the
# last one out restores it. Other threads building DataFrames meanwhile lose only the call sites in
# their error messages. Without that cache (another PySpark version) nothing changes.
_CALL_SITES_LOCK = threading.Lock()
_CALL_SITES_DEPTH = 0
_CALL_SITES_SAVED: bool | None = None


@contextlib.contextmanager
def without_call_sites() -> Iterator[None]:
    """Build DataFrames without PySpark recording the Python call site of each function call."""
    global _CALL_SITES_DEPTH, _CALL_SITES_SAVED
    try:
        import pyspark.errors.utils as origin
    except ImportError:  # pragma: no cover - every supported PySpark has the module
        yield
        return
    if not hasattr(origin, "_enable_debugging_cache"):
        yield
        return
    with _CALL_SITES_LOCK:
        if _CALL_SITES_DEPTH == 0:
            _CALL_SITES_SAVED = origin._enable_debugging_cache
        _CALL_SITES_DEPTH += 1
        origin._enable_debugging_cache = False  # type: ignore[assignment]
    try:
        yield
    finally:
        with _CALL_SITES_LOCK:
            _CALL_SITES_DEPTH -= 1
            if _CALL_SITES_DEPTH == 0:
                origin._enable_debugging_cache = _CALL_SITES_SAVED  # type: ignore[assignment]
                _CALL_SITES_SAVED = None


def internal_plan(func: _F) -> _F:
    """Decorator: run ``func`` under :func:`without_call_sites` (deltamerge's entry points)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with without_call_sites():
            return func(*args, **kwargs)

    return cast(_F, wrapper)


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def analyzed_plan_text(df: DataFrame) -> str:
    """The analysed logical plan of ``df`` as Spark prints it (classic or Connect)."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        text = df._explain_string(extended=True)  # type: ignore[attr-defined,operator]
        text = text.split("== Analyzed Logical Plan ==", 1)[-1]
        text = text.split("== Optimized Logical Plan ==", 1)[0].strip("\n")
        return text.split("\n", 1)[1] if "\n" in text else ""  # the first line is the output schema
    return str(df._jdf.queryExecution().analyzed().toString())  # type: ignore[attr-defined]


_SNAPSHOT = threading.local()  # .session, .values: settings_snapshot's session and its settings


def _session_key(spark: SparkSession) -> object:
    # One session may come as several Python objects (``df.sparkSession`` on Connect).
    if is_connect(spark):
        return ("connect", spark.session_id)  # type: ignore[attr-defined]
    return ("classic", id(spark._jsparkSession))  # type: ignore[attr-defined]


def _snapshot(spark: SparkSession) -> dict[str, str] | None:
    values: dict[str, str] | None = getattr(_SNAPSHOT, "values", None)
    if values is None or _SNAPSHOT.session != _session_key(spark):
        return None
    return values


@contextlib.contextmanager
def settings_snapshot(spark: SparkSession) -> Iterator[None]:
    """Within the block (one command, in this thread), ``conf_getter`` and ``setting`` answer from
    one read of every session setting: on Spark Connect each ``spark.conf.get`` is a round trip,
    ~45 of them per merge (~0.15 s). An unset key reads as None either way; settings the block
    changes through ``temporary_settings`` are seen."""
    if _snapshot(spark) is not None:
        yield
        return
    try:
        values = all_settings(spark)
    except Exception:  # read them one by one, as without the block
        yield
        return
    before = getattr(_SNAPSHOT, "session", None), getattr(_SNAPSHOT, "values", None)
    _SNAPSHOT.session, _SNAPSHOT.values = _session_key(spark), values
    try:
        yield
    finally:
        _SNAPSHOT.session, _SNAPSHOT.values = before


def conf_getter(spark: SparkSession) -> Callable[[str], str | None]:
    """A ``key -> value | None`` function over the session's runtime settings."""

    def get(key: str) -> str | None:
        snapshot = _snapshot(spark)
        if snapshot is not None:
            return snapshot.get(key)
        try:
            value = spark.conf.get(key, None)
        except Exception:  # an unset static conf on some versions raises instead of returning None
            return None
        return None if value is None else str(value)

    return get


def _allow_arbitrary(spark: SparkSession) -> bool:
    return bool(SessionConf.ALLOW_ARBITRARY_PROPERTIES.get(conf_getter(spark)))


def table_property_defaults(spark: SparkSession) -> dict[str, str]:
    """Delta's session defaults for the properties of new tables
    (``spark.databricks.delta.properties.defaults.<key>`` -> ``delta.<key>``), checked as Delta
    checks them (log/table_config.py)."""
    try:
        settings = all_settings(spark)
    except Exception:
        return {}
    return table_config.session_defaults(settings, allow_arbitrary=_allow_arbitrary(spark))


_SEP = "\u0000"


def all_settings(spark: SparkSession) -> dict[str, str]:
    """Every runtime setting of the session (``spark.conf.getAll``).

    On a classic session ``spark.conf.getAll`` walks the JVM map through py4j, two round trips per
    entry and a converted exception at its end (~35 ms for a few dozen settings, paid by every
    table creation); the keys and the values each come joined in one string here instead. A
    separator inside a key or value (the counts disagree) falls back to the walk."""
    if not is_connect(spark):
        jmap = spark._jsparkSession.conf().getAll()  # type: ignore[attr-defined]
        size = int(jmap.size())
        keys = str(jmap.keys().mkString(_SEP)).split(_SEP) if size else []
        values = str(jmap.values().mkString(_SEP)).split(_SEP) if size else []
        if len(keys) == len(values) == size:
            return dict(zip(keys, values, strict=True))
    return {str(k): str(v) for k, v in dict(spark.conf.getAll).items()}


def user_properties(spark: SparkSession, props: Mapping[str, Any] | None) -> dict[str, str]:
    """Table properties a user gave (CREATE, SET TBLPROPERTIES, writer options, CLONE), checked and
    spelled as Delta stores them: ``DELTA_UNKNOWN_CONFIGURATION`` for an unknown ``delta.*`` key
    unless ``spark.databricks.delta.allowArbitraryProperties.enabled``. Python booleans become
    ``true`` / ``false``."""
    given = {
        k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in (props or {}).items()
    }
    return table_config.validate(given, allow_arbitrary=_allow_arbitrary(spark)) if given else {}


def setting(spark: SparkSession, s: Setting):  # type: ignore[no-untyped-def]
    """Read one typed setting from the session."""
    return s.get(conf_getter(spark))


def local_frame(spark: SparkSession, rows: Sequence[tuple], schema: StructType) -> DataFrame:
    """A small DataFrame of driver-side values (a result row, a file list) as a local relation.

    Built from Arrow: reading it runs no Spark job. A Python list goes through an RDD in Classic
    mode, and collecting that is a job of its own (~0.1 s, most of a small merge's result step).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    columns = [[row[i] for row in rows] for i in range(len(schema.fields))]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema, strict=True)]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=arrow_schema), schema)  # type: ignore[call-overload]


def read_parquet_files(spark: SparkSession, reader: DataFrameReader, paths: Sequence[str]) -> DataFrame:
    """``reader.parquet(*paths)`` in a fixed number of Python->JVM round trips.

    Classic PySpark hands a list of paths to the JVM one element per round trip: a scan of 2,000
    files cost 2,011 of them, ~0.6 s per merge. Here the paths travel as one text, split in the
    JVM into the ``String[]`` of the reader's varargs method (NUL separates them: no path holds
    it). Connect sends the list in one message anyway.
    """
    jreader = getattr(reader, "_jreader", None)
    if jreader is None or len(paths) <= 16 or is_connect(spark) or any("\x00" in p for p in paths):
        return reader.parquet(*paths)
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    array = jvm.java.util.regex.Pattern.compile("\\x00").split("\x00".join(paths))
    return reader._df(jreader.parquet(array))  # type: ignore[attr-defined]


def observed_values(obs: Observation) -> dict[str, Any]:
    """The values of an observation (blocks until its query has run).

    Classic sessions read the row as JSON text: PySpark's ``Observation.get`` pickles it and py4j
    decodes the bytes one at a time in Python, which for a list of 40k row positions takes about
    twice as long.
    """
    jo = getattr(obs, "_jo", None)
    if jo is None:
        return {
            k.removesuffix(_JSON): json.loads(v) if k.endswith(_JSON) and isinstance(v, str) else v
            for k, v in obs.get.items()
        }
    row = _observed_row(jo)
    if row is not None:
        try:
            values = json.loads(row.json())
        except (Py4JJavaError, IllegalArgumentException):
            # A dropped observation (its subtree optimised away) has an empty row without a schema;
            # asked only here, so a delivered one costs no round trip more.
            if row.length():
                raise
            values = {}
    else:
        scala_map = _observed_map(obs, jo)
        values = {} if scala_map is None else json.loads(_map_json(obs, scala_map))
    return values if isinstance(values, dict) else {}


# False once the JVM's Observation proved to have no getRow (Spark 4.0; 4.1+ has it).
_HAS_GET_ROW = True


def _observed_row(jo: Any) -> Any:
    """The observation's Row, or None on Spark 4.0, whose Observation has only the name -> value map."""
    global _HAS_GET_ROW
    if _HAS_GET_ROW:
        try:
            return jo.getRow()
        except Py4JError as e:
            if isinstance(e, Py4JJavaError) or "getRow" not in str(e):
                raise
            _HAS_GET_ROW = False
    return None


def _observed_map(obs: Observation, jo: Any) -> Any:
    """Spark 4.0: the observation's name -> value map, or None when Spark dropped it (the optimizer
    removed the observed subtree). Spark 4.0 hands the metrics over from its listener bus after
    the query returns, and never for a dropped observation, where ``get`` would wait forever: so
    wait for the bus to deliver what the finished query posted, then look."""
    future = jo.future()
    if not future.isCompleted():
        jvm: Any = getattr(obs, "_jvm", None)
        jvm.org.apache.spark.SparkContext.getOrCreate().listenerBus().waitUntilEmpty()
        if not future.isCompleted():
            return None
    return jo.get()


def _map_json(obs: Observation, scala_map: Any) -> str:
    """A Scala map of observed values (numbers, strings, Seqs) as JSON text, written on the JVM."""
    jvm: Any = getattr(obs, "_jvm", None)
    mapper = jvm.com.fasterxml.jackson.databind.ObjectMapper()
    mapper.registerModule(jvm.com.fasterxml.jackson.module.scala.DefaultScalaModule())
    return str(mapper.writeValueAsString(scala_map))


_JSON = "__json"


def array_metric(spark: SparkSession, agg_sql: str, alias: str) -> Column:
    """An observed metric with an array value (``collect_set(...)``), read by ``observed_values``.

    Spark 4.0's Connect server cannot send an observed array (UnsupportedOperationException once
    the query has run), so on Connect the array travels as JSON text and is decoded on arrival."""
    if is_connect(spark):
        return F.expr(f"to_json({agg_sql}) AS {alias}{_JSON}")
    return F.expr(f"{agg_sql} AS {alias}")


def listed_metric(spark: SparkSession, values_sql: str, alias: str) -> Column:
    """An observed metric listing the non-null ``values_sql`` of every row, for ``observed_text``.

    A classic session observes the bare list and joins it on the JVM (``observed_text``): Spark's
    ``array_join`` renders each element as a string in the query's final step. For 400k row
    positions written beside a 500k-row write: 0.62 s against 0.79 s (0.42 s without the list).
    Spark Connect has no JVM at hand, so its server joins the text."""
    listed = f"collect_list({values_sql})"
    return F.expr(f"array_join({listed}, ',') AS {alias}" if is_connect(spark) else f"{listed} AS {alias}")


def observed_text(obs: Observation) -> str | None:
    """The one value of an observation as text (blocks until its query has run): a string, or a
    ``listed_metric`` list joined with commas.

    A classic session reads the text on the JVM side and brings it over as one string, which is
    several times faster than rendering the list as JSON (50k numbers: ~11 ms as text, against
    ~48 ms for a JSON row holding the list and the text).
    """
    jo = getattr(obs, "_jo", None)
    if jo is None:
        values = list(obs.get.values())
        return None if not values or values[0] is None else str(values[0])
    row = _observed_row(jo)
    if row is not None:
        if row.length() == 0 or row.isNullAt(0):
            return None
        value = row.get(0)
    else:
        scala_map = _observed_map(obs, jo)
        value = None if scala_map is None or scala_map.isEmpty() else scala_map.values().head()
        if value is None:
            return None
    return value if isinstance(value, str) else str(value.mkString(","))


def case_sensitive(spark: SparkSession) -> bool:
    """``spark.sql.caseSensitive``."""
    return (conf_getter(spark)("spark.sql.caseSensitive") or "false").lower() == "true"


def session_time_zone(spark: SparkSession) -> str:
    """``spark.sql.session.timeZone``."""
    return conf_getter(spark)("spark.sql.session.timeZone") or "UTC"


_QUICK_THREADS: set[tuple[int, int]] = set()


def quick_replies(spark: SparkSession) -> None:
    """Classic sessions: turn off Nagle's algorithm on the JVM's end of the py4j sockets.

    py4j writes a reply longer than its 8 KiB buffer in pieces. With Nagle's algorithm the JVM holds
    the last piece until Python acknowledges the first, and Linux delays that acknowledgement by
    40 ms: any reply over 8 KiB (an observed list of row positions, a wide schema) took 44 ms, a
    one-row ``collect()`` ~50 ms instead of ~23. Latency only: nothing else about the socket
    changes. Done once per Python thread (py4j pins one connection per thread); errors are ignored.
    """
    if is_connect(spark):
        return
    sc = getattr(spark, "sparkContext", None)
    gateway = getattr(sc, "_gateway", None)
    key = (id(gateway), threading.get_ident())
    if gateway is None or key in _QUICK_THREADS:
        return
    _QUICK_THREADS.add(key)
    with contextlib.suppress(Exception):
        jvm = gateway.jvm
        field = jvm.java.lang.Class.forName("py4j.GatewayServer").getDeclaredField("connections")
        field.setAccessible(True)
        # A copy: a thread that ends removes its connection meanwhile, and indexing the live list
        # then failed half-way and left the later sockets with Nagle's algorithm on.
        connections = jvm.java.util.ArrayList(field.get(gateway.java_gateway_server))
        for i in range(connections.size()):
            with contextlib.suppress(Exception):  # a socket closed meanwhile: skip just that one
                sock = connections.get(i).getSocket()
                if not sock.isClosed() and not sock.getTcpNoDelay():
                    sock.setTcpNoDelay(True)


def prepare_session(spark: SparkSession) -> None:
    """Settings deltamerge needs for interoperable files: INT64 timestamps instead of legacy INT96.

    delta-rs and Trino read INT96, but only INT64 timestamps carry Parquet min/max statistics,
    which data skipping needs.
    """
    get = conf_getter(spark)
    if (get("spark.sql.parquet.outputTimestampType") or "INT96").upper() == "INT96":
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


_TAG_CLEAN = re.compile(r"[^A-Za-z0-9_.-]+")

PhaseListener = Callable[[str, bool], None]
_PHASE_LISTENERS: list[PhaseListener] = []


@contextlib.contextmanager
def phase_listener(listener: PhaseListener) -> Iterator[None]:
    """Call ``listener(description, started)`` when a ``job_phase`` starts and ends, in any thread
    (progress displays, e.g. the CLI's; works on Classic and Connect alike)."""
    _PHASE_LISTENERS.append(listener)
    try:
        yield
    finally:
        _PHASE_LISTENERS.remove(listener)


def _notify(description: str, started: bool) -> None:
    for listener in list(_PHASE_LISTENERS):
        with contextlib.suppress(Exception):  # a display must never break the operation
            listener(description, started)


@contextlib.contextmanager
def job_phase(spark: SparkSession, description: str) -> Iterator[None]:
    """Run the body's Spark jobs under a description visible in the Spark UI (a tag on Connect)."""
    _notify(description, True)
    try:
        with _describe_jobs(spark, description):
            yield
    finally:
        _notify(description, False)


@contextlib.contextmanager
def _describe_jobs(spark: SparkSession, description: str) -> Iterator[None]:
    if is_connect(spark):
        tag = _TAG_CLEAN.sub("_", description)[:100] or "deltamerge"
        spark.addTag(tag)
        try:
            yield
        finally:
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(description)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", previous)  # type: ignore[arg-type]


# Blocks of ``temporary_settings`` open per (session, key): each block's token and value, in the
# order they were opened, after the value before the first of them. A merge's threads (a write
# beside job 1) open overlapping blocks on one session; each restoring "its" previous value left
# the other's value behind (adaptive execution off after the merge).
_OPEN_SETTINGS: dict[tuple[int, str], tuple[str | None, list[tuple[object, str]]]] = {}
_OPEN_SETTINGS_LOCK = threading.Lock()


@contextlib.contextmanager
def temporary_settings(
    spark: SparkSession, settings: Mapping[str, str], *, on_connect: bool = False
) -> Iterator[None]:
    """Set session settings for the duration of a block and restore (or unset) them after.
    Classic sessions only unless ``on_connect`` (settings that change what is written, not only
    the speed): on Connect each setting costs a round trip.

    Safe across threads: while blocks on the same session and key overlap, the last one opened
    sets the value; when one closes the latest still open sets it again, and when the last
    closes the value before the first comes back."""
    if is_connect(spark) and not on_connect:
        yield
        return
    conf = spark.conf
    token = object()
    with _OPEN_SETTINGS_LOCK:
        for k, v in settings.items():
            key = (id(spark), k)
            if key not in _OPEN_SETTINGS:
                _OPEN_SETTINGS[key] = (conf.get(k, None), [])
            _OPEN_SETTINGS[key][1].append((token, v))
            conf.set(k, v)
            _snapshot_set(spark, k, v)
    try:
        yield
    finally:
        with _OPEN_SETTINGS_LOCK:
            for k in settings:
                key = (id(spark), k)
                before, open_blocks = _OPEN_SETTINGS[key]
                open_blocks[:] = [b for b in open_blocks if b[0] is not token]
                if open_blocks:
                    conf.set(k, open_blocks[-1][1])
                    _snapshot_set(spark, k, open_blocks[-1][1])
                    continue
                del _OPEN_SETTINGS[key]
                if before is None:
                    conf.unset(k)
                else:
                    conf.set(k, before)
                _snapshot_set(spark, k, before)


def _snapshot_set(spark: SparkSession, key: str, value: str | None) -> None:
    snapshot = _snapshot(spark)
    if snapshot is not None:
        if value is None:
            snapshot.pop(key, None)
        else:
            snapshot[key] = str(value)


_SIZE_UNITS = {u: 1 << (10 * i) for i, u in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"))}
_STATISTICS = re.compile(r"Statistics\(sizeInBytes=([0-9.E+]+) ?([KMGTPE]?i?B)")


def estimated_size_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of ``df``'s plan (without CBO: the input files' bytes through
    filters and projections, an upper bound rather than a guess); None when unknown."""
    try:
        if is_connect(df.sparkSession):
            text = df._explain_string(mode="cost")  # type: ignore[attr-defined,operator]
            m = _STATISTICS.search(text)
            return None if m is None else int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
        # The analysed plan is already there (no optimiser run): its estimate scales the input's
        # bytes by the projected columns' share, like the optimised plan's before any filter.
        return int(df._jdf.queryExecution().analyzed().stats().sizeInBytes())  # type: ignore[attr-defined]
    except Exception:  # an estimate is an optimisation only: no estimate, no shortcut
        return None


@contextlib.contextmanager
def small_result_query(spark: SparkSession) -> Iterator[None]:
    """Run an aggregation whose result is a handful of rows (per-file or per-bucket summaries)
    without adaptive execution: AQE submits every shuffle stage as a job of its own and plans
    again between them, which costs more than these stages take. Without AQE's coalescing, the
    shuffle uses one partition per core (at most the session's setting): one wave of reduce tasks
    (4 partitions on 2 cores cost ~25 ms more per summary than 2). Classic
    sessions only (there a setting is a local call; on Connect each costs a round trip).
    """
    if is_connect(spark):
        yield
        return
    try:
        configured = int(spark.conf.get("spark.sql.shuffle.partitions", None) or 200)
    except ValueError:
        configured = 200
    partitions = max(1, min(configured, spark.sparkContext.defaultParallelism))
    settings = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}
    with temporary_settings(spark, settings):
        yield


@contextlib.contextmanager
def without_adaptive(spark: SparkSession) -> Iterator[None]:
    """Run a query whose joins are all broadcasts without adaptive execution: with no shuffle AQE
    has nothing to re-plan, but it would still submit every broadcast as a job of its own and plan
    again after them; without it Spark builds the broadcasts concurrently as the query starts.
    Classic sessions only (on Connect each setting costs a round trip)."""
    with temporary_settings(spark, {"spark.sql.adaptive.enabled": "false"}):
        yield


def idempotent_skip(spark: SparkSession, txn: Any, options: Any = None) -> bool:
    """Delta's idempotent writes for ``txn`` (an ``OptimisticTransaction``): True when the table has
    already seen this (txnAppId, txnVersion) — the caller commits nothing; otherwise the commit will
    record them. Writer ``options`` win over the session settings; with
    ``spark.databricks.delta.write.txnVersion.autoReset.enabled`` a version taken from the session
    is unset once used, so a forgotten setting cannot skip the next batch's writes."""
    from deltamerge.txn.idempotency import idempotency

    get = conf_getter(spark)
    found = idempotency(get, options)
    if found is None:
        return False
    app_id, version, from_session = found
    seen = txn.read_app_version(app_id)
    skip = seen is not None and seen >= version
    if not skip:
        txn.set_app_transaction(app_id, version)
    if from_session and SessionConf.TXN_AUTO_RESET.get(get):
        spark.conf.unset(SessionConf.TXN_VERSION.key)
    return skip
