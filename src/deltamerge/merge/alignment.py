"""Alignment of MERGE actions to the final schema (Delta's ``PreprocessTableMerge``), and value types.

``Aligner`` turns the resolved actions of an UPDATE or INSERT clause into one expression per final
column, cast to the column type (``casting.py``): ``generateUpdateExpressions`` for UPDATE (nested
SETs rebuild their struct from the target's other fields; untouched columns keep the target value
cast to an evolved type) and the column-by-column INSERT alignment (missing columns are NULL).

``Typer`` gives the type of internal-name expressions: plain column references and literals from
the schemas; everything else from Spark, in one batch, by a ``select`` over an empty DataFrame of
the joined schema (no job runs; works on Spark Connect). It also checks that every final output
expression analyses and has its column's type, so type errors surface before any file is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
)
from sqlglot import exp

from deltamerge.column_defaults import default_text, default_value
from deltamerge.errors import AnalysisError
from deltamerge.generated import generated_columns
from deltamerge.merge.casting import Caster
from deltamerge.merge.evolution import same_type, scala_string
from deltamerge.merge.sql_trees import field as struct_field
from deltamerge.merge.sql_trees import named_struct, spark_type, typed_null
from deltamerge.predicates import to_sql


def tcol(i: int) -> str:
    """Internal name of target column ``i`` in the joined DataFrame."""
    return f"__t{i}"


def scol(i: int) -> str:
    """Internal name of source column ``i`` in the joined DataFrame."""
    return f"__s{i}"


def error(message: str, error_class: str, sql_state: str) -> AnalysisError:
    """An ``AnalysisError`` with Delta's class and SQLSTATE."""
    return AnalysisError(message, error_class=error_class, sql_state=sql_state)


@dataclass
class Action:
    """One resolved assignment: target path (as written; source names for ``*``) and value."""

    path: tuple[str, ...]
    value: exp.Expression
    preserve: bool = False  # UPDATE * with evolution: keep target-only struct fields
    vtype: DataType | None = None


