"""Delta Lake's type widening in MERGE schema evolution (``TypeWideningMergeIntoSchemaEvolutionSuite``).

Ported from delta-io/delta ``typewidening/TypeWideningMergeIntoSchemaEvolutionSuite.scala``, with its
test cases from ``TypeWideningTestCases.scala``. As in Delta's ``TypeWideningTestMixin`` every new
target table has ``delta.enableTypeWidening`` set, ``typeWidening.allowAutomaticWidening`` is
``always`` and schema evolution (``schema.autoMerge.enabled``) is on unless a test says otherwise.
MERGEs run as SQL from the temp view ``source`` into ``delta.`path` t``.

- ``WIDENINGS``: a supported (or, with ``always``, restricted) change ``fromType -> toType``: an
  insert-only MERGE of ``toType`` values must widen the target column and keep every value.
- ``UNSUPPORTED``: the column keeps its type (the MERGE of an empty source may overflow, nothing else).
- ``EVOLUTIONS``: Delta's ``testTypeEvolution`` cases, each run with schema evolution off (same rows,
  target types) and on (same rows, widened types).
- the two ``allowAutomaticWidening`` tests, widening with the table property off, widening with schema
  evolution off, and the two "type widening toggled by a concurrent transaction" tests.

Scala's ``null.asInstanceOf[Int]`` (and Byte, Short, Long, Float, Double) is 0, not NULL: those test
values are 0 here too. Not ported: nothing (Delta's name-based variants are path based here).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.functions import col
from pyspark.sql.types import StructType

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import MetadataChangedError

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
AUTOMATIC = "spark.databricks.delta.typeWidening.allowAutomaticWidening"
ANSI = "spark.sql.ansi.enabled"
WIDENING = {"delta.enableTypeWidening": "true"}
OVERFLOWS = ("CAST_OVERFLOW_IN_TABLE_INSERT", "CAST_OVERFLOW", "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE")


@pytest.fixture
def suite_conf(spark_conf):
    """The suite's session: ANSI casts, automatic widening ``always``, schema evolution on."""
    spark_conf({ANSI: "true", AUTOMATIC: "always", AUTO_MERGE: "true"})
    return spark_conf


