"""Column DEFAULT values (Delta's table feature ``allowColumnDefaults``).

A column's default is the SQL text in its field metadata ``CURRENT_DEFAULT`` (Spark's key; Spark
also keeps ``EXISTS_DEFAULT``, the value rows written before the column existed read as, which
deltamerge writes alongside). The table must support ``allowColumnDefaults``, which Delta never
adds implicitly (``log/protocol.check_column_defaults_allowed``). Where a value is missing, the
default stands in (NULL for a column without one):

* a MERGE INSERT clause that does not list the column, and the keyword ``DEFAULT`` as a value in
  MERGE INSERT / UPDATE SET and UPDATE (``merge/analysis.py``, ``merge/alignment.py``);
* SQL ``INSERT INTO t (cols) ...`` leaving the column out, and ``DEFAULT`` in its ``VALUES``.

A DataFrame append leaves a missing column NULL, as delta-spark does.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType
from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.predicates import DIALECT, column_references, is_deterministic, parse_expression, to_sql

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


def values_with_defaults(values: exp.Values, schema_string: str, columns: list[str] | None) -> exp.Values:
    """An INSERT's ``VALUES`` rows with each ``DEFAULT`` replaced by its column's default (NULL
    without one), by position in ``columns`` (all the table's columns when None)."""
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
        return exp.Cast(this=default_value(target), to=to)

    def row(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Tuple):
            return node
        return exp.Tuple(expressions=[value(i, v) for i, v in enumerate(node.expressions)])

    return exp.Values(expressions=[row(r) for r in values.expressions], alias=values.args.get("alias"))


def metadata(text: str) -> dict[str, str]:
    """The field metadata of a column with this DEFAULT."""
    return {CURRENT_DEFAULT: text, EXISTS_DEFAULT: text}


def validate(spark: SparkSession, schema: StructType) -> None:
    """Spark's checks of new DEFAULT expressions: constant (no column, no non-deterministic
    function), and of a type the column can store."""
    for f in schema.fields:
        text = default_text(f)
        if text is None:
            continue
        node = parse_expression(text)
        if column_references(node) or not is_deterministic(node) or node.find(exp.Subquery, exp.Select):
            raise AnalysisError(
                f"Failed to execute the command because the destination column or variable {f.name} has "
                f"a DEFAULT value {text}, which is not a constant expression whose equivalent value is "
                "known at query planning time.",
                error_class="INVALID_DEFAULT_VALUE.NOT_CONSTANT",
                sql_state="42623",
            )
        try:  # evaluated once: a value the column cannot hold fails here (ANSI casts)
            spark.range(1).selectExpr(f"CAST(({to_sql(node)}) AS {f.dataType.simpleString()}) AS d").collect()
        except Exception as e:
            raise AnalysisError(
                f"Failed to execute the command because the destination column or variable {f.name} has "
                f"a DEFAULT value {text}, which cannot be stored as {f.dataType.simpleString()}: "
                f"{str(e).splitlines()[0]}",
                error_class="INVALID_DEFAULT_VALUE.DATA_TYPE",
                sql_state="42623",
            ) from None
