"""``spark.read.format("delta")``: ``load`` (latest, time travel, change data feed) and ``table``;
``spark.table`` of a classic session (Connect's reads through ``spark.read.table``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from deltamerge.configure.state import (
    bool_option,
    deltamerge_table,
    int_option,
    is_delta,
    reader_session,
    reader_state,
    single_path,
)
from deltamerge.errors import InvalidArgumentError
from deltamerge.log.paths import split_time_travel


def _delta_read(spark: Any, path: str, opts: Mapping[str, str], *, user_schema: bool) -> Any:
    if user_schema:
        raise InvalidArgumentError(
            "delta does not allow user-specified schemas: the schema is the table's. Drop .schema(...).",
            error_class="DELTA_UNSUPPORTED_SCHEMA_DURING_READ",
        )
    path, at_version, at_timestamp = split_time_travel(path)
    if bool_option(opts, "readChangeFeed") or bool_option(opts, "readChangeData"):
        from deltamerge.cdf_read import read_changes

        if opts.get("versionasof") is not None or opts.get("timestampasof") is not None:
            raise InvalidArgumentError(
                "Cannot time travel views, subqueries, streams or change data feed queries: read the "
                "change data feed with startingVersion/endingVersion instead.",
                error_class="DELTA_UNSUPPORTED_TIME_TRAVEL_VIEWS",
            )
        return read_changes(
            spark,
            path,
            int_option(opts, "startingVersion"),
            int_option(opts, "endingVersion"),
            starting_timestamp=opts.get("startingtimestamp"),
            ending_timestamp=opts.get("endingtimestamp"),
        )
    from deltamerge.io import read

    version = int_option(opts, "versionAsOf")
    timestamp = opts.get("timestampasof")
    if at_version is not None or at_timestamp is not None:
        if version is not None or timestamp is not None:
            raise InvalidArgumentError(
                "Cannot specify time travel in multiple formats: use either the path@ syntax or the "
                "versionAsOf/timestampAsOf options.",
                error_class="DELTA_UNSUPPORTED_TIME_TRAVEL_MULTIPLE_FORMATS",
            )
        version, timestamp = at_version, at_timestamp
    return read(spark, path, version=version, timestamp=timestamp)


def wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def load(
        self: Any, path: Any = None, format: str | None = None, schema: Any = None, **options: Any
    ) -> Any:
        if format is not None:
            self.format(format)
        if schema is not None:
            self.schema(schema)
        if options:
            self.options(**options)
        fmt, opts, user_schema = reader_state(self)
        spark = reader_session(self)
        if not is_delta(fmt, spark):
            return original(self, path)
        return _delta_read(spark, single_path(path, opts, "load"), opts, user_schema=user_schema)

    return load


def wrap_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def table(self: Any, tableName: str) -> Any:
        _fmt, opts, user_schema = reader_state(self)
        spark = reader_session(self)
        target = deltamerge_table(tableName)
        if target is None:
            return original(self, tableName)
        path, name = target
        df = _delta_read(spark, path, opts, user_schema=user_schema)
        return df if name is None else df.alias(name)

    return table


def wrap_session_table(original: Callable[..., Any]) -> Callable[..., Any]:
    """``SparkSession.table`` that reads deltamerge's tables as ``spark.read.table`` does: a
    registered name with the session catalog's qualifiers (``default.people``) has no view of its
    own, and ``delta.`/path``` none at all."""

    @functools.wraps(original)
    def table(self: Any, tableName: str) -> Any:
        if deltamerge_table(tableName) is None:
            return original(self, tableName)
        return self.read.table(tableName)

    return table
