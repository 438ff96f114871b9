"""Delta's ``replaceOn`` / ``replaceUsing`` overwrites (``INSERT INTO t REPLACE USING (c) ...`` and
``df.write.mode("overwrite").option("replaceUsing", "c")`` / ``.option("replaceOn", cond)``): the
target rows some written row matches are deleted and every written row is inserted, in one ``WRITE``
commit run on the MERGE machinery.

The MERGE reads the written rows once, each twice over (``explode``): a copy marked to match,
whose MATCHED clause deletes every target row it meets (an unconditional DELETE, so several
matches are allowed), and a copy that never matches, which NOT MATCHED inserts. ``replaceUsing``
compares with ``=``: a NULL matches nothing, as in Delta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deltamerge.configure.replace import quoted
from deltamerge.errors import AnalysisError, InvalidArgumentError, InvariantViolationError
from deltamerge.log.paths import table_root

_MARKER = "__dm_replace_on_marker"
_TARGET, _SOURCE = "__dm_t", "__dm_s"


def replace_option(options: Mapping[str, str]) -> str | None:
    """``replaceOn`` or ``replaceUsing`` when the writer options give one (None otherwise)."""
    keys = {k.lower() for k in options}
    if "replaceon" in keys:
        return "replaceOn"
    return "replaceUsing" if "replaceusing" in keys else None


def check_replace_options(options: Mapping[str, str], overwrite: bool) -> None:
    """Delta's refusals of option combinations with ``replaceOn`` / ``replaceUsing``."""
    from deltamerge.configure.state import bool_option
    from deltamerge.txn.idempotency import rearranges_only

    opts = {k.lower(): v for k, v in options.items()}
    which = replace_option(options)
    if which is None:
        return

    def incompatible(first: str, second: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"The `{first}` option cannot be used with the `{second}` option for Delta tables.",
            error_class="DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS",
            sql_state="42613",
        )

    if "replaceon" in opts and "replaceusing" in opts:
        raise incompatible("replaceOn", "replaceUsing")
    if "replacewhere" in opts:
        raise InvalidArgumentError(
            "Overwrite by filter is incompatible with the `replaceOn`/`replaceUsing` option.",
            error_class="DELTA_OVERWRITE_BY_FILTER_INCOMPATIBLE_REPLACE_ON_OR_USING",
            sql_state="42613",
        )
    if "partitionoverwritemode" in opts:
        raise InvalidArgumentError(
            "Dynamic partition overwrite is incompatible with the `replaceOn`/`replaceUsing` option.",
            error_class="DELTA_DYNAMIC_PARTITION_OVERWRITE_INCOMPATIBLE_REPLACE_ON_OR_USING",
            sql_state="42613",
        )
    if overwrite and bool_option(opts, "overwriteSchema"):
        raise incompatible("overwriteSchema", which)
    if rearranges_only(options):
        raise incompatible("dataChange", which)


def using_columns(text: str) -> list[str]:
    """The distinct column names of a ``replaceUsing`` option (``"id, key"``)."""
    out: list[str] = []
    for name in (p.strip().strip("`") for p in text.split(",")):
        if name and name.lower() not in {o.lower() for o in out}:
            out.append(name)
    if not out:
        raise InvalidArgumentError(
            "The `replaceUsing` option names no column. Give the columns to match on, e.g. 'id, key'.",
            error_class="DELTA_ILLEGAL_OPTION",
        )
    return out


def _unresolved_using(name: str, relation: str, names: Sequence[str]) -> AnalysisError:
    suggestion = ", ".join(f"`{n}`" for n in sorted(names))
    return AnalysisError(
        f"Column `{name}` cannot be resolved in {relation}. Did you mean one of the following? "
        f"[{suggestion}].",
        error_class="UNRESOLVED_INSERT_REPLACE_USING_COLUMN",
        sql_state="42703",
    )


