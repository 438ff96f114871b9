"""Per-row output generation (Delta's ``MergeOutputGeneration``).

Each joined row gets one action code: the index of the first clause of its kind whose condition
is true, ``COPY`` (keep the target row unchanged) or ``DROP`` (an unmatched source row that no
insert clause takes). Every output column is then one ``CASE action WHEN k THEN value_k ...``, so
clause conditions are evaluated once per row, and the counters are aggregates of the action code
collected with ``observe`` while the rows are written.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from deltamerge.merge.analysis import ResolvedClause, ResolvedMerge, tcol
from deltamerge.merge.clauses import ActionType, ClauseKind
from deltamerge.merge.sql_trees import typed_null
from deltamerge.predicates import to_sql
from deltamerge.spark.scan import ROW_ID_COL, ROW_VERSION_COL
from deltamerge.spark.types import quote_name

ACTION = "__dm_action"
SOURCE_PRESENT = "__dm_sp"
TARGET_PRESENT = "__dm_tp"
COPY = -1
DROP = -2


def sql_col(node) -> Column:  # type: ignore[no-untyped-def]
    """A Spark Column for an internal-name expression tree."""
    return F.expr(to_sql(node))


# The per-row expressions are built as SQL text and handed to Spark in one ``F.expr`` per column:
# composing them from Column objects costs a Python->JVM round trip per ``when``/``lit``/``col``
# (thousands per merge), which is a visible part of a small merge's wall time.


def _cond_sql(c: ResolvedClause) -> str:
    return "true" if c.condition is None else f"({to_sql(c.condition)})"


def _first_true_sql(clauses: Sequence[ResolvedClause], default: int) -> str:
    if not clauses:
        return str(default)
    whens = " ".join(f"WHEN {_cond_sql(c)} THEN {c.index}" for c in clauses)
    return f"CASE {whens} ELSE {default} END"


def action_sql(rm: ResolvedMerge, *, has_source: bool, has_target: bool) -> str:
    """The action code of a joined row as SQL (first matching clause wins within each kind)."""
    inserts = _first_true_sql(rm.of_kind(ClauseKind.NOT_MATCHED), DROP)
    if not has_target:
        return inserts
    by_source = _first_true_sql(rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE), COPY)
    if not has_source:
        return by_source
    matched = _first_true_sql(rm.of_kind(ClauseKind.MATCHED), COPY)
    sp, tp = quote_name(SOURCE_PRESENT), quote_name(TARGET_PRESENT)
    return (
        f"CASE WHEN {sp} IS NOT NULL AND {tp} IS NOT NULL THEN {matched} "
        f"WHEN {sp} IS NULL THEN {by_source} ELSE {inserts} END"
    )


def action_column(rm: ResolvedMerge, *, has_source: bool, has_target: bool) -> Column:
    """The action code of a joined row (first matching clause wins within each kind)."""
    return F.expr(action_sql(rm, has_source=has_source, has_target=has_target))


def tracking_sql(*, has_target: bool) -> list[str]:
    """Row tracking's two materialized values of a written row (Delta's MergeOutputGeneration): a
    target row keeps its id, a copied row its commit version too; an updated row takes the new
    commit's version and an inserted row fresh ids from its file (NULL)."""
    if not has_target:
        return ["CAST(NULL AS BIGINT)", "CAST(NULL AS BIGINT)"]
    version = f"CASE WHEN {quote_name(ACTION)} = {COPY} THEN {ROW_VERSION_COL} END"
    return [ROW_ID_COL, version]


