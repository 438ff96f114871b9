"""``format("delta")`` for ``spark.read`` and ``df.write``: ``deltamerge.configure(spark)``.

PySpark has no JVM ``delta`` data source here (no Delta jars), so the Python side intercepts:
``configure`` wraps ``load``/``table`` of ``DataFrameReader``, ``save``/``saveAsTable``/``insertInto``
of ``DataFrameWriter``, the actions of ``DataFrameWriterV2`` (``df.writeTo``: ``configure/writes_v2.py``),
``start``/``toTable`` of ``DataStreamWriter`` (the streaming sink: ``configure/streams.py``),
Spark 4's ``DataFrame.mergeInto`` (``configure/merge_into.py``) and ``spark.sql`` for Delta
statements (``configure/sql.py``: ``spark.sql("MERGE INTO ...")`` runs ``deltamerge.sql``), for
classic PySpark and for Spark Connect. When the chosen format is
``delta`` (case-insensitive, or ``spark.sql.sources.default`` is ``delta`` and no format was
chosen) they call deltamerge; any other format goes to PySpark's own method untouched.

Reads::

    spark.read.format("delta").load(path)                                   # latest
    spark.read.format("delta").option("versionAsOf", 3).load(path)          # time travel
    spark.read.format("delta").option("timestampAsOf", "2024-05-01").load(path)
    spark.read.format("delta").load(path + "@v3")                            # delta-spark's @ syntax
    spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", 1).option("endingVersion", 4).load(path)  # change data feed
    spark.read.table(name)      # names given with saveAsTable or deltamerge.register_table

Writes::

    df.write.format("delta").mode("overwrite").partitionBy("country").save(path)
    df.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    df.write.format("delta").mode("overwrite").option("replaceWhere", "day >= '2024-05-01'").save(path)
    df.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(path)
    df.write.format("delta").saveAsTable("events")   # under spark.sql.warehouse.dir, name registered
    df.write.insertInto("events", overwrite=False)   # by position, as INSERT INTO events SELECT ...

``replaceWhere`` and dynamic partition overwrite are one ``WRITE`` commit each (they run on the
MERGE machinery: rows to replace are deleted and the new rows inserted in one transaction, with
deletion vectors and change data files when the table has them enabled).

The interception is process-wide (PySpark's classes are patched), idempotent and thread-safe;
``configure(spark, enable=False)`` or ``unconfigure()`` restores PySpark's methods.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from deltamerge.configure.reads import wrap_load, wrap_session_table, wrap_table
from deltamerge.configure.replace import REPLACE_WHERE_CONSTRAINT_CHECK
from deltamerge.configure.state import (
    mirror_cluster_by,
    mirror_format,
    mirror_mode,
    mirror_option,
    mirror_options,
    mirror_partition_by,
    mirror_schema,
)
from deltamerge.configure.writes import (
    delta_save,
    delta_save_as_table,
    wrap_insert_into,
    wrap_save,
    wrap_save_as_table,
)

__all__ = [
    "REPLACE_WHERE_CONSTRAINT_CHECK",
    "configure",
    "delta_save",
    "delta_save_as_table",
    "is_configured",
    "unconfigure",
]

_LOCK = threading.RLock()
_ORIGINALS: dict[tuple[type, str], Callable[..., Any]] = {}
_MARK = "__deltamerge_wrapped__"


# --- public ----------------------------------------------------------------------------------------


def configure(spark: Any = None, enable: bool = True) -> Any:
    """Make ``format("delta")`` work on ``spark.read`` and ``df.write`` (classic and Spark Connect).

    Call once per process, before or after creating sessions; calling again is a no-op. Returns
    ``spark`` so it can wrap session creation. ``enable=False`` undoes it (as ``unconfigure()``).
    With a session, also applies the settings deltamerge writes with (INT64 Parquet timestamps).
    """
    if not enable:
        unconfigure()
        return spark
    with _LOCK:
        for cls, methods in _targets():
            for name, factory in methods.items():
                current = cls.__dict__.get(name)
                if current is None or getattr(current, _MARK, False):
                    continue
                _ORIGINALS[(cls, name)] = current
                wrapper = factory(current)
                setattr(wrapper, _MARK, True)
                setattr(cls, name, wrapper)
    if spark is not None:
        from deltamerge.spark.session import prepare_session

        prepare_session(spark)
    return spark


def unconfigure() -> None:
    """Restore PySpark's own reader and writer methods (``format("delta")`` stops working)."""
    with _LOCK:
        for (cls, name), original in list(_ORIGINALS.items()):
            if getattr(cls.__dict__.get(name), _MARK, False):
                setattr(cls, name, original)
            del _ORIGINALS[(cls, name)]


