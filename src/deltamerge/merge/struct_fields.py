"""``col.withField(name, value)`` and ``col.dropFields(name)`` in builder Columns.

Spark's ``UpdateFields`` has no SQL form, and deltamerge runs every builder argument as SQL text, so
the Column converter writes marker calls (``spark/columns.py``: ``__dm_with_field(struct, 'a.b',
value)``, ``__dm_drop_field(struct, 'a')``). Once MERGE analysis has resolved the references, the
struct's type is known and each marker becomes what Spark computes: a ``named_struct`` of the
struct's fields with one replaced, added at the end or left out, NULL when the struct is NULL. A
chain of calls edits one struct in call order and is written once (see ``_Struct``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from pyspark.sql.types import DataType, StructType
from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.merge.alignment import error
from deltamerge.predicates import to_sql
from deltamerge.spark.columns import DROP_FIELD, WITH_FIELD

_MARKERS = (WITH_FIELD, DROP_FIELD)


def _marker(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in _MARKERS


def has_markers(node: exp.Expression | None) -> bool:
    """Whether ``node`` holds a ``withField`` / ``dropFields`` marker."""
    return node is not None and any(_marker(n) for n in node.walk())


def _field_path(name: str) -> list[str]:
    # Spark reads the name as a multi-part attribute: dots separate, backticks quote (`` escapes).
    parts: list[str] = []
    current, quoted, i = "", False, 0
    while i < len(name):
        c = name[i]
        if c == "`":
            if quoted and name[i + 1 : i + 2] == "`":
                current += "`"
                i += 2
                continue
            quoted = not quoted
        elif c == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += c
        i += 1
    return [*parts, current]


def _ref(base: exp.Expression, name: str) -> exp.Expression:
    if not isinstance(base, (exp.Column, exp.Dot, exp.Paren)):
        base = exp.Paren(this=base)
    return exp.Dot(this=base, expression=exp.to_identifier(name, quoted=True))


@dataclass
class _Field:
    name: str
    value: exp.Expression | _Struct
    type: DataType | None  # None: not known yet (a withField value), typed when descended into


@dataclass
class _Struct:
    """A struct being rebuilt: ``base`` (NULL makes the result NULL) and its fields as they stand
    after the updates applied so far. A chain of updates edits one of these, so the SQL names
    ``base`` once per field in the end instead of once per field per update (a chain of k updates
    of an n-field struct would repeat the innermost struct (n+1)^k times)."""

    base: exp.Expression
    fields: list[_Field]

    @classmethod
    def of(cls, base: exp.Expression, t: DataType) -> _Struct:
        if not isinstance(t, StructType):
            raise error(
                f"Cannot update fields of {to_sql(base)}: it is a {t.simpleString()}, not a struct.",
                "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
                "42K09",
            )
        return cls(base, [_Field(f.name, _ref(base, f.name), f.dataType) for f in t.fields])

    def sql(self) -> exp.Expression:
        args = [
            a
            for f in self.fields
            for a in (exp.Literal.string(f.name), f.value.sql() if isinstance(f.value, _Struct) else f.value)
        ]
        struct = exp.Anonymous(this="named_struct", expressions=args)
        null = exp.Is(this=self.base, expression=exp.Null())
        return exp.Case(ifs=[exp.If(this=null, true=exp.Null())], default=struct)

    def update(
        self,
        parts: list[str],
        value: exp.Expression | None,
        same: Callable[[str, str], bool],
        type_of: Callable[[exp.Expression], DataType],
    ) -> None:
        """Spark's ``withField(path, value)`` (``dropFields(path)`` when ``value`` is None): a
        field replaced in place, added at the end, or left out; nested paths update the inner
        struct (NULL stays NULL)."""
        name, rest = parts[0], parts[1:]
        matches = {i for i, f in enumerate(self.fields) if same(f.name, name)}
        if not matches and (rest or value is None):
            if not rest:
                return  # nothing of that name to drop
            names = ", ".join(f"`{f.name}`" for f in self.fields)
            raise error(f"No such struct field `{name}` in {names}.", "FIELD_NOT_FOUND", "42704")
        fields: list[_Field] = []
        for i, f in enumerate(self.fields):
            if i not in matches:
                fields.append(f)
            elif rest:
                inner = f.value
                if not isinstance(inner, _Struct):
                    inner = _Struct.of(inner, f.type if f.type is not None else type_of(inner))
                inner.update(rest, value, same, type_of)
                fields.append(_Field(name, inner, None))  # Spark spells it as the path does
            elif value is not None:
                fields.append(_Field(name, value, None))
        if value is not None and not matches:
            fields.append(_Field(name, value, None))
        if not fields:
            raise error(
                f"Cannot drop all fields in struct {to_sql(self.base)}.",
                "DATATYPE_MISMATCH.CANNOT_DROP_ALL_FIELDS",
                "42K09",
            )
        self.fields = fields


def expand(
    node: exp.Expression, type_of: Callable[[exp.Expression], DataType], case_sensitive: bool
) -> exp.Expression:
    """``node`` with every marker replaced by the struct it builds; ``type_of`` types a resolved
    expression (internal column names)."""
    if not has_markers(node):
        return node

    def same(a: str, b: str) -> bool:
        return a == b if case_sensitive else a.lower() == b.lower()

    def rewrite(n: exp.Expression) -> exp.Expression:
        if _marker(n):
            return _chain(cast(exp.Anonymous, n)).sql()
        for child in list(n.iter_expressions()):
            if has_markers(child):
                new = rewrite(child)
                if new is not child:
                    child.replace(new)
        return n

    def _chain(call: exp.Anonymous) -> _Struct:
        # A chain of updates (each marker's struct argument the next marker) edits one _Struct.
        args = list(call.expressions)
        with_field = str(call.this).lower() == WITH_FIELD
        name = args[1] if len(args) > 1 else None
        if not isinstance(name, exp.Literal) or not name.is_string or len(args) != (3 if with_field else 2):
            raise AnalysisError(
                f"Malformed struct field update {to_sql(call)}.", error_class="INTERNAL_ERROR"
            )
        base = args[0]
        if _marker(base):
            struct = _chain(cast(exp.Anonymous, base))
        else:
            base = rewrite(base)
            struct = _Struct.of(base, type_of(base))
        value = rewrite(args[2]) if with_field else None
        struct.update(_field_path(name.this), value, same, type_of)
        return struct

    return rewrite(node.copy())
