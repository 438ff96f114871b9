"""A MERGE whose builder arguments are Columns of the kinds deltamerge converts to SQL text itself:
higher-order functions with Python lambdas and ``try_cast``. Run on a classic session
(tests/spark/test_builder_column_literals.py) and on Spark Connect (tests/connect/test_connect_core.py)."""

from __future__ import annotations

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
