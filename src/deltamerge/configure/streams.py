"""``df.writeStream.format("delta")``: Delta's streaming sink (``DeltaSink``) over ``foreachBatch``.

Each micro-batch is one ``STREAMING UPDATE`` commit (``outputMode``, ``queryId``, ``epochId``) of
``deltamerge.write``: an append, or in ``complete`` output mode a replacement of every file. The
commit records ``txn(appId = the query id, version = the batch id)``, so a batch Spark replays after a
restart (committed to the table, not yet to the checkpoint) is skipped, as Delta's sink does. The
query id is the one Spark keeps in the checkpoint (``<checkpointLocation>/metadata``), the same
across restarts. Options: ``mergeSchema`` (new columns join the table), ``overwriteSchema`` (complete
mode only), ``userMetadata``, partitioning with ``partitionBy`` on the first write; ``start(path)``
and ``toTable(name)`` (``delta.`/path```, a registered name, or a new one: created first with the
stream's schema, as Spark's ``toTable``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

from deltamerge.catalog import session_name, unqualified
from deltamerge.configure.state import (
    _FMT,
    _OPTS,
    _PARTS,
    _is_connect,
    bool_option,
    deltamerge_table,
    is_delta,
    single_path,
)
from deltamerge.errors import AnalysisError, InvalidArgumentError

__all__ = ["STREAM_ACTIONS", "STREAM_MIRRORS", "delta_sink"]

_OUTPUT_MODE = "_dm_output_mode"
_QUERY_NAME = "_dm_query_name"
_TRIGGER = "_dm_trigger"


def _record(key: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def method(self: Any, value: Any) -> Any:
            self.__dict__[key] = value
            return original(self, value)

        return method

    return wrap


def _state(writer: Any) -> tuple[str | None, dict[str, str], str, list[str], str | None]:
    """(format, options as spelled, output mode, partition columns, query name) of a stream writer."""
    if _is_connect(writer):
        proto = writer._write_proto
        return (
            proto.format or None,
            dict(proto.options),
            proto.output_mode or "append",
            list(proto.partitioning_column_names),
            proto.query_name or None,
        )
    d = writer.__dict__
    return (
        d.get(_FMT),
        dict(d.get(_OPTS) or {}),
        str(d.get(_OUTPUT_MODE) or "append"),
        list(d.get(_PARTS) or []),
        d.get(_QUERY_NAME),
    )


def _session(writer: Any) -> Any:
    return writer._session if _is_connect(writer) else writer._df.sparkSession


def _frame(writer: Any) -> Any:
    """The streaming DataFrame a stream writer writes."""
    if _is_connect(writer):
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

        return ConnectDataFrame(writer._write_stream._child, writer._session)
    return writer._df


def _checkpoint(spark: Any, opts: dict[str, str], query_name: str | None) -> str:
    from deltamerge.spark.session import conf_getter

    lower = {k.lower(): v for k, v in opts.items()}
    location = lower.get("checkpointlocation")
    if location:
        return location
    root = conf_getter(spark)("spark.sql.streaming.checkpointLocation")
    if root and query_name:
        return os.path.join(root, query_name)
    raise AnalysisError(
        'checkpointLocation must be specified either through option("checkpointLocation", ...) or '
        'SparkSession.conf.set("spark.sql.streaming.checkpointLocation", ...) with a queryName: the '
        "Delta sink needs it to make replayed micro-batches idempotent.",
        error_class="CHECKPOINT_LOCATION_NOT_SPECIFIED",
        sql_state="42000",
    )


def _query_id(checkpoint: str) -> str:
    """The streaming query's id, as Spark wrote it into the checkpoint when the query started."""
    local = checkpoint[len("file:") :] if checkpoint.startswith("file:") else checkpoint
    with open(os.path.join(local, "metadata"), encoding="utf-8") as f:
        return str(json.loads(f.readline())["id"])


def _check_no_null_type(schema: Any) -> None:
    from pyspark.sql.types import NullType, StructType

    def has_null(t: Any) -> bool:
        if isinstance(t, NullType):
            return True
        if isinstance(t, StructType):
            return any(has_null(f.dataType) for f in t.fields)
        return any(has_null(getattr(t, a)) for a in ("elementType", "keyType", "valueType") if hasattr(t, a))

    if has_null(schema):
        raise AnalysisError(
            "Delta doesn't accept NullTypes in the schema for streaming writes.",
            error_class="DELTA_NULL_SCHEMA_IN_STREAMING_WRITE",
            sql_state="42P18",
        )


