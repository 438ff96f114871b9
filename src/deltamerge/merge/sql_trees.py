"""Small SQLGlot tree builders the MERGE casts and output expressions are made of."""

from __future__ import annotations

import functools
import re
from typing import cast

import sqlglot
from pyspark.sql.types import DataType, NullType
from sqlglot import exp

from deltamerge.merge.evolution import ddl
from deltamerge.spark.types import string_pieces
from deltamerge.sql_dialect import DIALECT

_VOID_IN_DDL = re.compile(r"(^|[:<,])void(?=$|[>,])")


def spark_type(dt: DataType) -> exp.DataType:
    """A PySpark type as a SQLGlot type node."""
    # A copy: the node is attached to the caller's tree. Parsing each time cost ~0.25 ms a column.
    return _parsed_type(ddl(dt)).copy()


@functools.lru_cache(maxsize=1024)
def _parsed_type(text: str) -> exp.DataType:
    # SQLGlot has no VOID type (it drops a VOID struct field): parse it as NULL, render it as VOID.
    has_void = "void" in text
    if has_void:
        text = _VOID_IN_DDL.sub(r"\1null", text)
    if " collate " in text:
        # DataType.build stops before a COLLATE; a CAST's target type keeps it (nested ones too).
        built = sqlglot.parse_one(f"CAST(NULL AS {text})", dialect=DIALECT).args["to"]
    else:
        built = exp.DataType.build(text, dialect=DIALECT)
    if not has_void:
        return cast(exp.DataType, built)
    void = exp.DataType.build("VOID", udt=True)
    out = built.transform(
        lambda n: void.copy() if isinstance(n, exp.DataType) and n.this == exp.DataType.Type.NULL else n
    )
    return cast(exp.DataType, out)


def typed_null(dt: DataType) -> exp.Expression:
    """``CAST(NULL AS dt)`` (plain NULL for VOID)."""
    if isinstance(dt, NullType):
        return exp.Null()
    return exp.Cast(this=exp.Null(), to=spark_type(dt))


def field(node: exp.Expression, name: str) -> exp.Expression:
    """``node.`name```."""
    return exp.Dot(this=node.copy(), expression=exp.to_identifier(name, quoted=True))


def string_literal(value: str) -> exp.Expression:
    """``value`` as a SQL string that reads the same under ``spark.sql.parser.escapedStringLiterals``
    (see ``spark.types.sql_string``)."""
    parts: list[exp.Expression] = [
        exp.Anonymous(this="chr", expressions=[exp.Literal.number(p)])
        if isinstance(p, int)
        else exp.Literal.string(p)
        for p in string_pieces(value)
    ]
    if len(parts) == 1:
        return parts[0]
    return exp.Anonymous(this="concat", expressions=parts) if parts else exp.Literal.string("")


def named_struct(pairs: list[tuple[str, exp.Expression]]) -> exp.Expression:
    """``named_struct('a', x, ...)``."""
    args: list[exp.Expression] = []
    for name, value in pairs:
        args += [string_literal(name), value]
    return exp.Anonymous(this="named_struct", expressions=args)


def is_null(node: exp.Expression) -> exp.Expression:
    """``(node) IS NULL``."""
    return exp.Is(this=exp.Paren(this=node.copy()), expression=exp.Null())


def if_(cond: exp.Expression, then: exp.Expression, other: exp.Expression) -> exp.Expression:
    """``IF(cond, then, other)``."""
    return exp.If(this=cond, true=then, false=other)


def plain_cast(node: exp.Expression, dt: DataType) -> exp.Expression:
    """``CAST(node AS dt)``."""
    return exp.Cast(this=node.copy(), to=spark_type(dt))


def try_cast(node: exp.Expression, dt: DataType) -> exp.Expression:
    """``TRY_CAST(node AS dt)``."""
    return exp.TryCast(this=node.copy(), to=spark_type(dt), safe=True)


def template(sql: str, **values: exp.Expression) -> exp.Expression:
    """Parse ``sql`` with ``{name}`` placeholders and put the given trees in their place."""
    text = sql
    for name in values:
        text = text.replace("{" + name + "}", f"__dm_ph_{name}")
    tree = sqlglot.parse_one(text, read=DIALECT)
    for col in list(tree.find_all(exp.Column)):
        if col.name.startswith("__dm_ph_"):
            col.replace(exp.Paren(this=values[col.name[len("__dm_ph_") :]].copy()))
    return tree  # type: ignore[return-value]


class Lambdas:
    """Fresh lambda variable names (Spark wants them unique across nesting)."""

    def __init__(self) -> None:
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        return f"__dm_l{self.n}"
