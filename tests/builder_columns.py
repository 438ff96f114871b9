"""A MERGE whose builder arguments are Columns of the kinds deltamerge converts to SQL text itself:
higher-order functions with Python lambdas and ``try_cast``. Run on a classic session
(tests/spark/test_builder_column_literals.py) and on Spark Connect (tests/connect/test_connect_core.py)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any


def higher_order_merge(spark: Any, path: str) -> list[tuple]:
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = "id int, arr array<int>, m map<string,int>, n int, code string"
    target = [(1, [1, 2], {"a": 1}, 0, "x"), (2, [5], {"b": 2}, 0, "y")]
    deltamerge.write(spark.createDataFrame(target, schema), path)
    source = spark.createDataFrame(
        [(1, [3, 4, 5], {"a": 10}, 0, "12"), (2, [], {}, 0, "oops"), (3, [7, 8], {"c": 3}, 0, "3")], schema
    )
    s = lambda name: F.col(f"s.{name}")  # noqa: E731
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedUpdate(
            F.exists(s("arr"), lambda x: x > 4) | (F.size(s("arr")) == 0),
            set={
                "arr": F.transform(s("arr"), lambda x, i: x * 10 + i),
                "m": F.transform_values(s("m"), lambda k, v: v + F.length(k)),
                "n": F.aggregate(F.filter(s("arr"), lambda x: x % 2 == 1), F.lit(0), lambda acc, x: acc + x),
                "code": s("code").try_cast("int").cast("string"),
            },
        )
        .whenNotMatchedInsert(
            values={
                "id": s("id"),
                "arr": F.zip_with(s("arr"), s("arr"), lambda a, b: a * b),
                "m": s("m"),
                "n": F.array_sort(s("arr"), lambda a, b: b - a)[0],
                "code": s("code").try_cast("int").cast("string"),
            }
        )
        .execute()
    )  # fmt: skip
    rows = deltamerge.read(spark, path).collect()
    return sorted((r.id, list(r.arr), dict(r.m), r.n, r.code) for r in rows)


HIGHER_ORDER_EXPECTED = [
    (1, [30, 41, 52], {"a": 11}, 8, "12"),
    (2, [], {}, 0, None),
    (3, [49, 64], {"c": 3}, 8, "3"),
]


def udf_merge(spark: Any, path: str) -> list[tuple]:
    """Python UDF Columns in a condition, an assignment and an insert value (each registered as a
    temporary function for the merge); a non-deterministic one in ON is refused, as in Delta."""
    import pytest
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable
    from deltamerge.errors import AnalysisError

    shout = F.udf(lambda s: None if s is None else s.upper() + "!", "string", useArrow=False)
    odd = F.udf(lambda n: n % 2 == 1, "boolean", useArrow=False)
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id int, v string"), path)
    source = spark.createDataFrame([(1, "x"), (2, "y"), (5, "z")], "id int, v string")
    merge = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedUpdate(odd(F.col("t.id")), set={"v": F.concat(shout(F.col("s.v")), F.col("t.v"))})
        .whenNotMatchedInsert(values={"id": F.col("s.id") * 10, "v": shout(F.lit("new"))})
    )  # fmt: skip
    merge.explain()  # analysed with the UDFs registered (and dropped after)
    merge.execute()
    # The temporary functions exist only while the merge runs (one per merge and UDF used to stay:
    # a streaming job merging every batch piled them up).
    assert not [r for r in spark.sql("SHOW USER FUNCTIONS").collect() if "__dm_udf" in r[0]]
    coin = F.udf(lambda: 1, "int", useArrow=False).asNondeterministic()
    with pytest.raises(AnalysisError, match="DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"):
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(source.alias("s"), (F.col("t.id") == F.col("s.id")) & (coin() == 1))
            .whenMatchedDelete()
            .execute()
        )  # fmt: skip
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


UDF_EXPECTED = [(1, "X!a"), (2, "b"), (3, "c"), (50, "NEW!")]


def struct_merge(spark: Any, path: str) -> list[tuple]:
    """F.struct(...) Columns name their fields after the aliases (the aliases were dropped: the
    struct's fields were v and col2, which cannot be cast to a<int>, b<string>)."""
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = "id INT, s STRUCT<a: INT, b: STRING>"
    deltamerge.write(spark.createDataFrame([(1, (1, "a")), (2, (2, "b"))], schema), path)
    source = spark.createDataFrame([(1, 9, "x"), (3, 7, "y")], "id INT, v INT, w STRING")
    updated = F.struct(F.col("s.v").alias("a"), F.upper(F.col("s.w")).alias("b"))
    # fields out of order: assigned by name (spark.databricks.delta.resolveMergeUpdateStructsByName)
    inserted = F.struct(F.col("s.w").alias("b"), F.col("s.v").alias("a"))
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"s": updated})
        .whenNotMatchedInsert(values={"id": "s.id", "s": inserted})
        .execute()
    )  # fmt: skip
    return sorted((r.id, tuple(r.s)) for r in deltamerge.read(spark, path).collect())