def delta_sink(
    path: str, output_mode: str, options: dict[str, str], partition_by: list[str], checkpoint: str
) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function that commits each micro-batch to the Delta table at ``path``."""
    mode = output_mode.strip().lower()
    if mode not in ("append", "complete"):
        raise InvalidArgumentError(
            f"Data source delta does not support {output_mode} output mode; use append or complete.",
            error_class="DELTA_UNSUPPORTED_OUTPUT_MODE",
        )
    lower = {k.lower(): v for k, v in options.items()}
    merge_schema = bool_option(lower, "mergeSchema")
    overwrite_schema = mode == "complete" and bool_option(lower, "overwriteSchema")
    shown_mode = "Complete" if mode == "complete" else "Append"
    user_metadata = lower.get("usermetadata")

    def write_batch(batch: Any, batch_id: int) -> None:
        from deltamerge.io import write

        _check_no_null_type(batch.schema)
        query_id = _query_id(checkpoint)
        opts = {"txnAppId": query_id, "txnVersion": str(batch_id)}
        if user_metadata is not None:
            opts["userMetadata"] = user_metadata
        write(
            batch,
            path,
            mode="overwrite" if mode == "complete" else "append",
            partition_by=partition_by or None,
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
            options=opts,
            operation=(
                "STREAMING UPDATE",
                {"outputMode": shown_mode, "queryId": query_id, "epochId": str(batch_id)},
            ),
        )

    return write_batch


def _start(writer: Any, original: Callable[..., Any], target: str) -> Any:
    _, state_opts, output_mode, parts, query_name = _state(writer)
    _check_no_null_type(_frame(writer).schema)  # before the query starts
    checkpoint = _checkpoint(_session(writer), state_opts, query_name)
    sink = delta_sink(target, output_mode, state_opts, parts, checkpoint)
    if _is_connect(writer):
        proto = writer._write_proto
        proto.format = ""  # the server must run the foreachBatch sink, not look up "delta"
        del proto.partitioning_column_names[:]  # foreachBatch takes no partitioning; the sink does
        writer.foreachBatch(sink)
        writer.option("checkpointLocation", checkpoint)
        return original(writer)
    # A classic writer keeps partitioning in the JVM, which foreachBatch refuses: a fresh writer
    # with the same trigger, name, options and output mode runs the sink.
    fresh = writer._df.writeStream
    trigger = writer.__dict__.get(_TRIGGER)
    if trigger:
        fresh.trigger(**trigger)
    if query_name:
        fresh.queryName(query_name)
    fresh.options(**{k: v for k, v in state_opts.items() if k.lower() != "path"})
    fresh.outputMode(output_mode)
    fresh.foreachBatch(sink)
    fresh.option("checkpointLocation", checkpoint)
    return original(fresh)


def wrap_stream_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def start(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: Any = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        _apply(self, format, outputMode, partitionBy, queryName, options)
        fmt, opts, _, _, _ = _state(self)
        if not is_delta(fmt, _session(self)):
            return original(self, path)
        target = single_path(path, {k.lower(): v for k, v in opts.items()}, "start")
        return _start(self, original, target)

    return start


def wrap_stream_to_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def toTable(
        self: Any,
        tableName: str,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: Any = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        _apply(self, format, outputMode, partitionBy, queryName, options)
        owned = deltamerge_table(tableName)
        fmt, _, _, parts, _ = _state(self)
        if owned is None and is_delta(fmt, _session(self)):
            # As Spark's toTable: a new table is created first, with the stream's schema.
            owned = (_create_for_stream(self, tableName, parts), None)
        if owned is None:
            return original(self, tableName)
        # the foreachBatch query starts with PySpark's own start (the class's, unwrapped)
        start = type(self).__dict__["start"]
        return _start(self, getattr(start, "__wrapped__", start), owned[0])

    return toTable


def _create_for_stream(writer: Any, name: str, partition_by: list[str]) -> str:
    """A new registered table ``name`` with the streaming DataFrame's schema; its path."""
    from deltamerge.builders import create_table

    short = unqualified(session_name(name, "start(path)"))
    schema = _frame(writer).schema
    return create_table(
        _session(writer), "createIfNotExists", name=short, schema=schema, partition_by=partition_by
    )


def _apply(writer: Any, fmt: Any, output_mode: Any, partition_by: Any, query_name: Any, options: Any) -> None:
    """Apply ``start``'s / ``toTable``'s keyword settings to the writer, as PySpark does."""
    if options:
        writer.options(**options)
    if output_mode is not None:
        writer.outputMode(output_mode)
    if partition_by is not None:
        writer.partitionBy(partition_by)
    if fmt is not None:
        writer.format(fmt)
    if query_name is not None:
        writer.queryName(query_name)


def _record_trigger(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def trigger(self: Any, **kwargs: Any) -> Any:
        self.__dict__[_TRIGGER] = kwargs
        return original(self, **kwargs)

    return trigger


#: Classic ``DataStreamWriter`` setters whose arguments deltamerge records.
STREAM_MIRRORS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "outputMode": _record(_OUTPUT_MODE),
    "queryName": _record(_QUERY_NAME),
    "trigger": _record_trigger,
}
#: The ``DataStreamWriter`` actions that send ``format("delta")`` to the Delta sink.
STREAM_ACTIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "start": wrap_stream_start,
    "toTable": wrap_stream_to_table,
}
