"""``DeltaMergeBuilder``: delta-spark's Python merge builder, immutable, with its argument checks.

Each ``when...`` call returns a new builder with one clause appended; ``execute()`` turns the
clauses into a ``MergeSpec`` and runs the command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column, DataFrame
from sqlglot import exp

from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
from deltamerge.merge.resolution import side_qualifier
from deltamerge.predicates import column_parts, parse_expression
from deltamerge.spark.arg_checks import check_condition_arg, check_set_arg
from deltamerge.spark.columns import PendingUdf, attribute_refs, column_session, expression_text


def _check_condition(condition: Any, method: str) -> None:
    check_condition_arg(condition, f"'condition' in {method}")


def _check_dict(values: Any, arg: str, method: str) -> dict[str, str | Column]:
    return check_set_arg(values, f"'{arg}' in {method}")


def _unaliased(text: str):  # type: ignore[no-untyped-def]
    """An expression of a builder string or Column without a top-level alias (``"id = 1 x"`` reads
    as ``id = 1 AS x``): Spark drops aliases outside a projection (CleanupAliases), so Delta
    merges with the expression, where an alias in the generated SQL was a syntax error."""
    node = parse_expression(text)
    while isinstance(node.unnest(), exp.Alias):  # a Column's text is parenthesised: (x AS y)
        node = node.unnest().this
    return node


def parse_condition(value: str | Column | None):  # type: ignore[no-untyped-def]
    """A builder condition (SQL string or Column) as an expression tree."""
    return None if value is None else _unaliased(expression_text(value))


def parse_key(key: str) -> tuple[str, ...]:
    """A column-name key (``"t.x"``, ``"a.b"``, back-ticks quote) as name parts."""
    node = parse_expression(key)
    try:
        return tuple(column_parts(node))  # type: ignore[arg-type]
    except ValueError:
        return (key,)


def assignments(values: dict[str, str | Column]) -> tuple[Assignment, ...]:
    """Builder ``set``/``values`` dicts as assignments."""
    return tuple(Assignment(parse_key(k), _unaliased(expression_text(v))) for k, v in values.items())


@dataclass(frozen=True)
class DeltaMergeBuilder:
    """Builder for a MERGE; obtained from ``DeltaTable.merge(source, condition)``."""

    _run: Callable[[MergeSpec], DataFrame]
    _explain: Callable[[MergeSpec], str]
    _source: DataFrame
    _condition: Any
    _target_alias: str | None
    _source_alias: str | None
    _target_name: tuple[str, ...] = ()
    _clauses: tuple[MergeClause, ...] = ()
    _evolve: bool = False
    _extras: dict[str, Any] = field(default_factory=dict)
    _refs: Callable[[int, str], str] | None = None  # renders a pre-resolved df["col"] reference
    # The temporary functions of UDF Columns, registered only while the merge runs (shared by the
    # builders derived from this one: a fork may register one it does not use, harmlessly).
    _udfs: list[PendingUdf] = field(default_factory=list)

    def _parse(self, value: str | Column | None):  # type: ignore[no-untyped-def]
        with attribute_refs(self._refs), column_session(self._source.sparkSession, self._udfs):
            return parse_condition(value)

    def _assign(self, values: dict[str, str | Column]) -> tuple[Assignment, ...]:
        with attribute_refs(self._refs), column_session(self._source.sparkSession, self._udfs):
            return assignments(values)

    @contextlib.contextmanager
    def _functions(self) -> Iterator[None]:
        udfs = list(self._udfs)
        try:
            for udf in udfs:
                udf.register()
            yield
        finally:
            for udf in udfs:
                with contextlib.suppress(Exception):  # a stopped session has nothing to drop
                    udf.drop()

    def _with(self, clause: MergeClause | None) -> DeltaMergeBuilder:
        return self if clause is None else replace(self, _clauses=(*self._clauses, clause))

    def whenMatchedUpdate(
        self, condition: str | Column | None = None, set: dict[str, str | Column] | None = None
    ) -> DeltaMergeBuilder:
        """WHEN MATCHED [AND condition] THEN UPDATE SET ..."""
        values = _check_dict(set, "set", "whenMatchedUpdate")
        _check_condition(condition, "whenMatchedUpdate")
        if not values and condition is None:
            return self  # delta-spark drops an unconditional update with no assignment
        return self._with(
            MergeClause(ClauseKind.MATCHED, ActionType.UPDATE, self._parse(condition), self._assign(values))
        )

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        """WHEN MATCHED [AND condition] THEN UPDATE SET *"""
        _check_condition(condition, "whenMatchedUpdateAll")
        return self._with(MergeClause(ClauseKind.MATCHED, ActionType.UPDATE, self._parse(condition), None))

    def whenMatchedDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        """WHEN MATCHED [AND condition] THEN DELETE"""
        _check_condition(condition, "whenMatchedDelete")
        return self._with(MergeClause(ClauseKind.MATCHED, ActionType.DELETE, self._parse(condition), ()))

    def whenNotMatchedInsert(
        self, condition: str | Column | None = None, values: dict[str, str | Column] | None = None
    ) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED [AND condition] THEN INSERT (...) VALUES (...)"""
        vals = _check_dict(values, "values", "whenNotMatchedInsert")
        _check_condition(condition, "whenNotMatchedInsert")
        return self._with(
            MergeClause(ClauseKind.NOT_MATCHED, ActionType.INSERT, self._parse(condition), self._assign(vals))
        )

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED [AND condition] THEN INSERT *"""
        _check_condition(condition, "whenNotMatchedInsertAll")
        return self._with(
            MergeClause(ClauseKind.NOT_MATCHED, ActionType.INSERT, self._parse(condition), None)
        )

    def whenNotMatchedBySourceUpdate(
        self, condition: str | Column | None = None, set: dict[str, str | Column] | None = None
    ) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET ..."""
        values = _check_dict(set, "set", "whenNotMatchedBySourceUpdate")
        _check_condition(condition, "whenNotMatchedBySourceUpdate")
        if not values and condition is None:
            return self
        return self._with(
            MergeClause(
                ClauseKind.NOT_MATCHED_BY_SOURCE,
                ActionType.UPDATE,
                self._parse(condition),
                self._assign(values),
            )
        )

    def whenNotMatchedBySourceDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        """WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE"""
        _check_condition(condition, "whenNotMatchedBySourceDelete")
        return self._with(
            MergeClause(ClauseKind.NOT_MATCHED_BY_SOURCE, ActionType.DELETE, self._parse(condition), ())
        )

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """Allow the merge to add source columns to the target schema."""
        return replace(self, _evolve=True)

    def _spec(self) -> MergeSpec:
        return MergeSpec(
            source=self._source,
            condition=self._parse(self._condition),
            clauses=self._clauses,
            target_alias=self._target_alias,
            source_alias=self._source_alias,
            target_name=self._target_name,
            schema_evolution=self._evolve,
            extras=dict(self._extras),
        )

    def execute(self) -> DataFrame:
        """Run the merge; returns one row (num_affected_rows, num_updated_rows, num_deleted_rows,
        num_inserted_rows)."""
        spec = self._spec()
        with self._functions():
            return self._run(spec)

    def explain(self) -> str:
        """The plan (executor, join, files before/after skipping, materialization), nothing written."""
        spec = self._spec()
        with self._functions():
            return self._explain(spec)