def output_sql(rm: ResolvedMerge, *, has_target: bool, copies: bool = True) -> list[str]:
    """``output_columns`` as SQL text, one ``CASE ... END`` per final column (unaliased)."""
    schema: StructType = rm.final_schema
    action = quote_name(ACTION)
    out: list[str] = []
    # Without a target side only INSERT clauses can apply (UPDATE outputs refer to target columns).
    writers = [
        c for c in rm.clauses if c.outputs is not None and (has_target or c.kind is ClauseKind.NOT_MATCHED)
    ]
    for j, field in enumerate(schema.fields):
        # Analysis already cast every value to its final column type (casting.py: by-name structs,
        # store-assignment policy); ``keep_values`` is the unchanged target value in that type.
        keep = _keep_sql(rm, j) if has_target else to_sql(typed_null(field.dataType))
        values: list[tuple[int, str]] = []
        for c in writers:
            assert c.outputs is not None
            node = c.outputs[j]
            if node is None:
                continue  # an UPDATE that leaves this column as it is
            values.append((c.index, to_sql(node)))
        if not copies and values and len(values) == len(writers):
            # Rows of non-writing actions (deletes, dropped source rows) are filtered out after
            # this projection, so the last writer's value can stand in as the fallback.
            *branches, (_, keep) = values
        else:
            branches = values
        out.append(_choose(action, branches, keep))
    return out


def _keep_sql(rm: ResolvedMerge, j: int) -> str:
    """Final column j of an unchanged target row: its value in the final type (NULL for a column
    schema evolution adds)."""
    if j < len(rm.target_schema.fields):
        return to_sql(rm.keep_values[j]) if rm.keep_values else quote_name(tcol(j))
    return to_sql(typed_null(rm.final_schema.fields[j].dataType))


def copied_exprs(rm: ResolvedMerge) -> list[str]:
    """``selectExpr`` text of an unchanged target row in the final schema (no action code)."""
    return [f"{_keep_sql(rm, j)} AS {quote_name(f.name)}" for j, f in enumerate(rm.final_schema.fields)]


def _choose(action: str, branches: list[tuple[int, str]], keep: str) -> str:
    """``CASE`` over the action code. Each branch tests one distinct code, so branches with the
    same value merge into one ``IN`` test, whatever their order (an upsert's UPDATE * and INSERT *
    give one test per column instead of two: half the generated code, which for a wide table is
    what Spark's JIT compiler has to warm up)."""
    codes: dict[str, list[int]] = {}
    for index, value in branches:
        codes.setdefault(value, []).append(index)
    codes.pop(keep, None)  # the fallback gives that value anyway
    if not codes:
        return f"({keep})"
    whens = " ".join(
        f"WHEN {action} = {ks[0]} THEN ({v})"
        if len(ks) == 1
        else f"WHEN {action} IN ({', '.join(map(str, ks))}) THEN ({v})"
        for v, ks in codes.items()
    )
    return f"CASE {whens} ELSE ({keep}) END"


def output_columns(
    rm: ResolvedMerge,
    *,
    has_target: bool,
    copies: bool = True,
    tracking: tuple[str, str] | None = None,
) -> list[Column]:
    """One column per final target column: the value chosen by the row's action code.

    ``copies=False`` promises that no row with the ``COPY`` code reaches the projection (DV mode
    filters them out first). A column that every writing clause assigns then needs no unchanged
    target value, so Spark can prune unused target columns from the scan and the join.
    ``tracking`` (row tracking's materialized column names) adds those two columns.
    """
    exprs = output_exprs(rm, has_target=has_target, copies=copies, tracking=tracking)
    return [F.expr(e) for e in exprs]


def output_exprs(
    rm: ResolvedMerge,
    *,
    has_target: bool,
    copies: bool = True,
    tracking: tuple[str, str] | None = None,
) -> list[str]:
    """``output_columns`` as ``selectExpr`` text (one Python->JVM call for all of them)."""
    names = [f.name for f in rm.final_schema.fields]
    texts = output_sql(rm, has_target=has_target, copies=copies)
    if tracking:
        names += list(tracking)
        texts += tracking_sql(has_target=has_target)
    return [f"{t} AS {quote_name(n)}" for t, n in zip(texts, names, strict=True)]


