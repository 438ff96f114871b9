"""deltamerge parses and rewrites users' SQL with SQLGlot (``predicates.DIALECT``) before Spark
runs it: whatever it writes back must mean what the user wrote. Each expression below is evaluated
by Spark as written and after the round trip; the values must be equal. The first ones are those
SQLGlot's own Spark dialect gets wrong for Spark 4 (``parse_json`` dropped, ``localtimestamp()``
without its parentheses, ``collate(x, 'name')`` as ``x COLLATE 'name'``)."""

from __future__ import annotations

import pytest
import sqlglot

import deltamerge
from deltamerge import DeltaTable
from deltamerge.predicates import DIALECT

pytestmark = pytest.mark.spark

EXPRESSIONS = [
    "to_json(parse_json('{\"a\": [1, 2]}'))",
    "variant_get(parse_json('{\"a\": 1}'), '$.a', 'int')",
    "is_variant_null(parse_json('null'))",
    "schema_of_variant(parse_json('{\"a\": 1}'))",
    "CAST(parse_json('7') AS INT)",
    "to_json(try_parse_json('{oops'))",
    "localtimestamp() IS NOT NULL",
    "collate('a', 'UTF8_LCASE') = 'A'",
    "'a' COLLATE UTF8_LCASE = 'A'",
    "get_json_object('{\"a\": 1}', '$.a')",
    "from_json('{\"a\": 1}', 'a INT').a",
    "date_add(DATE'2020-01-31', 1)",
    "add_months(DATE'2020-01-31', 1)",
    "date_diff(DAY, DATE'2020-01-01', DATE'2020-01-31')",
    "date_format(TIMESTAMP'2020-01-02 03:04:05', 'yyyy/MM/dd HH')",
    "to_date('02/01/2020', 'dd/MM/yyyy')",
    "date_trunc('MONTH', TIMESTAMP'2020-01-02 03:04:05')",
    "timestampadd(HOUR, 1, TIMESTAMP'2020-01-01 00:00:00')",
    "TIMESTAMP'2020-01-01 00:00:00' + INTERVAL 1 DAY",
    "CAST('2020-01-01' AS TIMESTAMP_NTZ)",
    "split_part('a,b', ',', 2)",
    "regexp_extract('abc123', '([0-9]+)', 1)",
    "'abc' LIKE ANY ('a%', 'x%')",
    "overlay('hello' PLACING 'XX' FROM 2 FOR 2)",
    "decode(2, 1, 'one', 2, 'two', 'other')",
    "aggregate(array(1, 2, 3), 0, (acc, x) -> acc + x)",
    "array_sort(array(2, 1, 3), (a, b) -> b - a)",
    "transform_values(map('a', 1), (k, v) -> v + 1)['a']",
    "named_struct('a', 1, 'b', 'x').b",
    "pmod(-7, 3)",
    "7 div 2",
    "try_divide(1, 0)",
    "nvl2(NULL, 1, 2)",
    "1 <=> NULL",
    "1 IS DISTINCT FROM 2",
    "CAST(1 AS DECIMAL(10, 2))",
    "CAST(map('a', 1) AS MAP<STRING, BIGINT>)",
    "1::string",
    "xxhash64('a')",
    "trim(BOTH 'x' FROM 'xax')",
    "X'0102'",
    "to_utc_timestamp(TIMESTAMP'2020-01-01 00:00:00', 'Asia/Seoul')",
    "equal_null(1, NULL)",
    # Spark 4 reads a doubled quote in a literal as one quote; SQLGlot's Spark, as two literals
    "'it''s'",
    "'a''''b'",
    "''''",
    "'' || ''",
    '"say ""hi"""',
    '"it\'s"',
    "'a\"'",
    "\"a''b\"",
    "'a' 'b'",
    r"'it\'s'",
    r"r'a\b'",
    "'x''y' LIKE 'x''%'",
]


def test_round_trip_keeps_the_meaning(spark) -> None:  # type: ignore[no-untyped-def]
    rewritten = [sqlglot.transpile(e, read=DIALECT, write=DIALECT)[0] for e in EXPRESSIONS]
    original = spark.sql("SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(EXPRESSIONS))).collect()[
        0
    ]
    again = spark.sql("SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(rewritten))).collect()[0]
    diffs = [
        (e, r, a, b) for e, r, a, b in zip(EXPRESSIONS, rewritten, original, again, strict=True) if a != b
    ]
    assert not diffs


def test_doubled_quotes_reach_the_table(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """'O''Brien' is O'Brien in every statement deltamerge parses (it was OBrien: SQLGlot's Spark
    concatenated the two halves), in the builder's strings too."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "O'Brien"), (2, "x"), (3, "y")], "id INT, name STRING"), path)
    table = f"delta.`{path}`"
    deltamerge.sql(
        spark,
        f"MERGE INTO {table} t USING (SELECT 1 AS id, 'it''s' AS v UNION ALL SELECT 4, 'D''Arcy') s "
        "ON t.id = s.id AND t.name = 'O''Brien' "
        "WHEN MATCHED THEN UPDATE SET name = s.v || ' ''ok''' "
        "WHEN NOT MATCHED AND s.v = 'D''Arcy' THEN INSERT (id, name) VALUES (s.id, s.v || '''')",
    )
    deltamerge.sql(spark, f"UPDATE {table} SET name = 'Mc''Coy' WHERE name = 'x'")
    deltamerge.sql(spark, f"DELETE FROM {table} WHERE name = \"y\" OR name = 'it''s'")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(spark.createDataFrame([(2,)], "id INT").alias("s"), "t.id = s.id AND t.name = 'Mc''Coy'")
        .whenMatchedUpdate(condition="t.name <> 'it''s'", set={"name": "concat(t.name, '''s')"})
        .execute()
    )
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(1, "it's 'ok'"), (2, "Mc'Coy's"), (4, "D'Arcy'")]
