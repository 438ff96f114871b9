"""Delta Lake's top-level MERGE schema-evolution tests (delta-io/delta ``MergeIntoSchemaEvolutionSuite``).

Ported traits: ``MergeIntoSchemaEvolutionCoreTests``, ``...BaseNewColumnTests``,
``...BaseExistingColumnTests``, ``MergeIntoSchemaEvoStoreAssignmentPolicyTests`` and
``MergeIntoSchemaEvolutionNotMatchedBySourceTests``: every test of them.

Each ``Case`` is one Delta ``testEvolution``, which is two Delta tests: the target rows are appended
to a new table, the source becomes the temp view ``source`` and the MERGE runs as SQL
(``MERGE INTO delta.`path` t USING source s ON ... WHEN ...``), once with
``spark.databricks.delta.schema.autoMerge.enabled`` on and once with it off. With it on the table
must hold ``expected`` (a multiset) with the schema of ``expected`` (types and field order, nullability
ignored, as Delta's ``schema.asNullable`` check), or the MERGE must fail with ``error`` in its
message (case-insensitive, like Delta's ``errorContains``); with it off, ``expected_off`` /
``error_off`` likewise. A failed MERGE must leave the table at its version (not checked by Delta).

Cases with ``no_aliases`` are Delta's ``testEvolutionWithoutTableAliases``: target and source are
tables named ``target`` and ``source`` (here ``deltamerge.register_table`` names), the condition is
``1 = 1`` and columns are qualified with the table names; Delta checks only the rows there.

Generated suites run these traits via SQL and the Scala API, path- and name-based, with CDF, with
CDF and deletion vectors, and with column mapping. Here every case runs via SQL, path-based (the
name-based form is covered by the ``no_aliases`` cases); the cases in ``WITH_DVS`` run again on a
table with the change data feed and deletion vectors enabled (Delta's ``...CDCOnDVs...`` suites).
``schema evolution enabled for the current command`` runs in Delta's Scala suite only (the builder's
``withSchemaEvolution()``); here it runs through the builder and through
``MERGE WITH SCHEMA EVOLUTION INTO``.

Scala ``toDF`` columns of ``Int``/``Long``/``Byte``/``Short``/``Double``/``Boolean`` tuples are NOT
NULL; the schemas below say so with ``not null``.

Not ported: the predicate-pushdown on/off variants (a Delta-internal optimizer switch), the
column-mapping variants (Delta runs only one nested-array test of these traits with column mapping),
and the DSv2 in-memory-table variants (Spark's V2 MERGE, not Delta's).
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

import deltamerge
from delta_clauses import delete, insert, update  # tests/ is on sys.path
from delta_clauses import when as _when
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
DROP_NULL_COLUMNS = "spark.databricks.delta.createDataFrame.dropNullColumns"
POLICY = "spark.sql.storeAssignmentPolicy"
FOLLOWS_ANSI = "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag"
CASE_SENSITIVE = "spark.sql.caseSensitive"

Data = Callable[[SparkSession], DataFrame]


def df(ddl: str, *rows: tuple[Any, ...]) -> Data:
    return lambda spark: spark.createDataFrame(list(rows), ddl)


def sql_df(*exprs: str) -> Data:
    """One row built from SQL expressions (for schemas Python rows cannot give, e.g. containsNull)."""
    return lambda spark: spark.range(1).selectExpr(*exprs)


# --- clauses (Delta's MergeHelpers) -------------------------------------------------------------------


def update_nmbs(set_: str, condition: str | None = None) -> str:
    return _when("NOT MATCHED BY SOURCE", condition, f"UPDATE SET {set_}")


def delete_nmbs(condition: str | None = None) -> str:
    return _when("NOT MATCHED BY SOURCE", condition, "DELETE")


@dataclass(frozen=True)
class Case:
    name: str
    target: Data
    source: Data
    clauses: tuple[str, ...]
    cond: str = "t.key = s.key"
    expected: Data | None = None
    expected_off: Data | None = None
    error: str | None = None
    error_off: str | None = None
    confs: dict[str, str] = field(default_factory=dict)
    # Delta's explicit ``expectedSchema``: compared with nullability (name, type, nullable).
    exact_schema: tuple[tuple[str, str, bool], ...] | None = None
    no_aliases: bool = False


KV = "key int not null, value int not null"
KV_EXTRA = "key int not null, value int not null, extra string"
KV_EXTRA_INT = "key int not null, value int not null, extra int not null"
KV_EXTRA_UNUSED = "key int not null, value int not null, extra string, unused string"
T3 = df(KV, (0, 0), (1, 10), (3, 30))
S_EXTRA = df(KV_EXTRA, (1, 1, "extra1"), (2, 2, "extra2"))
S_EXTRA_INT = df(KV_EXTRA_INT, (1, 1, -1), (2, 2, -2))
S_EXTRA_UNUSED = df(KV_EXTRA_UNUSED, (1, 1, "extra1", "unused1"), (2, 2, "extra2", "unused2"))
S_EXTRA_123 = df(KV_EXTRA_INT, (1, 1, 1), (2, 2, 2))

TV = "key int not null, targetVal string"
SV = "key int not null, srcVal string"
T_TARGETVAL = df(TV, (1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e"))
S_SRCVAL = df(SV, (1, "t"), (2, "u"), (3, "v"), (4, "w"), (6, "x"), (7, "y"), (8, "z"))
KTS = "key int, targetVal string, srcVal string"

OPENINGS = "array<struct<opened_at:string, opened_with:string, location:string>>"


def _at(i: int) -> str:
    return f"{i}-01-19T09:29:00.000+0000"


def _openings_target(last: int) -> Data:
    items = ", ".join(
        f"named_struct('opened_at', '{_at(i)}', 'opened_with', CAST(NULL AS STRING), 'location', '{i}')"
        for i in range(2010, last + 1)
    )
    return sql_df("CAST(1 AS INT) AS key", f"array({items}) AS openings")


def _openings_source(repeat: int = 1) -> Data:
    seq = "sequence(2020, 8020)"
    if repeat == 2:
        seq = f"concat({seq}, {seq})"
    lam = (
        "i -> named_struct('opened_with', CAST(NULL AS STRING), "
        "'opened_at', concat(CAST(i AS STRING), '-01-19T09:29:00.000+0000'))"
    )
    return sql_df("CAST(1 AS INT) AS key", f"transform({seq}, {lam}) AS openings")


def _openings_expected(first: int, last: int) -> Data:
    return df(f"key int, openings {OPENINGS}", (1, [(_at(i), None, None) for i in range(first, last + 1)]))


def _array_fn_case(name: str, set_: str, expected: Data, target_last: int = 2019, repeat: int = 1) -> Case:
    return Case(
        name,
        target=_openings_target(target_last),
        source=_openings_source(repeat),
        clauses=(update(set_), insert("*")),
        expected=expected,
        error_off="All nested columns must match",
    )


def _policy_confs(policy: str) -> dict[str, str]:
    return {POLICY: policy, FOLLOWS_ANSI: "false"}


STRUCT_A = "key string, value struct<a:int>"
STRUCT_AB = "key string, value struct<a:int, b:int>"
NAMED_TARGET = "a int not null, target struct<a:int not null> not null"
NAMED_SOURCE_AB = "a int not null, b int not null, target struct<a:int not null, b:int not null> not null"
DEDUCTION = "named_struct('date', DATE'2024-11-08', 'col2', array(named_struct('data', 0d)))"

CORE = [
    Case(
        "new column with only insert *",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("*"),),
        expected=df(KV_EXTRA, (0, 0, None), (3, 30, None), (1, 10, None), (2, 2, "extra2")),
        expected_off=df(KV, (0, 0), (3, 30), (1, 10), (2, 2)),
    ),
    Case(
        "new column with only update *",
        target=T3,
        source=S_EXTRA,
        clauses=(update("*"),),
        expected=df(KV_EXTRA, (0, 0, None), (3, 30, None), (1, 1, "extra1")),
        expected_off=df(KV, (0, 0), (3, 30), (1, 1)),
    ),
    Case(
        "new column with insert * and delete not matched by source",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("*"), delete_nmbs()),
        expected=df(KV_EXTRA, (1, 10, None), (2, 2, "extra2")),
        expected_off=df(KV, (1, 10), (2, 2)),
    ),
    Case(
        "new nested source field added when updating top-level column",
        target=df(STRUCT_A, ("A", (1,))),
        source=df(STRUCT_AB, ("A", (2, 3))),
        clauses=(update("value = s.value"),),
        expected=df(STRUCT_AB, ("A", (2, 3))),
        error_off="Cannot cast",
    ),
]

NEW_COLUMN = [
    Case(
        "new column with update set",
        target=T3,
        source=S_EXTRA,
        clauses=(update("key = s.key, value = s.value, extra = s.extra"),),
        expected=df(KV_EXTRA, (0, 0, None), (3, 30, None), (1, 1, "extra1")),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "new column updated with value from existing column",
        target=T3,
        source=S_EXTRA_INT,
        clauses=(update("extra = s.value"),),
        expected=df("key int, value int, extra int", (0, 0, None), (1, 10, 1), (3, 30, None)),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "new column with insert values",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("(key, value, extra) VALUES (s.key, s.value, s.extra)"),),
        expected=df(KV_EXTRA, (0, 0, None), (1, 10, None), (3, 30, None), (2, 2, "extra2")),
        error_off="cannot resolve extra in INSERT clause",
    ),
    Case(
        "new column inserted with value from existing column",
        target=T3,
        source=S_EXTRA_INT,
        clauses=(insert("(key, extra) VALUES (s.key, s.value)"),),
        expected=df(
            "key int, value int, extra int", (0, 0, None), (1, 10, None), (3, 30, None), (2, None, 2)
        ),
        error_off="cannot resolve extra in INSERT clause",
    ),
    Case(
        "new column with update set and column not updated",
        target=T3,
        source=S_EXTRA_UNUSED,
        clauses=(update("extra = s.extra"),),
        expected=df("key int, value int, extra string", (0, 0, None), (1, 10, "extra1"), (3, 30, None)),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "new column updated from other new column",
        target=T3,
        source=S_EXTRA_UNUSED,
        clauses=(update("extra = s.unused"),),
        expected=df("key int, value int, extra string", (0, 0, None), (1, 10, "unused1"), (3, 30, None)),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "new column with insert values and column not inserted",
        target=T3,
        source=S_EXTRA_UNUSED,
        clauses=(insert("(key, extra) VALUES (s.key, s.extra)"),),
        expected=df(
            "key int, value int, extra string",
            (0, 0, None),
            (1, 10, None),
            (3, 30, None),
            (2, None, "extra2"),
        ),
        error_off="cannot resolve extra in INSERT clause",
    ),
    Case(
        "new column inserted from other new column",
        target=T3,
        source=S_EXTRA_UNUSED,
        clauses=(insert("(key, extra) VALUES (s.key, s.unused)"),),
        expected=df(
            "key int, value int, extra string",
            (0, 0, None),
            (1, 10, None),
            (3, 30, None),
            (2, None, "unused2"),
        ),
        error_off="cannot resolve extra in INSERT clause",
    ),
    Case(
        "new column added by insert and other new column added by update",
        target=T3,
        source=df(
            "key int not null, value int not null, extra string, other string",
            (1, 1, "extra1", "other1"),
            (2, 2, "extra2", "other2"),
        ),
        clauses=(update("extra = s.extra"), insert("(key, other) VALUES (s.key, s.other)")),
        expected=df(
            "key int, value int, extra string, other string",
            (0, 0, None, None),
            (1, 10, "extra1", None),
            (3, 30, None, None),
            (2, None, None, "other2"),
        ),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "new column with insert existing column",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("(key) VALUES (s.key)"),),
        expected=df("key int, value int", (0, 0), (1, 10), (2, None), (3, 30)),
        expected_off=df("key int, value int", (0, 0), (1, 10), (2, None), (3, 30)),
    ),
    Case(
        "new column with update set and update *",
        target=df(KV, (0, 0), (1, 10), (2, 20)),
        source=S_EXTRA,
        clauses=(update("value = s.value", "s.key < 2"), update("*")),
        expected=df(KV_EXTRA, (0, 0, None), (1, 1, None), (2, 2, "extra2")),
        expected_off=df(KV, (0, 0), (1, 1), (2, 2)),
    ),
    Case(
        "new column with update non-* and insert *",
        target=T3,
        source=S_EXTRA_123,
        clauses=(update("key = s.key, value = s.value"), insert("*")),
        expected=df("key int, value int, extra int", (0, 0, None), (2, 2, 2), (3, 30, None), (1, 1, None)),
        expected_off=df(KV, (0, 0), (2, 2), (3, 30), (1, 1)),
    ),
    Case(
        "new column with update * and insert non-*",
        target=T3,
        source=S_EXTRA_123,
        clauses=(update("*"), insert("(key, value) VALUES (s.key, s.value)")),
        expected=df("key int, value int, extra int", (0, 0, None), (1, 1, 1), (3, 30, None), (2, 2, None)),
        expected_off=df(KV, (0, 0), (2, 2), (3, 30), (1, 1)),
    ),
    Case(
        # Delta's test appends the target without partition columns too.
        "evolve partitioned table",
        target=T3,
        source=S_EXTRA,
        clauses=(update("*"), insert("*")),
        expected=df(KV_EXTRA, (0, 0, None), (1, 1, "extra1"), (2, 2, "extra2"), (3, 30, None)),
        expected_off=df(KV, (0, 0), (2, 2), (3, 30), (1, 1)),
    ),
    Case(
        "star expansion with names including dots",
        target=df("key int not null, `value.with.dotted.name` int not null", (0, 0), (1, 10), (3, 30)),
        source=df(
            "key int not null, `value.with.dotted.name` int not null, `extra.dotted` string",
            (1, 1, "extra1"),
            (2, 2, "extra2"),
        ),
        clauses=(update("*"), insert("*")),
        expected=df(
            "key int, `value.with.dotted.name` int, `extra.dotted` string",
            (0, 0, None),
            (1, 1, "extra1"),
            (2, 2, "extra2"),
            (3, 30, None),
        ),
        expected_off=df("key int, `value.with.dotted.name` int", (0, 0), (2, 2), (3, 30), (1, 1)),
    ),
    Case(
        "extra nested column in source - insert",
        target=df("key int not null, x struct<_1:int not null, _2:int not null>", (1, (1, 10))),
        source=df(
            "key int not null, x struct<_1:int not null, _2:int not null, _3:int not null>", (2, (2, 20, 30))
        ),
        clauses=(insert("*"),),
        expected=df("key int, x struct<_1:int, _2:int, _3:int>", (1, (1, 10, None)), (2, (2, 20, 30))),
        error_off="Cannot cast",
    ),
    Case(
        "add non-nullable column to target schema",
        target=df("key int not null", (1,), (2,)),
        source=df(KV, (1, 10), (3, 30)),
        clauses=(update("*"), insert("*")),
        expected=df("key int, value int", (1, 10), (2, None), (3, 30)),
        exact_schema=(("key", "int", True), ("value", "int", True)),
        expected_off=df("key int", (1,), (2,), (3,)),
    ),
    Case(
        "extra nested column in source - update - single target partition",
        target=lambda spark: (
            spark.createDataFrame(
                [(1, (1, 10)), (2, (2, 2000))], "key int not null, x struct<_1:int not null, _2:int not null>"
            )
            .selectExpr("key", "named_struct('a', x._1, 'c', x._2) AS x")
            .repartition(1)
        ),
        source=lambda spark: spark.createDataFrame(
            [(1, (10, 100, 1000))],
            "key int not null, x struct<_1:int not null, _2:int not null, _3:int not null>",
        ).selectExpr("key", "named_struct('a', x._1, 'b', x._2, 'c', x._3) AS x"),
        clauses=(update("*"),),
        expected=df("key int, x struct<a:int, c:int, b:int>", (1, (10, 1000, 100)), (2, (2, 2000, None))),
        error_off="Cannot cast",
    ),
    Case(
        "multiple clauses",
        target=T_TARGETVAL,
        source=S_SRCVAL,
        clauses=(
            update("targetVal = srcVal", "s.key = 1"),
            update("*", "s.key = 2"),
            delete("s.key = 3"),
            delete("s.key = 4"),
            insert("(key) VALUES (s.key)", "s.key = 6"),
            insert("*", "s.key = 7"),
        ),
        expected=df(KTS, (1, "t", None), (2, "b", "u"), (5, "e", None), (6, None, None), (7, None, "y")),
        error_off="cannot resolve targetVal",
    ),
    Case(
        "multiple INSERT * clauses with UPDATE",
        target=T_TARGETVAL,
        source=S_SRCVAL,
        clauses=(
            update("targetVal = srcVal", "s.key = 1"),
            update("*", "s.key = 2"),
            delete("s.key = 3"),
            delete("s.key = 4"),
            insert("*", "s.key = 6"),
            insert("*", "s.key = 7"),
        ),
        expected=df(KTS, (1, "t", None), (2, "b", "u"), (5, "e", None), (6, None, "x"), (7, None, "y")),
        error_off="cannot resolve targetVal",
    ),
    Case(
        "array of struct should work with containsNull as false",
        target=df("key int not null", (500000,)),
        source=lambda spark: spark.createDataFrame([(500000,), (100000,)], "key int not null").selectExpr(
            "key", f"{DEDUCTION} AS generalDeduction"
        ),
        clauses=(update("*"), insert("*")),
        expected=df(
            "key int, generalDeduction struct<date:date, col2:array<struct<data:double>>>",
            (500000, (datetime.date(2024, 11, 8), [(0.0,)])),
            (100000, (datetime.date(2024, 11, 8), [(0.0,)])),
        ),
        expected_off=df("key int", (500000,), (100000,)),
    ),
    _array_fn_case(
        "test array_union with schema evolution",
        "openings = array_union(s.openings, s.openings)",
        _openings_expected(2020, 8020),
    ),
    _array_fn_case(
        "test array_intersect with schema evolution",
        "openings = array_intersect(s.openings, s.openings)",
        _openings_expected(2020, 8020),
    ),
    _array_fn_case(
        "test array_except with schema evolution",
        "openings = array_except(s.openings, s.openings)",
        df(f"key int, openings {OPENINGS}", (1, [])),
        target_last=2020,
    ),
    _array_fn_case(
        "test array_remove with schema evolution",
        "openings = array_remove(s.openings,"
        "named_struct('opened_with', cast(null as string),"
        "'opened_at', '2020-01-19T09:29:00.000+0000'))",
        _openings_expected(2021, 8020),
    ),
    _array_fn_case(
        "test array_distinct with schema evolution",
        "openings = array_distinct(s.openings)",
        _openings_expected(2020, 8020),
        repeat=2,
    ),
    Case(
        "void columns are allowed",
        target=df(KV, (1, 1)),
        source=df("key int not null, value int not null, extra void", (1, 100, None), (2, 200, None)),
        clauses=(update("*"), insert("*")),
        expected=df("key int, value int, extra void", (1, 100, None), (2, 200, None)),
        expected_off=df(KV, (1, 100), (2, 200)),
        confs={DROP_NULL_COLUMNS: "false"},
    ),
    Case(
        "void evolution in target non-key column",
        target=df("key2 int not null, value void", (2, None), (1, None)),
        source=df("key1 int not null, value int not null", (1, 1), (0, 3)),
        cond="s.key1 = key2",
        clauses=(
            update("key2 = 20 + key1, value = 20 + s.value"),
            insert("(key2, value) VALUES (key1 - 10, s.value + 10)"),
        ),
        expected=df("key2 int, value int", (2, None), (21, 21), (-10, 13)),
        error_off="cannot cast",
        confs={DROP_NULL_COLUMNS: "false"},
    ),
    Case(
        "void evolution in target key column",
        target=df("key void, value int not null", (None, 2), (None, 4)),
        source=df(KV, (1, 1), (0, 3), (1, 6)),
        clauses=(
            update("t.key = 20 + s.key, value = 20 + s.value"),
            insert("(key, value) VALUES (s.key - 10, s.value + 10)"),
        ),
        expected=df("key int, value int", (None, 2), (None, 4), (-9, 11), (-10, 13), (-9, 16)),
        error_off="cannot cast",
        confs={DROP_NULL_COLUMNS: "false"},
    ),
    Case(
        "void columns are not allowed",
        target=df(KV, (1, 1)),
        source=df("key int not null, value int not null, extra void", (1, 100, None), (2, 200, None)),
        clauses=(update("*"), insert("*")),
        error="Cannot add column `extra` with type VOID",
        expected_off=df(KV, (1, 100), (2, 200)),
        confs={DROP_NULL_COLUMNS: "true"},
    ),
    Case(
        "top-level column assignment qualified with source alias",
        target=T3,
        source=S_EXTRA,
        clauses=(update("s.value = s.value"),),
        expected=df(KV, (0, 0), (3, 30), (1, 1)),
        error_off="cannot resolve s.value in UPDATE clause",
    ),
    Case(
        "new top-level column assignment qualified with target name",
        target=lambda spark: spark.createDataFrame(
            [(0, 1)], "a int not null, nested_a int not null"
        ).selectExpr("a", "named_struct('a', nested_a) AS target"),
        source=lambda spark: spark.createDataFrame(
            [(2, 3, 4, 5)], "a int not null, b int not null, nested_a int not null, nested_b int not null"
        ).selectExpr("a", "b", "named_struct('a', nested_a, 'b', nested_b) AS target"),
        cond="1 = 1",
        clauses=(update("target.b = source.b"),),
        expected=df("a int, target struct<a:int, b:int>", (0, (1, 3))),
        error_off="No such struct field `b` in `a",
        no_aliases=True,
    ),
    Case(
        "new nested field assignment qualified with target name",
        target=lambda spark: spark.createDataFrame(
            [(0, 1)], "a int not null, nested_a int not null"
        ).selectExpr("a", "named_struct('a', nested_a) AS target"),
        source=lambda spark: spark.createDataFrame(
            [(2, 3, 4, 5)], "a int not null, b int not null, nested_a int not null, nested_b int not null"
        ).selectExpr("a", "b", "named_struct('a', nested_a, 'b', nested_b) AS target"),
        cond="1 = 1",
        clauses=(update("target.target.b = source.target.b"),),
        error="No such struct field `target` in `a`, `b`",
        error_off="No such struct field `b` in `a`",
        no_aliases=True,
    ),
]

KVX = "key int not null, value int not null, extra int not null"
T3X = df(KVX, (0, 0, 0), (1, 10, 10), (3, 30, 30))
NESTED_TARGET = df("a int not null, nested_a int not null", (0, 1))
NESTED_SOURCE = df("a int not null, nested_a int not null", (2, 3))

EXISTING_COLUMN = [
    Case(
        "old column updated from new column",
        target=T3,
        source=S_EXTRA_INT,
        clauses=(update("value = s.extra"),),
        expected=df(KV, (0, 0), (1, -1), (3, 30)),
        expected_off=df(KV, (0, 0), (1, -1), (3, 30)),
    ),
    Case(
        "old column inserted from new column",
        target=T3,
        source=S_EXTRA_INT,
        clauses=(insert("(key) VALUES (s.extra)"),),
        expected=df("key int, value int", (0, 0), (1, 10), (3, 30), (-2, None)),
        expected_off=df("key int, value int", (0, 0), (1, 10), (3, 30), (-2, None)),
    ),
    Case(
        "update set nonexistent column",
        target=T3,
        source=S_EXTRA,
        clauses=(update("nonexistent = s.extra"),),
        error="cannot resolve nonexistent in UPDATE clause",
        error_off="cannot resolve nonexistent in UPDATE clause",
    ),
    Case(
        "insert values nonexistent column",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("(nonexistent) VALUES (s.extra)"),),
        error="cannot resolve nonexistent in INSERT clause",
        error_off="cannot resolve nonexistent in INSERT clause",
    ),
    Case(
        "update * with column not in source",
        target=T3X,
        source=df(KV, (1, 1), (2, 2)),
        clauses=(update("*"),),
        expected=df(KVX, (0, 0, 0), (1, 1, 10), (3, 30, 30)),
        error_off="cannot resolve extra in UPDATE clause",
    ),
    Case(
        "insert * with column not in source",
        target=T3X,
        source=df(KV, (1, 1), (2, 2)),
        clauses=(insert("*"),),
        expected=df("key int, value int, extra int", (0, 0, 0), (1, 10, 10), (2, 2, None), (3, 30, 30)),
        error_off="cannot resolve extra in INSERT clause",
    ),
    Case(
        "explicitly insert subset of columns",
        target=T3X,
        source=df(KVX, (1, 1, 1), (2, 2, 2)),
        clauses=(insert("(key, value) VALUES (s.key, s.value)"),),
        expected=df("key int, value int, extra int", (0, 0, 0), (1, 10, 10), (2, 2, None), (3, 30, 30)),
        expected_off=df("key int, value int, extra int", (0, 0, 0), (1, 10, 10), (2, 2, None), (3, 30, 30)),
    ),
    Case(
        "explicitly update one column",
        target=T3,
        source=S_EXTRA_123,
        clauses=(update("value = s.value"),),
        expected=df(KV, (0, 0), (1, 1), (3, 30)),
        expected_off=df(KV, (0, 0), (1, 1), (3, 30)),
    ),
    Case(
        "case-insensitive insert",
        target=T3,
        source=df("key int not null, VALUE int not null", (1, 1), (2, 2)),
        clauses=(insert("(key, value, VALUE) VALUES (s.key, s.value, s.VALUE)"),),
        expected=df(KV, (0, 0), (1, 10), (3, 30), (2, 2)),
        expected_off=df(KV, (0, 0), (1, 10), (3, 30), (2, 2)),
        confs={CASE_SENSITIVE: "false"},
    ),
    Case(
        "case-sensitive insert, column not in target",
        target=T3,
        source=df("key int not null, value int not null, EXTRA string", (1, 1, "extra1"), (2, 2, "extra2")),
        clauses=(insert("(key, value, EXTRA) VALUES (s.key, s.value, s.EXTRA)"),),
        expected=df(
            "key int, value int, EXTRA string", (0, 0, None), (1, 10, None), (3, 30, None), (2, 2, "extra2")
        ),
        error_off="cannot resolve EXTRA in INSERT clause",
        confs={CASE_SENSITIVE: "true"},
    ),
    Case(
        "case-sensitive insert, column not in source",
        target=T3,
        source=df("key int not null, VALUE int not null", (1, 1), (2, 2)),
        clauses=(insert("(key, value) VALUES (s.key, s.value)"),),
        error="Cannot resolve s.value in INSERT clause",
        error_off="Cannot resolve s.value in INSERT clause",
        confs={CASE_SENSITIVE: "true"},
    ),
    Case(
        "incompatible types in update *",
        target=T3,
        source=df("key int not null, value binary", (1, bytearray(b"\x01")), (2, bytearray(b"\x02"))),
        clauses=(update("*"),),
        error="Failed to merge incompatible data types IntegerType and BinaryType",
        error_off="cannot cast",
    ),
    Case(
        "incompatible types in insert *",
        target=T3,
        source=df("key int not null, value binary", (1, bytearray(b"\x01")), (2, bytearray(b"\x02"))),
        clauses=(insert("*"),),
        error="Failed to merge incompatible data types IntegerType and BinaryType",
        error_off="cannot cast",
    ),
    Case(
        "upcast numeric source types into integer target",
        target=T3,
        source=df("key tinyint not null, value smallint not null", (1, 1), (2, 2)),
        clauses=(update("*"), insert("*")),
        expected=df(KV, (0, 0), (1, 1), (2, 2), (3, 30)),
        expected_off=df(KV, (0, 0), (1, 1), (2, 2), (3, 30)),
    ),
    Case(
        "upcast numeric target types from integer source",
        target=df("key tinyint not null, value smallint not null", (0, 0), (1, 10)),
        source=df(KV, (1, 1), (2, 2)),
        clauses=(update("*"), insert("*")),
        expected=df("key tinyint, value smallint", (0, 0), (1, 1), (2, 2)),
        expected_off=df("key tinyint, value smallint", (0, 0), (1, 1), (2, 2)),
    ),
    Case(
        "upcast int source type into long target",
        target=df("key int not null, value bigint not null", (0, 0), (1, 10), (3, 30)),
        source=df(KV, (1, 1), (2, 2)),
        clauses=(update("*"), insert("*")),
        expected=df("key int, value bigint", (0, 0), (1, 1), (2, 2), (3, 30)),
        expected_off=df("key int, value bigint", (0, 0), (1, 1), (2, 2), (3, 30)),
    ),
    Case(
        "write string into int column",
        target=T3,
        source=df("key int not null, value string", (1, "1"), (2, "2"), (5, "notANumber")),
        clauses=(insert("*"),),
        expected=df("key int, value int", (0, 0), (1, 10), (2, 2), (3, 30), (5, None)),
        expected_off=df("key int, value int", (0, 0), (1, 10), (2, 2), (3, 30), (5, None)),
        confs={POLICY: "LEGACY"},
    ),
    Case(
        "write double into int column",
        target=T3,
        source=df("key int not null, value double not null", (1, 1.1), (2, 2.2), (5, math.inf)),
        clauses=(insert("*"),),
        expected=df("key int, value int", (0, 0), (1, 10), (2, 2), (3, 30), (5, 2**31 - 1)),
        expected_off=df("key int, value int", (0, 0), (1, 10), (2, 2), (3, 30), (5, 2**31 - 1)),
        confs={POLICY: "LEGACY"},
    ),
    Case(
        "missing nested column in source - insert",
        target=df(
            "key int not null, x struct<_1:int not null, _2:int not null, _3:int not null>", (1, (1, 2, 3))
        ),
        source=df("key int not null, x struct<_1:int not null, _2:int not null>", (2, (2, 3))),
        clauses=(insert("*"),),
        expected=df("key int, x struct<_1:int, _2:int, _3:int>", (1, (1, 2, 3)), (2, (2, 3, None))),
        error_off="Cannot cast",
    ),
    Case(
        "missing nested column resolved by name - insert",
        target=lambda spark: spark.createDataFrame(
            [(1, 1, 2, 3)], "key int not null, a int not null, b int not null, c int not null"
        ).selectExpr("key", "named_struct('a', a, 'b', b, 'c', c) AS x"),
        source=lambda spark: spark.createDataFrame(
            [(2, 2, 4)], "key int not null, a int not null, c int not null"
        ).selectExpr("key", "named_struct('a', a, 'c', c) AS x"),
        clauses=(insert("*"),),
        expected=df("key int, x struct<a:int, b:int, c:int>", (1, (1, 2, 3)), (2, (2, None, 4))),
        error_off="Cannot cast",
    ),
    Case(
        "existing top-level column assignment qualified with target name",
        target=lambda spark: NESTED_TARGET(spark).selectExpr("a", "named_struct('a', nested_a) AS target"),
        source=lambda spark: NESTED_SOURCE(spark).selectExpr("a", "named_struct('a', nested_a) AS target"),
        cond="1 = 1",
        clauses=(update("target.a = source.a"),),
        expected=df("a int, target struct<a:int>", (2, (1,))),
        expected_off=df("a int, target struct<a:int>", (2, (1,))),
        no_aliases=True,
    ),
    Case(
        "existing nested field assignment qualified with target name",
        target=lambda spark: NESTED_TARGET(spark).selectExpr("a", "named_struct('a', nested_a) AS target"),
        source=lambda spark: NESTED_SOURCE(spark).selectExpr("a", "named_struct('a', nested_a) AS target"),
        cond="1 = 1",
        clauses=(update("target.target.a = source.target.a"),),
        expected=df("a int, target struct<a:int>", (0, (3,))),
        expected_off=df("a int, target struct<a:int>", (0, (3,))),
        no_aliases=True,
    ),
]

STORE_ASSIGNMENT = [
    *[
        Case(
            f"upcast int source type into long target, storeAssignmentPolicy = {policy}",
            target=df("key int not null, value bigint not null", (0, 0), (1, 1), (3, 3)),
            source=df(KV, (1, 1), (2, 2)),
            clauses=(update("*"), insert("*")),
            expected=df("key int, value bigint", (0, 0), (1, 1), (2, 2), (3, 3)),
            expected_off=df("key int, value bigint", (0, 0), (1, 1), (2, 2), (3, 3)),
            confs=_policy_confs(policy),
        )
        for policy in ("ANSI", "LEGACY", "STRICT")
    ],
    *[
        Case(
            f"invalid implicit cast string source type into boolean target, storeAssignmentPolicy = {policy}",
            target=df("key int not null, value boolean not null", (0, True), (1, False), (3, True)),
            source=df("key int not null, value string", (1, "true"), (2, "false")),
            clauses=(update("*"), insert("*")),
            error="Failed to merge incompatible data types BooleanType and StringType",
            expected_off=df("key int, value boolean", (0, True), (1, True), (2, False), (3, True)),
            confs=_policy_confs(policy),
        )
        for policy in ("ANSI", "LEGACY")
    ],
    Case(
        "invalid implicit cast string source type into boolean target, storeAssignmentPolicy = STRICT",
        target=df("key int not null, value boolean not null", (0, True), (1, False), (3, True)),
        source=df("key int not null, value string", (1, "true"), (2, "false")),
        clauses=(update("*"), insert("*")),
        error="Failed to merge incompatible data types BooleanType and StringType",
        error_off='cannot up cast s.value from "string" to "boolean"',
        confs=_policy_confs("STRICT"),
    ),
    *[
        Case(
            f"valid implicit cast string source type into int target, storeAssignmentPolicy = {policy}",
            target=df(KV, (0, 0), (1, 1), (3, 3)),
            source=df("key int not null, value string", (1, "1"), (2, "2")),
            clauses=(update("*"), insert("*")),
            expected=df(KV, (0, 0), (1, 1), (2, 2), (3, 3)),
            expected_off=df(KV, (0, 0), (1, 1), (2, 2), (3, 3)),
            confs=_policy_confs(policy),
        )
        for policy in ("ANSI", "LEGACY")
    ],
    *[
        Case(
            f"valid implicit cast long source type into int target, storeAssignmentPolicy = {policy}",
            target=df(KV, (0, 0), (1, 1), (3, 3)),
            source=df("key int not null, value bigint not null", (1, 1), (2, 2)),
            clauses=(update("*"), insert("*")),
            expected=df(KV, (0, 0), (1, 1), (2, 2), (3, 3)),
            expected_off=df(KV, (0, 0), (1, 1), (2, 2), (3, 3)),
            confs=_policy_confs(policy),
        )
        for policy in ("ANSI", "LEGACY")
    ],
    Case(
        "valid implicit cast string source type into int target, storeAssignmentPolicy = STRICT",
        target=df(KV, (0, 0), (1, 1), (3, 3)),
        source=df("key int not null, value string", (1, "1"), (2, "2")),
        clauses=(update("*"), insert("*")),
        error='cannot up cast s.value from "string" to "int"',
        error_off='cannot up cast s.value from "string" to "int"',
        confs=_policy_confs("STRICT"),
    ),
    Case(
        "multiple casts with storeAssignmentPolicy = STRICT",
        target=df("key bigint not null, value string", (0, "0"), (1, "10"), (3, "30")),
        source=df("key int not null, value bigint not null", (1, 1), (2, 2)),
        clauses=(update("*"), insert("*")),
        expected=df("key bigint, value string", (0, "0"), (1, "1"), (2, "2"), (3, "30")),
        expected_off=df("key bigint, value string", (0, "0"), (1, "1"), (2, "2"), (3, "30")),
        confs=_policy_confs("STRICT"),
    ),
    Case(
        "new column with storeAssignmentPolicy = STRICT",
        target=T3,
        source=df(KV_EXTRA, (1, 1, "one"), (2, 2, "two")),
        clauses=(update("value = CAST(s.value AS short)"), insert("*")),
        expected=df(KV_EXTRA, (0, 0, None), (1, 1, None), (2, 2, "two"), (3, 30, None)),
        expected_off=df(KV, (0, 0), (1, 1), (2, 2), (3, 30)),
        confs=_policy_confs("STRICT"),
    ),
]

NOT_MATCHED_BY_SOURCE = [
    Case(
        "new column with insert * and conditional update not matched by source",
        target=T3,
        source=S_EXTRA,
        clauses=(insert("*"), update_nmbs("value = value + 1", "key > 0")),
        expected=df(KV_EXTRA, (0, 0, None), (1, 10, None), (2, 2, "extra2"), (3, 31, None)),
        expected_off=df(KV, (0, 0), (1, 10), (2, 2), (3, 31)),
    ),
    Case(
        "new column not inserted and conditional update not matched by source",
        target=T3,
        source=S_EXTRA,
        clauses=(update_nmbs("value = value + 1", "key > 0"),),
        expected=df(KV, (0, 0), (1, 10), (3, 31)),
        expected_off=df(KV, (0, 0), (1, 10), (3, 31)),
    ),
    Case(
        "new column referenced in matched condition but not inserted",
        target=T3,
        source=S_EXTRA,
        clauses=(delete("extra = 'extra1'"), update_nmbs("value = value + 1", "key > 0")),
        expected=df(KV, (0, 0), (3, 31)),
        expected_off=df(KV, (0, 0), (3, 31)),
    ),
    Case(
        "matched update * and conditional update not matched by source",
        target=T3,
        source=S_EXTRA,
        clauses=(update("*"), update_nmbs("value = value + 1", "key > 0")),
        expected=df(KV_EXTRA, (0, 0, None), (1, 1, "extra1"), (3, 31, None)),
        expected_off=df(KV, (0, 0), (1, 1), (3, 31)),
    ),
    Case(
        "update new column with not matched by source fails",
        target=T3,
        source=df(KV_EXTRA, (1, 1, "extra3"), (2, 2, "extra2")),
        clauses=(update_nmbs("extra = s.extra"),),
        error="cannot resolve extra in UPDATE clause",
        error_off="cannot resolve extra in UPDATE clause",
    ),
]

CASES = CORE + NEW_COLUMN + EXISTING_COLUMN + STORE_ASSIGNMENT + NOT_MATCHED_BY_SOURCE
assert len({c.name for c in CASES}) == len(CASES)

# Delta's expectation and deltamerge's behaviour differ: (name, evolution on?) -> xfail reason.
XFAIL: dict[tuple[str, bool], str] = {}

# Run again on a table with the change data feed and deletion vectors (Delta's CDCOnDVs suites).
WITH_DVS = {
    "new column with insert * and delete not matched by source",
    "extra nested column in source - update - single target partition",
    "multiple clauses",
    "new column referenced in matched condition but not inserted",
}
assert WITH_DVS.issubset(c.name for c in CASES)

PLAIN: dict[str, str] = {}
CDF_AND_DVS = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}


def _params() -> list[Any]:
    out = []
    variants = [("sql", PLAIN), ("sql+cdf+dvs", CDF_AND_DVS)]
    for mode, props in variants:
        for c in CASES:
            if props and c.name not in WITH_DVS:
                continue
            for evolve in (True, False):
                marks = []
                reason = XFAIL.get((c.name, evolve))
                if reason is not None:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                label = "evolution" if evolve else "no_evolution"
                out.append(pytest.param(c, evolve, props, id=f"{c.name}-{label}-{mode}", marks=marks))
    return out


# --- comparing ------------------------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    if isinstance(value, (tuple, list)):  # Row is a tuple
        return tuple(_norm(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


def _multiset(rows: Any) -> Counter:
    return Counter(_norm(r) for r in rows)


def _message(exc: BaseException) -> str:
    """The exception's text and that of its causes (Delta matches in the whole exception string)."""
    parts, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return "\n".join(parts)


