"""MERGE into a temp view over a Delta table (Delta's ``MergeIntoTempViewsTests``).

Delta strips a temp view from the MERGE target when the view is a full scan of one Delta table:
aliases, nested views and projections that pass every column through unchanged. Anything else
between the view and the table (a filter, a join, a computed column) is refused, because the MERGE
would otherwise write rows the view cannot show.

The table behind a view is found from the analysed plan: a view over a registered name shows that
name's own view; a view over ``deltamerge.read(...)`` shows deltamerge's scan, whose files lie under
the table root. A view made from a DataFrame keeps the file list it was made with, so after a MERGE
through it the view is made again over the new snapshot (views over registered names re-resolve on
their own once the name is refreshed).
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession

from deltamerge import catalog
from deltamerge.errors import AnalysisError
from deltamerge.spark.session import analyzed_plan_text
from deltamerge.spark.types import quote_name

_NODE = re.compile(r"^[\s:|+\-]*([A-Za-z]+)\s?(.*)$")
_VIEW_NAME = re.compile(r"^\(`([^`]+)`")
# one projected item that passes a column through: `c#1`, `c#1 AS c#2`, `cast(c#1 as int) AS c#2`
_PASS = re.compile(r"^(?:cast\()?([^#\s(),]+)#\d+L?(?: as [^)]+\))?(?: AS ([^#\s]+)#\d+L?)?$")
_WRAPPERS = {"SubqueryAlias", "View"}
_SCAN_LEAVES = {"Relation", "LogicalRDD", "LocalRelation"}


def split_items(text: str) -> list[str]:
    """The top-level comma-separated items of a plan line's list (brackets nest)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [i for i in items if i]


def _passes_through(args: str, physical: dict[str, str] | None = None) -> bool:
    """Whether a Project passes every column through under its own name (or, with ``physical``
    given, under the logical name of the physical column it reads: a column-mapped table's scan)."""
    body = args.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return False
    for item in split_items(body[1:-1]):
        m = _PASS.match(item)
        if m is None:
            return False
        source, name = m.group(1), m.group(2)
        if name is None or name.lower() == source.lower():
            continue
        if physical is None or physical.get(name.lower()) != source:
            return False
    return True


def _physical_names(path: str) -> dict[str, str]:
    from deltamerge.io import snapshot_for
    from deltamerge.log.column_mapping import physical_names

    return {k.lower(): v for k, v in physical_names(snapshot_for(path).metadata.schema).items()}


def enclosing_table_root(path: str) -> str | None:
    """The root of the Delta table that ``path`` (a file or a directory, local path or ``file:``
    URI) lies strictly inside, if any."""
    local = unquote(urlparse(path).path) if path.startswith("file:") else os.path.abspath(path)
    d = os.path.dirname(local)
    while d and d != os.path.dirname(d):
        if os.path.isdir(os.path.join(d, "_delta_log")):
            return d
        d = os.path.dirname(d)
    return None


def _registered_view(node: str, args: str, name: str) -> str | None:
    """The registered name a plan line ``View (`inner`, ...)`` shows, other than ``name`` itself."""
    m = _VIEW_NAME.match(args) if node == "View" else None
    inner = m.group(1) if m else None
    if inner is None or inner.lower() == name.lower() or catalog.path_for_name(inner) is None:
        return None
    return inner


def plan_nodes(df: DataFrame) -> list[tuple[str, str]]:
    """(node name, rest of the line) for each line of the analysed plan, top first."""
    nodes = []
    for line in analyzed_plan_text(df).splitlines():
        m = _NODE.match(line)
        if m is not None and m.group(1):
            nodes.append((m.group(1), m.group(2)))
    return nodes


def is_temp_view(spark: SparkSession, name: str) -> bool:
    """Whether ``name`` is a session temp view."""
    try:
        return bool(spark.catalog.getTable(name).isTemporary)
    except Exception:
        return False


def refuse_generated_columns(path: str, operation: str) -> None:
    """Delta refuses DML through a temp view that is more than a plain scan of a table with
    generated columns (``GeneratedColumn.allowDMLTargetPlan``), before it looks for a partial scan."""
    from deltamerge.generated import generated_columns
    from deltamerge.io import snapshot_for
    from deltamerge.spark.types import to_spark_schema

    if generated_columns(to_spark_schema(snapshot_for(path).metadata.schema_string)):
        raise AnalysisError(
            f"{operation} command on a temp view referring to a Delta table that contains generated "
            f"columns is not supported. Please run the {operation} command on the Delta table directly",
            error_class="DELTA_OPERATION_ON_TEMP_VIEW_WITH_GENERATED_COLS_NOT_SUPPORTED",
            sql_state="0A000",
        )


