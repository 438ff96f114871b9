"""Builder arguments given as Columns with date/timestamp literals and struct field extraction
(classic; the Connect variant is in tests/connect/test_connect_core.py)."""

from __future__ import annotations

import pytest

from builder_columns import CASES

pytestmark = pytest.mark.spark


def _temporal_merge(spark, path):
    import datetime as dt

    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = "id int, d date, ts timestamp, st struct<f:int>"
    utc = dt.timezone.utc
    target = [(1, dt.date(2023, 12, 31), dt.datetime(2023, 1, 1, tzinfo=utc), (1,)),
              (2, dt.date(2024, 1, 5), dt.datetime(2023, 1, 1, tzinfo=utc), (2,))]  # fmt: skip
    deltamerge.write(spark.createDataFrame(target, schema), path)
    source = [(1, None, None, (10,)), (2, None, None, (20,)), (3, dt.date(2024, 2, 1), None, (0,)),
              (4, dt.date(2024, 2, 2), None, (5,))]  # fmt: skip
    src = spark.createDataFrame(source, schema)
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(src.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedUpdate(
            F.col("t.d") >= F.lit(dt.date(2024, 1, 1)),
            set={"ts": F.lit(dt.datetime(2024, 5, 1, 12, 30, tzinfo=utc)), "st": F.col("s.st")},
        )
        .whenNotMatchedInsert(
            F.col("s.st")["f"] > 0,
            values={"id": "s.id", "d": "s.d", "ts": F.lit(dt.datetime(2024, 6, 1, tzinfo=utc)), "st": "s.st"},
        )
        .execute()
    )  # fmt: skip
    out = deltamerge.read(spark, path).selectExpr(
        "id", "CAST(d AS STRING)", "date_format(ts, 'yyyy-MM-dd HH:mm:ss')", "st.f"
    )
    return sorted(tuple(r) for r in out.collect())


TEMPORAL_EXPECTED = [
    (1, "2023-12-31", "2023-01-01 00:00:00", 1),
    (2, "2024-01-05", "2024-05-01 12:30:00", 20),
    (4, "2024-02-02", "2024-06-01 00:00:00", 5),
]


def test_temporal_literals_and_extract_value_in_column_arguments(spark, tmp_path):
    assert _temporal_merge(spark, str(tmp_path / "t")) == TEMPORAL_EXPECTED


