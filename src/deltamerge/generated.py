"""Generated columns (Delta's ``GeneratedColumn``): ``GENERATED ALWAYS AS (<expr>)`` columns.

A top-level column whose field metadata holds ``delta.generationExpression`` (a Spark SQL
expression over the table's other columns) is computed by every writer that does not provide it:

- an append or overwrite whose data lacks the column gets the expression (``fill_missing``);
- a MERGE INSERT that does not list it, and a MERGE (or UPDATE) UPDATE that does not assign it,
  get the expression over the row's *new* values (``substitute``, used by MERGE analysis);
- a value a writer provides explicitly must equal the expression: every written row is checked
  against ``<column> <=> (<expr>)``, reported as Delta's CHECK constraint ``Generated Column``
  (``deltamerge.constraints``).

Tables deltamerge creates with such a column get the feature in their protocol (writer version 4,
or ``generatedColumns`` in a writer-features list). Delta ignores the metadata on a table whose
protocol lacks the feature; deltamerge honours it there too (only a foreign writer makes such a
table, and a value that disagrees with its expression is never what a reader expects).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, VariantType
from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.predicates import (
    column_parts,
    column_references,
    has_aggregate,
    is_deterministic,
    parse_expression,
    rewrite_columns,
)
from deltamerge.spark.pyspark_errors import quiet_query_context
from deltamerge.spark.types import as_nullable, quote_name

GENERATION_EXPRESSION = "delta.generationExpression"


def generation_expression(f: StructField) -> str | None:
    """The column's generation expression, or None for an ordinary column."""
    value = (f.metadata or {}).get(GENERATION_EXPRESSION)
    return value if isinstance(value, str) and value.strip() else None


def generated_columns(schema: StructType) -> list[tuple[int, StructField, str]]:
    """(position, field, expression) of each generated column (they are top-level only)."""
    out = []
    for i, f in enumerate(schema.fields):
        text = generation_expression(f)
        if text is not None:
            out.append((i, f, text))
    return out


def check_expression(f: StructField, text: str) -> str:
    """SQL true for a row whose value of ``f`` is what its expression computes."""
    return f"{quote_name(f.name)} <=> ({text})"


def fill_missing(df: DataFrame, schema: StructType, provided: Sequence[str]) -> DataFrame:
    """``df`` (the table's columns, in order) with each generated column that the writer did not
    provide (names not in ``provided``, case-insensitive) computed from the row's other values."""
    given = {n.lower() for n in provided}
    fill = {f.name: text for _, f, text in generated_columns(schema) if f.name.lower() not in given}
    if not fill:
        return df
    cols = [
        F.expr(fill[f.name]).cast(f.dataType).alias(f.name) if f.name in fill else F.col(quote_name(f.name))
        for f in schema.fields
    ]
    return df.select(*cols)


def substitute(
    text: str,
    schema: StructType,
    values: Sequence[exp.Expression],
    same: Callable[[str, str], bool],
) -> exp.Expression:
    """The generation expression ``text`` with each reference to a column of ``schema`` replaced by
    that column's new value (``values``, one per field); nested references keep their field path."""
    names = [f.name for f in schema.fields]

    def resolve(parts: list[str]) -> exp.Expression:
        j = next((k for k, n in enumerate(names) if parts and same(n, parts[0])), None)
        if j is None:
            return exp.column(exp.to_identifier(".".join(parts), quoted=True))  # reported by analysis
        node: exp.Expression = exp.Paren(this=values[j].copy())
        for p in parts[1:]:
            node = exp.Dot(this=node, expression=exp.to_identifier(p, quoted=True))
        return node

    return rewrite_columns(parse_expression(text), resolve)


def _invalid(message: str, error_class: str) -> AnalysisError:
    return AnalysisError(message, error_class=error_class, sql_state="42621")


def validate(spark: SparkSession, schema: StructType, *, case_sensitive: bool = False) -> None:
    """Delta's checks of a new table's generation expressions: they parse, reference only existing
    non-generated columns, are deterministic, aggregate nothing, and have the column's type."""
    gens = generated_columns(schema)
    if not gens:
        return
    same = (lambda a, b: a == b) if case_sensitive else (lambda a, b: a.lower() == b.lower())
    generated = {f.name for _, f, _ in gens}
    plain = StructType([f for f in schema.fields if f.name not in generated])
    for _, f, text in gens:
        if isinstance(f.dataType, VariantType):
            # A writer must check value <=> expression, and variants cannot be compared.
            raise _invalid(
                "VARIANT cannot be the result of a generated column. Store the variant in a plain "
                "column, or generate a typed value from it (for example `v::int`).",
                "DELTA_UNSUPPORTED_DATA_TYPE_IN_GENERATED_COLUMN",
            )
        node = parse_expression(text)
        for ref in column_references(node):
            head = column_parts(ref)[0]
            if not any(same(head, p.name) for p in plain.fields):
                raise _invalid(
                    "A generated column cannot use a non-existent column or another generated column "
                    f"(column {f.name}: {text}). Refer only to the table's other, non-generated columns.",
                    "DELTA_INVALID_GENERATED_COLUMN_REFERENCES",
                )
        if not is_deterministic(node):
            raise _invalid(
                f"Found {text}. A generated column cannot use a non deterministic expression.",
                "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN",
            )
        if has_aggregate(node):
            raise _invalid(
                f"Found {text}. A generated column cannot use an aggregate expression",
                "DELTA_AGGREGATE_IN_GENERATED_COLUMN",
            )
        try:
            with quiet_query_context():  # re-raised as Delta's error below
                got = spark.createDataFrame([], plain).selectExpr(text).schema.fields[0].dataType
        except Exception as e:  # Spark's own analysis error, first line
            raise _invalid(
                f"The generation expression of column {f.name} ({text}) cannot be evaluated: "
                f"{str(e).splitlines()[0]}",
                "DELTA_INVALID_GENERATED_COLUMN_REFERENCES",
            ) from None
        if as_nullable(got) != as_nullable(f.dataType):
            raise AnalysisError(
                f"The expression type of the generated column {f.name} is {got.simpleString()}, but the "
                f"column type is {f.dataType.simpleString()}. Cast the expression to the column type.",
                error_class="DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH",
                sql_state="42K09",
            )