def is_configured() -> bool:
    """True while ``format("delta")`` is intercepted."""
    with _LOCK:
        return bool(_ORIGINALS)


# --- which methods -----------------------------------------------------------------------------------


def _targets() -> list[tuple[type, dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]]]]:
    from pyspark.sql import readwriter as classic
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    from pyspark.sql.session import SparkSession as ClassicSession
    from pyspark.sql.streaming import readwriter as classic_streams

    from deltamerge.configure.merge_into import wrap_merge_into
    from deltamerge.configure.sql import wrap_sql
    from deltamerge.configure.streams import STREAM_ACTIONS, STREAM_MIRRORS
    from deltamerge.configure.writes_v2 import V2_ACTIONS, V2_MIRRORS

    targets: list[tuple[type, dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]]]] = [
        (
            classic.DataFrameReader,
            {
                "format": mirror_format,
                "option": mirror_option,
                "options": mirror_options,
                "schema": mirror_schema,
                "load": wrap_load,
                "table": wrap_table,
            },
        ),
        (
            classic.DataFrameWriter,
            {
                "format": mirror_format,
                "option": mirror_option,
                "options": mirror_options,
                "mode": mirror_mode,
                "partitionBy": mirror_partition_by,
                "clusterBy": mirror_cluster_by,
                "save": wrap_save,
                "saveAsTable": wrap_save_as_table,
                "insertInto": wrap_insert_into,
            },
        ),
        (ClassicDataFrame, {"mergeInto": wrap_merge_into}),
        (classic.DataFrameWriterV2, {**V2_MIRRORS, **V2_ACTIONS}),
        (ClassicSession, {"sql": wrap_sql, "table": wrap_session_table}),
        (
            classic_streams.DataStreamWriter,
            {
                "format": mirror_format,
                "option": mirror_option,
                "options": mirror_options,
                "partitionBy": mirror_partition_by,
                **STREAM_MIRRORS,
                **STREAM_ACTIONS,
            },
        ),
    ]
    try:
        from pyspark.sql.connect import readwriter as connect
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
        from pyspark.sql.connect.session import SparkSession as ConnectSession
        from pyspark.sql.connect.streaming import readwriter as connect_streams
    except ImportError:  # pyspark without the connect extra: classic only
        return targets
    targets += [
        (connect.DataFrameReader, {"load": wrap_load, "table": wrap_table}),
        (
            connect.DataFrameWriter,
            {"save": wrap_save, "saveAsTable": wrap_save_as_table, "insertInto": wrap_insert_into},
        ),
        (ConnectDataFrame, {"mergeInto": wrap_merge_into}),
        (connect.DataFrameWriterV2, dict(V2_ACTIONS)),
        (ConnectSession, {"sql": wrap_sql}),
        (connect_streams.DataStreamWriter, dict(STREAM_ACTIONS)),
    ]
    return targets


# ``deltamerge.configure`` names both this module and the function: once the module is imported the
# package attribute is the module, so the module itself is made callable as ``configure``.
class _CallableModule(types.ModuleType):
    def __call__(self, spark: Any = None, enable: bool = True) -> Any:
        return configure(spark, enable)


sys.modules[__name__].__class__ = _CallableModule