class Aligner:
    """Per-column output expressions of UPDATE / INSERT clauses for one MERGE."""

    def __init__(
        self,
        target_schema: StructType,
        final_schema: StructType,
        caster: Caster,
        *,
        case_sensitive: bool,
        evolve: bool,
    ):
        self.target_schema = target_schema
        self.final_schema = final_schema
        self.caster = caster
        self.case_sensitive = case_sensitive
        self.evolve = evolve

    def _eq(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    def _key(self, name: str) -> str:
        return name if self.case_sensitive else name.lower()

    def defaults(self) -> list[tuple[str, exp.Expression, DataType]]:
        """The target columns as (name, value, type): the defaults of UPDATE alignment."""
        return [(f.name, exp.column(tcol(i)), f.dataType) for i, f in enumerate(self.target_schema.fields)]

    def update_exprs(
        self,
        fields: Sequence[StructField],
        ops: list[Action],
        defaults: list[tuple[str, exp.Expression, DataType]],
        prefix: tuple[str, ...],
    ) -> list[exp.Expression | None]:
        """Delta's ``generateUpdateExpressions``: None where the (cast) default value stays."""
        if not prefix and self.evolve and not self.caster.s.preserve_null_structs:
            ops = ops + self._null_leaves_of_new_columns(ops)
        # Lookups by key, not scans: a wide table (hundreds of columns) would make them quadratic.
        field_keys = {self._key(f.name) for f in fields}
        by_key: dict[str, list[Action]] = {}
        for op in ops:
            by_key.setdefault(self._key(op.path[0]), []).append(op)
        default_of: dict[str, tuple[exp.Expression, DataType]] = {}
        for n, e, t in defaults:
            default_of.setdefault(self._key(n), (e, t))
        for op in ops:
            if self._key(op.path[0]) not in field_keys:
                cols = ", ".join(f"`{'.'.join((*prefix, f.name))}`" for f in fields)
                raise error(
                    f"SET column `{'.'.join((*prefix, op.path[0]))}` not found given columns: [{cols}].",
                    "DELTA_MISSING_SET_COLUMN",
                    "42703",
                )
        out: list[exp.Expression | None] = []
        for f in fields:
            mine = by_key.get(self._key(f.name), [])
            default = default_of.get(self._key(f.name))
            if not mine:
                out.append(None)
                continue
            full = [op for op in mine if len(op.path) == 1]
            if full:
                if len(mine) > 1:
                    cols = ", ".join(f"`{'.'.join((*prefix, *op.path))}`" for op in mine)
                    raise error(
                        f"There is a conflict from these SET columns: [{cols}]. "
                        "Assign each column (or nested field) once.",
                        "DELTA_CONFLICT_SET_COLUMN",
                        "42701",
                    )
                op = full[0]
                original = default if (op.preserve and self.evolve) else None
                assert op.vtype is not None
                out.append(self.caster.cast_if_needed(op.value, op.vtype, f.dataType, f.name, original))
                continue
            if not isinstance(f.dataType, StructType):
                raise error(
                    "Updating nested fields is only supported for StructType, but you are trying to update "
                    f"a field of `{'.'.join((*prefix, f.name))}`, which is of type: "
                    f"{scala_string(f.dataType)}.",
                    "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
                    "0AKDC",
                )
            child_defaults = []
            if default is not None and isinstance(default[1], StructType):
                child_defaults = [
                    (c.name, struct_field(default[0], c.name), c.dataType) for c in default[1].fields
                ]
            children = self.update_exprs(
                f.dataType.fields,
                [Action(op.path[1:], op.value, op.preserve, op.vtype) for op in mine],
                child_defaults,
                (*prefix, f.name),
            )
            pairs = []
            for c, value in zip(f.dataType.fields, children, strict=True):
                if value is None:
                    d = next(((e, t) for n, e, t in child_defaults if self._eq(n, c.name)), None)
                    value = (
                        self.caster.cast_if_needed(d[0], d[1], c.dataType, c.name)
                        if d
                        else typed_null(c.dataType)
                    )
                pairs.append((c.name, value))
            out.append(named_struct(pairs))
        return out

    def _null_leaves_of_new_columns(self, ops: list[Action]) -> list[Action]:
        """Legacy ``merge.preserveNullSourceStructs=false`` (Delta's
        ``generateUpdateOpsForNewTargetFields``): every leaf of a column added by evolution that
        the clause does not assign is set to NULL, so an unassigned new struct column becomes a
        struct of NULLs rather than a NULL struct."""

        def without(fields: Sequence[StructField], path: tuple[str, ...]) -> list[StructField]:
            out = []
            for f in fields:
                if not self._eq(f.name, path[0]):
                    out.append(f)
                elif len(path) > 1 and isinstance(f.dataType, StructType):
                    out.append(StructField(f.name, StructType(without(f.dataType.fields, path[1:]))))
            return out

        def leaves(fields: Sequence[StructField], at: tuple[str, ...]) -> list[Action]:
            out = []
            for f in fields:
                if isinstance(f.dataType, StructType):
                    out += leaves(f.dataType.fields, (*at, f.name))
                else:
                    out.append(Action((*at, f.name), typed_null(f.dataType), vtype=f.dataType))
            return out

        old = {self._key(t.name) for t in self.target_schema.fields}
        new = [f for f in self.final_schema.fields if self._key(f.name) not in old]
        for op in ops:
            new = without(new, op.path)
        return leaves(new, ())

    def insert_exprs(self, actions: list[Action]) -> list[exp.Expression]:
        """One cast value per final column for an INSERT clause (NULL where not listed)."""
        for a in actions:
            if len(a.path) > 1:
                shown = ".".join(f"`{p}`" for p in a.path)
                raise error(
                    "Nested field is not supported in the INSERT clause of MERGE operation "
                    f"(field = {shown}). Insert the whole struct instead.",
                    "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION",
                    "0AKDC",
                )
        names = [a.path[0] for a in actions]
        if not self.case_sensitive and generated_columns(self.target_schema):
            # Delta (merge.insert.fixCaseSensitiveDuplicateColumns): case variants are duplicates
            # on a table with generated columns.
            names = [n.lower() for n in names]
        if len(set(names)) < len(names):
            raise error(
                "Duplicate column names in INSERT clause. List each column once.",
                "DELTA_DUPLICATE_COLUMNS_ON_INSERT",
                "42701",
            )
        first: dict[str, Action] = {}
        for a in actions:
            first.setdefault(self._key(a.path[0]), a)
        out: list[exp.Expression] = []
        # Only the target's own columns have defaults (not a column schema evolution adds).
        target = {self._key(f.name): f for f in self.target_schema.fields}
        for f in self.final_schema.fields:
            found = first.get(self._key(f.name))
            own = target.get(self._key(f.name))
            if found is None and own is not None and default_text(own) is not None:
                # An unlisted column with a DEFAULT takes it (checked castable when it was set).
                out.append(exp.Cast(this=default_value(own), to=spark_type(f.dataType)))
            elif found is None:
                out.append(typed_null(f.dataType))
            else:
                assert found.vtype is not None
                out.append(self.caster.cast_if_needed(found.value, found.vtype, f.dataType, f.name))
        return out

    def keep_values(self) -> tuple[exp.Expression, ...]:
        """The unchanged target value of each final column, in its final type."""
        out: list[exp.Expression] = []
        n = len(self.target_schema.fields)
        for j, f in enumerate(self.final_schema.fields):
            if j < n:
                t = self.target_schema.fields[j].dataType
                out.append(self.caster.cast_if_needed(exp.column(tcol(j)), t, f.dataType, f.name))
            else:
                out.append(typed_null(f.dataType))
        return tuple(out)


# --- value types ----------------------------------------------------------------------------------------


class Typer:
    """Types of internal-name expressions: from the schemas where obvious, else from Spark."""

    def __init__(self, target: StructType, source: StructType, spark: Any, case_sensitive: bool):
        self.columns = {tcol(i): f.dataType for i, f in enumerate(target.fields)}
        self.columns.update({scol(i): f.dataType for i, f in enumerate(source.fields)})
        self.target, self.source, self.spark = target, source, spark
        self.case_sensitive = case_sensitive
        self._frame: Any = None
        self._known: dict[str, DataType] = {}  # SQL of expressions Spark already typed

    def _direct(self, node: exp.Expression) -> DataType | None:
        if isinstance(node, exp.Paren):
            return self._direct(node.this)
        if isinstance(node, exp.Null):
            return NullType()
        if isinstance(node, exp.Boolean):
            return BooleanType()
        if isinstance(node, exp.Literal):
            if node.is_string:
                return StringType()
            text = node.this
            if text.isdigit():
                return IntegerType() if int(text) < 2**31 else LongType() if int(text) < 2**63 else None
            return None
        if isinstance(node, exp.Column) and not node.table and node.name in self.columns:
            return self.columns[node.name]
        if isinstance(node, exp.Dot):
            base = self._direct(node.this)
            if isinstance(base, StructType):
                name = node.expression.name
                for f in base.fields:
                    if f.name == name or (not self.case_sensitive and f.name.lower() == name.lower()):
                        return f.dataType
        return None

    def _schema_of(self, nodes: Sequence[exp.Expression]) -> list[DataType]:
        if self.spark is None:
            raise RuntimeError("typing these MERGE expressions needs a Spark session")
        from pyspark.sql import functions as F

        if self._frame is None:
            fields = [StructField(name, dt, True) for name, dt in self.columns.items()]
            self._frame = self.spark.createDataFrame([], StructType(fields))
        cols = [F.expr(to_sql(n)).alias(f"__v{i}") for i, n in enumerate(nodes)]
        return [f.dataType for f in self._frame.select(*cols).schema.fields]

    def _obviously(self, node: exp.Expression, want: DataType) -> bool:
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Null):
            return True
        got = self._direct(node) or self._known.get(to_sql(node))
        return got is not None and same_type(got, want, case_sensitive=True)

    def types(self, nodes: Sequence[exp.Expression]) -> list[DataType]:
        """One type per expression (one Spark analysis for all that need it)."""
        found = [self._direct(n) for n in nodes]
        todo = [i for i, t in enumerate(found) if t is None]
        if todo:
            for i, t in zip(todo, self._schema_of([nodes[i] for i in todo]), strict=True):
                found[i] = t
                self._known[to_sql(nodes[i])] = t
        return [t for t in found if t is not None]

    def check(
        self,
        final: StructType,
        keep: Sequence[exp.Expression],
        outputs: Sequence[Sequence[exp.Expression | None] | None],
    ) -> None:
        """Let Spark analyse every output expression; each must have its column's type."""
        if self.spark is None:
            return
        candidates: list[tuple[int, exp.Expression]] = list(enumerate(keep))
        for outs in outputs:
            candidates += [(j, o) for j, o in enumerate(outs or ()) if o is not None]
        # Values used as they are (plain references, typed NULLs, expressions Spark typed above)
        # need no second look; only built casts and rebuilt structs are analysed.
        nodes = [(j, n) for j, n in candidates if not self._obviously(n, final.fields[j].dataType)]
        if not nodes:
            return
        for (j, node), got in zip(nodes, self._schema_of([n for _, n in nodes]), strict=True):
            want = final.fields[j].dataType
            if not same_type(got, want, case_sensitive=True) and not isinstance(want, NullType):
                name = final.fields[j].name
                raise error(
                    f"MERGE produced a value of type {got.simpleString()} for column {name} of type "
                    f"{want.simpleString()} ({to_sql(node)}). This is a bug in deltamerge.",
                    "INTERNAL_ERROR",
                    "XX000",
                )
