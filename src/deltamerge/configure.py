"""``format("delta")`` for ``spark.read`` and ``df.write``: ``deltamerge.configure(spark)``.

PySpark has no JVM ``delta`` data source here (no Delta jars), so the Python side intercepts:
``configure`` wraps ``load``/``table`` of ``DataFrameReader`` and ``save``/``saveAsTable`` of
``DataFrameWriter``, for classic PySpark and for Spark Connect. When the chosen format is
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

``replaceWhere`` and dynamic partition overwrite are one ``WRITE`` commit each (they run on the
MERGE machinery: rows to replace are deleted and the new rows inserted in one transaction, with
deletion vectors and change data files when the table has them enabled).

The interception is process-wide (PySpark's classes are patched), idempotent and thread-safe;
``configure(spark, enable=False)`` or ``unconfigure()`` restores PySpark's methods.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deltamerge.config import Setting, parse_bool
from deltamerge.errors import InvalidArgumentError, TableAlreadyExistsError

__all__ = ["configure", "is_configured", "unconfigure"]

_LOCK = threading.RLock()
_ORIGINALS: dict[tuple[type, str], Callable[..., Any]] = {}
_MARK = "__deltamerge_wrapped__"

# Python-side mirrors of a classic reader's / writer's state (which otherwise lives in the JVM).
_FMT = "_dm_format"
_OPTS = "_dm_options"
_MODE = "_dm_mode"
_PARTS = "_dm_partition_by"
_SCHEMA = "_dm_schema"

_REPLACE_MARKER = "__dm_replace_marker"
REPLACE_WHERE_CONSTRAINT_CHECK = Setting(
    "spark.databricks.delta.replaceWhere.constraintCheck.enabled", True, parse_bool
)
_MISMATCH_TAG = "DELTAMERGE_REPLACE_WHERE_MISMATCH"


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

    targets: list[tuple[type, dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]]]] = [
        (
            classic.DataFrameReader,
            {
                "format": _mirror_format,
                "option": _mirror_option,
                "options": _mirror_options,
                "schema": _mirror_schema,
                "load": _wrap_load,
                "table": _wrap_table,
            },
        ),
        (
            classic.DataFrameWriter,
            {
                "format": _mirror_format,
                "option": _mirror_option,
                "options": _mirror_options,
                "mode": _mirror_mode,
                "partitionBy": _mirror_partition_by,
                "save": _wrap_save,
                "saveAsTable": _wrap_save_as_table,
            },
        ),
    ]
    try:
        from pyspark.sql.connect import readwriter as connect
    except ImportError:  # pyspark without the connect extra: classic only
        return targets
    targets += [
        (connect.DataFrameReader, {"load": _wrap_load, "table": _wrap_table}),
        (connect.DataFrameWriter, {"save": _wrap_save, "saveAsTable": _wrap_save_as_table}),
    ]
    return targets


# --- classic mirrors ----------------------------------------------------------------------------------


def _to_str(value: Any) -> str | None:
    from pyspark.sql.utils import to_str

    return to_str(value)


def _opts_of(obj: Any) -> dict[str, str]:
    opts = obj.__dict__.get(_OPTS)
    if opts is None:
        opts = {}
        obj.__dict__[_OPTS] = opts
    return opts


def _mirror_format(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def format(self: Any, source: str) -> Any:
        self.__dict__[_FMT] = source
        return original(self, source)

    return format


def _set_option(mirror: dict[str, str], key: str, value: Any) -> None:
    # Spark's options are case-insensitive; the last spelling wins and keeps its case (table
    # properties given as "delta.*" options are stored as spelled).
    for existing in [k for k in mirror if k.lower() == key.lower()]:
        del mirror[existing]
    text = _to_str(value)
    if text is not None:
        mirror[key] = text


def _mirror_option(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def option(self: Any, key: str, value: Any) -> Any:
        _set_option(_opts_of(self), str(key), value)
        return original(self, key, value)

    return option


def _mirror_options(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def options(self: Any, **opts: Any) -> Any:
        mirror = _opts_of(self)
        for k, v in opts.items():
            _set_option(mirror, k, v)
        return original(self, **opts)

    return options


def _mirror_schema(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def schema(self: Any, schema: Any) -> Any:
        self.__dict__[_SCHEMA] = schema
        return original(self, schema)

    return schema


def _mirror_mode(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def mode(self: Any, saveMode: str | None) -> Any:
        if saveMode is not None:
            self.__dict__[_MODE] = saveMode
        return original(self, saveMode)

    return mode


def _mirror_partition_by(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def partitionBy(self: Any, *cols: Any) -> Any:
        flat = cols[0] if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        self.__dict__[_PARTS] = [str(c) for c in flat]
        return original(self, *cols)

    return partitionBy


# --- reading state from readers and writers ----------------------------------------------------------


def _is_connect(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql.connect")


def _reader_state(reader: Any) -> tuple[str | None, dict[str, str], bool]:
    """(format, options with lower-case keys, user schema given) of a reader."""
    if _is_connect(reader):
        return reader._format, {k.lower(): v for k, v in reader._options.items()}, bool(reader._schema)
    d = reader.__dict__
    return d.get(_FMT), {k.lower(): v for k, v in (d.get(_OPTS) or {}).items()}, d.get(_SCHEMA) is not None


def _writer_state(writer: Any) -> tuple[str | None, dict[str, str], str | None, list[str]]:
    """(format, options as spelled, mode, partition columns) of a writer."""
    if _is_connect(writer):
        w = writer._write
        return (
            w.source,
            dict(w.options),
            w.mode,
            list(w.partitioning_cols or []),
        )
    d = writer.__dict__
    return d.get(_FMT), dict(d.get(_OPTS) or {}), d.get(_MODE), list(d.get(_PARTS) or [])


def _reader_session(reader: Any) -> Any:
    return reader._client if _is_connect(reader) else reader._spark


def _writer_frame(writer: Any) -> Any:
    if _is_connect(writer):
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

        return ConnectDataFrame(writer._df, writer._spark)
    return writer._df


def _is_delta(fmt: str | None, spark: Any) -> bool:
    if fmt is None:
        from deltamerge.spark.session import conf_getter

        fmt = conf_getter(spark)("spark.sql.sources.default")
    if not fmt:
        return False
    name = fmt.strip().lower()
    return name == "delta" or name.endswith(".deltadatasource")


def _bool_option(opts: Mapping[str, str], key: str, default: bool = False) -> bool:
    value = opts.get(key.lower())
    if value is None:
        return default
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidArgumentError(
        f"Invalid value '{value}' for option '{key}', must be 'true' or 'false'.",
        error_class="DELTA_ILLEGAL_OPTION",
    )


def _int_option(opts: Mapping[str, str], key: str) -> int | None:
    value = opts.get(key.lower())
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidArgumentError(
            f"Invalid value '{value}' for option '{key}', must be a version number.",
            error_class="DELTA_ILLEGAL_OPTION",
        ) from None


def _single_path(path: Any, opts: Mapping[str, str], what: str) -> str:
    if path is None:
        path = opts.get("path")
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            raise InvalidArgumentError(f"A Delta {what} takes exactly one table path, got {len(path)}.")
        path = path[0]
    if not path:
        raise InvalidArgumentError(
            f"'path' is not specified: pass the table path to {what}(path) or set option('path', ...).",
            error_class="DELTA_PATH_DOES_NOT_EXIST",
        )
    return str(path)


# --- reads --------------------------------------------------------------------------------------------

_AT_VERSION = re.compile(r"^(?P<path>.+)@[vV](?P<version>\d+)$")
_AT_TIMESTAMP = re.compile(r"^(?P<path>.+)@(?P<ts>\d{17})$")


def _split_time_travel(path: str) -> tuple[str, int | None, str | None]:
    """delta-spark's ``path@v123`` / ``path@yyyyMMddHHmmssSSS`` suffixes."""
    m = _AT_VERSION.match(path)
    if m:
        return m.group("path"), int(m.group("version")), None
    m = _AT_TIMESTAMP.match(path)
    if m:
        t = m.group("ts")
        return m.group("path"), None, f"{t[0:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}.{t[14:17]}"
    return path, None, None