def check_using_columns(columns: Sequence[str], table: Sequence[str], query: Sequence[str]) -> None:
    """Every ``replaceUsing`` column must be a column of the table and of the written rows."""
    for name in columns:
        if name.lower() not in {c.lower() for c in table}:
            raise _unresolved_using(name, "table", table)
        if name.lower() not in {c.lower() for c in query}:
            raise _unresolved_using(name, "query", query)


def check_aligned(columns: Sequence[str], table: Sequence[str], query: Sequence[str]) -> None:
    """A positional ``INSERT ... REPLACE USING`` needs each using column at the same position in
    the query as in the table (Delta's INSERT_REPLACE_USING_DISALLOW_MISALIGNED_COLUMNS)."""
    lower_t = [c.lower() for c in table]
    lower_q = [c.lower() for c in query]

    def at(names: list[str], name: str) -> int:
        return names.index(name.lower()) if name.lower() in names else -1

    # Checked before the names resolve, as Delta's analysis does: a query column named otherwise
    # (VALUES' col1, ...) is misaligned.
    bad = [c for c in columns if at(lower_t, c) != at(lower_q, c)]
    if bad:
        raise AnalysisError(
            f"INSERT REPLACE USING has misaligned columns: {', '.join(f'`{c}`' for c in bad)}. The "
            "replaceUsing columns must be at the same ordinal position in both the table and the source "
            "query.",
            error_class="INSERT_REPLACE_USING_DISALLOW_MISALIGNED_COLUMNS",
            sql_state="42802",
        )
    check_using_columns(columns, table, query)


def _q(*parts: str) -> str:
    return quoted(parts)


def _on_condition(text: str, target_alias: str | None, table: Sequence[str], df: Any) -> str:
    """The ``replaceOn`` condition over the MERGE's aliases: columns qualified by ``target_alias``
    are the table's, columns qualified as Spark resolves them on ``df`` (its alias, or a table it
    reads) the written rows'; an unqualified name is the side that has it (both: ambiguous, as in
    Delta)."""
    from deltamerge.predicates import parse_expression, rewrite_columns, to_sql
    from deltamerge.spark.qualifiers import qualified_columns

    query = list(df.columns)
    in_table = {c.lower() for c in table}
    in_query = {c.lower() for c in query}
    by_qualifier = qualified_columns(df)
    ambiguous: list[str] = []
    unresolved: list[str] = []

    def resolve(parts: list[str]) -> Any:
        if len(parts) > 1 and target_alias is not None and parts[0].lower() == target_alias.lower():
            return parse_expression(_q(_TARGET, *parts[1:]))
        if len(parts) > 1 and parts[0].lower() not in in_table:
            positions = by_qualifier((parts[0],), parts[1])
            if positions:
                return parse_expression(_q(_SOURCE, query[positions[0]], *parts[2:]))
            unresolved.append(".".join(parts))  # a qualifier neither side answers to
            return parse_expression(_q(*parts))
        name = parts[0].lower()
        if name in in_table and name in in_query:
            ambiguous.append(".".join(parts))
        elif name in in_table:
            return parse_expression(_q(_TARGET, *parts))
        elif name in in_query:
            return parse_expression(_q(_SOURCE, *parts))
        else:
            unresolved.append(".".join(parts))
        return parse_expression(_q(*parts))

    rewritten = to_sql(rewrite_columns(parse_expression(text), resolve))
    if ambiguous:
        raise AnalysisError(
            f"Column(s) {', '.join(f'`{c}`' for c in dict.fromkeys(ambiguous))} are ambiguous in the "
            "condition of INSERT REPLACE ON. Consider specifying an alias for these columns.",
            error_class="DELTA_INSERT_REPLACE_ON_AMBIGUOUS_COLUMNS_IN_CONDITION",
            sql_state="42702",
        )
    if unresolved:
        raise AnalysisError(
            f"Column(s) {', '.join(f'`{c}`' for c in dict.fromkeys(unresolved))} cannot be resolved in "
            "the condition of INSERT REPLACE ON.",
            error_class="DELTA_INSERT_REPLACE_ON_UNRESOLVED_COLUMNS_IN_CONDITION",
            sql_state="42703",
        )
    return rewritten