def _norm(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return tuple(_norm(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _multiset(rows: Any) -> Counter:
    return Counter(_norm(r) for r in rows)


def _merge(spark, path: str, source, on: str, *clauses: str) -> None:
    source.createOrReplaceTempView("source")
    try:
        deltamerge.sql(
            spark, "\n".join([f"MERGE INTO delta.`{path}` t", "USING source s", f"ON {on}", *clauses])
        )
    finally:
        spark.catalog.dropTempView("source")


def _type_of(spark, path: str, column: str) -> str:
    return deltamerge.read(spark, path).schema[column].dataType.simpleString()


def _create(spark, path: str, ddl: str, configuration: dict[str, str] | None = None) -> None:
    """``CREATE TABLE ... (ddl) USING DELTA``: an empty table."""
    deltamerge.write(spark.createDataFrame([], ddl), path, configuration=configuration or WIDENING)


INSERT_ALL = "WHEN NOT MATCHED THEN INSERT *"


def _maybe_overflows(run) -> None:  # type: ignore[no-untyped-def]
    """Delta's ``mayOverflow``: the write may succeed or fail with a cast overflow, nothing else."""
    try:
        run()
    except Exception as e:
        assert any(name in str(e) for name in OVERFLOWS), str(e)


# --- allowAutomaticWidening -------------------------------------------------------------------------


def test_always_automatic_widening_short_to_double(spark, tmp_path, suite_conf) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "a short")
    source = spark.createDataFrame([(3.0,), (-10.5,)], "a double")
    _merge(spark, path, source, "0 = 1", INSERT_ALL)
    assert _type_of(spark, path, "a") == "double"
    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset([(3.0,), (-10.5,)])


def test_never_automatic_widening_short_to_int(spark, tmp_path, suite_conf) -> None:
    suite_conf({AUTOMATIC: "never"})
    path = str(tmp_path / "t")
    _create(spark, path, "a short")
    source = spark.createDataFrame([(1,), (2,)], "a int")
    _maybe_overflows(lambda: _merge(spark, path, source, "0 = 1", INSERT_ALL))
    assert _type_of(spark, path, "a") == "smallint"


# --- TypeWideningTestCases ------------------------------------------------------------------------

BYTES = [1, -1, -128, 127, 0]
SHORTS = [1, -1, -(2**15), 2**15 - 1, 0]
INTS = [1, -1, -(2**31), 2**31 - 1, 0]
LONGS = [1, -1, -(2**63), 2**63 - 1, 0]
FLOATS = [
    1234.56789,
    -0.0,
    0.0,
    math.nan,
    -math.inf,
    math.inf,
    1.401298464324817e-45,  # Float.MinPositiveValue
    -3.4028234663852886e38,  # Float.MinValue
    3.4028234663852886e38,  # Float.MaxValue
    0.0,
]
DOUBLES = [
    987654321.987654321,
    -0.0,
    0.0,
    math.nan,
    -math.inf,
    math.inf,
    5e-324,  # Double.MinPositiveValue
    -1.7976931348623157e308,
    1.7976931348623157e308,
    0.0,
]
DECIMALS = [Decimal("1.23"), Decimal("10.34"), None]


@dataclass(frozen=True)
class Values:
    """Test values of one Spark type: created as ``raw`` then cast to ``sql``."""

    sql: str
    values: list[Any]
    raw: str = ""

    def df(self, spark):  # type: ignore[no-untyped-def]
        raw = self.raw or self.sql
        data = spark.createDataFrame([(v,) for v in self.values], f"value {raw}")
        return data.select(col("value").cast(self.sql).alias("value"))


def _dec(precision: int, scale: int, values: list[Any]) -> Values:
    return Values(f"decimal({precision},{scale})", values, "decimal(38,18)")


@dataclass(frozen=True)
class Widening:
    initial: Values
    additional: Values

    @property
    def id(self) -> str:
        return f"{self.initial.sql}->{self.additional.sql}"


SUPPORTED = [
    Widening(Values("tinyint", BYTES, "int"), Values("smallint", [4, -4, -(2**15), 2**15 - 1, 0], "int")),
    Widening(Values("tinyint", BYTES, "int"), Values("int", [4, -4, -(2**31), 2**31 - 1, 0])),
    Widening(Values("smallint", SHORTS, "int"), Values("int", [4, -4, -(2**31), 2**31 - 1, 0])),
    Widening(Values("smallint", SHORTS, "int"), Values("bigint", [4, -4, -(2**63), 2**63 - 1, 0])),
    Widening(Values("int", INTS), Values("bigint", [4, -4, -(2**63), 2**63 - 1, 0])),
    Widening(Values("float", FLOATS), Values("double", DOUBLES)),
    Widening(
        Values("date", ["2020-01-01", "2024-02-29", "1312-02-27"], "string"),
        Values(
            "timestamp_ntz",
            ["2020-03-17 15:23:15.123456", "2058-12-31 23:59:59.999", "0001-01-01 00:00:00"],
            "string",
        ),
    ),
    # larger precision
    Widening(_dec(9, 2, DECIMALS), _dec(18, 2, [Decimal("-67.89"), Decimal("9" * 16 + ".99"), None])),
    # larger precision and scale, same physical type
    Widening(_dec(8, 2, DECIMALS), _dec(9, 3, [Decimal("-67.89"), Decimal("9" * 6 + ".99"), None])),
    # larger precision and scale, different physical types
    Widening(_dec(9, 2, DECIMALS), _dec(19, 3, [Decimal("-67.89"), Decimal("9" * 16 + ".99"), None])),
]

# Eligible for automatic widening only with allowAutomaticWidening = always.
RESTRICTED = [
    Widening(Values("int", INTS), Values("double", DOUBLES)),
    Widening(Values("tinyint", BYTES, "int"), _dec(10, 0, [Decimal("1.23"), Decimal("9" * 10), None])),
    Widening(Values("smallint", SHORTS, "int"), _dec(10, 0, [Decimal("1.23"), Decimal("9" * 10), None])),
    Widening(Values("int", INTS), _dec(10, 0, [Decimal("1.23"), Decimal("9" * 10), None])),
    Widening(Values("bigint", LONGS), _dec(20, 0, [Decimal("1.23"), Decimal("9" * 20), None])),
]

UNSUPPORTED = [
    Widening(Values("int", [1, 2, -(2**31)]), Values("tinyint", [])),
    Widening(Values("bigint", [4, 5, 2**63 - 1]), Values("int", [])),
    Widening(
        Values(
            "double",
            [
                987654321.987654321,
                math.nan,
                -math.inf,
                math.inf,
                5e-324,
                -1.7976931348623157e308,
                1.7976931348623157e308,
            ],
        ),
        Values("float", []),
    ),
    Widening(Values("tinyint", [1, -1, -128], "int"), _dec(2, 0, [])),
    Widening(Values("smallint", [1, -1, -(2**15)], "int"), _dec(4, 0, [])),
    Widening(Values("int", [1, -1, -(2**31)]), _dec(9, 0, [])),
    Widening(Values("bigint", [1, -1, -(2**63)]), _dec(19, 0, [])),
    Widening(
        Values(
            "timestamp_ntz", ["2020-03-17 15:23:15", "2023-12-31 23:59:59", "0001-01-01 00:00:00"], "string"
        ),
        Values("date", []),
    ),
    # reduce scale
    Widening(_dec(9, 2, [Decimal("-67.89"), Decimal("9" * 7 + ".99")]), _dec(9, 3, [])),
    # reduce precision
    Widening(_dec(9, 2, [Decimal("-67.89"), Decimal("9" * 7 + ".99")]), _dec(8, 2, [])),
    # reduce precision and scale
    Widening(_dec(18, 2, [Decimal("-67.89"), Decimal("9" * 16 + ".99")]), _dec(8, 1, [])),
    # increase scale more than precision
    Widening(_dec(9, 2, [Decimal("-67.89"), Decimal("9" * 7 + ".99")]), _dec(10, 4, [])),
    # smaller scale and larger precision
    Widening(_dec(18, 2, [Decimal("-67.89"), Decimal("9" * 16 + ".99")]), _dec(12, 1, [])),
]


@pytest.mark.parametrize("case", SUPPORTED + RESTRICTED, ids=lambda c: c.id)
def test_automatic_type_widening(spark, tmp_path, suite_conf, case: Widening) -> None:
    path = str(tmp_path / "t")
    initial, additional = case.initial.df(spark), case.additional.df(spark)
    deltamerge.write(initial, path, mode="append", configuration=WIDENING)
    _merge(spark, path, additional, "0 = 1", INSERT_ALL)
    out = deltamerge.read(spark, path)
    to_type = additional.schema["value"].dataType
    assert out.schema["value"].dataType == to_type
    expected = initial.select(col("value").cast(to_type).alias("value")).union(additional)
    assert _multiset(out.select("value").collect()) == _multiset(expected.collect())


@pytest.mark.parametrize("case", UNSUPPORTED, ids=lambda c: c.id)
def test_unsupported_automatic_type_widening(spark, tmp_path, suite_conf, case: Widening) -> None:
    path = str(tmp_path / "t")
    initial = case.initial.df(spark)
    deltamerge.write(initial, path, mode="append", configuration=WIDENING)
    from_type = initial.schema["value"].dataType
    _maybe_overflows(lambda: _merge(spark, path, case.additional.df(spark), "0 = 1", INSERT_ALL))
    assert deltamerge.read(spark, path).schema["value"].dataType == from_type


# --- table property and schema evolution switches ---------------------------------------------------


def test_no_widening_when_type_widening_disabled(spark, tmp_path, suite_conf) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "a short")
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'false')"
    )
    _merge(spark, path, spark.createDataFrame([(1,), (2,)], "a int"), "0 = 1", INSERT_ALL)
    assert _type_of(spark, path, "a") == "smallint"
    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset([(1,), (2,)])