def touch_sql(rm: ResolvedMerge) -> str:
    """Whether a matched row touches its file: any MATCHED clause condition holds when the merge
    has only MATCHED clauses (Delta's matched-only rule), else always."""
    if not rm.is_matched_only:
        return "true"
    conds = [_cond_sql(c) for c in rm.of_kind(ClauseKind.MATCHED)]
    assert conds
    return f"coalesce({' OR '.join(conds)}, false)"


def touch_condition(rm: ResolvedMerge) -> Column:
    """``touch_sql`` as a Column."""
    return F.expr(touch_sql(rm))


def changes_target_row_sql(rm: ResolvedMerge) -> str:
    """Whether the row's action code updates or deletes its target row (a deletion-vector
    position), as SQL."""
    changing = [str(c.index) for c in rm.clauses if c.action in (ActionType.UPDATE, ActionType.DELETE)]
    return f"{quote_name(ACTION)} IN ({', '.join(changing)})" if changing else "false"


def changes_target_row(rm: ResolvedMerge, action: Column) -> Column:
    """Whether an action code updates or deletes its target row (a deletion-vector position)."""
    changing = [c.index for c in rm.clauses if c.action in (ActionType.UPDATE, ActionType.DELETE)]
    return action.isin(changing) if changing else F.lit(False)


def target_side_rows(rm: ResolvedMerge, counts: dict[str, int]) -> int:
    """Rows of a left join of the target with the source, from the counters: matched (by clause,
    or copied when no clause acted) and unmatched (copied) target rows."""
    matched = sum(counts.get(f"clause_{c.index}", 0) for c in rm.of_kind(ClauseKind.MATCHED))
    return counts.get("copied", 0) + matched


def count_actions(df: DataFrame, rm: ResolvedMerge) -> dict[str, int]:
    """The counters of ``counter_columns`` computed directly (when Spark dropped the observation)."""
    by = {int(r[ACTION]): int(r["count"]) for r in df.groupBy(ACTION).count().collect()}
    result = {f"clause_{c.index}": by.get(c.index, 0) for c in rm.clauses}
    result["copied"] = by.get(COPY, 0)
    return result


def removed_codes(rm: ResolvedMerge) -> list[int]:
    """Action codes whose rows are not written: deletes and dropped source rows."""
    return [c.index for c in rm.clauses if c.action is ActionType.DELETE] + [DROP]


def counter_names(rm: ResolvedMerge) -> list[str]:
    """The names of the ``counter_columns`` (per clause, then copied rows)."""
    return [f"clause_{c.index}" for c in rm.clauses] + ["copied"]


def counter_columns(rm: ResolvedMerge) -> list[Column]:
    """Aggregates for ``observe``: rows per clause plus copied rows."""
    # count(CASE ...), not count_if: Spark rewrites count_if's test into a common subexpression
    # projected beside the rows, which made an observation ~1.5x as costly (20M rows, noop sink).
    action = quote_name(ACTION)
    cols = [
        F.expr(f"count(CASE WHEN {action} = {c.index} THEN 1 END) AS clause_{c.index}") for c in rm.clauses
    ]
    cols.append(F.expr(f"count(CASE WHEN {action} = {COPY} THEN 1 END) AS copied"))
    return cols


def project_output(df: DataFrame, rm: ResolvedMerge, *, has_source: bool, has_target: bool) -> DataFrame:
    """Joined rows -> (final columns..., action code)."""
    with_action = df.withColumn(ACTION, action_column(rm, has_source=has_source, has_target=has_target))
    return with_action.select(*output_columns(rm, has_target=has_target), F.col(ACTION))


def written_rows(projected: DataFrame, rm: ResolvedMerge) -> DataFrame:
    """Only the rows that go into data files, without the action code."""
    codes = ", ".join(str(c) for c in removed_codes(rm))
    return projected.where(f"{quote_name(ACTION)} NOT IN ({codes})").drop(ACTION)
