"""MERGE analysis: Delta's ``ResolveDeltaMergeInto`` and ``PreprocessTableMerge`` as small passes.

1. Resolution. Every column reference is resolved against the side(s) its clause may see (ON and
   MATCHED: both; NOT MATCHED: source only; NOT MATCHED BY SOURCE: target only) and rewritten to
   the internal column names of the joined DataFrame (``__t<i>`` for target column i, ``__s<i>``
   for source column i). Assignment keys resolve against the target and, with schema evolution,
   for MATCHED UPDATE / INSERT against the source; ``*`` expands per Delta's rules. The sides,
   references and expression checks live in ``resolution.py``.
2. Evolution (``evolution.py``): the post-evolution target schema.
3. Alignment. Each UPDATE / INSERT clause gets one output expression per final column, cast to
   the column type by store-assignment rules (``casting.py``); nested SETs rebuild their struct.

Value types come from the schemas for plain column references and literals; anything else is
typed by Spark in one batch (a ``select`` over an empty DataFrame of the joined schema, which runs
no job and also works on Spark Connect), and the final output expressions are checked the same way
so that every type error surfaces here, before any file is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
)
from sqlglot import exp

from deltamerge.column_defaults import default_value, is_default_keyword
from deltamerge.config import SessionConf
from deltamerge.errors import AnalysisError
from deltamerge.generated import generated_columns, substitute
from deltamerge.identity import explicit_insert_error, identity_columns, identity_of, update_error
from deltamerge.merge import struct_fields
from deltamerge.merge.alignment import Action, Aligner, Typer, error, scol, tcol
from deltamerge.merge.casting import Caster, CastSettings
from deltamerge.merge.clauses import ActionType, ClauseKind, MergeClause, MergeSpec
from deltamerge.merge.evolution import (
    Widening,
    filter_schema,
    find_null_type_column,
    merge_schemas,
    widening_for,
)
from deltamerge.merge.resolution import (
    Ref,
    Side,
    _check_condition,
    _check_value,
    _Resolver,
    _unresolved,
    name_lookup,
)
from deltamerge.merge.sql_trees import field as struct_field
from deltamerge.merge.sql_trees import spark_type
from deltamerge.predicates import is_deterministic, rewrite_columns, split_conjuncts, to_sql
from deltamerge.spark.qualifiers import qualified_columns

__all__ = [
    "AnalysisSettings",
    "Ref",
    "ResolvedClause",
    "ResolvedMerge",
    "Side",
    "analyze",
    "scol",
    "tcol",
]


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
    """The analysed MERGE: internal-name expressions and the final target schema.

    Every output expression (and ``keep_values``) already has the type of its final column.
    ``keep_values[j]`` is the unchanged target value of final column j in the final type (a typed
    NULL for a column added by schema evolution).
    """

    spec: MergeSpec
    target_schema: StructType
    final_schema: StructType
    source_schema: StructType
    condition: exp.Expression
    clauses: tuple[ResolvedClause, ...]
    target_only_conjuncts: tuple[exp.Expression, ...]  # ON conjuncts over target columns, plain names
    clause_target_only: tuple[exp.Expression | None, ...] = field(default=())  # per MATCHED clause
    keep_values: tuple[exp.Expression, ...] = field(default=())

    def of_kind(self, kind: ClauseKind) -> list[ResolvedClause]:
        """Resolved clauses of one kind in order."""
        return [c for c in self.clauses if c.kind is kind]

    @property
    def schema_changed(self) -> bool:
        """True when schema evolution changes the table schema (new columns, fields or types)."""
        return self.final_schema.jsonValue() != self.target_schema.jsonValue()

    @property
    def is_insert_only(self) -> bool:
        """Only NOT MATCHED clauses."""
        return all(c.kind is ClauseKind.NOT_MATCHED for c in self.clauses)

    @property
    def is_matched_only(self) -> bool:
        """Only MATCHED clauses."""
        return all(c.kind is ClauseKind.MATCHED for c in self.clauses)


@dataclass(frozen=True)
class AnalysisSettings:
    """Session and table settings that analysis depends on."""

    cast: CastSettings = field(default_factory=CastSettings)
    widening: Widening | None = None  # type widening during evolution (table feature enabled)
    drop_null_columns: bool = False  # createDataFrame.dropNullColumns: refuse VOID columns
    empty_schema_check: bool = True  # merge.emptySchemaTargetCheck.enabled

    @classmethod
    def from_session(
        cls,
        get: Callable[[str], str | None],
        *,
        case_sensitive: bool,
        table_configuration: dict[str, str] | None,
    ) -> AnalysisSettings:
        """Read the settings through a ``key -> value | None`` getter."""

        return cls(
            cast=CastSettings.from_conf(get, case_sensitive=case_sensitive),
            widening=widening_for(table_configuration, SessionConf.TYPE_WIDENING_AUTO.get(get) or "always"),
            drop_null_columns=bool(SessionConf.DROP_NULL_COLUMNS.get(get)),
            empty_schema_check=bool(SessionConf.EMPTY_SCHEMA_TARGET_CHECK.get(get)),
        )


_CONDITION_NAMES = {
    ActionType.UPDATE: "UPDATE condition",
    ActionType.DELETE: "DELETE condition",
    ActionType.INSERT: "INSERT condition",
}
_CLAUSE_NAMES = {ActionType.UPDATE: "UPDATE clause", ActionType.INSERT: "INSERT clause"}


def display_name(name: str) -> str:
    """A column name as deltamerge's messages show it (backquoted unless a plain identifier)."""
    return name if name.replace("_", "a").isalnum() else f"`{name}`"