def test_no_widening_without_schema_evolution(spark, tmp_path, suite_conf) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "a short")
    source = spark.createDataFrame([(1,), (2,)], "a int")
    suite_conf({AUTO_MERGE: "false"})
    _merge(spark, path, source, "0 = 1", INSERT_ALL)
    assert _type_of(spark, path, "a") == "smallint"
    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset([(1,), (2,)])
    suite_conf({AUTO_MERGE: "true"})
    _merge(spark, path, source, "0 = 1", INSERT_ALL)
    assert _type_of(spark, path, "a") == "int"
    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset([(1,), (2,), (1,), (2,)])


# --- testTypeEvolution ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evolution:
    name: str
    target: list[tuple[Any, ...]]
    source: list[tuple[Any, ...]]
    target_schema: str
    source_schema: str
    cond: str
    clauses: tuple[str, ...]
    result: list[tuple[Any, ...]]
    result_schema: str


EVOLUTIONS = [
    Evolution(
        "change top-level column short -> int with update",
        [(0,), (10,)],
        [(0,), (20,)],
        "a short",
        "a int",
        "t.a = s.a",
        ("WHEN MATCHED THEN UPDATE SET a = s.a + 1",),
        [(1,), (10,)],
        "a int",
    ),
    Evolution(
        "change top-level column short -> int with insert",
        [(0,), (10,)],
        [(0,), (20,)],
        "a short",
        "a int",
        "t.a = s.a",
        ("WHEN NOT MATCHED THEN INSERT (a) VALUES (s.a)",),
        [(0,), (10,), (20,)],
        "a int",
    ),
    Evolution(
        "updating using narrower value doesn't evolve schema",
        [(0,), (10,)],
        [(0,), (20,)],
        "a int",
        "a short",
        "t.a = s.a",
        ("WHEN MATCHED THEN UPDATE SET a = s.a + 1",),
        [(1,), (10,)],
        "a int",
    ),
    Evolution(
        "only columns in assignments are widened",
        [(0, 5), (10, 15)],
        [(0, 6), (20, 16)],
        "a short, b short",
        "a int, b int",
        "t.a = s.a",
        ("WHEN MATCHED THEN UPDATE SET a = s.a + 1",),
        [(1, 5), (10, 15)],
        "a int, b short",
    ),
    Evolution(
        "automatic widening of struct field with struct assignment",
        [((1,),), ((10,),)],
        [((1,),), ((20,),)],
        "s struct<a: short>",
        "s struct<a: int>",
        "t.s.a = s.s.a",
        ("WHEN MATCHED THEN UPDATE SET t.s.a = s.s.a + 1",),
        [((2,),), ((10,),)],
        "s struct<a: int>",
    ),
    Evolution(
        "automatic widening of struct field with field assignment",
        [((1,),), ((10,),)],
        [((1,),), ((20,),)],
        "s struct<a: short>",
        "s struct<a: int>",
        "t.s.a = s.s.a",
        ("WHEN MATCHED THEN UPDATE SET t.s.a = s.s.a + 1",),
        [((2,),), ((10,),)],
        "s struct<a: int>",
    ),
    Evolution(
        "automatic widening of map value",
        [({"a": 1},)],
        [({"a": 2},)],
        "m map<string, short>",
        "m map<string, int>",
        "1 = 1",
        ("WHEN MATCHED THEN UPDATE SET t.m = s.m",),
        [({"a": 2},)],
        "m map<string, int>",
    ),
    Evolution(
        "automatic widening of array element",
        [([1, 2],)],
        [([3, 4],)],
        "a array<short>",
        "a array<int>",
        "t.a != s.a",
        ("WHEN MATCHED THEN UPDATE SET t.a = s.a",),
        [([3, 4],)],
        "a array<int>",
    ),
    Evolution(
        "multiple automatic widening",
        [(1, 2)],
        [(1, 4), (5, 6)],
        "a tinyint, b short",
        "a short, b int",
        "t.a = s.a",
        ("WHEN MATCHED THEN UPDATE SET *", "WHEN NOT MATCHED THEN INSERT *"),
        [(1, 4), (5, 6)],
        "a short, b int",
    ),
]


