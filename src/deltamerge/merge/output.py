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
from deltamerge.predicates import to_sql

ACTION = "__dm_action"
SOURCE_PRESENT = "__dm_sp"
TARGET_PRESENT = "__dm_tp"
COPY = -1
DROP = -2


def sql_col(node) -> Column:  # type: ignore[no-untyped-def]
    """A Spark Column for an internal-name expression tree."""
    return F.expr(to_sql(node))


def _first_true(clauses: Sequence[ResolvedClause], default: int) -> Column:
    chain: Column | None = None
    for c in clauses:
        cond = F.lit(True) if c.condition is None else sql_col(c.condition)
        chain = F.when(cond, F.lit(c.index)) if chain is None else chain.when(cond, F.lit(c.index))
    return F.lit(default) if chain is None else chain.otherwise(F.lit(default))


def action_column(rm: ResolvedMerge, *, has_source: bool, has_target: bool) -> Column:
    """The action code of a joined row (first matching clause wins within each kind)."""
    matched = _first_true(rm.of_kind(ClauseKind.MATCHED), COPY)
    by_source = _first_true(rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE), COPY)
    inserts = _first_true(rm.of_kind(ClauseKind.NOT_MATCHED), DROP)
    if not has_target:
        return inserts
    if not has_source:
        return by_source
    sp, tp = F.col(SOURCE_PRESENT), F.col(TARGET_PRESENT)
    return F.when(sp.isNotNull() & tp.isNotNull(), matched).when(sp.isNull(), by_source).otherwise(inserts)


def output_columns(rm: ResolvedMerge, *, has_target: bool, copies: bool = True) -> list[Column]:
    """One column per final target column: the value chosen by the row's action code.

    ``copies=False`` promises that no row with the ``COPY`` code reaches the projection (DV mode
    filters them out first). A column that every writing clause assigns then needs no unchanged
    target value, so Spark can prune unused target columns from the scan and the join.
    """
    schema: StructType = rm.final_schema
    n_target = len(rm.target_schema.fields)
    action = F.col(ACTION)
    cols: list[Column] = []
    # Without a target side only INSERT clauses can apply (UPDATE outputs refer to target columns).
    writers = [
        c for c in rm.clauses if c.outputs is not None and (has_target or c.kind is ClauseKind.NOT_MATCHED)
    ]
    for j, field in enumerate(schema.fields):
        # Analysis already cast every value to its final column type (casting.py: by-name structs,
        # store-assignment policy); ``keep_values`` is the unchanged target value in that type.
        if has_target and j < n_target:
            keep = sql_col(rm.keep_values[j]) if rm.keep_values else F.col(tcol(j))
        else:
            keep = F.lit(None).cast(field.dataType)
        values: list[tuple[int, Column]] = []
        for c in writers:
            assert c.outputs is not None
            node = c.outputs[j]
            if node is None:
                continue  # an UPDATE that leaves this column as it is
            values.append((c.index, sql_col(node)))
        if not copies and values and len(values) == len(writers):
            # Rows of non-writing actions (deletes, dropped source rows) are filtered out after
            # this projection, so the last writer's value can stand in as the fallback.
            *branches, (_, keep) = values
        else:
            branches = values
        chain: Column | None = None
        for index, value in branches:
            cond = action == F.lit(index)
            chain = F.when(cond, value) if chain is None else chain.when(cond, value)
        out = keep if chain is None else chain.otherwise(keep)
        cols.append(out.alias(field.name))
    return cols


def touch_condition(rm: ResolvedMerge) -> Column:
    """Whether a matched row touches its file: any MATCHED clause condition holds when the merge
    has only MATCHED clauses (Delta's matched-only rule), else always."""
    if not rm.is_matched_only:
        return F.lit(True)
    touch: Column | None = None
    for c in rm.of_kind(ClauseKind.MATCHED):
        cond = F.lit(True) if c.condition is None else sql_col(c.condition)
        touch = cond if touch is None else touch | cond
    assert touch is not None
    return F.coalesce(touch, F.lit(False))


def changes_target_row(rm: ResolvedMerge, action: Column) -> Column:
    """Whether an action code updates or deletes its target row (a deletion-vector position)."""
    changing = [c.index for c in rm.clauses if c.action in (ActionType.UPDATE, ActionType.DELETE)]
    return action.isin(changing) if changing else F.lit(False)


def count_actions(df: DataFrame, rm: ResolvedMerge) -> dict[str, int]:
    """The counters of ``counter_columns`` computed directly (when Spark dropped the observation)."""
    by = {int(r[ACTION]): int(r["count"]) for r in df.groupBy(ACTION).count().collect()}
    result = {f"clause_{c.index}": by.get(c.index, 0) for c in rm.clauses}
    result["copied"] = by.get(COPY, 0)
    return result


def removed_codes(rm: ResolvedMerge) -> list[int]:
    """Action codes whose rows are not written: deletes and dropped source rows."""
    return [c.index for c in rm.clauses if c.action is ActionType.DELETE] + [DROP]


def counter_columns(rm: ResolvedMerge) -> list[Column]:
    """Aggregates for ``observe``: rows per clause plus copied rows."""
    action = F.col(ACTION)
    cols = [F.count_if(action == F.lit(c.index)).alias(f"clause_{c.index}") for c in rm.clauses]
    cols.append(F.count_if(action == F.lit(COPY)).alias("copied"))
    return cols


def project_output(df: DataFrame, rm: ResolvedMerge, *, has_source: bool, has_target: bool) -> DataFrame:
    """Joined rows -> (final columns..., action code)."""
    with_action = df.withColumn(ACTION, action_column(rm, has_source=has_source, has_target=has_target))
    return with_action.select(*output_columns(rm, has_target=has_target), F.col(ACTION))


def written_rows(projected: DataFrame, rm: ResolvedMerge) -> DataFrame:
    """Only the rows that go into data files, without the action code."""
    return projected.where(~F.col(ACTION).isin(removed_codes(rm))).drop(ACTION)