class _KeyError(Exception):
    """A key that does not resolve on one side (retried on the source with evolution)."""

    def __init__(self, error: AnalysisError):
        super().__init__(str(error))
        self.error = error


class _Analyzer:
    def __init__(
        self,
        spec: MergeSpec,
        target_schema: StructType,
        case_sensitive: bool,
        evolve: bool,
        settings: AnalysisSettings,
        typer: Any,
    ):
        self.spec = spec
        self.target_schema = target_schema
        self.source_schema: StructType = spec.source.schema
        self.case_sensitive = case_sensitive
        self.evolve = evolve
        self.settings = settings
        self.typer = typer
        cs = case_sensitive
        self.target = Side(
            "target", spec.target_alias, tuple(f.name for f in target_schema.fields), tcol, cs, target_schema
        )
        if spec.target_name:
            self.target = replace(self.target, by_qualifier=name_lookup(spec.target_name, self.target))
        self.source = Side(
            "source",
            spec.source_alias,
            tuple(f.name for f in self.source_schema.fields),
            scol,
            cs,
            self.source_schema,
            by_qualifier=qualified_columns(spec.source),
        )
        self.r = _Resolver(self.target, self.source)
        self.final_schema = target_schema
        self.caster = Caster(settings.cast, allow_missing=evolve, display=self.display)

    def _eq(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    def _find(self, struct: StructType, name: str) -> StructField | None:
        return next((f for f in struct.fields if self._eq(f.name, name)), None)

    def display(self, node: exp.Expression) -> str:
        """An internal-name tree in the user's names (``s.value``), for error messages."""

        def named(parts: list[str]) -> exp.Expression:
            head = parts[0]
            out: exp.Expression = exp.column(head)
            for side in (self.target, self.source):
                prefix = "__t" if side.name == "target" else "__s"
                if head.startswith(prefix) and head[3:].isdigit():
                    out = exp.column(side.columns[int(head[3:])], table=side.alias)
            for p in parts[1:]:
                out = exp.Dot(this=out, expression=exp.to_identifier(p))
            return out

        try:
            return to_sql(rewrite_columns(node, named))
        except Exception:
            return to_sql(node)

    # --- resolution of assignment keys ---------------------------------------------------------------

    def _scope(self, kind: ClauseKind) -> list[Side]:
        if kind is ClauseKind.NOT_MATCHED:
            return [self.source]
        if kind is ClauseKind.NOT_MATCHED_BY_SOURCE:
            return [self.target]
        return [self.source, self.target]

    def _key_on(self, side: Side, key: tuple[str, ...], where: str) -> tuple[str, ...]:
        parts = list(key)
        if len(parts) >= 2 and side.matches_alias(parts[0]) and side.index(parts[1]) is not None:
            parts = parts[1:]
        elif len(parts) >= 2 and side.index(parts[0]) is None:
            # ``default.people.v`` on a target opened by name: 3-, 2- then 1-part qualifiers, as Spark.
            qualified = (
                k for k in range(min(3, len(parts) - 1), 0, -1) if side.answers_to(tuple(parts[:k]), parts[k])
            )
            parts = parts[next(qualified, 0) :]
        idx = side.single(parts[0], key)
        if idx is None:
            raise _KeyError(_unresolved(".".join(display_name(p) for p in key), where, side.qualified()))
        dtype: DataType = side.schema.fields[idx].dataType
        for i, part in enumerate(parts[1:], start=1):
            if isinstance(dtype, StructType):
                found = self._find(dtype, part)
                if found is None:
                    names = ", ".join(f"`{f.name}`" for f in dtype.fields)
                    raise _KeyError(
                        error(f"No such struct field `{part}` in {names}.", "FIELD_NOT_FOUND", "42704")
                    )
                dtype = found.dataType
            elif isinstance(dtype, (MapType, ArrayType)) and (
                isinstance(dtype, MapType) or isinstance(dtype.elementType, StructType)
            ):
                raise error(
                    f"Cannot resolve {'.'.join(parts[: i + 1])} in target columns in {where} given columns "
                    f"{', '.join(side.qualified())} - "
                    "Updating nested fields is only supported for StructType.",
                    "DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE",
                    "0A000",
                )
            else:
                raise _KeyError(
                    error(
                        f'Can\'t extract a value from "{".".join(parts[:i])}". Need a complex type '
                        f'[STRUCT, ARRAY, MAP] but got "{dtype.simpleString().upper()}".',
                        "INVALID_EXTRACT_BASE_FIELD_TYPE",
                        "42000",
                    )
                )
        return tuple(parts)

    def _resolve_key(self, clause: MergeClause, key: tuple[str, ...]) -> tuple[str, ...]:
        where = _CLAUSE_NAMES[clause.action]
        try:
            return self._key_on(self.target, key, where)
        except _KeyError as on_target:
            retry = self.evolve and clause.kind is not ClauseKind.NOT_MATCHED_BY_SOURCE
            if not retry:
                raise on_target.error
        try:
            return self._key_on(self.source, key, where)
        except _KeyError as on_source:
            raise on_source.error

    def _star(self, clause: MergeClause) -> list[Action]:
        where = _CLAUSE_NAMES[clause.action]
        if not self.evolve:
            out = []
            for f in self.target_schema.fields:
                i = self.source.single(f.name, [self.source.alias or "source", f.name])
                if i is None and identity_of(f) is not None:
                    continue  # generated for new rows, never updated
                if i is None:
                    raise _unresolved(display_name(f.name), where, self.source.qualified())
                out.append(
                    Action((f.name,), exp.column(scol(i)), vtype=self.source_schema.fields[i].dataType)
                )
            return out
        if clause.action is ActionType.INSERT or self.settings.cast.preserve_null_update_star:
            preserve = clause.action is ActionType.UPDATE
            return [
                Action((f.name,), exp.column(scol(i)), preserve=preserve, vtype=f.dataType)
                for i, f in enumerate(self.source_schema.fields)
            ]
        leaves: list[Action] = []  # legacy UPDATE * with evolution: one action per source leaf

        def walk(node: exp.Expression, dtype: DataType, path: tuple[str, ...]) -> None:
            if isinstance(dtype, StructType):
                for f in dtype.fields:
                    walk(struct_field(node, f.name), f.dataType, (*path, f.name))
            else:
                leaves.append(Action(path, node, vtype=dtype))

        for i, f in enumerate(self.source_schema.fields):
            walk(exp.column(scol(i)), f.dataType, (f.name,))
        return leaves

    def _rewrite(self, node: exp.Expression, scope: list[Side], where: str) -> exp.Expression:
        """``node`` in internal column names, builder Columns' withField / dropFields expanded."""
        out = self.r.rewrite(node, scope, where)
        return struct_fields.expand(out, lambda n: self.typer.types([n])[0], self.case_sensitive)

    def _relation_exists(self) -> Callable[[str], bool] | None:
        spark = getattr(self.typer, "spark", None)
        return None if spark is None else spark.catalog.tableExists

    def _actions(self, clause: MergeClause) -> list[Action] | None:
        if clause.action is ActionType.DELETE:
            return None
        if clause.is_star:
            return self._star(clause)
        scope = self._scope(clause.kind)
        where = _CLAUSE_NAMES[clause.action]
        out = []
        assert clause.assignments is not None
        for a in clause.assignments:
            path = self._resolve_key(clause, a.key)
            if is_default_keyword(a.value):
                # The column's DEFAULT, NULL without one (Spark's ResolveDefaultColumns).
                field = self._find(self.target_schema, path[0]) if len(path) == 1 else None
                out.append(Action(path, default_value(field)))
                continue
            _check_value(a.value, where)
            out.append(Action(path, self._rewrite(a.value, scope, where)))
        return out

    # --- schema evolution ------------------------------------------------------------------------------

    def _evolve(self, actions: list[tuple[MergeClause, list[Action] | None]]) -> StructType:
        if not self.evolve:
            return self.target_schema
        assigned = [
            a.path
            for clause, acts in actions
            if acts is not None and clause.kind is not ClauseKind.NOT_MATCHED_BY_SOURCE
            for a in acts
        ]
        migration = filter_schema(self.source_schema, assigned, case_sensitive=self.case_sensitive)
        final = merge_schemas(self.target_schema, migration, widening=self.settings.widening)
        if self.settings.drop_null_columns:
            void = find_null_type_column(final)
            if void is not None:
                shown = ".".join(f"`{p}`" for p in void.split("."))
                raise error(
                    f"Cannot add column {shown} with type VOID. Please explicitly specify a non-void type.",
                    "DELTA_MERGE_ADD_VOID_COLUMN",
                    "42K09",
                )
        return final

    # --- driver -----------------------------------------------------------------------------------------

    def target_only(self, node: exp.Expression | None) -> list[exp.Expression]:
        """Conjuncts of ``node`` that reference only target columns, in plain target names."""
        out = []
        for conj in split_conjuncts(node):
            try:
                refs = self.r.refs(conj, [self.source, self.target], "search condition")
            except AnalysisError:
                continue
            if not refs or any(r.side != "target" for r in refs) or not is_deterministic(conj):
                continue

            def plain(parts: list[str]) -> exp.Expression:
                ref = self.r.resolve(parts, [self.source, self.target], "search condition")
                name = exp.to_identifier(self.target.columns[ref.index], quoted=True)
                if not ref.fields:
                    return exp.column(name)
                return exp.Dot.build([name, *[exp.to_identifier(f, quoted=True) for f in ref.fields]])

            out.append(rewrite_columns(conj, plain))
        return out

    def _generated(
        self,
        clause: MergeClause,
        actions: list[Action],
        outputs: tuple[exp.Expression | None, ...],
        keep: tuple[exp.Expression, ...],
    ) -> tuple[exp.Expression | None, ...]:
        """Delta's generated and identity columns in one clause. A generated column the clause does
        not set (an INSERT that does not list it, an UPDATE that does not assign it) gets its
        generation expression over the row's new values; a value set explicitly stays, and is
        checked against the expression when the row is written (``deltamerge.constraints``).
        An identity column may not be updated, nor given a value when it is GENERATED ALWAYS; an
        INSERT that leaves it out writes NULL, which the write replaces with a generated value
        (``deltamerge.identity``)."""
        insert = clause.action is ActionType.INSERT
        explicit = [a.path[0] for a in actions]
        for j, ident in identity_columns(self.target_schema):
            if not insert and outputs[j] is not None:
                raise update_error(ident.name)
            if (
                insert
                and not ident.allow_explicit_insert
                and any(self._same(n, ident.name) for n in explicit)
            ):
                raise explicit_insert_error(ident.name)
        gens = generated_columns(self.target_schema)
        if not gens:
            return outputs
        # New values of every final column: an UPDATE's unassigned columns keep the target value.
        values = [o if o is not None else keep[k] for k, o in enumerate(outputs)]
        out = list(outputs)
        for j, f, text in gens:
            if insert and any(self._same(n, f.name) for n in explicit):
                continue
            if not insert and outputs[j] is not None:
                continue
            value = substitute(text, self.final_schema, values, self._same)
            out[j] = exp.Cast(this=exp.Paren(this=value), to=spark_type(self.final_schema.fields[j].dataType))
        return tuple(out)

    def _same(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    def run(self) -> ResolvedMerge:
        spec = self.spec
        if not self.target_schema.fields and not self.evolve and self.settings.empty_schema_check:
            raise error(
                "Cannot MERGE INTO a table with no columns. The target table must have columns, "
                "or schema evolution must be enabled.",
                "DELTA_MERGE_INTO_EMPTY_SCHEMA_TARGET",
                "428GU",
            )
        _check_condition(spec.condition, "search condition of MERGE operation", self._relation_exists())
        condition = self._rewrite(spec.condition, [self.source, self.target], "search condition")
        resolved: list[tuple[MergeClause, list[Action] | None, exp.Expression | None]] = []
        for clause in spec.clauses:
            actions = self._actions(clause)
            cond = None
            if clause.condition is not None:
                where = _CONDITION_NAMES[clause.action]
                _check_condition(clause.condition, f"{where} of MERGE operation", self._relation_exists())
                cond = self._rewrite(clause.condition, self._scope(clause.kind), where)
            resolved.append((clause, actions, cond))
        self.final_schema = self._evolve([(c, a) for c, a, _ in resolved])
        untyped = [a for _, acts, _ in resolved for a in acts or [] if a.vtype is None]
        for a, t in zip(untyped, self.typer.types([a.value for a in untyped]), strict=True):
            a.vtype = t
        aligner = Aligner(
            self.target_schema,
            self.final_schema,
            self.caster,
            case_sensitive=self.case_sensitive,
            evolve=self.evolve,
        )
        keep = aligner.keep_values()
        clauses = []
        for i, (clause, actions, cond) in enumerate(resolved):
            outputs: tuple[exp.Expression | None, ...] | None = None
            if actions is not None and clause.action is ActionType.INSERT:
                outputs = tuple(aligner.insert_exprs(actions))
            elif actions is not None:
                outputs = tuple(
                    aligner.update_exprs(self.final_schema.fields, actions, aligner.defaults(), ())
                )
            if outputs is not None and actions is not None:
                outputs = self._generated(clause, actions, outputs, keep)
            clauses.append(ResolvedClause(clause, i, cond, outputs))
        self.typer.check(self.final_schema, keep, [c.outputs for c in clauses])
        return ResolvedMerge(
            spec=spec,
            target_schema=self.target_schema,
            final_schema=self.final_schema,
            source_schema=self.source_schema,
            condition=condition,
            clauses=tuple(clauses),
            target_only_conjuncts=tuple(self.target_only(spec.condition)),
            clause_target_only=tuple(
                _and_all(self.target_only(c.condition)) if c.condition is not None else None
                for c in spec.clauses
                if c.kind is ClauseKind.MATCHED
            ),
            keep_values=keep,
        )


def _and_all(nodes: list[exp.Expression]) -> exp.Expression | None:
    if not nodes:
        return None
    out: exp.Expression = nodes[0]
    for n in nodes[1:]:
        out = exp.and_(out, n)  # type: ignore[assignment]
    return out


def analyze(
    spec: MergeSpec,
    target_schema: StructType,
    *,
    case_sensitive: bool,
    evolve: bool,
    table_configuration: dict[str, str] | None = None,
    settings: AnalysisSettings | None = None,
    spark: Any = None,
) -> ResolvedMerge:
    """Resolve and validate ``spec`` against the target schema (Delta's analysis + preprocessing).

    ``table_configuration`` (the table's ``metaData.configuration``) enables type widening when it
    sets ``delta.enableTypeWidening``. Settings are read from the source's Spark session unless
    given; ``spark=None`` with explicit settings types only plain references and literals.
    """
    if spark is None and settings is None:
        spark = getattr(spec.source, "sparkSession", None)
    if settings is None:
        from deltamerge.spark.session import conf_getter

        settings = AnalysisSettings.from_session(
            conf_getter(spark), case_sensitive=case_sensitive, table_configuration=table_configuration
        )
    elif table_configuration is not None and settings.widening is None:
        mode = "always"
        settings = AnalysisSettings(
            settings.cast,
            widening_for(table_configuration, mode),
            settings.drop_null_columns,
            settings.empty_schema_check,
        )
    typer = Typer(target_schema, spec.source.schema, spark, case_sensitive)
    return _Analyzer(spec, target_schema, case_sensitive, evolve, settings, typer).run()
