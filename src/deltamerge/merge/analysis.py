"""MERGE analysis: Delta's ``ResolveDeltaMergeInto`` and ``PreprocessTableMerge`` as small passes.

Every column reference is resolved against the side(s) its clause may see (ON and MATCHED: both;
NOT MATCHED: source only; NOT MATCHED BY SOURCE: target only) and rewritten to the internal column
names of the joined DataFrame (``__t<i>`` for target column i, ``__s<i>`` for source column i).
Assignments are aligned to the (possibly evolved) target schema: each resolved clause carries one
output expression per target column, in schema order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql.types import DataType, StructField, StructType
from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.merge.clauses import ActionType, ClauseKind, MergeClause, MergeSpec
from deltamerge.predicates import (
    has_aggregate,
    has_subquery,
    has_window,
    is_deterministic,
    rewrite_columns,
    split_conjuncts,
    to_sql,
)


def tcol(i: int) -> str:
    """Internal name of target column ``i`` in the joined DataFrame."""
    return f"__t{i}"


def scol(i: int) -> str:
    """Internal name of source column ``i`` in the joined DataFrame."""
    return f"__s{i}"


@dataclass(frozen=True)
class Side:
    """One input of the merge as seen by name resolution."""

    name: str  # "target" or "source"
    alias: str | None
    columns: tuple[str, ...]
    internal: Callable[[int], str]
    case_sensitive: bool

    def _eq(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    def index(self, name: str) -> int | None:
        """Position of column ``name`` (None when absent)."""
        for i, c in enumerate(self.columns):
            if self._eq(c, name):
                return i
        return None

    def matches_alias(self, qualifier: str) -> bool:
        """Whether ``qualifier`` names this side."""
        return self.alias is not None and self._eq(self.alias, qualifier)

    def qualified(self) -> list[str]:
        """Columns as ``alias.col`` for error messages."""
        prefix = f"{self.alias}." if self.alias else ""
        return [f"{prefix}{c}" for c in self.columns]


@dataclass(frozen=True)
class Ref:
    """A resolved column reference: side, column index and nested field path."""

    side: str
    index: int
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResolvedClause:
    """A clause after analysis. ``outputs[j]`` is the new value of final column j (None = keep)."""

    clause: MergeClause
    index: int
    condition: exp.Expression | None
    outputs: tuple[exp.Expression | None, ...] | None

    @property
    def kind(self) -> ClauseKind:
        """The clause kind."""
        return self.clause.kind

    @property
    def action(self) -> ActionType:
        """The clause action."""
        return self.clause.action


@dataclass(frozen=True)
class ResolvedMerge:
    """The analysed MERGE: internal-name expressions and the final target schema."""

    spec: MergeSpec
    target_schema: StructType
    final_schema: StructType
    source_schema: StructType
    condition: exp.Expression
    clauses: tuple[ResolvedClause, ...]
    target_only_conjuncts: tuple[exp.Expression, ...]  # ON conjuncts over target columns, plain names
    clause_target_only: tuple[exp.Expression | None, ...] = field(default=())  # per MATCHED clause

    def of_kind(self, kind: ClauseKind) -> list[ResolvedClause]:
        """Resolved clauses of one kind in order."""
        return [c for c in self.clauses if c.kind is kind]

    @property
    def schema_changed(self) -> bool:
        """True when schema evolution adds columns."""
        return len(self.final_schema.fields) != len(self.target_schema.fields)

    @property
    def is_insert_only(self) -> bool:
        """Only NOT MATCHED clauses."""
        return all(c.kind is ClauseKind.NOT_MATCHED for c in self.clauses)

    @property
    def is_matched_only(self) -> bool:
        """Only MATCHED clauses."""
        return all(c.kind is ClauseKind.MATCHED for c in self.clauses)


# --- resolution -----------------------------------------------------------------------------------


class _Resolver:
    def __init__(self, target: Side, source: Side):
        self.target = target
        self.source = source

    def given_columns(self, scope: Sequence[Side]) -> str:
        cols: list[str] = []
        for side in sorted(scope, key=lambda s: s.name):  # Delta lists source columns first
            cols += side.qualified()
        return ", ".join(cols)

    def resolve(self, parts: list[str], scope: Sequence[Side], where: str) -> Ref:
        candidates: list[tuple[Side, int, tuple[str, ...]]] = []
        if len(parts) >= 2:
            for side in scope:
                if side.matches_alias(parts[0]):
                    idx = side.index(parts[1])
                    if idx is not None:
                        candidates.append((side, idx, tuple(parts[2:])))
        if not candidates:
            for side in scope:
                idx = side.index(parts[0])
                if idx is not None:
                    candidates.append((side, idx, tuple(parts[1:])))
        if len(candidates) > 1:
            options = ", ".join(
                f"`{s.alias}`.`{s.columns[i]}`" if s.alias else f"`{s.columns[i]}`"
                for s, i, _ in sorted(candidates, key=lambda c: c[0].name)
            )
            raise AnalysisError(
                f"Reference `{'.'.join(parts)}` is ambiguous, could be: [{options}]. "
                "Qualify the column with the source or target alias.",
                error_class="AMBIGUOUS_REFERENCE",
                sql_state="42704",
            )
        if not candidates:
            raise AnalysisError(
                f"Cannot resolve {'.'.join(parts)} in {where} given columns {self.given_columns(scope)}.",
                error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
                sql_state="42601",
            )
        side, idx, fields = candidates[0]
        return Ref(side.name, idx, fields)

    def rewrite(self, node: exp.Expression, scope: Sequence[Side], where: str) -> exp.Expression:
        def to_internal(parts: list[str]) -> exp.Expression:
            ref = self.resolve(parts, scope, where)
            internal = self.target.internal if ref.side == "target" else self.source.internal
            out: exp.Expression = exp.column(internal(ref.index))
            for f in ref.fields:
                out = exp.Dot(this=out, expression=exp.to_identifier(f, quoted=True))
            return out

        return rewrite_columns(node, to_internal)

    def refs(self, node: exp.Expression, scope: Sequence[Side], where: str) -> list[Ref]:
        found: list[Ref] = []

        def collect(parts: list[str]) -> exp.Expression:
            found.append(self.resolve(parts, scope, where))
            return exp.column("x")

        rewrite_columns(node, collect)
        return found


def _check_condition(node: exp.Expression, operation: str) -> None:
    shown = to_sql(node)
    if not is_deterministic(node):
        raise AnalysisError(
            f"Non-deterministic functions are not supported in the {operation} (condition = {shown}). "
            "Move the non-deterministic expression into the source query.",
            error_class="DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
            sql_state="0AKDC",
        )
    if has_aggregate(node):
        raise AnalysisError(
            f"Aggregate functions are not supported in the {operation} (condition = {shown}). "
            "Aggregate the source first and merge the aggregated rows.",
            error_class="DELTA_AGGREGATION_NOT_SUPPORTED",
            sql_state="42903",
        )
    if has_subquery(node):
        raise AnalysisError(
            f"Subqueries are not supported in the {operation} (condition = {shown}). "
            "Join the subquery into the source instead.",
            error_class="DELTA_UNSUPPORTED_SUBQUERY",
            sql_state="0AKDC",
        )
    if has_window(node):
        raise AnalysisError(
            f"Window functions are not supported in the {operation} (condition = {shown}).",
            error_class="UNSUPPORTED_EXPR_FOR_OPERATOR",
            sql_state="42K0E",
        )


def _check_value(node: exp.Expression, where: str) -> None:
    if has_aggregate(node) or has_window(node):
        raise AnalysisError(
            f"Aggregate and window functions are not supported in the {where} of a MERGE "
            f"(expression = {to_sql(node)}). Compute them in the source query.",
            error_class="UNSUPPORTED_EXPR_FOR_OPERATOR",
            sql_state="42K0E",
        )


_CONDITION_NAMES = {
    ActionType.UPDATE: "UPDATE condition",
    ActionType.DELETE: "DELETE condition",
    ActionType.INSERT: "INSERT condition",
}
_CLAUSE_NAMES = {ActionType.UPDATE: "UPDATE clause", ActionType.INSERT: "INSERT clause"}


def _null_of(dt: DataType) -> exp.Expression:
    return exp.Cast(this=exp.Null(), to=exp.DataType.build(dt.simpleString(), dialect="spark"))


class _Analyzer:
    def __init__(self, spec: MergeSpec, target_schema: StructType, case_sensitive: bool, evolve: bool):
        self.spec = spec
        self.target_schema = target_schema
        self.source_schema: StructType = spec.source.schema
        self.case_sensitive = case_sensitive
        self.evolve = evolve
        self.target = Side("target", spec.target_alias, tuple(f.name for f in target_schema.fields), tcol, case_sensitive)
        self.source = Side(
            "source", spec.source_alias, tuple(f.name for f in self.source_schema.fields), scol, case_sensitive
        )
        self.r = _Resolver(self.target, self.source)
        self.new_columns: list[StructField] = []

    def _eq(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    # --- schema evolution --------------------------------------------------------------------------

    def _final_index(self, name: str) -> int | None:
        for i, f in enumerate(self.target_schema.fields):
            if self._eq(f.name, name):
                return i
        for j, f in enumerate(self.new_columns):
            if self._eq(f.name, name):
                return len(self.target_schema.fields) + j
        return None

    def _add_new_column(self, name: str) -> int:
        src_idx = self.source.index(name)
        assert src_idx is not None
        field = self.source_schema.fields[src_idx]
        self.new_columns.append(StructField(field.name, field.dataType, True, field.metadata))
        return len(self.target_schema.fields) + len(self.new_columns) - 1

    def _plan_evolution(self) -> None:
        """Collect new top-level columns that clauses assign (Delta's filterSchema, top level)."""
        if not self.evolve:
            return
        for clause in self.spec.clauses:
            if clause.kind is ClauseKind.NOT_MATCHED_BY_SOURCE or clause.action is ActionType.DELETE:
                continue
            if clause.assignments is None:
                names = [f.name for f in self.source_schema.fields]
            else:
                names = []
                for a in clause.assignments:
                    key = list(a.key)
                    if len(key) >= 2 and self.target.matches_alias(key[0]):
                        key = key[1:]
                    if len(key) == 1:
                        names.append(key[0])
            for name in names:
                if self._final_index(name) is None and self.source.index(name) is not None:
                    self._add_new_column(name)

    @property
    def final_schema(self) -> StructType:
        return StructType(list(self.target_schema.fields) + self.new_columns)

    # --- clauses ---------------------------------------------------------------------------------------

    def _scope(self, kind: ClauseKind) -> list[Side]:
        if kind is ClauseKind.NOT_MATCHED:
            return [self.source]
        if kind is ClauseKind.NOT_MATCHED_BY_SOURCE:
            return [self.target]
        return [self.source, self.target]

    def _key_index(self, clause: MergeClause, key: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
        parts = list(key)
        where = _CLAUSE_NAMES[clause.action]
        if len(parts) >= 2 and self.target.matches_alias(parts[0]) and self._final_index(parts[1]) is not None:
            parts = parts[1:]
        idx = self._final_index(parts[0])
        if idx is None:
            raise AnalysisError(
                f"Cannot resolve {'.'.join(key)} in {where} given columns "
                f"{', '.join(self.target.qualified())}.",
                error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
                sql_state="42601",
            )
        return idx, tuple(parts[1:])

    def _star_outputs(self, clause: MergeClause) -> list[exp.Expression | None]:
        final = self.final_schema
        outputs: list[exp.Expression | None] = [None] * len(final.fields)
        where = _CLAUSE_NAMES[clause.action]
        if self.evolve:
            for i, f in enumerate(self.source_schema.fields):
                j = self._final_index(f.name)
                if j is not None:
                    outputs[j] = exp.column(scol(i))
            return outputs
        for j, f in enumerate(final.fields):
            i = self.source.index(f.name)
            if i is None:
                raise AnalysisError(
                    f"Cannot resolve {f.name} in {where} given columns {', '.join(self.source.qualified())}.",
                    error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
                    sql_state="42601",
                )
            outputs[j] = exp.column(scol(i))
        return outputs

    def _explicit_outputs(self, clause: MergeClause) -> list[exp.Expression | None]:
        final = self.final_schema
        outputs: list[exp.Expression | None] = [None] * len(final.fields)
        scope = self._scope(clause.kind)
        where = _CLAUSE_NAMES[clause.action]
        nested: dict[int, list[tuple[tuple[str, ...], exp.Expression]]] = {}
        seen: list[tuple[int, tuple[str, ...], str]] = []
        assert clause.assignments is not None
        for a in clause.assignments:
            idx, fields = self._key_index(clause, a.key)
            if clause.action is ActionType.INSERT and fields:
                raise AnalysisError(
                    f"Nested field is not supported in the INSERT clause of MERGE operation "
                    f"(field = {a.key_sql}). Insert the whole struct instead.",
                    error_class="DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION",
                    sql_state="0AKDC",
                )
            for other_idx, other_fields, other_sql in seen:
                if other_idx != idx:
                    continue
                shorter = min(len(fields), len(other_fields))
                if tuple(f.lower() for f in fields[:shorter]) == tuple(f.lower() for f in other_fields[:shorter]):
                    if clause.action is ActionType.INSERT:
                        raise AnalysisError(
                            "Duplicate column names in INSERT clause. List each column once.",
                            error_class="DELTA_DUPLICATE_COLUMNS_ON_INSERT",
                            sql_state="42701",
                        )
                    raise AnalysisError(
                        f"There is a conflict from these SET columns: [{other_sql}, {a.key_sql}]. "
                        "Assign each column (or nested field) once.",
                        error_class="DELTA_CONFLICT_SET_COLUMN",
                        sql_state="42701",
                    )
            seen.append((idx, fields, a.key_sql))
            _check_value(a.value, where)
            value = self.r.rewrite(a.value, scope, where)
            if fields:
                nested.setdefault(idx, []).append((fields, value))
            else:
                outputs[idx] = value
        for idx, assigns in nested.items():
            outputs[idx] = self._rebuild_struct(idx, final.fields[idx].dataType, (), assigns)
        return outputs

    def _rebuild_struct(
        self,
        idx: int,
        dtype: DataType,
        path: tuple[str, ...],
        assigns: list[tuple[tuple[str, ...], exp.Expression]],
    ) -> exp.Expression:
        """``SET a.b.c = v``: a named_struct of the target's fields with the assigned ones replaced."""
        if not isinstance(dtype, StructType):
            name = ".".join((self.final_schema.fields[idx].name, *path))
            raise AnalysisError(
                f"Updating nested fields is only supported for StructType, but you are trying to update "
                f"a field of `{name}`, which is of type: {dtype.simpleString()}.",
                error_class="DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
                sql_state="0AKDC",
            )
        known = {f.name.lower() for f in dtype.fields}
        for fields, _ in assigns:
            if fields[0].lower() not in known:
                raise AnalysisError(
                    f"No such struct field `{fields[0]}` in {', '.join(f.name for f in dtype.fields)}.",
                    error_class="FIELD_NOT_FOUND",
                    sql_state="42704",
                )
        args: list[exp.Expression] = []
        for f in dtype.fields:
            mine = [(fs[1:], v) for fs, v in assigns if fs[0].lower() == f.name.lower()]
            if any(not rest for rest, _ in mine):
                value = next(v for rest, v in mine if not rest)
                value = exp.Cast(this=value, to=exp.DataType.build(f.dataType.simpleString(), dialect="spark"))
            elif mine:
                value = self._rebuild_struct(idx, f.dataType, (*path, f.name), mine)
            else:
                value = exp.column(tcol(idx)) if idx < len(self.target_schema.fields) else exp.Null()
                for p in (*path, f.name):
                    value = exp.Dot(this=value, expression=exp.to_identifier(p, quoted=True))
            args += [exp.Literal.string(f.name), value]
        return exp.Anonymous(this="named_struct", expressions=args)

    def resolve_clause(self, clause: MergeClause, index: int) -> ResolvedClause:
        scope = self._scope(clause.kind)
        condition = None
        if clause.condition is not None:
            where = _CONDITION_NAMES[clause.action]
            _check_condition(clause.condition, f"{where} of MERGE operation")
            condition = self.r.rewrite(clause.condition, scope, where)
        outputs: list[exp.Expression | None] | None
        if clause.action is ActionType.DELETE:
            outputs = None
        elif clause.is_star:
            outputs = self._star_outputs(clause)
        else:
            outputs = self._explicit_outputs(clause)
        if outputs is not None and clause.action is ActionType.INSERT:
            outputs = [o if o is not None else _null_of(f.dataType) for o, f in zip(outputs, self.final_schema.fields)]
        return ResolvedClause(clause, index, condition, None if outputs is None else tuple(outputs))

    def target_only(self, node: exp.Expression | None) -> list[exp.Expression]:
        """Conjuncts of ``node`` that reference only target columns, in plain target names."""
        out = []
        for conj in split_conjuncts(node):
            try:
                refs = self.r.refs(conj, [self.source, self.target], "search condition")
            except AnalysisError:
                continue
            if not refs or any(r.side != "target" for r in refs):
                continue
            if not is_deterministic(conj):
                continue

            def plain(parts: list[str]) -> exp.Expression:
                ref = self.r.resolve(parts, [self.source, self.target], "search condition")
                name = self.target.columns[ref.index]
                return exp.column(exp.to_identifier(name, quoted=True)) if not ref.fields else exp.Dot.build(
                    [exp.to_identifier(name, quoted=True), *[exp.to_identifier(f, quoted=True) for f in ref.fields]]
                )

            out.append(rewrite_columns(conj, plain))
        return out

    def run(self) -> ResolvedMerge:
        spec = self.spec
        if not self.target_schema.fields and not self.evolve:
            raise AnalysisError(
                "Cannot MERGE INTO a table with no columns. The target table must have columns, "
                "or schema evolution must be enabled.",
                error_class="DELTA_MERGE_INTO_EMPTY_SCHEMA_TARGET",
                sql_state="428GU",
            )
        _check_condition(spec.condition, "search condition of MERGE operation")
        condition = self.r.rewrite(spec.condition, [self.source, self.target], "search condition")
        self._plan_evolution()
        resolved = tuple(self.resolve_clause(c, i) for i, c in enumerate(spec.clauses))
        clause_target_only = tuple(
            _and_all(self.target_only(c.condition)) if c.condition is not None else None
            for c in spec.clauses
            if c.kind is ClauseKind.MATCHED
        )
        return ResolvedMerge(
            spec=spec,
            target_schema=self.target_schema,
            final_schema=self.final_schema,
            source_schema=self.source_schema,
            condition=condition,
            clauses=resolved,
            target_only_conjuncts=tuple(self.target_only(spec.condition)),
            clause_target_only=clause_target_only,
        )


def _and_all(nodes: list[exp.Expression]) -> exp.Expression | None:
    if not nodes:
        return None
    out = nodes[0]
    for n in nodes[1:]:
        out = exp.and_(out, n)
    return out


def analyze(spec: MergeSpec, target_schema: StructType, *, case_sensitive: bool, evolve: bool) -> ResolvedMerge:
    """Resolve and validate ``spec`` against the target schema (Delta's analysis + preprocessing)."""
    return _Analyzer(spec, target_schema, case_sensitive, evolve).run()