def view_target_path(
    spark: SparkSession, name: str, *, check_columns: bool = True, operation: str = "MERGE INTO"
) -> str | None:
    """The root of the Delta table that the temp view ``name`` fully scans; None when ``name`` is
    not a temp view over a Delta table. Raises ``DELTA_UNEXPECTED_PARTIAL_SCAN`` for a view that is
    more than a full scan of one."""
    if catalog.path_for_name(name) is not None or not is_temp_view(spark, name):
        return None
    df = spark.table(name)
    nodes = plan_nodes(df)
    path: str | None = None
    full_scan = True
    first: tuple[str, str] | None = None
    for node, args in nodes:
        if node in _WRAPPERS or (node == "Project" and _passes_through(args)):
            inner = _registered_view(node, args, name)
            if inner is not None:
                path = catalog.path_for_name(inner)
                break  # a registered name's view is a full scan by construction
            continue
        # the first other node must be deltamerge's own scan (its helper columns are named __dm_*)
        full_scan = node in _SCAN_LEAVES or "__dm_" in args
        first = (node, args)
        break
    if path is None:  # a view over deltamerge.read(...): its files lie under the table root
        roots = {enclosing_table_root(f) for f in df.inputFiles()}
        path = roots.pop() if len(roots) == 1 else None
        if path is None:
            return None
    if not full_scan and first is not None and first[0] == "Project":
        # a column-mapped table's scan renames its physical columns to the logical names
        full_scan = _passes_through(first[1], _physical_names(path))
    if check_columns:  # as in Delta, an extra column is reported before a partial scan
        _check_columns(name, df, path)
    if not full_scan:
        refuse_generated_columns(path, operation)
        raise AnalysisError(
            f"Expect a full scan of Delta sources, but found a partial scan. path:{path}. MERGE can "
            f"target the view `{name}` only when it shows every row and column of the table unchanged; "
            "merge into the table itself instead.",
            error_class="DELTA_UNEXPECTED_PARTIAL_SCAN",
        )
    return path


def _check_columns(name: str, df: DataFrame, path: str) -> None:
    from deltamerge.io import snapshot_for

    table_cols = [f["name"] for f in snapshot_for(path).metadata.schema["fields"]]
    view_cols = df.columns
    lower = {c.lower() for c in table_cols}
    extra = [c for c in view_cols if c.lower() not in lower]
    if extra:
        raise AnalysisError(
            f"The schema of your Delta table has changed in an incompatible way since your DataFrame "
            f"or DeltaTable object was created. Latest schema is missing field(s): {', '.join(extra)}. "
            f"Re-create the view `{name}` over the table.",
            error_class="DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS",
        )
    shown = {c.lower() for c in view_cols}
    missing = [c for c in table_cols if c.lower() not in shown]
    if missing:
        raise AnalysisError(
            f"A column, variable, or function parameter with name `{missing[0]}` cannot be resolved: "
            f"the view `{name}` does not show the column(s) {', '.join(missing)} of the table at {path}. "
            f"Did you mean one of the following? [{', '.join(f'`{name}`.`{c}`' for c in view_cols)}]. "
            "MERGE through a view needs every column of the table.",
            error_class="UNRESOLVED_COLUMN.WITH_SUGGESTION",
        )


def refresh_after_write(spark: SparkSession, name: str, path: str) -> None:
    """Point the view ``name`` (a full scan of the table at ``path``) at the newest snapshot.

    A view over a registered name becomes a SQL view of that name, which Spark re-resolves on every
    use; any other view is made again over the table's newest snapshot.
    """
    for node, args in plan_nodes(spark.table(name)):
        inner = _registered_view(node, args, name)
        if inner is not None:
            spark.sql(f"CREATE OR REPLACE TEMP VIEW {quote_name(name)} AS SELECT * FROM {quote_name(inner)}")
            return
    from deltamerge.io import read

    read(spark, path).createOrReplaceTempView(name)