STRUCT_EXPECTED = [(1, (9, "X")), (2, (2, "b")), (3, (7, "y"))]


def decimal_interval_merge(spark: Any, path: str) -> list[tuple]:
    """lit(Decimal) is a DECIMAL (it was the string '1.50': times 2 gave the double 3.0) and
    lit(timedelta) a day-time interval (it was the string 'PT24H3S')."""
    import datetime as dt
    from decimal import Decimal

    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = "id INT, label STRING, ts TIMESTAMP"
    start = dt.datetime(2024, 1, 1, 12, 0, 0)
    deltamerge.write(spark.createDataFrame([(1, "a", start), (2, "b", start)], schema), path)
    source = spark.createDataFrame([(1,), (2,)], "id INT")
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(
            F.col("s.id") * F.lit(Decimal("1.5")) > F.lit(Decimal("2.0")),
            set={
                "label": F.lit(Decimal("1.50")) * 2,
                "ts": F.col("t.ts") + F.lit(dt.timedelta(days=1, seconds=3)),
            },
        )
        .execute()
    )  # fmt: skip
    return sorted((r.id, r.label, r.ts) for r in deltamerge.read(spark, path).collect())


DECIMAL_INTERVAL_EXPECTED = [
    (1, "a", _dt.datetime(2024, 1, 1, 12, 0, 0)),
    (2, "3.00", _dt.datetime(2024, 1, 2, 12, 0, 3)),
]


def update_fields_merge(spark: Any, path: str) -> tuple[list[tuple], list[tuple]]:
    """Column.withField / dropFields (were refused: DELTA_UNSUPPORTED_EXPRESSION), nested, chained,
    on NULL structs, against the same Columns evaluated by Spark over the joined rows. Returns
    (merged rows, Spark's rows)."""
    import pytest
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable
    from deltamerge.errors import AnalysisError

    schema = "id INT, s STRUCT<a: INT, b: STRING, n: STRUCT<x: INT, y: INT>>"
    rows = [(1, (1, "a", (1, 2))), (2, None), (3, (3, "c", None)), (4, (4, "d", (4, 4)))]
    deltamerge.write(spark.createDataFrame(rows, schema), path)
    source = spark.createDataFrame([(1, 9, "p"), (2, 8, "q"), (3, 7, "r")], "id INT, v INT, w STRING")
    value = (
        F.col("t.s").withField("a", F.col("s.v")).withField("n.x", F.col("s.v") * 10)
        .dropFields("b", "n.zz").withField("b", F.upper(F.col("s.w")))
    )  # fmt: skip
    # Spark's own result for the matched rows (the merge assigns the struct's fields by name)
    target = spark.createDataFrame(rows, schema).alias("t")
    updated = (
        target.join(source.alias("s"), "id").select("id", value.alias("s"))
        .select("id", F.when(F.col("s").isNotNull(), F.struct("s.a", "s.b", "s.n")).alias("s"))
    )  # fmt: skip
    expected = sorted(
        (r.id, None if r.s is None else (r.s.a, r.s.b, None if r.s.n is None else tuple(r.s.n)))
        for r in updated.unionByName(target.join(source, "id", "left_anti")).collect()
    )
    for bad in (F.col("t.s").withField("zz.q", F.lit(1)), F.col("t.s").dropFields("zz.q")):
        with pytest.raises(AnalysisError, match="FIELD_NOT_FOUND"):
            (
                DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
                .whenMatchedUpdate(set={"s": bad})
                .execute()
            )  # fmt: skip
    (
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"s": value})
        .execute()
    )  # fmt: skip
    got = sorted(
        (r.id, None if r.s is None else (r.s.a, r.s.b, None if r.s.n is None else tuple(r.s.n)))
        for r in deltamerge.read(spark, path).collect()
    )
    assert expected[:3] == [(1, (9, "P", (90, 2))), (2, None), (3, (7, "R", None))]  # the oracle itself
    return got, expected


def _with(run: Callable[[Any, str], Any], expected: Any) -> Callable[[Any, str], tuple[Any, Any]]:
    return lambda spark, path: (run(spark, path), expected)


#: The merges run on a classic session (tests/spark/test_builder_column_literals.py) and on Spark
#: Connect (tests/connect/test_connect_core.py): name -> (spark, table path) -> (got, expected).
CASES: dict[str, Callable[[Any, str], tuple[Any, Any]]] = {
    "lambdas_and_try_cast": _with(higher_order_merge, HIGHER_ORDER_EXPECTED),
    "python_udfs": _with(udf_merge, UDF_EXPECTED),
    "struct_fields_named_by_aliases": _with(struct_merge, STRUCT_EXPECTED),
    "decimal_and_interval_literals": _with(decimal_interval_merge, DECIMAL_INTERVAL_EXPECTED),
    "with_field_and_drop_fields": update_fields_merge,
}