def _delta_read(spark: Any, path: str, opts: Mapping[str, str], *, user_schema: bool) -> Any:
    if user_schema:
        raise InvalidArgumentError(
            "delta does not allow user-specified schemas: the schema is the table's. Drop .schema(...).",
            error_class="DELTA_UNSUPPORTED_SCHEMA_DURING_READ",
        )
    path, at_version, at_timestamp = _split_time_travel(path)
    if _bool_option(opts, "readChangeFeed") or _bool_option(opts, "readChangeData"):
        from deltamerge.cdf_read import read_changes

        if opts.get("versionasof") is not None or opts.get("timestampasof") is not None:
            raise InvalidArgumentError(
                "Cannot time travel a change data feed read: use startingVersion/endingVersion instead.",
                error_class="DELTA_UNSUPPORTED_TIME_TRAVEL_CDF",
            )
        return read_changes(
            spark,
            path,
            _int_option(opts, "startingVersion"),
            _int_option(opts, "endingVersion"),
            starting_timestamp=opts.get("startingtimestamp"),
            ending_timestamp=opts.get("endingtimestamp"),
        )
    from deltamerge.io import read

    version = _int_option(opts, "versionAsOf")
    timestamp = opts.get("timestampasof")
    if at_version is not None or at_timestamp is not None:
        if version is not None or timestamp is not None:
            raise InvalidArgumentError(
                "Cannot specify time travel in multiple formats: use either the path@ syntax or the "
                "versionAsOf/timestampAsOf options.",
                error_class="DELTA_MULTIPLE_TIME_TRAVEL_FORMATS",
            )
        version, timestamp = at_version, at_timestamp
    return read(spark, path, version=version, timestamp=timestamp)