def _version(path: str) -> int:
    return deltamerge.io.snapshot_for(path).version


def _statement(case: Case, target: str, source: str) -> str:
    return "\n".join([f"MERGE INTO {target}", f"USING {source}", f"ON {case.cond}", *case.clauses])


@pytest.mark.parametrize(("case", "evolve", "props"), _params())
def test_merge_schema_evolution(spark, tmp_path, spark_conf, case: Case, evolve: bool, props: dict[str, str]):
    spark_conf({**case.confs, AUTO_MERGE: "true" if evolve else "false"})
    expected, error = (case.expected, case.error) if evolve else (case.expected_off, case.error_off)
    assert (expected is None) != (error is None), "a case gives a result or an error"

    path = str(tmp_path / "target")
    deltamerge.write(case.target(spark), path, mode="append", configuration=props)
    before = _version(path)
    if case.no_aliases:
        source_path = str(tmp_path / "source")
        deltamerge.write(case.source(spark), source_path, mode="append")
        deltamerge.register_table(spark, "target", path)
        deltamerge.register_table(spark, "source", source_path)
        statement = _statement(case, "target", "source")
    else:
        case.source(spark).createOrReplaceTempView("source")
        statement = _statement(case, f"delta.`{path}` t", "source s")
    try:
        if error is not None:
            with pytest.raises(Exception) as failure:
                deltamerge.sql(spark, statement)
            message = _message(failure.value)
            assert error.lower() in message.lower(), message
            assert _version(path) == before, "a failed MERGE commits nothing"
            return
        deltamerge.sql(spark, statement)
    finally:
        if case.no_aliases:
            deltamerge.unregister_table(spark, "target")
            deltamerge.unregister_table(spark, "source")
        else:
            spark.catalog.dropTempView("source")

    table = DeltaTable.forPath(spark, path).toDF()
    want = expected(spark)
    assert _multiset(table.collect()) == _multiset(want.collect())
    if case.no_aliases:
        return  # Delta checks the rows only
    if evolve and case.exact_schema is not None:
        got = tuple((f.name, f.dataType.simpleString(), f.nullable) for f in table.schema.fields)
        assert got == case.exact_schema
    else:
        assert table.schema.simpleString() == want.schema.simpleString()