@pytest.mark.sampled
@pytest.mark.parametrize("escaped", ["false", "true"])
def test_quotes_and_backslashes_reach_spark_intact(spark, tmp_path, spark_conf, escaped):
    """Strings deltamerge renders into SQL (Column literals, struct field names of a widened
    struct, file URIs of a root with a quote and a backslash) keep their value whatever
    spark.sql.parser.escapedStringLiterals says: an escaped literal would keep its backslashes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    import deltamerge
    from deltamerge import DeltaTable

    spark_conf({"spark.sql.parser.escapedStringLiterals": escaped})
    odd = "it's a \\ b"
    path = str(tmp_path / "o'ne \\ two")
    deltamerge.write(
        spark.range(20, numPartitions=2).select("id", F.col("id").cast("string").alias("v")),
        path,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    src = spark.range(15, 25).select("id", F.lit("new").alias("v"))
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(src.alias("s"), (F.col("t.id") == F.col("s.id")) & (F.col("s.v") != F.lit(odd)))
        .whenMatchedUpdate(set={"v": F.lit(odd)})
        .whenNotMatchedInsert(values={"id": "s.id", "v": F.concat(F.lit(odd), F.lit("'\\"))})
        .execute()
    )  # fmt: skip
    got = {r.id: r.v for r in deltamerge.read(spark, path).collect()}
    assert got == {**{i: str(i) for i in range(15)}, **dict.fromkeys(range(15, 20), odd),
                   **dict.fromkeys(range(20, 25), odd + "'\\")}  # fmt: skip

    names = ["a'b", "c\\d"]
    wide = StructType([StructField(n, LongType()) for n in names])
    narrow = StructType([StructField(names[0], IntegerType()), StructField(names[1], LongType())])
    structs = str(tmp_path / "structs")
    schema = StructType(
        [StructField("id", LongType()), StructField("st", wide), StructField("s", StringType())]
    )
    deltamerge.write(spark.createDataFrame([(1, (1, 1), "x")], schema), structs)
    src_schema = StructType(
        [StructField("id", LongType()), StructField("st", narrow), StructField("s", StringType())]
    )
    src2 = spark.createDataFrame([(1, (10, 11), odd), (2, (20, 21), odd)], src_schema)
    (
        DeltaTable.forPath(spark, structs).alias("t").merge(src2.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    )  # fmt: skip
    out = deltamerge.read(spark, structs)
    assert [f.name for f in out.schema["st"].dataType.fields] == names
    assert sorted((r.id, tuple(r.st), r.s) for r in out.collect()) == [(1, (10, 11), odd), (2, (20, 21), odd)]
    if escaped == "false":  # col["a'b"]: a struct field's name must reach Spark as a string literal
        (
            DeltaTable.forPath(spark, structs).alias("t").merge(src2.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(F.col("t.st")[names[0]] > 15, set={"s": F.col("s.st")[names[1]].cast("int")})
            .execute()
        )  # fmt: skip
        assert sorted((r.id, r.s) for r in deltamerge.read(spark, structs).collect()) == [(1, odd), (2, "21")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_builder_columns_written_as_sql(spark, tmp_path, case):
    """Column arguments deltamerge writes as SQL text itself (builder_columns.py): higher-order
    functions with Python lambdas, try_cast, Python UDFs, struct aliases, decimal and interval
    literals, withField / dropFields."""
    got, expected = CASES[case](spark, str(tmp_path / "t"))
    assert got == expected


def test_python_udf_registered_in_the_merges_own_session(spark, tmp_path):
    """A merge run from another session of the same context registers its UDFs there (the active
    session cannot see that session's temporary functions, nor the reverse)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    other = spark.newSession()
    path = str(tmp_path / "t")
    deltamerge.write(other.createDataFrame([(1, "a")], "id int, v string"), path)
    shout = F.udf(lambda s: s.upper(), "string", useArrow=False)
    source = other.createDataFrame([(1, "x")], "id int, v string")
    builder = DeltaTable.forPath(other, path).alias("t").merge(source.alias("s"), "t.id = s.id")
    # make the test session the active one again (creating other's DataFrames made other active)
    SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(spark._jsparkSession)
    SparkSession._activeSession = spark
    assert SparkSession.getActiveSession() is spark
    (
        builder
        .whenMatchedUpdate(set={"v": shout(F.col("s.v"))}).execute()
    )  # fmt: skip
    assert [tuple(r) for r in deltamerge.read(other, path).collect()] == [(1, "X")]


def test_chained_struct_field_updates_edit_one_struct(spark, tmp_path):
    """A chain of withField / dropFields calls (long, nested, dropping and re-adding, descending
    into a struct set by an earlier call) merges as Spark evaluates the same Column: each chain is
    rebuilt once, not once per call (12 calls on a 5-field struct would repeat the innermost struct
    6^12 times)."""
    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = (
        "id INT, s STRUCT<a: INT, b: STRING, c: INT, n: STRUCT<x: INT, y: INT>, m: STRUCT<p: INT, q: STRING>>"
    )
    rows = [(1, (1, "a", 10, (1, 2), (5, "e"))), (2, None), (3, (3, "c", 30, None, (6, "f"))),
            (4, (4, "d", 40, (4, 4), None))]  # fmt: skip
    source = spark.createDataFrame(
        [(1, 9, "p"), (2, 8, "q"), (3, 7, "r"), (4, 6, "s")], "id INT, v INT, w STRING"
    )
    s, v, w = F.col("t.s"), F.col("s.v"), F.col("s.w")
    long_chain = s
    for i in range(4):
        long_chain = (
            long_chain.withField("a", v + i).withField("n.x", v * i).withField("m.q", F.concat(w, F.lit(i)))
        )
    chains = {
        "long": long_chain,
        "drop_and_add_again": s.dropFields("c").withField("c", v).dropFields("n.x").withField("n.x", v + 1),
        "descend_into_a_new_struct": s.withField("n", F.struct(F.lit(1).alias("x"), F.lit(2).alias("y")))
        .withField("n.y", v)
        .withField("A", F.lit(0)),
    }

    def canonical(r):  # by name, as the merge assigns a struct (case-insensitively)
        if r is None:
            return None
        d = {k.lower(): r[k] for k in r.__fields__}
        inner = [None if d[k] is None else tuple(d[k][f] for f in fs) for k, fs in (("n", "xy"), ("m", "pq"))]
        return (d["a"], d["b"], d["c"], *inner)

    for label, value in chains.items():
        path = str(tmp_path / label)
        deltamerge.write(spark.createDataFrame(rows, schema), path)
        target = spark.createDataFrame(rows, schema).alias("t")
        expected = sorted(
            (r.id, canonical(r.s))
            for r in target.join(source.alias("s"), F.col("t.id") == F.col("s.id"))
            .select("t.id", value.alias("s"))
            .collect()
        )
        (
            DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(set={"s": value})
            .execute()
        )  # fmt: skip
        got = sorted((r.id, canonical(r.s)) for r in deltamerge.read(spark, path).collect())
        assert got == expected, label
        assert got[1] == (2, None)  # a NULL struct stays NULL
