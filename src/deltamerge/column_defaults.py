"""Column DEFAULT values (Delta's table feature ``allowColumnDefaults``).

A column's default is the SQL text in its field metadata ``CURRENT_DEFAULT`` (Spark's key; Spark
also keeps ``EXISTS_DEFAULT``, the value rows written before the column existed read as, which
deltamerge writes alongside). The table must support ``allowColumnDefaults``, which Delta never
adds implicitly (``log/protocol.check_column_defaults_allowed``). Where a value is missing, the
default stands in (NULL for a column without one):

* a MERGE INSERT clause that does not list the column, and the keyword ``DEFAULT`` as a value in
  MERGE INSERT / UPDATE SET and UPDATE (``merge/analysis.py``, ``merge/alignment.py``);
* SQL ``INSERT INTO t (cols) ...`` leaving the column out, and ``DEFAULT`` in its ``VALUES`` rows
  or its ``SELECT`` list (``with_defaults``).

A DataFrame append leaves a missing column NULL, as delta-spark does. ``ADD COLUMNS ... DEFAULT``
is refused, as in Delta (``sql_alter.py``): the rows already written would read NULL.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    DataType,
    DateType,
    MapType,
    NullType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.predicates import column_references, is_deterministic, parse_expression, to_sql
from deltamerge.spark.pyspark_errors import quiet_query_context
from deltamerge.sql_dialect import DIALECT

CURRENT_DEFAULT = "CURRENT_DEFAULT"
EXISTS_DEFAULT = "EXISTS_DEFAULT"


def default_text(field: StructField) -> str | None:
    """The column's DEFAULT expression (SQL text), if it has one."""
    value = (field.metadata or {}).get(CURRENT_DEFAULT)
    return str(value) if value is not None else None


def is_default_keyword(node: exp.Expression) -> bool:
    """Whether a value is the bare keyword ``DEFAULT`` (not a quoted column named so)."""
    if isinstance(node, exp.Var):
        return node.name.upper() == "DEFAULT"
    if isinstance(node, exp.Column) and not node.table:
        ident = node.this
        return isinstance(ident, exp.Identifier) and not ident.quoted and ident.name.upper() == "DEFAULT"
    return False


def default_value(field: StructField | None) -> exp.Expression:
    """The column's default as an expression (uncast), or NULL."""
    text = default_text(field) if field is not None else None
    return parse_expression(text) if text is not None else exp.Null()


def with_defaults(query: exp.Expression, schema_string: str, columns: list[str] | None) -> exp.Expression:
    """An INSERT's query with each ``DEFAULT`` replaced by its column's default (NULL without
    one), by position in ``columns`` (all the table's columns when None): in every row of a
    ``VALUES`` list, or among the select list of a plain ``SELECT``."""
    schema = StructType.fromJson(json.loads(schema_string))
    by_name = {f.name.lower(): f for f in schema.fields}
    targets: list[StructField | None] = (
        [by_name.get(c.lower()) for c in columns] if columns is not None else list(schema.fields)
    )

    def value(i: int, v: exp.Expression) -> exp.Expression:
        target = targets[i] if i < len(targets) else None
        if target is None or not is_default_keyword(v):
            return v
        to = exp.DataType.build(target.dataType.simpleString(), dialect=DIALECT)
        out: exp.Expression = exp.Cast(this=default_value(target), to=to)
        if isinstance(query, exp.Select):
            return exp.Alias(this=out, alias=exp.to_identifier(target.name, quoted=True))
        return out

    if isinstance(query, exp.Values):
        rows = [
            exp.Tuple(expressions=[value(i, v) for i, v in enumerate(r.expressions)])
            if isinstance(r, exp.Tuple)
            else r
            for r in query.expressions
        ]
        return exp.Values(expressions=rows, alias=query.args.get("alias"))
    if isinstance(query, exp.Select):
        out = query.copy()
        out.set("expressions", [value(i, v) for i, v in enumerate(query.expressions)])
        return out
    return query


def metadata(text: str) -> dict[str, str]:
    """The field metadata of a column with this DEFAULT."""
    return {CURRENT_DEFAULT: text, EXISTS_DEFAULT: text}


def _invalid(kind: str, f: StructField, text: str, why: str) -> AnalysisError:
    return AnalysisError(
        f"Failed to execute the command because the destination column or variable `{f.name}` has a "
        f"DEFAULT value {text}, {why}",
        error_class=f"INVALID_DEFAULT_VALUE.{kind}",
        sql_state="42623",
    )


def _storable(value: DataType, column: DataType) -> bool:
    """Spark's store assignment of a DEFAULT's type into the column's (ANSI): the same type, a
    NULL, number into number, any atomic value into a string, date/time into date/time."""
    times = (DateType, TimestampType, TimestampNTZType)
    if value == column or isinstance(value, NullType):
        return True
    if isinstance(value, NumericType) and isinstance(column, NumericType):
        return True
    if isinstance(column, StringType) and isinstance(value, AtomicType):
        return True
    if isinstance(value, times) and isinstance(column, times):
        return True
    # Nested values are cast field by field; the evaluation in ``validate`` checks them.
    return isinstance(value, StructType | ArrayType | MapType) and type(value) is type(column)


def validate(spark: SparkSession, schema: StructType) -> None:
    """Spark's checks of new DEFAULT expressions: no subquery, no column, a constant, of a type the
    column can store (checked by evaluating it once, which also catches values out of range)."""
    for f in schema.fields:
        text = default_text(f)
        if text is None:
            continue
        node = parse_expression(text)
        if node.find(exp.Subquery, exp.Select):
            raise _invalid("SUBQUERY_EXPRESSION", f, text, "which contains subquery expressions.")
        if column_references(node):
            raise _invalid("UNRESOLVED_EXPRESSION", f, text, "which fails to resolve as a valid expression.")
        if not is_deterministic(node):
            raise _invalid(
                "NOT_CONSTANT", f, text, "which is not a constant expression whose equivalent value is known."
            )
        try:
            with quiet_query_context():  # re-raised as Delta's error below
                got = spark.range(1).selectExpr(f"({to_sql(node)}) AS d").schema.fields[0].dataType
        except Exception as e:
            raise _invalid(
                "UNRESOLVED_EXPRESSION", f, text, f"which fails to resolve: {str(e).splitlines()[0]}"
            ) from None
        if not _storable(got, f.dataType):
            raise _invalid(
                "DATA_TYPE",
                f,
                text,
                f'which requires "{f.dataType.simpleString().upper()}" type, but the statement provided a '
                f'value of incompatible "{got.simpleString().upper()}" type.',
            )
        try:  # evaluated once: a value the column cannot hold fails here (ANSI casts)
            with quiet_query_context():
                spark.range(1).selectExpr(
                    f"CAST(({to_sql(node)}) AS {f.dataType.simpleString()}) AS d"
                ).collect()
        except Exception as e:
            raise _invalid(
                "DATA_TYPE",
                f,
                text,
                f"which cannot be stored as {f.dataType.simpleString()}: {str(e).splitlines()[0]}",
            ) from None
