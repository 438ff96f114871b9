"""Reader and writer state for ``format("delta")``: the mirrors that record a classic reader's or
writer's settings in Python (they otherwise live in the JVM), the state of Connect readers and
writers, and the parsing of the options deltamerge honours."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from deltamerge.catalog import unqualified
from deltamerge.errors import InvalidArgumentError
from deltamerge.txn.idempotency import writer_flag

# Python-side mirrors of a classic reader's / writer's state (which otherwise lives in the JVM).
_FMT = "_dm_format"
_OPTS = "_dm_options"
_MODE = "_dm_mode"
_PARTS = "_dm_partition_by"
_CLUSTER = "_dm_cluster_by"
_SCHEMA = "_dm_schema"


def _to_str(value: Any) -> str | None:
    from pyspark.sql.utils import to_str

    return to_str(value)


def _opts_of(obj: Any) -> dict[str, str]:
    opts = obj.__dict__.get(_OPTS)
    if opts is None:
        opts = {}
        obj.__dict__[_OPTS] = opts
    return opts


# The mirror_* factories wrap a classic reader's / writer's setter so it also records its argument.


def mirror_format(original: Callable[..., Any]) -> Callable[..., Any]:
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


def mirror_option(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def option(self: Any, key: str, value: Any) -> Any:
        _set_option(_opts_of(self), str(key), value)
        return original(self, key, value)

    return option


def mirror_options(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def options(self: Any, **opts: Any) -> Any:
        mirror = _opts_of(self)
        for k, v in opts.items():
            _set_option(mirror, k, v)
        return original(self, **opts)

    return options


def mirror_schema(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def schema(self: Any, schema: Any) -> Any:
        self.__dict__[_SCHEMA] = schema
        return original(self, schema)

    return schema


def mirror_mode(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def mode(self: Any, saveMode: str | None) -> Any:
        if saveMode is not None:
            self.__dict__[_MODE] = saveMode
        return original(self, saveMode)

    return mode


def _recording(key: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a writer's ``partitionBy`` / ``clusterBy``: record the columns (the JVM keeps its own)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def method(self: Any, *cols: Any) -> Any:
            flat = cols[0] if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
            self.__dict__[key] = [str(c) for c in flat]
            return original(self, *cols)

        return method

    return wrap


mirror_partition_by = _recording(_PARTS)
mirror_cluster_by = _recording(_CLUSTER)


def writer_clustering(writer: Any) -> list[str] | None:
    """The columns a writer's ``clusterBy`` named, None when it was not called."""
    if _is_connect(writer):
        cols = writer._write.clustering_cols
        return list(cols) if cols else None
    cols = writer.__dict__.get(_CLUSTER)
    return list(cols) if cols is not None else None


def _is_connect(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql.connect")


def reader_state(reader: Any) -> tuple[str | None, dict[str, str], bool]:
    """(format, options with lower-case keys, user schema given) of a reader."""
    if _is_connect(reader):
        return reader._format, {k.lower(): v for k, v in reader._options.items()}, bool(reader._schema)
    d = reader.__dict__
    return d.get(_FMT), {k.lower(): v for k, v in (d.get(_OPTS) or {}).items()}, d.get(_SCHEMA) is not None


def writer_state(writer: Any) -> tuple[str | None, dict[str, str], str | None, list[str]]:
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


def reader_session(reader: Any) -> Any:
    """The session (or Connect client) a reader belongs to."""
    return reader._client if _is_connect(reader) else reader._spark


def writer_frame(writer: Any) -> Any:
    """The DataFrame a writer writes."""
    if _is_connect(writer):
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

        return ConnectDataFrame(writer._df, writer._spark)
    return writer._df


def is_delta(fmt: str | None, spark: Any) -> bool:
    """True when ``fmt`` (or, unset, ``spark.sql.sources.default``) names Delta."""
    if fmt is None:
        from deltamerge.spark.session import conf_getter

        fmt = conf_getter(spark)("spark.sql.sources.default")
    if not fmt:
        return False
    name = fmt.strip().lower()
    return name == "delta" or name.endswith(".deltadatasource")


def bool_option(opts: Mapping[str, str], key: str, default: bool = False) -> bool:
    """A ``true``/``false`` option of ``opts``."""
    return writer_flag(opts, key, default)


def int_option(opts: Mapping[str, str], key: str) -> int | None:
    """A version-number option of ``opts`` (lower-case keys), None when unset."""
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


def single_path(path: Any, opts: Mapping[str, str], what: str) -> str:
    """The one table path given to ``load``/``save`` (or as option ``path``)."""
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


def delta_path_identifier(name: str) -> str | None:
    """The path of a ``delta.`/path``` table identifier, else None."""
    m = re.fullmatch(r"\s*delta\s*\.\s*`(?P<path>(?:[^`]|``)+)`\s*", name, re.IGNORECASE)
    return m.group("path").replace("``", "`") if m else None


def deltamerge_table(table: Any) -> tuple[str, str | None] | None:
    """(path, registered name) of a table reference deltamerge owns: ``delta.`/path``` (name None) or
    a name registered with ``deltamerge.register_table`` / ``saveAsTable``; None for anything else
    (Spark's own methods then handle it)."""
    from deltamerge import catalog

    if not isinstance(table, str):
        return None
    path = delta_path_identifier(table)
    if path is not None:
        return path, None
    name = unqualified(table)
    registered = catalog.path_for_name(name)
    return (registered, name) if registered is not None else None