def _wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
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
        fmt, opts, user_schema = _reader_state(self)
        spark = _reader_session(self)
        if not _is_delta(fmt, spark):
            return original(self, path)
        return _delta_read(spark, _single_path(path, opts, "load"), opts, user_schema=user_schema)

    return load


def _delta_path_identifier(name: str) -> str | None:
    m = re.fullmatch(r"\s*delta\s*\.\s*`(?P<path>(?:[^`]|``)+)`\s*", name, re.IGNORECASE)
    return m.group("path").replace("``", "`") if m else None


def _wrap_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def table(self: Any, tableName: str) -> Any:
        from deltamerge import catalog

        _fmt, opts, user_schema = _reader_state(self)
        spark = _reader_session(self)
        path = _delta_path_identifier(tableName) if isinstance(tableName, str) else None
        registered = catalog.path_for_name(_unqualified(tableName)) if isinstance(tableName, str) else None
        if path is None and registered is None:
            return original(self, tableName)
        df = _delta_read(spark, path or registered, opts, user_schema=user_schema)  # type: ignore[arg-type]
        return df if path is not None else df.alias(_unqualified(tableName))

    return table


# --- writes --------------------------------------------------------------------------------------------

_SAVE_MODES = {
    "error": "error",
    "errorifexists": "error",
    "default": "error",
    "append": "append",
    "overwrite": "overwrite",
    "ignore": "ignore",
}


def _save_mode(mode: str | None) -> str:
    if mode is None:
        return "error"
    key = str(mode).strip().lower()
    if key not in _SAVE_MODES:
        raise InvalidArgumentError(
            f"Unknown save mode: {mode}. Accepted save modes are 'overwrite', 'append', 'ignore', 'error', "
            "'errorifexists', 'default'.",
            error_class="INVALID_SAVE_MODE",
        )
    return _SAVE_MODES[key]


