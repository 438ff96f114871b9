"""``col.withField(name, value)`` and ``col.dropFields(name)`` in builder Columns.

Spark's ``UpdateFields`` has no SQL form, and deltamerge runs every builder argument as SQL text, so
the Column converter writes marker calls (``spark/columns.py``: ``__dm_with_field(struct, 'a.b',
value)``, ``__dm_drop_field(struct, 'a')``). Once MERGE analysis has resolved the references, the
struct's type is known and each marker becomes what Spark computes: a ``named_struct`` of the
struct's fields with one replaced, added at the end or left out, NULL when the struct is NULL
(innermost markers first, so chained calls see the fields added before them).
"""

from __future__ import annotations

from collections.abc import Callable
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


def _rebuild(
    base: exp.Expression,
    t: DataType,
    parts: list[str],
    value: exp.Expression | None,
    same: Callable[[str, str], bool],
) -> exp.Expression:
    if not isinstance(t, StructType):
        raise error(
            f"Cannot update fields of {to_sql(base)}: it is a {t.simpleString()}, not a struct.",
            "DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE",
            "42K09",
        )
    name, rest = parts[0], parts[1:]
    matches = {i for i, f in enumerate(t.fields) if same(f.name, name)}
    if not matches and (rest or value is None):
        if not rest:
            return base  # nothing of that name to drop
        names = ", ".join(f"`{f.name}`" for f in t.fields)
        raise error(f"No such struct field `{name}` in {names}.", "FIELD_NOT_FOUND", "42704")
    fields: list[tuple[str, exp.Expression]] = []
    for i, f in enumerate(t.fields):
        ref = _ref(base, f.name)
        if i not in matches:
            fields.append((f.name, ref))
        elif rest:
            fields.append((f.name, _rebuild(ref, f.dataType, rest, value, same)))
        elif value is not None:
            fields.append((f.name, value))
    if value is not None and not matches:
        fields.append((name, value))
    if not fields:
        raise error(
            f"Cannot drop all fields in struct {to_sql(base)}.",
            "DATATYPE_MISMATCH.CANNOT_DROP_ALL_FIELDS",
            "42K09",
        )
    struct = exp.Anonymous(
        this="named_struct", expressions=[a for n, e in fields for a in (exp.Literal.string(n), e)]
    )
    return exp.Case(
        ifs=[exp.If(this=exp.Is(this=base, expression=exp.Null()), true=exp.Null())], default=struct
    )


def expand(
    node: exp.Expression, type_of: Callable[[exp.Expression], DataType], case_sensitive: bool
) -> exp.Expression:
    """``node`` with every marker replaced by the struct it builds; ``type_of`` types a resolved
    expression (internal column names)."""
    if not has_markers(node):
        return node

    def same(a: str, b: str) -> bool:
        return a == b if case_sensitive else a.lower() == b.lower()

    tree = node.copy()
    while True:
        inner = [n for n in tree.walk() if _marker(n) and not any(_marker(a) for a in n.walk() if a is not n)]
        if not inner:
            return tree
        call = cast(exp.Anonymous, inner[0])
        built = _expanded(call, type_of, same)
        if call is tree:
            tree = built
        else:
            call.replace(built)


def _expanded(
    call: exp.Anonymous, type_of: Callable[[exp.Expression], DataType], same: Callable[[str, str], bool]
) -> exp.Expression:
    args = list(call.expressions)
    with_field = str(call.this).lower() == WITH_FIELD
    name = args[1] if len(args) > 1 else None
    if not isinstance(name, exp.Literal) or not name.is_string or len(args) != (3 if with_field else 2):
        raise AnalysisError(f"Malformed struct field update {to_sql(call)}.", error_class="INTERNAL_ERROR")
    value = args[2] if with_field else None
    return _rebuild(args[0], type_of(args[0]), _field_path(name.this), value, same)