def validate_merge_args(source: Any, condition: Any) -> None:
    """delta-spark's checks of ``DeltaTable.merge(source, condition)``."""
    if source is None:
        raise ValueError("'source' in merge cannot be None")
    if not isinstance(source, DataFrame):
        raise TypeError("Type of 'source' in merge must be DataFrame.")
    if condition is None:
        raise ValueError("'condition' in merge cannot be None")
    _check_condition(condition, "merge")


def dataframe_alias(df: DataFrame) -> str | None:
    """The alias set by ``df.alias(name)`` (top of the plan), or the name of a table read with
    ``spark.table(name)`` (Spark qualifies its columns with the name's last part), if any."""
    try:
        plan = getattr(df, "_plan", None)
        if plan is not None and type(plan).__name__ == "SubqueryAlias":
            return str(plan._alias)
        if plan is not None and type(plan).__name__ == "Read":
            return _last_part(str(plan.table_name))
        jdf = getattr(df, "_jdf", None)
        if jdf is not None:
            logical = jdf.queryExecution().logical()
            kind = logical.getClass().getSimpleName()
            if kind == "SubqueryAlias":
                return str(logical.alias())
            if kind == "UnresolvedRelation":
                analyzed = jdf.queryExecution().analyzed()
                if analyzed.getClass().getSimpleName() == "SubqueryAlias":
                    return str(analyzed.alias())
    except Exception:
        return None
    return None