# --- Delta's Scala-API-only test ---------------------------------------------------------------------


@pytest.mark.parametrize("api", ["builder", "sql"])
def test_schema_evolution_enabled_for_the_current_command(spark, tmp_path, spark_conf, api):
    spark_conf({AUTO_MERGE: "false"})
    target, source = str(tmp_path / "target"), str(tmp_path / "source")
    deltamerge.write(spark.createDataFrame([(0, 0), (1, 10), (3, 30)], KV), target)
    deltamerge.write(spark.createDataFrame([(1, 1, 1), (2, 2, 2)], KV_EXTRA_INT), source)
    deltamerge.register_table(spark, "target", target)
    deltamerge.register_table(spark, "source", source)
    clauses = "WHEN MATCHED THEN UPDATE SET extra = -1 WHEN NOT MATCHED THEN INSERT *"
    try:
        with pytest.raises(Exception) as failure:
            deltamerge.sql(spark, f"MERGE INTO target USING source ON target.key = source.key {clauses}")
        assert failure.value.getErrorClass() == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
        assert "resolve extra in UPDATE clause" in str(failure.value)

        if api == "builder":
            (
                DeltaTable.forName(spark, "target")
                .merge(spark.table("source"), "target.key = source.key")
                .whenMatchedUpdate(set={"extra": "-1"})
                .whenNotMatchedInsertAll()
                .withSchemaEvolution()
                .execute()
            )
        else:
            deltamerge.sql(
                spark,
                f"MERGE WITH SCHEMA EVOLUTION INTO target USING source ON target.key = source.key {clauses}",
            )
        got = DeltaTable.forPath(spark, target).toDF()
        assert _multiset(got.collect()) == _multiset([(0, 0, None), (1, 10, -1), (2, 2, 2), (3, 30, None)])
        assert got.schema.simpleString() == "struct<key:int,value:int,extra:int>"
    finally:
        deltamerge.unregister_table(spark, "target")
        deltamerge.unregister_table(spark, "source")
