"""``df.write.format("delta")``: ``save(path)`` and ``saveAsTable(name)`` with Delta's save modes and
writer options (``mergeSchema``, ``overwriteSchema``, ``replaceWhere``, ``partitionOverwriteMode``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deltamerge.catalog import session_name
from deltamerge.configure.replace import (
    REPLACE_WHERE_DATA_COLUMNS,
    check_replace_where,
    checked_against,
    raise_if_mismatch,
    replace_rows,
)
from deltamerge.configure.replace_on import check_replace_options, replace_matching, replace_option
from deltamerge.configure.state import (
    bool_option,
    delta_path_identifier,
    deltamerge_table,
    is_delta,
    single_path,
    unqualified,
    writer_clustering,
    writer_frame,
    writer_state,
)
from deltamerge.errors import InvalidArgumentError, TableAlreadyExistsError
from deltamerge.log.paths import table_root
from deltamerge.spark.session import table_property_defaults
from deltamerge.spark.types import quote_name

_REPLACE_KEYS = ("replaceon", "replaceusing", "targetalias")
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
    cluster_by: Sequence[str] | None = None,
) -> int | None:
    """``df.write.format("delta")...save(path)``: returns the committed version (None if ignored)."""
    from deltamerge.config import SessionConf
    from deltamerge.io import write
    from deltamerge.log.snapshot import DeltaLog
    from deltamerge.spark.session import conf_getter, setting

    spark = df.sparkSession
    opts = {k.lower(): v for k, v in options.items()}
    key = _save_mode(mode)
    exists = DeltaLog.for_table(table_root(path)).exists()
    # Session settings are read only when they can matter (each is a round trip on Connect).
    if "mergeschema" in opts:
        merge_schema = bool_option(opts, "mergeSchema")
    else:
        merge_schema = exists and key != "ignore" and bool(setting(spark, SessionConf.SCHEMA_AUTO_MERGE))
    overwrite_schema = bool_option(opts, "overwriteSchema")
    replace_where = opts.get("replacewhere")
    if replace_option(options) is not None:
        check_replace_options(options, key == "overwrite")
        if key == "overwrite" and exists:
            return replace_matching(df, path, partition_by, merge_schema, options)
        if key == "overwrite":  # a new table: the rows are all there is (as Delta)
            options = {k: v for k, v in options.items() if k.lower() not in _REPLACE_KEYS}
    dynamic = "static"
    if key == "overwrite" and exists:
        dynamic = (
            (
                opts.get("partitionoverwritemode")
                or conf_getter(spark)("spark.sql.sources.partitionOverwriteMode")
                or "static"
            )
            .strip()
            .lower()
        )
    if dynamic not in ("static", "dynamic"):
        raise InvalidArgumentError(
            f"Invalid value '{dynamic}' for option 'partitionOverwriteMode', must be 'static' or 'dynamic'.",
            error_class="DELTA_ILLEGAL_OPTION",
        )
    if key == "overwrite" and exists:
        # As Delta's WriteIntoDelta: dynamic partition overwrite applies to partitioned tables only,
        # replaceWhere wins over a session-wide dynamic mode (not over one given as an option), and
        # overwriteSchema is ignored with replaceWhere.
        partitioned = bool(DeltaLog.for_table(table_root(path)).update().metadata.partition_columns)
        if not partitioned:
            dynamic = "static"
        mode_option = "partitionoverwritemode" in opts
        read_mode = mode_option or not replace_where  # where Delta reads the mode at all
        if dynamic == "dynamic" and read_mode and not setting(spark, SessionConf.DYNAMIC_PARTITION_OVERWRITE):
            raise InvalidArgumentError(
                "Dynamic partition overwrite mode is specified by session config or write options, "
                "but it is disabled by `spark.databricks.delta.dynamicPartitionOverwrite.enabled=false`.",
                error_class="DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED",
                sql_state="0A000",
            )
        if cluster_by is not None and (replace_where or dynamic == "dynamic"):
            _check_clustering(path, cluster_by)  # a partial overwrite keeps the clustering
        if replace_where is not None and replace_where.strip():
            if dynamic == "dynamic" and mode_option:
                raise InvalidArgumentError(
                    "A 'replaceWhere' expression and 'partitionOverwriteMode'='dynamic' cannot both be "
                    "set in the DataFrameWriter options.",
                    error_class="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE",
                    sql_state="42613",
                )
            return replace_rows(
                df, path, partition_by, merge_schema, predicate=replace_where, options=options
            )
        if dynamic == "dynamic":
            if overwrite_schema:
                raise InvalidArgumentError(
                    "'overwriteSchema' cannot be used in dynamic partition overwrite mode.",
                    error_class="DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE",
                )
            return replace_rows(df, path, partition_by, merge_schema, predicate=None, options=options)
    elif key == "overwrite" and replace_where:
        if not setting(spark, REPLACE_WHERE_DATA_COLUMNS):
            check_replace_where(replace_where, partition_by, data_columns=False, rearranging=False)
        df = checked_against(df, replace_where)
    # A new table takes spark.databricks.delta.properties.defaults.* and "delta."-prefixed writer
    # options as table properties.
    configuration = {} if exists else table_property_defaults(spark)
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
            options=options,
            cluster_by=cluster_by,
        )
    except Exception as e:
        raise_if_mismatch(e, replace_where)
        raise


def _check_clustering(path: str, cluster_by: Sequence[str]) -> None:
    from deltamerge.clustering_ddl import check_matches
    from deltamerge.identifiers import name_parts
    from deltamerge.io import snapshot_for

    snap = snapshot_for(path)
    check_matches(snap.protocol, snap.domains, snap.metadata.schema, [name_parts(c) for c in cluster_by])


def insert_rows(
    data: Any,
    path: str,
    *,
    columns: Sequence[str] | None = None,
    by_name: bool = False,
    overwrite: bool = False,
    options: Mapping[str, str] | None = None,
) -> int | None:
    """INSERT INTO / INSERT OVERWRITE and ``df.write.insertInto``: ``data``'s columns go to the table's
    columns (or ``columns``) by position (by name with ``by_name``), cast to their types as Spark's
    store assignment does; an overwrite is static or, with ``partitionOverwriteMode`` = dynamic (the
    option or the session setting), replaces only the partitions the rows fall into."""
    from pyspark.sql import functions as F

    from deltamerge.column_defaults import default_text
    from deltamerge.errors import AnalysisError
    from deltamerge.io import snapshot_for
    from deltamerge.spark.types import to_spark_schema

    schema = to_spark_schema(snapshot_for(path).metadata.schema_string)
    fields = {f.name.lower(): f for f in schema.fields}
    if by_name:
        names = list(data.columns)
    elif columns is not None:
        names = list(columns)
    else:
        names = [f.name for f in schema.fields]
    unknown = [n for n in names if n.lower() not in fields]
    if unknown:
        raise AnalysisError(
            f"A column or function parameter with name `{unknown[0]}` cannot be resolved. The table's "
            f"columns are {', '.join(f.name for f in schema.fields)}.",
            error_class="UNRESOLVED_COLUMN.WITH_SUGGESTION",
        )
    if len(names) != len(data.columns):
        which = "NOT_ENOUGH_DATA_COLUMNS" if len(data.columns) < len(names) else "TOO_MANY_DATA_COLUMNS"
        raise AnalysisError(
            f"Cannot write to the Delta table at {path}: the query has {len(data.columns)} column(s) and "
            f"the table expects {len(names)} ({', '.join(names)}). List the columns to insert, e.g. "
            "INSERT INTO t (a, b) SELECT ...",
            error_class=f"INSERT_COLUMN_ARITY_MISMATCH.{which}",
        )
    positional = data.toDF(*[f"_c{i}" for i in range(len(names))])  # query columns may share a name
    given = {n.lower() for n in names}
    # Columns the statement leaves out take their DEFAULT (the rest stay NULL, or generated).
    defaulted = [
        F.expr(f"CAST(({text}) AS {f.dataType.simpleString()})").alias(f.name)
        for f in schema.fields
        if f.name.lower() not in given and (text := default_text(f)) is not None
    ]
    data = positional.select(
        *[
            F.col(f"_c{i}").cast(fields[n.lower()].dataType).alias(fields[n.lower()].name)
            for i, n in enumerate(names)
        ],
        *defaulted,
    )
    return delta_save(data, path, "overwrite" if overwrite else "append", [], dict(options or {}))


def wrap_insert_into(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def insertInto(self: Any, tableName: str, overwrite: bool | None = None) -> None:
        from deltamerge.errors import AnalysisError

        target = deltamerge_table(tableName)
        if target is None:
            return original(self, tableName, overwrite)  # not a deltamerge table: Spark's insertInto
        path = target[0]
        _fmt, opts, mode, parts = writer_state(self)
        if parts:
            raise AnalysisError(
                "insertInto() can't be used together with partitionBy(). Partition columns have already "
                "been defined for the table. It is not necessary to use partitionBy().",
                error_class="_LEGACY_ERROR_TEMP_1309",
            )
        replace = overwrite if overwrite is not None else _save_mode(mode) == "overwrite"
        insert_rows(writer_frame(self), path, overwrite=replace, options=opts)
        return None

    return insertInto


def _applied(
    writer: Any, format: str | None, mode: str | None, partitionBy: Any, options: Mapping[str, Any]
) -> tuple[str | None, dict[str, str], str | None, list[str], Any]:
    """Apply ``save``/``saveAsTable``'s keyword arguments to ``writer`` (as PySpark does), then
    return its (format, options, mode, partition columns) and the DataFrame it writes."""
    writer.mode(mode)
    if options:
        writer.options(**options)
    if partitionBy is not None:
        writer.partitionBy(partitionBy)
    if format is not None:
        writer.format(format)
    fmt, opts, save_mode, parts = writer_state(writer)
    return fmt, opts, save_mode, parts, writer_frame(writer)


def wrap_save(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def save(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        fmt, opts, save_mode, parts, df = _applied(self, format, mode, partitionBy, options)
        if not is_delta(fmt, df.sparkSession):
            return original(self, path)
        lower = {k.lower(): v for k, v in opts.items()}
        delta_save(df, single_path(path, lower, "save"), save_mode, parts, opts, writer_clustering(self))
        return None

    return save


def _warehouse_dir(spark: Any) -> str:
    from deltamerge.spark.session import conf_getter

    return table_root(conf_getter(spark)("spark.sql.warehouse.dir") or "spark-warehouse")


def delta_save_as_table(
    df: Any,
    name: str,
    mode: str | None,
    partition_by: Sequence[str],
    options: Mapping[str, str],
    cluster_by: Sequence[str] | None = None,
) -> int | None:
    """``df.write.format("delta")...saveAsTable(name)``: a table under ``spark.sql.warehouse.dir``
    (or at option ``path``), registered under ``name`` for ``spark.read.table``, SQL and
    ``DeltaTable.forName``."""
    from deltamerge import catalog
    from deltamerge.log.snapshot import DeltaLog

    spark = df.sparkSession
    key = _save_mode(mode)
    by_path = delta_path_identifier(name)
    if by_path is not None:
        return delta_save(df, by_path, key, partition_by, options, cluster_by)
    short = unqualified(session_name(name, "save(path)"))
    opts = {k.lower(): v for k, v in options.items()}
    registered = catalog.path_for_name(short)
    location = registered or opts.get("path") or os.path.join(_warehouse_dir(spark), short.lower())
    exists = registered is not None or DeltaLog.for_table(table_root(location)).exists()
    if registered is None and spark.catalog.tableExists(quote_name(short)):
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
        version = delta_save(
            df, location, "overwrite" if key == "error" else key, partition_by, options, cluster_by
        )
    catalog.register_table(spark, short, location)
    return version


def wrap_save_as_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def saveAsTable(
        self: Any,
        name: str,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        fmt, opts, save_mode, parts, df = _applied(self, format, mode, partitionBy, options)
        from deltamerge import catalog

        registered = isinstance(name, str) and catalog.path_for_name(unqualified(name)) is not None
        if not (is_delta(fmt, df.sparkSession) or (fmt is None and registered)):
            return original(self, name)
        delta_save_as_table(df, name, save_mode, parts, opts, writer_clustering(self))
        return None

    return saveAsTable