def _schema(spark, ddl: str) -> StructType:
    return spark.createDataFrame([], ddl).schema


@pytest.mark.parametrize("evolve", [False, True], ids=["without_evolution", "with_evolution"])
@pytest.mark.parametrize("case", EVOLUTIONS, ids=lambda c: c.name.replace(" ", "_"))
def test_type_evolution(spark, tmp_path, suite_conf, case: Evolution, evolve: bool) -> None:
    suite_conf({AUTO_MERGE: str(evolve).lower()})
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.createDataFrame(case.target, case.target_schema), path, mode="append", configuration=WIDENING
    )
    _merge(spark, path, spark.createDataFrame(case.source, case.source_schema), case.cond, *case.clauses)
    out = deltamerge.read(spark, path)
    want = _schema(spark, case.result_schema if evolve else case.target_schema)
    assert out.schema.simpleString() == want.simpleString()
    assert _multiset(out.collect()) == _multiset(case.result)


# --- concurrent change of the table property -------------------------------------------------------


@pytest.mark.parametrize("enabled", [False, True], ids=["disabled", "enabled"])
def test_fail_if_type_widening_toggled_concurrently(spark, tmp_path, suite_conf, enabled: bool) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "a short")

    def set_widening(value: bool) -> None:
        prop = f"'delta.enableTypeWidening' = '{str(value).lower()}'"
        deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({prop})")

    set_widening(not enabled)
    target = DeltaTable.forPath(spark, path)
    merge = (
        target.alias("target")
        .merge(spark.createDataFrame([(1,)], "a bigint").alias("source"), "target.a = source.a")
        .whenNotMatchedInsertAll()
    )
    set_widening(enabled)
    version = DeltaTable.forPath(spark, path).version()
    with pytest.raises(MetadataChangedError, match="DELTA_METADATA_CHANGED"):
        merge.execute()
    assert DeltaTable.forPath(spark, path).version() == version  # nothing committed
    # A table object made after the change runs the same MERGE.
    source = spark.createDataFrame([(1,)], "a bigint").alias("source")
    again = DeltaTable.forPath(spark, path).alias("target").merge(source, "target.a = source.a")
    assert again.whenNotMatchedInsertAll().execute().collect()[0][3] == 1