def _last_part(name: str) -> str:
    from deltamerge.catalog import name_parts

    parts = name_parts(name)
    return parts[-1] if parts else name


def attribute_ids(df: DataFrame) -> set[int]:
    """What a pre-resolved ``df["col"]`` of ``df`` can carry: the ids of the attributes ``df``
    outputs (classic), or the ids of ``df``'s plan and of the plans under it (Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        plan = getattr(df, "_plan", None)
        return _plan_ids(plan) if plan is not None else set()
    try:
        output = jdf.queryExecution().analyzed().output()
        return {int(output.apply(i).exprId().id()) for i in range(output.size())}
    except Exception:
        return set()


def _plan_ids(plan: Any) -> set[int]:
    from pyspark.sql.connect.plan import LogicalPlan

    ids: set[int] = set()
    todo = [plan]
    while todo:
        p = todo.pop()
        pid = getattr(p, "_plan_id", None)
        if isinstance(pid, int):
            ids.add(pid)
        for v in vars(p).values():
            if isinstance(v, LogicalPlan):
                todo.append(v)
            elif isinstance(v, (list, tuple)):
                todo += [x for x in v if isinstance(x, LogicalPlan)]
    return ids


def attribute_renderer(targets: Sequence[DataFrame], source: DataFrame) -> Callable[[int, str], str]:
    """How a pre-resolved Column ``df["col"]`` reads in a MERGE (Delta resolves it by attribute id):
    an attribute of the target (a DataFrame of ``DeltaTable.toDF()``) or of the source names that
    side; one of both stays unqualified, so it resolves where one side is in scope and is ambiguous
    where both are (as in Delta's self-merges); one of neither is an error. ``targets`` are the
    DataFrames ``toDF()`` gave out; ids are looked up only when such a Column shows up."""
    ids: dict[str, set[int]] = {}

    def render(expr_id: int, name: str) -> str:
        if not ids:
            ids["target"] = set().union(*(attribute_ids(t) for t in targets))
            ids["source"] = attribute_ids(source)
        quoted = "`" + name.replace("`", "``") + "`"
        in_target, in_source = expr_id in ids["target"], expr_id in ids["source"]
        if in_target and in_source:
            return quoted
        if in_target or in_source:
            return f"{side_qualifier('target' if in_target else 'source')}.{quoted}"
        from deltamerge.errors import AnalysisError

        raise AnalysisError(
            f"Resolved attribute(s) {name}#{expr_id} missing from the MERGE's inputs in operator "
            "MergeIntoTable: the Column was made from a DataFrame that is neither the source nor "
            'DeltaTable.toDF() of the target. Use F.col("alias.column") or a SQL string instead.',
            error_class="DELTA_MERGE_RESOLVED_ATTRIBUTE_MISSING_FROM_INPUT",
        )

    return render
