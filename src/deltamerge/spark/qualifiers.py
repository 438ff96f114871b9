"""The qualifiers a DataFrame's columns keep from an alias or a table read under other operators.

``spark.table("updates").where(...)``, ``df.alias("s").dropDuplicates(["id"])`` or
``spark.sql("SELECT * FROM updates")`` carry no alias at the top of their plan, yet Spark resolves
``updates.id`` / ``s.id`` against them: an attribute keeps its qualifier through filters,
projections, joins and the like. Delta resolves a MERGE's references in Spark's analyzer, so such
a source's qualified columns work there; here Spark is asked to resolve the reference itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deltamerge.spark.pyspark_errors import quiet_query_context

QualifiedLookup = Callable[[tuple[str, ...], str], list[int]]


def _quoted(parts: Sequence[str]) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def qualified_columns(df: DataFrame) -> QualifiedLookup:
    """``lookup(qualifier, name)``: the positions of the columns of ``df`` that Spark resolves
    ``qualifier.name`` to by the columns' own qualifiers (none when it does not, or when it reads
    the reference as a struct field instead). One resolution per distinct reference, asked only
    for qualifiers that name neither side of the merge."""
    cache: dict[tuple[tuple[str, ...], str], list[int]] = {}

    def lookup(qualifier: tuple[str, ...], name: str) -> list[int]:
        key = (qualifier, name)
        if key not in cache:
            try:
                with quiet_query_context():
                    cache[key] = _positions(df, qualifier, name)
            except Exception:  # not resolvable (Spark's error is the caller's "cannot resolve")
                cache[key] = []
        return cache[key]

    return lookup


def _positions(df: DataFrame, qualifier: tuple[str, ...], name: str) -> list[int]:
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return _connect_positions(df, qualifier, name)
    probe = df.select(F.col(_quoted((*qualifier, name))))
    resolved = probe._jdf.queryExecution().analyzed().output().apply(0)
    if resolved.getClass().getSimpleName() != "AttributeReference":
        return []
    wanted = resolved.exprId().id()
    output = jdf.queryExecution().analyzed().output()
    # The same attribute, not a struct field of a column named like the qualifier (a new alias).
    return [i for i in range(output.size()) if output.apply(i).exprId().id() == wanted]


def _connect_positions(df: DataFrame, qualifier: tuple[str, ...], name: str) -> list[int]:
    # No attribute ids on Spark Connect: a reference that could be a struct field of a column
    # named like the qualifier is left to the field reading; otherwise the name gives the
    # positions (once Spark resolved it, by its own case rules: it names the result as written).
    columns = df.columns
    if len(qualifier) == 1 and any(c.lower() == qualifier[0].lower() for c in columns):
        return []
    df.select(F.col(_quoted((*qualifier, name)))).schema  # noqa: B018 - resolves or raises
    exact = [i for i, c in enumerate(columns) if c == name]
    return exact or [i for i, c in enumerate(columns) if c.lower() == name.lower()]