def delta_save(
    df: Any,
    path: str,
    mode: str | None,
    partition_by: Sequence[str],
    options: Mapping[str, str],
) -> int | None:
    """``df.write.format("delta")...save(path)``: returns the committed version (None if ignored)."""
    from deltamerge.config import SessionConf
    from deltamerge.io import write
    from deltamerge.log.snapshot import DeltaLog
    from deltamerge.spark.session import conf_getter, setting

    spark = df.sparkSession
    opts = {k.lower(): v for k, v in options.items()}
    key = _save_mode(mode)
    exists = DeltaLog.for_table(_abs(path)).exists()
    # Session settings are read only when they can matter (each is a round trip on Connect).
    if "mergeschema" in opts:
        merge_schema = _bool_option(opts, "mergeSchema")
    else:
        merge_schema = exists and key != "ignore" and bool(setting(spark, SessionConf.SCHEMA_AUTO_MERGE))
    overwrite_schema = _bool_option(opts, "overwriteSchema")
    replace_where = opts.get("replacewhere")
    dynamic = "static"
    if key == "overwrite" and exists:
        dynamic = (
            opts.get("partitionoverwritemode")
            or conf_getter(spark)("spark.sql.sources.partitionOverwriteMode")
            or "static"
        ).strip().lower()
    if dynamic not in ("static", "dynamic"):
        raise InvalidArgumentError(
            f"Invalid value '{dynamic}' for option 'partitionOverwriteMode', must be 'static' or 'dynamic'.",
            error_class="DELTA_ILLEGAL_OPTION",
        )
    if key == "overwrite" and exists:
        if replace_where is not None and replace_where.strip():
            if overwrite_schema:
                raise InvalidArgumentError(
                    "'overwriteSchema' cannot be used together with 'replaceWhere': a partial overwrite "
                    "keeps the table schema. Drop one of the options.",
                    error_class="DELTA_OVERWRITE_SCHEMA_WITH_REPLACE_WHERE",
                )
            return _replace(df, path, partition_by, merge_schema, predicate=replace_where)
        if dynamic == "dynamic":
            if overwrite_schema:
                raise InvalidArgumentError(
                    "'overwriteSchema' cannot be used in dynamic partition overwrite mode.",
                    error_class="DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE",
                )
            return _replace(df, path, partition_by, merge_schema, predicate=None)
    elif key == "overwrite" and replace_where:
        df = _checked_against(df, replace_where)
    # A new table takes spark.databricks.delta.properties.defaults.* and "delta."-prefixed writer
    # options as table properties.
    configuration = {} if exists else _default_properties(spark)
    configuration.update({k: v for k, v in options.items() if k.lower().startswith("delta.")})
    try:
        return write(
            df,
            path,
            key,
            partition_by or None,
            configuration or None,
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
        )
    except Exception as e:
        _raise_if_mismatch(e, replace_where)
        raise


_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."


def _default_properties(spark: Any) -> dict[str, str]:
    """Delta's session defaults for the properties of new tables, as ``delta.<key>`` properties."""
    try:
        settings = dict(spark.conf.getAll)
    except Exception:
        return {}
    n = len(_DEFAULTS_PREFIX)
    return {"delta." + k[n:]: str(v) for k, v in settings.items() if k.startswith(_DEFAULTS_PREFIX)}


def _abs(path: str) -> str:
    from deltamerge.io import _abs as io_abs

    return io_abs(path)


