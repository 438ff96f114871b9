"""One clock reading per MERGE: ``now()``, ``current_timestamp()``, ``current_date()`` and
``localtimestamp()`` give the same instant everywhere in the statement.

Delta analyses a MERGE as one plan, so Spark replaces every clock function in it (in the source,
the ON condition, clause conditions and assigned values) by one value. deltamerge runs a MERGE as
several Spark queries (source-key summary, job 1, job 2), and each would read the clock again: a
source row stamped ``current_timestamp()`` would no longer equal ``now()`` in a condition. So:

- a source whose plan reads the clock is materialized once, with one more column holding
  ``current_timestamp()`` of that same query; that value is the merge's instant (the driver's clock
  when the source is empty);
- otherwise the instant is the driver's clock when the merge starts;
- the statement's own expressions get the instant as literals: ``timestamp_micros(n)``, and casts
  of it to DATE and TIMESTAMP_NTZ, which Spark computes in the session time zone exactly as
  ``current_date()`` and ``localtimestamp()`` do.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from typing import cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from deltamerge.merge.clauses import Assignment, MergeClause, MergeSpec
from deltamerge.spark.types import quote_name
from deltamerge.sql_dialect import bare_function_name, mark_bare

# How Spark prints clock functions in an analysed plan (``current_date(Some(UTC))``, ``now()`` ...).
_CLOCK_IN_PLAN = re.compile(r"(?<![\w`.])(current_timestamp|now|current_date|localtimestamp)\(", re.I)


def _is_clock(node: exp.Expr) -> bool:
    # SQLGlot parses current_timestamp/current_date/curdate/localtimestamp; now() stays a call.
    if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate, exp.Localtimestamp)):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == "now"


def _literal(node: exp.Expr, micros: int) -> exp.Expr:
    instant = exp.Anonymous(this="timestamp_micros", expressions=[exp.Literal.number(micros)])
    out: exp.Expr = instant
    if isinstance(node, exp.CurrentDate):
        out = exp.Cast(this=instant, to=exp.DataType.build("DATE"))
    elif isinstance(node, exp.Localtimestamp):
        out = exp.Cast(this=instant, to=exp.DataType.build("TIMESTAMP_NTZ", dialect="spark"))
    bare = bare_function_name(node)
    if bare is not None:  # a column named current_date still wins over it (merge/resolution.py)
        mark_bare(out, bare)
    return out


def _reads_clock(node: exp.Expression | None) -> bool:
    return node is not None and any(_is_clock(n) for n in node.walk())


def _pinned(node: exp.Expression, micros: int) -> exp.Expression:
    out = node.transform(lambda n: _literal(n, micros) if _is_clock(n) else n, copy=True)
    return cast(exp.Expression, out)


def statement_reads_clock(spec: MergeSpec) -> bool:
    """Whether the ON condition, a clause condition or an assigned value reads the clock."""
    if _reads_clock(spec.condition):
        return True
    for c in spec.clauses:
        if _reads_clock(c.condition) or any(_reads_clock(a.value) for a in c.assignments or ()):
            return True
    return False


def source_reads_clock(spark: SparkSession, source: DataFrame) -> bool:
    """Whether the source's analysed plan (views and subqueries included) reads the clock."""
    from deltamerge.spark.session import analyzed_plan_text

    try:
        text = analyzed_plan_text(source)
    except Exception:
        return False
    return bool(_CLOCK_IN_PLAN.search(text))


def with_literals(spec: MergeSpec, micros: int) -> MergeSpec:
    """``spec`` with every clock function in its expressions replaced by the instant ``micros``."""

    def clause(c: MergeClause) -> MergeClause:
        cond = None if c.condition is None else _pinned(c.condition, micros)
        assignments = (
            None
            if c.assignments is None
            else tuple(Assignment(a.key, _pinned(a.value, micros)) for a in c.assignments)
        )
        return dataclasses.replace(c, condition=cond, assignments=assignments)

    return dataclasses.replace(
        spec, condition=_pinned(spec.condition, micros), clauses=tuple(clause(c) for c in spec.clauses)
    )


def pin_clock(
    spark: SparkSession, spec: MergeSpec, *, attempt: int = 1
) -> tuple[MergeSpec, DataFrame | None]:
    """The spec with the merge's instant as literals, and the materialized source when its plan
    reads the clock (None otherwise: the source is used as it is). Nothing changes, and no Spark
    job runs, when neither the statement nor the source reads the clock."""
    from deltamerge.merge.source import materialize

    pinned_source = None
    micros = None
    if source_reads_clock(spark, spec.source):
        column = f"__dm_now_{uuid.uuid4().hex[:8]}"
        names = spec.source.columns
        materialized = materialize(spec.source.withColumn(column, F.current_timestamp()), attempt)
        first = materialized.select(F.unix_micros(F.col(column))).limit(1).collect()
        micros = int(first[0][0]) if first else None
        pinned_source = materialized.select(*[F.col(quote_name(n)) for n in names])
    if not statement_reads_clock(spec):
        return spec, pinned_source
    if micros is None:
        micros = time.time_ns() // 1000
    return with_literals(spec, micros), pinned_source