def replace_matching(
    df: Any, path: str, partition_by: Sequence[str], merge_schema: bool, options: Mapping[str, str]
) -> int | None:
    """Delete the target rows some row of ``df`` matches (``replaceOn`` / ``replaceUsing`` in
    ``options``) and insert all of ``df``, in one ``WRITE`` commit; the version committed."""
    from pyspark.sql import functions as F

    from deltamerge import catalog
    from deltamerge.configure.replace import write_metrics
    from deltamerge.io import _align, _check_names, partitioning_mismatch, snapshot_for
    from deltamerge.log.snapshot import DeltaLog
    from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
    from deltamerge.merge.command import run_merge
    from deltamerge.predicates import parse_expression
    from deltamerge.spark.types import to_spark_schema
    from deltamerge.txn.operations import Operation

    opts = {k.lower(): v for k, v in options.items()}
    root = table_root(path)
    meta = snapshot_for(root).metadata
    parts = list(meta.partition_columns)
    if partition_by and [p.lower() for p in partition_by] != [p.lower() for p in parts]:
        raise partitioning_mismatch(partition_by, parts, overwrite=True)
    _check_names(df.schema)
    table_schema = to_spark_schema(meta.schema_string)
    table_names = [f.name for f in table_schema.fields]
    params: dict[str, Any] = {"mode": "Overwrite", "partitionBy": parts}
    if "replaceon" in opts:
        condition = _on_condition(opts["replaceon"], opts.get("targetalias"), table_names, df)
        params["replaceOnCond"] = opts["replaceon"]
    else:
        columns = using_columns(opts["replaceusing"])
        check_using_columns(columns, table_names, df.columns)
        condition = " AND ".join(f"{_q(_TARGET, c)} = {_q(_SOURCE, c)}" for c in columns)
        params["replaceUsingCols"] = "(" + ", ".join(columns) + ")"
    data, final = _align(df, table_schema, merge_schema=merge_schema, overwrite=True)
    new_columns = [f.name for f in final.fields[len(table_schema.fields) :]]
    # One read of the rows: each once to match (marker true) and once to insert.
    twice = F.explode(F.array(F.lit(False), F.lit(True))).alias(_MARKER)
    source = data.select("*", twice).alias(_SOURCE)
    insert = MergeClause(
        ClauseKind.NOT_MATCHED,
        ActionType.INSERT,
        parse_expression(f"NOT {_q(_SOURCE, _MARKER)}"),
        tuple(Assignment((f.name,), parse_expression(_q(_SOURCE, f.name))) for f in final.fields),
    )
    spec = MergeSpec(
        source=source,
        condition=parse_expression(f"{_q(_SOURCE, _MARKER)} AND ({condition})"),
        clauses=(MergeClause(ClauseKind.MATCHED, ActionType.DELETE, None, ()), insert),
        target_alias=_TARGET,
        source_alias=_SOURCE,
        schema_evolution=bool(new_columns),
    )

    def operation(_spec: MergeSpec, m: Any) -> Operation:
        return Operation("WRITE", params, write_metrics(m))

    try:
        run_merge(df.sparkSession, root, spec, operation=operation, write_options=options)
    except InvariantViolationError as e:
        replaced = opts.get("replaceon") or opts.get("replaceusing")
        raise AnalysisError(
            f"Written data violates a table constraint during REPLACE ON/USING '{replaced}'. {e}",
            error_class="DELTA_REPLACE_ON_OR_USING_TABLE_CONSTRAINT_VIOLATION",
            sql_state="44000",
        ) from e
    catalog.refresh_views(df.sparkSession, root)
    return DeltaLog.for_table(root).update().version
