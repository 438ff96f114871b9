"""``df.writeTo(table)`` (DataFrameWriterV2) for Delta tables, after ``deltamerge.configure(spark)``.

Spark's V2 writer needs a catalog table; here a deltamerge table (a registered name or
``delta.`/path```), or any name with ``using("delta")`` for the creating actions, is written by
deltamerge instead:

* ``create()`` / ``replace()`` / ``createOrReplace()``: CREATE / REPLACE TABLE ... AS SELECT, with
  ``partitionedBy`` (plain columns), ``clusterBy``, ``tableProperty`` (``location`` and ``comment`` included);
* ``append()``; ``overwrite(condition)``: the rows matching the condition are replaced (Delta's
  ``replaceWhere``, the new rows checked against it); ``overwritePartitions()``: dynamic partition
  overwrite.

Other targets go to PySpark's own writer untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltamerge.errors import UnsupportedOperationError

__all__ = ["V2_ACTIONS", "V2_MIRRORS"]

_STATE = "_deltamerge_v2"


def _is_connect(writer: Any) -> bool:
    return hasattr(writer, "_write") and hasattr(writer, "_table_name")


def _state(writer: Any) -> dict[str, Any] | None:
    """(table, provider, options, properties, partition columns) of a V2 writer; None when a classic
    writer was made before ``configure`` (its settings were not seen)."""
    if _is_connect(writer):
        w = writer._write
        return {
            "table": writer._table_name,
            "provider": w.provider,
            "options": dict(w.options),
            "properties": dict(w.table_properties),
            "partitioning": list(w.partitioning_columns or []),
            "clustering": list(w.clustering_columns or []) or None,
        }
    return writer.__dict__.get(_STATE)  # type: ignore[no-any-return]


def _frame(writer: Any) -> Any:
    if _is_connect(writer):
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

        return ConnectDataFrame(writer._df, writer._spark)
    return writer._df


def _column_name(col: Any) -> str:
    from deltamerge.identifiers import name_parts
    from deltamerge.spark.columns import column_to_sql

    text = col if isinstance(col, str) else column_to_sql(col)
    try:
        parts = name_parts(text)
    except Exception:
        parts = []
    if len(parts) != 1:
        raise UnsupportedOperationError(
            f"partitionedBy({text}): Delta tables are partitioned by columns; partition transforms "
            "(years, days, bucket, ...) are not supported.",
            error_class="DELTA_UNSUPPORTED_PARTITION_TRANSFORM",
        )
    return str(parts[0])


def _target(
    spark: Any, table: str, provider: str | None, creating: bool
) -> tuple[str | None, str | None] | None:
    """(path, name) deltamerge writes, or None for PySpark's own writer."""
    from deltamerge.configure.state import deltamerge_table, is_delta, unqualified

    known = deltamerge_table(table)
    if known is not None:
        return known
    if creating and provider is not None and is_delta(provider, spark):
        return None, unqualified(table)
    return None


def _run(writer: Any, action: str, condition: Any = None) -> bool:
    """Run ``action`` with deltamerge; False when the target is not deltamerge's."""
    from deltamerge.configure.writes import delta_save

    state = _state(writer)
    if state is None:
        return False
    df = _frame(writer)
    spark = df.sparkSession
    creating = action in ("create", "replace", "createOrReplace")
    target = _target(spark, state["table"], state["provider"], creating)
    if target is None:
        return False
    path, name = target
    options = {str(k): str(v) for k, v in state["options"].items()}
    if creating:
        from deltamerge.builders.creation import create_table
        from deltamerge.configure.replace_on import replace_option
        from deltamerge.errors import InvalidArgumentError

        if replace_option(options) is not None:
            raise InvalidArgumentError(
                "DataFrame Writer V2 create()/replace()/createOrReplace() cannot be used with the "
                "`replaceOn` or `replaceUsing` option for Delta tables.",
                error_class="DELTA_DFV2_CREATE_REPLACE_INCOMPATIBLE_REPLACE_ON_OR_USING",
                sql_state="42000",
            )

        props = {str(k): str(v) for k, v in state["properties"].items()}
        location = props.pop("location", None) or path
        comment = props.pop("comment", None)
        props.pop("provider", None)
        create_table(
            spark,
            action,
            name=name,
            location=location,
            partition_by=[_column_name(c) for c in state["partitioning"]],
            properties=props,
            comment=comment,
            data=df,
            cluster_by=state.get("clustering"),
        )
        return True
    assert path is not None
    if action == "append":
        delta_save(df, path, "append", [], options)
    elif action == "overwrite":
        from deltamerge.spark.columns import expression_text

        delta_save(df, path, "overwrite", [], {**options, "replaceWhere": expression_text(condition)})
    else:  # overwritePartitions
        delta_save(df, path, "overwrite", [], {**options, "partitionOverwriteMode": "dynamic"})
    return True


def _action(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        if name == "overwrite":

            @functools.wraps(original)
            def overwrite(self: Any, condition: Any) -> None:
                if not _run(self, "overwrite", condition):
                    original(self, condition)

            return overwrite

        @functools.wraps(original)
        def act(self: Any) -> None:
            if not _run(self, name):
                original(self)

        return act

    return wrap


def _wrap_init(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __init__(self: Any, df: Any, table: str) -> None:
        original(self, df, table)
        self.__dict__[_STATE] = {
            "table": table,
            "provider": None,
            "options": {},
            "properties": {},
            "partitioning": [],
            "clustering": None,
        }

    return __init__


def _mirror(field: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Record a classic builder call in the writer's state (the JVM writer keeps its own)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            state = self.__dict__.get(_STATE)
            if state is not None:
                if field == "provider":
                    state["provider"] = args[0]
                elif field == "option":
                    state["options"][str(args[0])] = args[1]
                elif field == "options":
                    state["options"].update(kwargs)
                elif field == "property":
                    state["properties"][str(args[0])] = args[1]
                elif field == "clustering":
                    state["clustering"] = [str(a) for a in args]
                else:
                    state["partitioning"] = list(args)
            return out

        return method

    return wrap


#: Methods wrapped on both classic and Connect writers: the actions.
V2_ACTIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    name: _action(name)
    for name in ("create", "replace", "createOrReplace", "append", "overwrite", "overwritePartitions")
}
#: Classic writers only: their settings live in the JVM, so the builder calls are mirrored too.
V2_MIRRORS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "__init__": _wrap_init,
    "using": _mirror("provider"),
    "option": _mirror("option"),
    "options": _mirror("options"),
    "tableProperty": _mirror("property"),
    "partitionedBy": _mirror("partitioning"),
    "clusterBy": _mirror("clustering"),
}