def _wrap_save(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def save(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        self.mode(mode)
        if options:
            self.options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        fmt, opts, save_mode, parts = _writer_state(self)
        df = _writer_frame(self)
        if not _is_delta(fmt, df.sparkSession):
            return original(self, path)
        lower = {k.lower(): v for k, v in opts.items()}
        delta_save(df, _single_path(path, lower, "save"), save_mode, parts, opts)
        return None

    return save


def _unqualified(name: str) -> str:
    parts = [p.strip().strip("`") for p in name.split(".")]
    if len(parts) == 3 and parts[0].lower() == "spark_catalog":
        parts = parts[1:]
    if len(parts) == 2 and parts[0].lower() == "default":
        parts = parts[1:]
    return ".".join(parts)


def _warehouse_dir(spark: Any) -> str:
    from deltamerge.spark.session import conf_getter

    return _abs(conf_getter(spark)("spark.sql.warehouse.dir") or "spark-warehouse")


def delta_save_as_table(
    df: Any,
    name: str,
    mode: str | None,
    partition_by: Sequence[str],
    options: Mapping[str, str],
) -> int | None:
    """``df.write.format("delta")...saveAsTable(name)``: a table under ``spark.sql.warehouse.dir``
    (or at option ``path``), registered under ``name`` for ``spark.read.table``, SQL and
    ``DeltaTable.forName``."""
    from deltamerge import catalog
    from deltamerge.log.snapshot import DeltaLog

    spark = df.sparkSession
    key = _save_mode(mode)
    by_path = _delta_path_identifier(name)
    if by_path is not None:
        return delta_save(df, by_path, key, partition_by, options)
    short = _unqualified(name)
    if "." in short:
        raise InvalidArgumentError(
            f"Cannot save {name!r}: deltamerge table names are session names without a database "
            "(it has no metastore). Use an unqualified name, or save(path).",
            error_class="REQUIRES_SINGLE_PART_NAMESPACE",
        )
    opts = {k.lower(): v for k, v in options.items()}
    registered = catalog.path_for_name(short)
    location = registered or opts.get("path") or os.path.join(_warehouse_dir(spark), short.lower())
    exists = registered is not None or DeltaLog.for_table(_abs(location)).exists()
    if registered is None and spark.catalog.tableExists(short):
        raise TableAlreadyExistsError(
            f"Cannot create table `{short}`: a table or view of that name exists and is not a deltamerge "
            "Delta table. Drop it or choose another name.",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS",
        )
    if exists and key == "error":
        raise TableAlreadyExistsError(
            f"Cannot create table or view `{short}` because it already exists (at {location}). Choose a "
            "different name, or use mode('append') or mode('overwrite').",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS",
        )
    version = None
    if not (exists and key == "ignore"):
        version = delta_save(df, location, "overwrite" if key == "error" else key, partition_by, options)
    catalog.register_table(spark, short, location)
    return version


def _wrap_save_as_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def saveAsTable(
        self: Any,
        name: str,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        self.mode(mode)
        if options:
            self.options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        fmt, opts, save_mode, parts = _writer_state(self)
        df = _writer_frame(self)
        from deltamerge import catalog

        registered = isinstance(name, str) and catalog.path_for_name(_unqualified(name)) is not None
        if not (_is_delta(fmt, df.sparkSession) or (fmt is None and registered)):
            return original(self, name)
        delta_save_as_table(df, name, save_mode, parts, opts)
        return None

    return saveAsTable


# --- partial overwrites: replaceWhere and dynamic partition overwrite ----------------------------------


def _checked_against(df: Any, predicate: str) -> Any:
    """``df`` with a lazy check that every row satisfies ``predicate`` (Delta's replaceWhere
    constraint check): a row that does not fails the write."""
    from pyspark.sql import functions as F

    message = _MISMATCH_TAG.replace("'", "")
    return df.where(
        F.expr(f"CASE WHEN coalesce(({predicate}), false) THEN true ELSE raise_error('{message}') END")
    )


def _raise_if_mismatch(error: BaseException, predicate: str | None) -> None:
    if predicate is not None and _MISMATCH_TAG in str(error):
        raise InvalidArgumentError(
            f"Written data does not conform to partial table overwrite condition or constraint "
            f"'{predicate}'. Write only rows that satisfy the replaceWhere predicate.",
            error_class="DELTA_REPLACE_WHERE_MISMATCH",
        ) from None


def _quoted(parts: Sequence[str]) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def _replace(
    df: Any,
    path: str,
    partition_by: Sequence[str],
    merge_schema: bool,
    *,
    predicate: str | None,
) -> int | None:
    """Overwrite the rows matching ``predicate`` (replaceWhere), or the partitions present in ``df``
    (dynamic partition overwrite, ``predicate=None``), with ``df``, in one ``WRITE`` commit.

    Runs as one MERGE: the source is ``df`` plus one marker row; ``ON marker AND <rows to replace>``
    deletes the replaced rows (data skipping applies to the predicate; deletion vectors and change
    data files as the table is configured), ``WHEN NOT MATCHED AND NOT marker`` inserts ``df``.
    """
    from pyspark.sql import functions as F

    from deltamerge import catalog
    from deltamerge.io import _align, _check_names, snapshot_for
    from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
    from deltamerge.merge.command import run_merge
    from deltamerge.predicates import parse_expression, rewrite_columns, to_sql
    from deltamerge.spark.session import setting
    from deltamerge.spark.types import to_spark_schema
    from deltamerge.txn.operations import Operation

    spark = df.sparkSession
    root = _abs(path)
    snap = snapshot_for(root)
    meta = snap.metadata
    parts = list(meta.partition_columns)
    if partition_by and [p.lower() for p in partition_by] != [p.lower() for p in parts]:
        raise InvalidArgumentError(
            f"Partition columns {list(partition_by)} do not match the table's {parts}. Omit partitionBy for "
            "a partial overwrite.",
            error_class="DELTA_PARTITION_COLUMNS_MISMATCH",
        )
    if predicate is None and not parts:
        # Dynamic partition overwrite of an unpartitioned table replaces everything (as Delta).
        from deltamerge.io import write

        return write(df, root, "overwrite", merge_schema=merge_schema)
    _check_names(df.schema)
    table_schema = to_spark_schema(meta.schema_string)
    data, final = _align(df, table_schema, merge_schema=merge_schema)
    new_columns = [f.name for f in final.fields[len(table_schema.fields) :]]
    if predicate is not None and setting(spark, REPLACE_WHERE_CONSTRAINT_CHECK):
        data = _checked_against(data, predicate)
    marker = _REPLACE_MARKER
    target, source = "__dm_t", "__dm_s"
    if predicate is not None:
        # The replaced rows: target rows matching the predicate (names qualified to the target).
        pred = rewrite_columns(parse_expression(predicate), lambda p: parse_expression(_quoted([target, *p])))
        trigger = spark.range(1).select(
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in final.fields], F.lit(True).alias(marker)
        )
        condition = f"{source}.`{marker}` AND ({to_sql(pred)})"
    else:
        # The replaced partitions: one marker row per distinct partition tuple of the new data.
        trigger = data.select(*[F.col(_quoted([p])) for p in parts]).distinct()
        trigger = trigger.select(
            *[
                (F.col(_quoted([f.name])) if f.name in parts else F.lit(None).cast(f.dataType)).alias(f.name)
                for f in final.fields
            ],
            F.lit(True).alias(marker),
        )
        keys = " AND ".join(f"{_quoted([target, p])} <=> {_quoted([source, p])}" for p in parts)
        condition = f"{source}.`{marker}` AND {keys}"
    merge_source = data.withColumn(marker, F.lit(False)).unionByName(trigger).alias(source)
    insert = MergeClause(
        ClauseKind.NOT_MATCHED,
        ActionType.INSERT,
        parse_expression(f"NOT {source}.`{marker}`"),
        tuple(Assignment((f.name,), parse_expression(_quoted([source, f.name]))) for f in final.fields),
    )
    delete = MergeClause(ClauseKind.MATCHED, ActionType.DELETE, None, ())
    spec = MergeSpec(
        source=merge_source,
        condition=parse_expression(condition),
        clauses=(delete, insert),
        target_alias=target,
        source_alias=source,
        schema_evolution=bool(new_columns),
    )
    params: dict[str, Any] = {"mode": "Overwrite", "partitionBy": parts}
    if predicate is not None:
        params["predicate"] = [predicate]
    else:
        params["dynamicPartitionOverwrite"] = "true"

    def operation(_spec: MergeSpec, m: Any) -> Operation:
        metrics = {
            "numFiles": m.numTargetFilesAdded,
            "numOutputRows": m.numTargetRowsInserted + m.numTargetRowsCopied,
            "numOutputBytes": m.numTargetBytesAdded,
            "numRemovedFiles": m.numTargetFilesRemoved,
            "numRemovedBytes": m.numTargetBytesRemoved,
            "numDeletedRows": m.numTargetRowsDeleted,
            "numCopiedRows": m.numTargetRowsCopied,
            "numAddedChangeFiles": m.numTargetChangeFilesAdded,
            "numDeletionVectorsAdded": m.numTargetDeletionVectorsAdded,
            "numDeletionVectorsRemoved": m.numTargetDeletionVectorsRemoved,
        }
        return Operation("WRITE", params, metrics)

    try:
        run_merge(spark, root, spec, operation=operation)
    except Exception as e:
        _raise_if_mismatch(e, predicate)
        raise
    catalog.refresh_views(spark, root)
    from deltamerge.log.snapshot import DeltaLog

    return DeltaLog.for_table(root).update().version


# ``deltamerge.configure`` names both this module and the function: once the module is imported the
# package attribute is the module, so the module itself is made callable as ``configure``.
class _CallableModule(types.ModuleType):
    def __call__(self, spark: Any = None, enable: bool = True) -> Any:
        return configure(spark, enable)


sys.modules[__name__].__class__ = _CallableModule
