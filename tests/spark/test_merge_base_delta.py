"""Delta Lake's core MERGE suite (delta-io/delta ``MergeIntoSuiteBase.scala``), as data.

Ported traits: ``MergeIntoBasicTests``, ``MergeIntoNestedDataTests``,
``MergeIntoUnlimitedMergeClausesTests`` and ``MergeIntoExtendedSyntaxTests``, every test of each, as
Delta's SQL path-based generated suites run them: the target is a Delta table at a path, written
with one append (partitioned where the Scala partitions it), the source is a temp view, and the MERGE
runs as SQL (``MERGE INTO delta.`path` <alias> USING <view> <alias> ON ... WHEN ...``).

* ``Case``: key/value data (Delta's ``withKeyValueData`` and friends). Scala ``Int`` tuple columns
  are NOT NULL, ``java.lang.Integer`` and ``String`` columns nullable. ``partition`` names the column
  that the Scala partitions the target by in one variant (both variants run); ``confs`` are session
  confs (Delta's ``withSQLConf``); ``variants`` are extra conf sets that each make one more test.
* ``NestedCase``: JSON data (Delta's ``withJsonData`` / ``testNestedDataSupport``): target and source
  are read from JSON lines (with the given DDL schema, else inferred), the expected table too.

The table must then hold ``expected`` (a multiset), or the MERGE must fail with a message containing
every string of ``errors`` and leave the table at its version.

Not ported: ``MergeIntoTempViewsTests`` (temp views as MERGE targets: deltamerge targets are Delta
tables only), the Scala-API, name-based, column-mapping, DV, CDC and in-memory (DSv2) generated suite
variants (other files cover the builder, DVs and CDC), and the predicate-pushdown on/off switch (a
Delta-internal optimizer setting). Scala ``checkError`` error-class assertions are checked as error
class names in the message.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

import deltamerge
from delta_clauses import delete, insert, update  # tests/ is on sys.path

pytestmark = pytest.mark.spark

INSERT_ONLY = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
STATS_SKIPPING = "spark.databricks.delta.stats.skipping"
CROSS_JOINS = "spark.sql.crossJoin.enabled"
STRUCTS_BY_NAME = "spark.databricks.delta.resolveMergeUpdateStructsByName.enabled"

MULTIPLE_MATCHES = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


# --- schemas ----------------------------------------------------------------------------------------


def _schema(*cols: tuple[str, Any, bool]) -> StructType:
    return StructType([StructField(n, t, nullable) for n, t, nullable in cols])


def ints(a: str, b: str) -> StructType:
    """Scala ``Seq[(Int, Int)].toDF(a, b)``: both columns NOT NULL."""
    return _schema((a, IntegerType(), False), (b, IntegerType(), False))


def jints(a: str, b: str) -> StructType:
    """Scala ``Seq[(JInt, JInt)].toDF(a, b)``: both columns nullable."""
    return _schema((a, IntegerType(), True), (b, IntegerType(), True))


def strs(*names: str) -> StructType:
    return _schema(*((n, StringType(), True) for n in names))


KV = ints("key", "value")
K2V = ints("key2", "value")
K1V = ints("key1", "value")


@dataclass(frozen=True)
class Case:
    name: str
    target: list[tuple[Any, ...]]
    source: list[tuple[Any, ...]]
    clauses: tuple[str, ...]
    condition: str = "s.key = t.key"
    target_schema: StructType = KV
    source_schema: StructType = KV
    target_alias: str = "t"  # the text after delta.`path`
    source_ref: str = "source s"  # the text after USING; its first word is the temp view's name
    expected: list[tuple[Any, ...]] | None = None
    errors: tuple[str, ...] = ()
    partition: str | None = None  # also run with the target partitioned by this column
    confs: dict[str, str] = field(default_factory=dict)
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    target_files: int = 2  # files of the appended target (Delta coalesces or repartitions it to this)


def merge_case(name: str, target_schema: StructType, source_schema: StructType, **kw: Any) -> Case:
    return Case(name, target_schema=target_schema, source_schema=source_schema, **kw)


def basic(
    name: str,
    *,
    update_set: str,
    insert_values: str,
    **kw: Any,
) -> Case:
    """Delta's ``executeMerge(target, source, condition, update, insert)``: one of each clause."""
    return Case(name, clauses=(update(update_set), insert(insert_values)), **kw)


# --- MergeIntoBasicTests -------------------------------------------------------------------------

U20 = "key2 = 20 + key1, value = 20 + src.value"
I10 = "(key2, value) VALUES (key1 - 10, src.value + 10)"

BASIC: list[Case] = [
    basic(
        "basic case - merge to Delta table by path",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="",
        source_ref="source src",
        condition="src.key1 = key2",
        update_set=U20,
        insert_values=I10,
        expected=[(2, 2), (21, 21), (-10, 13)],
        partition="key2",
    ),
    basic(
        "basic case - merge to Delta table",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3), (1, 6)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="tgt",
        source_ref="source src",
        condition="src.key1 = key2 AND src.value < tgt.value",
        update_set=U20,
        insert_values=I10,
        expected=[(2, 2), (21, 21), (-10, 13), (-9, 16)],
        partition="key2",
        variants={"skipping": {STATS_SKIPPING: "true"}, "noSkipping": {STATS_SKIPPING: "false"}},
    ),
    basic(
        "basic case - update value from both source and target table",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as trgNew",
        source_ref="source src",
        condition="src.key1 = key2",
        update_set="key2 = 20 + key2, value = trgNew.value + src.value",
        insert_values=I10,
        expected=[(2, 2), (21, 5), (-10, 13)],
    ),
    basic(
        "basic case - columns are specified in wrong order",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as trgNew",
        source_ref="source src",
        condition="src.key1 = key2",
        update_set="value = trgNew.value + src.value, key2 = 20 + key2",
        insert_values="(value, key2) VALUES (src.value + 10, key1 - 10)",
        expected=[(2, 2), (21, 5), (-10, 13)],
    ),
    basic(
        "basic case - not all columns are specified in update",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as trgNew",
        source_ref="source src",
        condition="src.key1 = key2",
        update_set="value = trgNew.value + 3",
        insert_values=I10,
        expected=[(2, 2), (1, 7), (-10, 13)],
    ),
    Case(
        "basic case - multiple inserts",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3), (3, 5)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as trgNew",
        source_ref="source src",
        condition="src.key1 = key2",
        clauses=(
            insert("(key2, value) VALUES (src.key1, src.value + 3)", "key1 = 0"),
            insert("(key2, value) VALUES (src.key1 - 10, src.value + 10)"),
        ),
        expected=[(2, 2), (1, 4), (0, 6), (-7, 15)],
    ),
    Case(
        "basic case - upsert with only rows inserted",
        target=[(2, 2), (1, 4)],
        source=[(1, 1), (0, 3)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as trgNew",
        source_ref="source src",
        condition="src.key1 = key2",
        clauses=(
            update("value = src.value + 3", "key2 = 5"),
            insert("(key2, value) VALUES (src.key1 - 10, src.value + 10)"),
        ),
        expected=[(2, 2), (1, 4), (-10, 13)],
    ),
]


def null_case(name: str, **kw: Any) -> Case:
    """Delta's ``testNullCase``: nullable key/value, update then insert, both partitionings."""
    return basic(
        f"basic case - null handling - {name}",
        target_schema=jints("key", "value"),
        source_schema=jints("key", "value"),
        source_ref="sourceView s",
        target_alias="as t",
        update_set="t.value = s.value",
        insert_values="(t.key, t.value) VALUES (s.key, s.value)",
        partition="key",
        **kw,
    )


BASIC += [
    null_case(
        "null value in target",
        target=[(None, None), (1, 1)],
        source=[(1, 10), (2, 20)],
        expected=[(None, None), (1, 10), (2, 20)],
    ),
    null_case(
        "null value in source",
        target=[(1, 1)],
        source=[(1, 10), (2, 20), (None, None)],
        expected=[(1, 10), (2, 20), (None, None)],
    ),
    null_case(
        "null value in both source and target",
        target=[(1, 1), (None, None)],
        source=[(1, 10), (2, 20), (None, 0)],
        expected=[(None, None), (1, 10), (2, 20), (None, 0)],
    ),
    null_case(
        "null value in both source and target + IS NULL in condition",
        target=[(1, 1), (None, None)],
        source=[(1, 10), (2, 20), (None, 0)],
        condition="s.key = t.key AND s.key IS NULL",
        expected=[(None, None), (1, 1), (None, 0), (1, 10), (2, 20)],
    ),
    null_case(
        "null value in both source and target + IS NOT NULL in condition",
        target=[(1, 1), (None, None)],
        source=[(1, None), (2, 20), (None, 0)],
        condition="s.key = t.key AND t.value IS NOT NULL",
        expected=[(None, None), (1, None), (None, 0), (2, 20)],
    ),
    null_case(
        "null value in both source and target + <=> in condition",
        target=[(1, 1), (None, None)],
        source=[(1, 10), (2, 20), (None, 0)],
        condition="s.key <=> t.key",
        expected=[(None, 0), (1, 10), (2, 20)],
    ),
    null_case(
        "NULL in condition",
        target=[(1, 1), (None, None)],
        source=[(1, 10), (2, 20), (None, 0)],
        condition="s.key = t.key AND NULL",
        expected=[(None, None), (1, 1), (None, 0), (1, 10), (2, 20)],
    ),
    basic(
        "basic case - only insert",
        target=[],
        source=[(5, 5)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as target",
        source_ref="source src",
        condition="src.key1 = target.key2",
        update_set=U20,
        insert_values=I10,
        expected=[(-5, 15)],
    ),
    basic(
        "basic case - both source and target are empty",
        target=[],
        source=[],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as target",
        source_ref="source src",
        condition="src.key1 = target.key2",
        update_set=U20,
        insert_values=I10,
        expected=[],
    ),
    basic(
        "basic case - only update",
        target=[(2, 2), (1, 4)],
        source=[(1, 5), (2, 9)],
        target_schema=K2V,
        source_schema=K1V,
        target_alias="as target",
        source_ref="source src",
        condition="src.key1 = target.key2",
        update_set=U20,
        insert_values=I10,
        expected=[(21, 25), (22, 29)],
    ),
]


def local_predicates(name: str, **kw: Any) -> Case:
    """Delta's ``testLocalPredicates``: string columns, cross joins allowed, both partitionings."""
    return basic(
        f"basic case - local predicates - {name}",
        target_schema=strs("key2", "value", "op"),
        source_schema=strs("key1", "value"),
        target_alias="trg",
        source_ref="source src",
        update_set="key2 = src.key1, value = src.value, op = 'update'",
        insert_values="(key2, value, op) VALUES (src.key1, src.value, 'insert')",
        partition="key2",
        confs={CROSS_JOINS: "true"},
        **kw,
    )


T4 = [("1", "2", "noop"), ("1", "4", "noop"), ("3", "2", "noop"), ("4", "4", "noop")]

BASIC += [
    local_predicates(
        "predicate has no matches, only inserts",
        target=[("2", "2", "noop"), ("1", "4", "noop"), ("3", "2", "noop"), ("4", "4", "noop")],
        source=[("1", "8"), ("0", "3")],
        condition="src.key1 = key2 and key2 != '1'",
        expected=[
            ("2", "2", "noop"),
            ("1", "4", "noop"),
            ("3", "2", "noop"),
            ("4", "4", "noop"),
            ("1", "8", "insert"),
            ("0", "3", "insert"),
        ],
    ),
    local_predicates(
        "predicate has matches, updates and inserts",
        target=T4,
        source=[("1", "8"), ("0", "3")],
        condition="src.key1 = key2 and key2 < '3'",
        expected=[
            ("3", "2", "noop"),
            ("4", "4", "noop"),
            ("1", "8", "update"),
            ("1", "8", "update"),
            ("0", "3", "insert"),
        ],
    ),
    local_predicates(
        "predicate has matches, only updates",
        target=T4,
        source=[("1", "8")],
        condition="key2 < '3'",
        expected=[("3", "2", "noop"), ("4", "4", "noop"), ("1", "8", "update"), ("1", "8", "update")],
    ),
    local_predicates(
        "always false predicate, only inserts",
        target=T4,
        source=[("1", "8"), ("0", "3")],
        condition="1 != 1",
        expected=[*T4, ("1", "8", "insert"), ("0", "3", "insert")],
    ),
    local_predicates(
        "always true predicate, all updated",
        target=T4,
        source=[("1", "8")],
        condition="1 = 1",
        expected=[("1", "8", "update")] * 4,
    ),
    local_predicates(
        "single file, updates and inserts",
        target=T4,
        source=[("1", "8"), ("3", "10"), ("0", "3")],
        condition="src.key1 = key2 and key2 < '3'",
        expected=[
            ("3", "2", "noop"),
            ("4", "4", "noop"),
            ("1", "8", "update"),
            ("1", "8", "update"),
            ("0", "3", "insert"),
            ("3", "10", "insert"),
        ],
        target_files=1,
    ),
    basic(
        "basic case - column pruning",
        target=[(2, 2), (1, 4)],
        source=[(1, 1, "a"), (0, 3, "b")],
        target_schema=K2V,
        source_schema=_schema(
            ("key1", IntegerType(), False), ("value", IntegerType(), False), ("col1", StringType(), True)
        ),
        target_alias="",
        source_ref="source src",
        condition="src.key1 = key2",
        update_set=U20,
        insert_values=I10,
        expected=[(2, 2), (21, 21), (-10, 13)],
        partition="key2",
    ),
]


def null_insert_only(name: str, insert_condition: str | None = None, **kw: Any) -> Case:
    """Delta's ``testNullCaseInsertOnly``: one insert clause, insert-only optimisation on."""
    return Case(
        f"basic case - null handling - {name}",
        target_schema=jints("key", "value"),
        source_schema=jints("key", "value"),
        source_ref="sourceView s",
        target_alias="as t",
        clauses=(insert("(t.key, t.value) VALUES (s.key, s.value)", insert_condition),),
        partition="key",
        confs={INSERT_ONLY: "true"},
        **kw,
    )


BASIC += [
    null_insert_only(
        "insert only merge - null in source",
        target=[(1, 1)],
        source=[(1, 10), (2, 20), (None, None)],
        expected=[(1, 1), (2, 20), (None, None)],
    ),
    null_insert_only(
        "insert only merge - null value in both source and target",
        target=[(1, 1), (None, None)],
        source=[(1, 10), (2, 20), (None, 0)],
        expected=[(None, None), (1, 1), (2, 20), (None, 0)],
    ),
    null_insert_only(
        "insert only merge - null in insert clause",
        target=[(1, 1), (2, 20)],
        source=[(1, 10), (3, 30), (None, 0)],
        insert_condition="s.key IS NULL",
        expected=[(1, 1), (2, 20), (None, 0)],
    ),
]


# --- MergeIntoUnlimitedMergeClausesTests ----------------------------------------------------------


def extended(name: str, source: list, target: list, condition: str, *clauses: str, result: list) -> Case:
    """Delta's ``testExtendedMerge`` (and ``testUnlimitedClauses``): key/value data, both
    partitionings, insert-only optimisation on."""
    return Case(
        name,
        target=target,
        source=source,
        clauses=clauses,
        condition=condition,
        expected=result,
        partition="key",
        confs={INSERT_ONLY: "true"},
    )


KV_VALUES = "(key, value) VALUES (s.key, s.value)"
KEY_S = "key = s.key, value = s.value"
T0_3 = [(0, 0), (1, 10), (2, 20), (3, 30)]

UNLIMITED: list[Case] = [
    extended(
        "unlimited clauses - two conditional update + two conditional delete + insert",
        [(0, 0), (1, 100), (3, 300), (4, 400), (5, 500)],
        [(1, 10), (2, 20), (3, 30), (4, 40)],
        "s.key = t.key",
        delete("s.key < 2"),
        delete("s.key > 4"),
        update(KEY_S, "s.key == 3"),
        update("key = s.key, value = 2 * s.value", "s.key == 4"),
        insert(KV_VALUES),
        result=[(0, 0), (2, 20), (3, 300), (4, 800), (5, 500)],
    ),
    extended(
        "unlimited clauses - two conditional delete + conditional update + update + insert",
        [(0, 0), (1, 100), (2, 200), (3, 300), (4, 400)],
        [(1, 10), (2, 20), (3, 30), (4, 40)],
        "s.key = t.key",
        delete("s.key < 2"),
        delete("s.key > 3"),
        update(KEY_S, "s.key == 2"),
        update("key = s.key, value = 2 * s.value"),
        insert(KV_VALUES),
        result=[(0, 0), (2, 200), (3, 600)],
    ),
    extended(
        "unlimited clauses - conditional delete + two conditional update + two conditional insert",
        [(1, 100), (2, 200), (3, 300), (4, 400), (6, 600)],
        [(1, 10), (2, 20), (3, 30)],
        "s.key = t.key",
        delete("s.key < 2"),
        update(KEY_S, "s.key == 2"),
        update("key = s.key, value = 2 * s.value", "s.key == 3"),
        insert(KV_VALUES, "s.key < 5"),
        insert("(key, value) VALUES (s.key, 1 + s.value)", "s.key > 5"),
        result=[(2, 200), (3, 600), (4, 400), (6, 601)],
    ),
    extended(
        "unlimited clauses - conditional update + update + conditional delete + conditional insert",
        [(1, 100), (2, 200), (3, 300), (4, 400), (5, 500)],
        T0_3,
        "s.key = t.key",
        update(KEY_S, "s.key < 2"),
        update("key = s.key, value = 2 * s.value", "s.key < 3"),
        delete("s.key < 4"),
        insert(KV_VALUES, "s.key > 4"),
        result=[(0, 0), (1, 100), (2, 400), (5, 500)],
    ),
    extended(
        "unlimited clauses - conditional insert + insert",
        [(1, 100), (2, 200), (3, 300), (4, 400), (5, 500)],
        T0_3,
        "s.key = t.key",
        insert(KV_VALUES, "s.key < 5"),
        insert("(key, value) VALUES (s.key, s.value + 1)"),
        result=[*T0_3, (4, 400), (5, 501)],
    ),
    extended(
        "unlimited clauses - 2 conditional inserts",
        [(1, 100), (2, 200), (3, 300), (4, 400), (5, 500), (6, 600)],
        T0_3,
        "s.key = t.key",
        insert(KV_VALUES, "s.key < 5"),
        insert("(key, value) VALUES (s.key, s.value + 1)", "s.key = 5"),
        result=[*T0_3, (4, 400), (5, 501)],
    ),
    extended(
        "unlimited clauses - update/delete (no matches) + conditional insert + insert",
        [(4, 400), (5, 500)],
        T0_3,
        "s.key = t.key",
        update(KEY_S, "t.key = 0"),
        delete(),
        insert(KV_VALUES, "s.key < 5"),
        insert("(key, value) VALUES (s.key, s.value + 1)"),
        result=[*T0_3, (4, 400), (5, 501)],
    ),
    extended(
        "unlimited clauses - update/delete (no matches) + 2 conditional inserts",
        [(4, 400), (5, 500), (6, 600)],
        T0_3,
        "s.key = t.key",
        update(KEY_S, "t.key = 0"),
        delete(),
        insert(KV_VALUES, "s.key < 5"),
        insert("(key, value) VALUES (s.key, s.value + 1)", "s.key = 5"),
        result=[*T0_3, (4, 400), (5, 501)],
    ),
    extended(
        "unlimited clauses - 2 update + 2 delete + 4 insert",
        [(k, 100 * k) for k in range(1, 10)],
        [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)],
        "s.key = t.key",
        update(KEY_S, "s.key == 1"),
        delete("s.key == 2"),
        update("key = s.key, value = 2 * s.value", "s.key == 3"),
        delete(),
        insert(KV_VALUES, "s.key == 5"),
        insert("(key, value) VALUES (s.key, 1 + s.value)", "s.key == 6"),
        insert("(key, value) VALUES (s.key, 2 + s.value)", "s.key == 7"),
        insert("(key, value) VALUES (s.key, 3 + s.value)"),
        result=[(0, 0), (1, 100), (3, 600), (5, 500), (6, 601), (7, 702), (8, 803), (9, 903)],
    ),
]


def analysis_error(name: str, error_class: str, *clauses: str) -> Case:
    """Delta's ``testMergeAnalysisException``: empty (key, srcValue) source, (key, tgtValue) target."""
    return Case(
        f"analysis errors - {name}",
        target=[],
        source=[],
        target_schema=ints("key", "tgtValue"),
        source_schema=ints("key", "srcValue"),
        clauses=clauses,
        errors=(error_class,),
    )


UNLIMITED += [
    analysis_error(
        "error on multiple insert clauses without condition",
        "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
        update("key = s.key, value = 2 * srcValue", "s.key == 3"),
        insert("(key, value) VALUES (s.key, srcValue)"),
        insert("(key, value) VALUES (s.key, 1 + srcValue)"),
    ),
    analysis_error(
        "error on multiple update clauses without condition",
        "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        update("key = s.key, value = 2 * srcValue", "s.key == 3"),
        update("key = s.key, value = 3 * srcValue"),
        update("key = s.key, value = 4 * srcValue"),
        insert("(key, value) VALUES (s.key, srcValue)"),
    ),
    analysis_error(
        "error on multiple update/delete clauses without condition",
        "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        update("key = s.key, value = 2 * srcValue", "s.key == 3"),
        delete(),
        update("key = s.key, value = 4 * srcValue"),
        insert("(key, value) VALUES (s.key, srcValue)"),
    ),
    analysis_error(
        "error on non-empty condition following empty condition for update clauses",
        "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        update("key = s.key, value = 2 * srcValue"),
        update("key = s.key, value = srcValue", "s.key < 3"),
        insert("(key, value) VALUES (s.key, srcValue)"),
    ),
    analysis_error(
        "error on non-empty condition following empty condition for insert clauses",
        "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
        update("key = s.key, value = srcValue"),
        insert("(key, value) VALUES (s.key, srcValue)"),
        insert("(key, value) VALUES (s.key, srcValue)", "s.key < 3"),
    ),
]


# --- MergeIntoExtendedSyntaxTests -----------------------------------------------------------------


def multiple_matches(
    name: str, source: list, target: list, *clauses: str, confs: dict[str, str] | None = None
) -> Case:
    """Delta's ``testMergeErrorOnMultipleMatches``: unpartitioned, the MERGE must fail."""
    return Case(
        f"extended syntax - {name}",
        target=target,
        source=source,
        clauses=clauses,
        errors=(MULTIPLE_MATCHES,),
        confs=confs or {},
    )


EXTENDED: list[Case] = [
    extended(
        "extended syntax - only update",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        update(KEY_S),
        result=[(1, 10), (2, 2)],
    ),
    multiple_matches(
        "only update with multiple matches",
        [(0, 0), (1, 10), (1, 11), (2, 20)],
        [(1, 1), (2, 2)],
        update(KEY_S),
    ),
    extended(
        "extended syntax - only conditional update",
        [(0, 0), (1, 10), (2, 20), (3, 30)],
        [(1, 1), (2, 2), (3, 3)],
        "s.key = t.key",
        update(KEY_S, "s.value <> 20 AND t.value <> 3"),
        result=[(1, 10), (2, 2), (3, 3)],
    ),
    multiple_matches(
        "only conditional update with multiple matches",
        [(0, 0), (1, 10), (1, 11), (2, 20)],
        [(1, 1), (2, 2)],
        update(KEY_S, "s.value = 10"),
    ),
    extended(
        "extended syntax - only delete",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        delete(),
        result=[(2, 2)],
    ),
    extended(
        "extended syntax - only delete with multiple matches",
        [(0, 0), (1, 10), (1, 100), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        delete(),
        result=[(2, 2)],
    ),
    extended(
        "extended syntax - only conditional delete",
        [(0, 0), (1, 10), (2, 20), (3, 30)],
        [(1, 1), (2, 2), (3, 3)],
        "s.key = t.key",
        delete("s.value <> 20 AND t.value <> 3"),
        result=[(2, 2), (3, 3)],
    ),
    multiple_matches(
        "only conditional delete with multiple matches",
        [(0, 0), (1, 10), (1, 100), (2, 20)],
        [(1, 1), (2, 2)],
        delete("s.value = 10"),
    ),
    extended(
        "extended syntax - conditional update + delete",
        [(0, 0), (1, 10), (2, 20)],
        [(1, 1), (2, 2), (3, 3)],
        "s.key = t.key",
        update(KEY_S, "s.key <> 1"),
        delete(),
        result=[(2, 20), (3, 3)],
    ),
    multiple_matches(
        "conditional update + delete with multiple matches",
        [(0, 0), (1, 10), (2, 20), (2, 200)],
        [(1, 1), (2, 2)],
        update(KEY_S, "s.value = 20"),
        delete(),
    ),
    extended(
        "extended syntax - conditional update + conditional delete",
        [(0, 0), (1, 10), (2, 20), (3, 30)],
        [(1, 1), (2, 2), (3, 3), (4, 4)],
        "s.key = t.key",
        update(KEY_S, "s.key <> 1"),
        delete("s.key <> 2"),
        result=[(2, 20), (3, 30), (4, 4)],
    ),
    multiple_matches(
        "conditional update + conditional delete with multiple matches",
        [(0, 0), (1, 10), (1, 100), (2, 20), (2, 200)],
        [(1, 1), (2, 2)],
        update(KEY_S, "s.value = 20"),
        delete("s.value = 10"),
    ),
    extended(
        "extended syntax - conditional delete + conditional update (order matters)",
        [(0, 0), (1, 10), (2, 20), (3, 30)],
        [(1, 1), (2, 2), (3, 3), (4, 4)],
        "s.key = t.key",
        delete("s.key <> 2"),
        update(KEY_S, "s.key <> 1"),
        result=[(2, 20), (4, 4)],
    ),
    extended(
        "extended syntax - only insert",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert(KV_VALUES),
        result=[(0, 0), (1, 1), (2, 2), (3, 30)],
    ),
    extended(
        "extended syntax - only conditional insert",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert(KV_VALUES, "s.value <> 30"),
        result=[(0, 0), (1, 1), (2, 2)],
    ),
    extended(
        "extended syntax - update + conditional insert",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        update(KEY_S),
        insert(KV_VALUES, "s.value <> 30"),
        result=[(0, 0), (1, 10), (2, 2)],
    ),
    extended(
        "extended syntax - conditional update + conditional insert",
        [(0, 0), (1, 10), (2, 20), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        update(KEY_S, "s.key > 1"),
        insert(KV_VALUES, "s.key > 1"),
        result=[(1, 1), (2, 20), (3, 30)],
    ),
    extended(
        "extended syntax - update + conditional insert clause with data to only insert, no updates",
        [(0, 0), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        update(KEY_S),
        insert(KV_VALUES, "s.value <> 30"),
        result=[(0, 0), (1, 1), (2, 2)],
    ),
    extended(
        "extended syntax - delete + insert with multiple matches for both",
        [(1, 10), (1, 100), (3, 30), (3, 300)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        delete(),
        insert(KV_VALUES),
        result=[(2, 2), (3, 30), (3, 300)],
    ),
    extended(
        "extended syntax - conditional update + conditional delete + conditional insert",
        [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)],
        [(1, 1), (2, 2), (3, 3)],
        "s.key = t.key",
        update(KEY_S, "s.key < 2"),
        delete("s.key < 3"),
        insert(KV_VALUES, "s.key > 1"),
        result=[(1, 10), (3, 3), (4, 40)],
    ),
    multiple_matches(
        "conditional update + conditional delete + conditional insert with multiple matches",
        [(0, 0), (1, 10), (1, 100), (2, 20), (2, 200)],
        [(1, 1), (2, 2)],
        update(KEY_S, "s.value = 20"),
        delete("s.value = 10"),
        insert(KV_VALUES, "s.value = 0"),
    ),
    extended(
        "extended syntax - conditional update + conditional delete + conditional insert + complex merge "
        "condition",
        [(-1, -10), (0, 0), (1, 10), (2, 20), (3, 30), (4, 40), (5, 50)],
        [(-1, -1), (1, 1), (2, 2), (3, 3), (5, 5)],
        "s.key = t.key AND t.value > 0 AND s.key < 5",
        update(KEY_S, "s.key < 2"),
        delete("s.key < 3"),
        insert(KV_VALUES, "s.key > 1"),
        result=[(-1, -1), (1, 10), (3, 3), (4, 40), (5, 5), (5, 50)],
    ),
    Case(
        "extended syntax - different # cols in source than target",
        target=[(1, 1), (2, 2), (3, 3)],
        source=[(0, 0, 0), (1, 10, 100), (2, 20, 200), (3, 30, 300), (4, 40, 400)],
        source_schema=_schema(
            ("key", IntegerType(), False), ("value", IntegerType(), False), ("extra", IntegerType(), False)
        ),
        clauses=(
            update("key = s.key, value = s.value + s.extra", "s.key < 2"),
            delete("s.key < 3"),
            insert("(key, value) VALUES (s.key, s.value + s.extra)", "s.key > 1"),
        ),
        expected=[(1, 110), (3, 3), (4, 440)],
        target_files=1,
    ),
    extended(
        "extended syntax - insert only merge",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert("*"),
        result=[(0, 0), (1, 1), (2, 2), (3, 30)],
    ),
    extended(
        "extended syntax - insert only merge with insert condition on source",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert("*", "s.key = s.value"),
        result=[(0, 0), (1, 1), (2, 2)],
    ),
    extended(
        "extended syntax - insert only merge with predicate insert",
        [(0, 0), (1, 10), (3, 30)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert("(t.key, t.value) VALUES (s.key + 10, s.value + 10)"),
        result=[(10, 10), (1, 1), (2, 2), (13, 40)],
    ),
    extended(
        "extended syntax - insert only merge with multiple matches",
        [(0, 0), (1, 10), (1, 100), (3, 30), (3, 300)],
        [(1, 1), (2, 2)],
        "s.key = t.key",
        insert(KV_VALUES),
        result=[(0, 0), (1, 1), (2, 2), (3, 30), (3, 300)],
    ),
    multiple_matches(
        "unconditional insert only merge - multiple matches when feature flag off",
        [(1, 10), (1, 100), (2, 20)],
        [(1, 1)],
        insert(KV_VALUES),
        confs={INSERT_ONLY: "false"},
    ),
    multiple_matches(
        "conditional insert only merge - multiple matches when feature flag off",
        [(1, 10), (1, 100), (2, 20), (2, 200)],
        [(1, 1)],
        insert(KV_VALUES, "s.value = 20"),
        confs={INSERT_ONLY: "false"},
    ),
]


# --- MergeIntoNestedDataTests (and the nested test of MergeIntoExtendedSyntaxTests) ----------------


@dataclass(frozen=True)
class NestedCase:
    name: str
    source: str  # JSON lines
    target: str
    update: tuple[str, ...] = ()
    insert: str | None = None  # None: (all target columns) VALUES (all target columns)
    target_schema: str | None = None  # DDL; None: inferred from the JSON
    source_schema: str | None = None  # DDL; None: the target schema (or inferred)
    result: str | None = None  # JSON lines of the expected table, read with the target schema
    errors: tuple[str, ...] = ()
    confs: dict[str, str] = field(default_factory=dict)
    clauses: tuple[str, ...] | None = None  # explicit WHEN clauses instead of update / insert


def nested(name: str, prefix: str = "nested data support", **kw: Any) -> NestedCase:
    """Delta's ``testNestedDataSupport``: one UPDATE SET clause (``update`` joined by commas) and an
    INSERT clause, the key being the target's first column."""
    label = f"{prefix} - {name}" if kw.get("result") is not None else f"{prefix} - analysis error - {name}"
    return NestedCase(label, **kw)


STRUCT_T = "key string, value struct<a: struct<x: int, y: int>, b: int>"
STRUCT_S = "key string, value struct<b: int, a: struct<y: int, x: int>>"
ARRAY_T = "key string, value array<struct<a: struct<x: int, y: int>, b: int>>"
ARRAY_S = "key string, value array<struct<b: string, a: struct<y: int, x: int>>>"
NESTED_ARRAY_T = (
    "key string, value array<struct<a: struct<y: int, x: array<struct<c: int, d: int>>>, b: int>>"
)
NESTED_ARRAY_S = (
    "key string, value array<struct<b: string, a: struct<y: int, x: array<struct<c: int, d: string>>>>>"
)
MAP_T = "key string, value map<string, int>"

XY_TARGET = """
    { "key": { "x": "X1", "y": 1}, "value": { "a": 1,   "b": "B1" } }
    { "key": { "x": "X2", "y": 2}, "value": { "a": 2,   "b": "B2" } }"""
XYI_TARGET = """
    { "key": { "x": "X1", "y": { "i": 1.0 } }, "value": { "a": 1,   "b": "B1" } }
    { "key": { "x": "X2", "y": { "i": 2.0 } }, "value": { "a": 2,   "b": "B2" } }"""
XYI_SOURCE = """{ "key": { "x": "X1", "y": { "i": 1.0 } }, "value": { "a": 100, "b": "B100" } }"""

NESTED: list[NestedCase] = [
    nested(
        "no update when not matched, only insert",
        source="""{ "key": { "x": "X3", "y": 3}, "value": { "a": 300, "b": "B300" } }""",
        target=XY_TARGET,
        update=("value.b = 'UPDATED'",),
        result="""
            { "key": { "x": "X1", "y": 1}, "value": { "a": 1,   "b": "B1" } }
            { "key": { "x": "X2", "y": 2}, "value": { "a": 2,   "b": "B2"      } }
            { "key": { "x": "X3", "y": 3}, "value": { "a": 300, "b": "B300"    } }""",
    ),
    nested(
        "update entire nested column",
        source="""{ "key": { "x": "X1", "y": 1}, "value": { "a": 100, "b": "B100" } }""",
        target=XY_TARGET,
        update=("value = s.value",),
        result="""
            { "key": { "x": "X1", "y": 1}, "value": { "a": 100, "b": "B100" } }
            { "key": { "x": "X2", "y": 2}, "value": { "a": 2, "b": "B2"   } }""",
    ),
    nested(
        "update one nested field",
        source="""{ "key": { "x": "X1", "y": 1}, "value": { "a": 100, "b": "B100" } }""",
        target=XY_TARGET,
        update=("value.b = s.value.b",),
        result="""
            { "key": { "x": "X1", "y": 1}, "value": { "a": 1, "b": "B100" } }
            { "key": { "x": "X2", "y": 2}, "value": { "a": 2, "b": "B2"   } }""",
    ),
    nested(
        "update multiple fields at different levels",
        source=XYI_SOURCE,
        target=XYI_TARGET,
        update=("key.x = 'XXX'", "key.y.i = 9000", "value = named_struct('a', 9000, 'b', s.value.b)"),
        result="""
            { "key": { "x": "XXX", "y": { "i": 9000 } }, "value": { "a": 9000, "b": "B100" } }
            { "key": { "x": "X2" , "y": { "i": 2.0  } }, "value": { "a": 2, "b": "B2" } }""",
    ),
    nested(
        "update multiple fields at different levels to NULL",
        source=XYI_SOURCE,
        target=XYI_TARGET,
        update=("value = NULL", "key.x = NULL", "key.y.i = NULL"),
        result="""
            { "key": { "x": null, "y": { "i" : null } }, "value": null }
            { "key": { "x": "X2" , "y": { "i" : 2.0  } }, "value": { "a": 2, "b": "B2" } }""",
    ),
    nested(
        "update multiple fields at different levels with implicit casting",
        source=XYI_SOURCE,
        target=XYI_TARGET,
        update=("key.x = 'XXX' ", "key.y.i = '9000'", "value = named_struct('a', '9000', 'b', s.value.b)"),
        result="""
            { "key": { "x": "XXX", "y": { "i": 9000 } }, "value": { "a": 9000, "b": "B100" } }
            { "key": { "x": "X2" , "y": { "i": 2.0  } }, "value": { "a": 2, "b": "B2" } }""",
    ),
    nested(
        "update array fields at different levels",
        source="""{ "key": { "x": "X1", "y": [ 1, 11 ] }, "value": [ -1, -10 , -100 ] }""",
        # The stray closing braces are in Delta's data too; the JSON reader ignores them.
        target="""
            { "key": { "x": "X1", "y": [ 1, 11 ] }, "value": [ 1, 10 , 100 ]} }
            { "key": { "x": "X2", "y": [ 2, 22 ] }, "value": [ 2, 20 , 200 ]} }""",
        update=("value = array(-9000)", "key.y = array(-1, -11)"),
        result="""
            { "key": { "x": "X1", "y": [ -1, -11 ] }, "value": [ -9000 ]} }
            { "key": { "x": "X2", "y": [ 2, 22 ] }, "value": [ 2, 20 , 200 ]} }""",
    ),
    nested(
        "update using quoted names at different levels",
        prefix="dotted name support",
        source="""{ "key": { "x": "X1", "y.i": 1.0 }, "value.a": "A" }""",
        target="""
            { "key": { "x": "X1", "y.i": 1.0 }, "value.a": "A1" }
            { "key": { "x": "X2", "y.i": 2.0 }, "value.a": "A2" }""",
        update=("`t`.key.`y.i` = 9000", "t.`value.a` = 'UPDATED'"),
        result="""
            { "key": { "x": "X1", "y.i": 9000 }, "value.a": "UPDATED" }
            { "key": { "x": "X2", "y.i" : 2.0 }, "value.a": "A2" }""",
    ),
    nested(
        "unknown nested field",
        source="""{ "key": "A", "value": { "a": 0 } }""",
        target="""{ "key": "A", "value": { "a": 1 } }""",
        update=("value.c = 'UPDATED'",),
        errors=("No such struct field",),
    ),
    nested(
        "assigning simple type to struct field",
        source="""{ "key": "A", "value": { "a": { "x": 1 } } }""",
        target="""{ "key": "A", "value": { "a": { "x": 1 } } }""",
        update=("value.a = 'UPDATED'",),
        errors=("data type mismatch",),
    ),
    nested(
        "conflicting assignments between two nested fields at different levels",
        source="""{ "key": "A", "value": { "a": { "x": 0 } } }""",
        target="""{ "key": "A", "value": { "a": { "x": 1 } } }""",
        update=("value.a.x = 2", "value.a = named_struct('x', 3)"),
        errors=("There is a conflict from these SET columns",),
    ),
    nested(
        "conflicting assignments between nested field and top-level column",
        source="""{ "key": "A", "value": { "a": 0 } }""",
        target="""{ "key": "A", "value": { "a": 1 } }""",
        update=("value.a = 2", "value = named_struct('a', 3)"),
        errors=("There is a conflict from these SET columns",),
    ),
    nested(
        "nested field not supported in INSERT",
        source="""{ "key": "A", "value": { "a": 0 } }""",
        target="""{ "key": "B", "value": { "a": 1 } }""",
        update=("value.a = 2",),
        insert="(key, value.a) VALUES (s.key, s.value.a)",
        errors=("Nested field is not supported in the INSERT clause",),
    ),
    nested(
        "updating map type",
        source="""{ "key": "A", "value": { "a": 0 } }""",
        target="""{ "key": "A", "value": { "a": 1 } }""",
        update=("value.a = 2",),
        target_schema=MAP_T,
        errors=("Updating nested fields is only supported for StructType",),
    ),
    nested(
        "updating array type",
        source="""{ "key": "A", "value": [ { "a": 0 } ] }""",
        target="""{ "key": "A", "value": [ { "a": 1 } ] }""",
        update=("value.a = 2",),
        target_schema=MAP_T,  # as in Delta: the array JSON is read with the map schema
        errors=("Updating nested fields is only supported for StructType",),
    ),
    nested(
        "resolution by name - update specific column",
        source="""{ "key": "A", "value": { "b": 2, "a": { "y": 20, "x": 10} } }""",
        target="""{ "key": "A", "value": { "a": { "x": 1, "y": 2 }, "b": 1 }}""",
        target_schema=STRUCT_T,
        source_schema=STRUCT_S,
        update=("value.a = s.value.a",),
        result="""{ "key": "A", "value": { "a": { "x": 10, "y": 20 }, "b": 1 } }""",
    ),
]

_LONG_SRC_ARRAY = (
    """{ "key": "A", "value": [ { "b": "2", "a": { "y": 20, "x": 10 } }, """
    """{ "b": "3", "a": { "y": 30, "x": 40 } } ] }"""
)
_LONG_SRC_ARRAY_RESULT = (
    """{ "key": "A", "value": [ { "a": { "x": 10, "y": 20 }, "b": 2 }, """
    """{ "a": { "y": 30, "x": 40}, "b": 3 } ] }"""
)
_NESTED_TARGET_ONE = (
    """{ "key": "A", "value": [ { "a": { "y": 2, "x": [ { "c": 1, "d": 3 } ] }, "b": 1 } ] }"""
)
_SHORT_SRC_ARRAY = """{ "key": "A", "value": [ { "b": "2", "a": { "y": 20, "x": 10 } } ] }"""
_LONG_SRC_NESTED = (
    """{ "key": "A", "value": [ { "b": "2", "a": { "y": 20, "x": [ { "c": 10, "d": "30" }, """
    """{ "c": 3, "d": "40" } ] } } ] }"""
)
_LONG_SRC_NESTED_RESULT = (
    """{ "key": "A", "value": [ { "a": { "y": 20, "x": [ { "c": 10, "d": 30 }, """
    """{ "c": 3, "d": 40 } ] }, "b": 2 } ] }"""
)
_SHORT_SRC_NESTED = (
    """{ "key": "A", "value": [ { "b": "2", "a": { "y": 20, "x": [ { "c": 10, "d": "30" } ] } } ] }"""
)
_SHORT_SRC_NESTED_RESULT = (
    """{ "key": "A", "value": [ { "a": { "y": 20, "x": [ { "c": 10, "d": 30 } ] }, "b": 2 } ] }"""
)

for _how, _set in (("update specific column", "value = s.value"), ("update *", "*")):
    NESTED += [
        nested(
            f"resolution by name - {_how} - array of struct - longer source",
            source=_LONG_SRC_ARRAY,
            target="""{ "key": "A", "value": [ { "a": { "x": 1, "y": 2 }, "b": 1 } ] }""",
            target_schema=ARRAY_T,
            source_schema=ARRAY_S,
            update=(_set,),
            result=_LONG_SRC_ARRAY_RESULT,
        ),
        nested(
            f"resolution by name - {_how} - array of struct - longer target",
            source=_SHORT_SRC_ARRAY,
            target=(
                """{ "key": "A", "value": [{ "a": { "x": 1, "y": 2 }, "b": 1 }, """
                """{ "a": { "x": 2, "y": 3 }, "b": 2 }] }"""
            ),
            target_schema=ARRAY_T,
            source_schema=ARRAY_S,
            update=(_set,),
            result="""{ "key": "A", "value": [ { "a": { "x": 10, "y": 20 }, "b": 2 } ] }""",
        ),
        nested(
            f"resolution by name - {_how} - nested array of struct - longer source",
            source=_LONG_SRC_NESTED,
            target="""{ "key": "A", "value": [ { "a": { "y": 2, "x": [ { "c": 1, "d": 3} ] }, "b": 1 } ] }""",
            target_schema=NESTED_ARRAY_T,
            source_schema=NESTED_ARRAY_S,
            update=(_set,),
            result=_LONG_SRC_NESTED_RESULT,
        ),
        nested(
            f"resolution by name - {_how} - nested array of struct - longer target",
            source=_SHORT_SRC_NESTED,
            target=(
                """{ "key": "A", "value": [ { "a": { "y": 2, "x": [ { "c": 1, "d": 3 }, """
                """{ "c": 2, "d": 4 } ] }, "b": 1 } ] }"""
            ),
            target_schema=NESTED_ARRAY_T,
            source_schema=NESTED_ARRAY_S,
            update=(_set,),
            result=_SHORT_SRC_NESTED_RESULT,
        ),
    ]

NESTED += [
    nested(
        "resolution by name - update *",
        source="""{ "key": "A", "value": { "b": 2, "a": { "y": 20, "x": 10} } }""",
        target="""{ "key": "A", "value": { "a": { "x": 1, "y": 2 }, "b": 1 }}""",
        target_schema=STRUCT_T,
        source_schema=STRUCT_S,
        update=("*",),
        result="""{ "key": "A", "value": { "a": { "x": 10, "y": 20 } , "b": 2} }""",
    ),
]

for _how, _values in (("insert specific column", "(key, value) VALUES (s.key, s.value)"), ("insert *", "*")):
    NESTED += [
        nested(
            f"resolution by name - {_how}",
            source="""{ "key": "B", "value": { "b": 2, "a": { "y": 20, "x": 10 } } }""",
            target="""{ "key": "A", "value": { "a": { "x": 1, "y": 2 }, "b": 1 } }""",
            target_schema=STRUCT_T,
            source_schema=STRUCT_S,
            update=("*",),
            insert=_values,
            result="""
                { "key": "A", "value": { "a": { "x": 1, "y": 2 }, "b": 1 } },
                { "key": "B", "value": { "a": { "x": 10, "y": 20 }, "b": 2 } }""",
        ),
        nested(
            f"resolution by name - {_how} - array of struct",
            source=_LONG_SRC_ARRAY.replace('"A"', '"B"'),
            target="""{ "key": "A", "value": [ { "a": { "x": 1, "y": 2 }, "b": 1 } ] }""",
            target_schema=ARRAY_T,
            source_schema=ARRAY_S,
            update=("*",),
            insert=_values,
            result=(
                """{ "key": "A", "value": [ { "a": { "x": 1, "y": 2 }, "b": 1 } ] },\n"""
                + _LONG_SRC_ARRAY_RESULT.replace('"A"', '"B"')
            ),
        ),
        nested(
            f"resolution by name - {_how} - nested array of struct",
            source=_LONG_SRC_NESTED.replace('"A"', '"B"'),
            target=_NESTED_TARGET_ONE,
            target_schema=NESTED_ARRAY_T,
            source_schema=NESTED_ARRAY_S,
            update=("*",),
            insert=_values,
            result=(
                """{ "key": "A", "value": [ { "a": { "y": 2, "x": [ { "c": 1, "d": 3 } ] }, "b": 1 } ] },\n"""
                + _LONG_SRC_NESTED_RESULT.replace('"A"', '"B"')
            ),
        ),
    ]

NESTED += [
    # value.b must keep its position: by position, source value.a (y, x) lands in target (x, y).
    nested(
        "update resolution by position with conf",
        source="""{ "key": "A", "value": { "a": { "y": 20, "x": 10}, "b": 2 }}""",
        target="""{ "key": "A", "value": { "a": { "x": 1, "y": 2 }, "b": 1 } }""",
        target_schema=STRUCT_T,
        source_schema="key string, value struct<a: struct<y: int, x: int>, b: int>",
        update=("*",),
        insert="(key, value) VALUES (s.key, s.value)",
        result="""{ "key": "A", "value": { "a": { "x": 20, "y": 10 }, "b": 2 } }""",
        confs={STRUCTS_BY_NAME: "false"},
    ),
    NestedCase(
        "extended syntax - nested data - conditions and actions",
        source="""
            { "key": { "x": "X1", "y": 1}, "value" : { "a": 100, "b": "B100" } }
            { "key": { "x": "X2", "y": 2}, "value" : { "a": 200, "b": "B200" } }
            { "key": { "x": "X3", "y": 3}, "value" : { "a": 300, "b": "B300" } }
            { "key": { "x": "X4", "y": 4}, "value" : { "a": 400, "b": "B400" } }""",
        target=XY_TARGET,
        clauses=(
            update("key = s.key, value = s.value", "s.key.y < 2"),
            insert("(key, value) VALUES (s.key, s.value)", "s.key.x < 'X4'"),
        ),
        result="""
            { "key": { "x": "X1", "y": 1}, "value" : { "a": 100, "b": "B100" } }
            { "key": { "x": "X2", "y": 2}, "value" : { "a": 2,   "b": "B2"   } }
            { "key": { "x": "X3", "y": 3}, "value" : { "a": 300, "b": "B300" } }""",
    ),
]


# --- running -------------------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    """Rows, structs and arrays become tuples, maps sorted tuples, recursively."""
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, (tuple, list)):
        return tuple(_norm(v) for v in value)
    return value


def _multiset(rows: Any) -> Counter:
    return Counter(_norm(r) for r in rows)


def _version(path: str) -> int:
    return deltamerge.io.snapshot_for(path).version


def _statement(
    path: str, target_alias: str, source_ref: str, condition: str, clauses: tuple[str, ...]
) -> str:
    return "\n".join(
        [
            f"MERGE INTO delta.`{path}` {target_alias}".rstrip(),
            f"USING {source_ref}",
            f"ON {condition}",
            *clauses,
        ]
    )


def _run(spark: Any, path: str, statement: str, expected: Counter | None, errors: tuple[str, ...]) -> None:
    if errors:
        before = _version(path)
        with pytest.raises(Exception) as failure:
            deltamerge.sql(spark, statement)
        for text in errors:
            assert text in str(failure.value)
        assert _version(path) == before, "a failed MERGE must not commit"
        return
    deltamerge.sql(spark, statement)
    assert _multiset(deltamerge.read(spark, path).collect()) == expected


# Known deltamerge bugs: case id -> reason (strict xfail).
XFAIL: dict[str, str] = {}


def _id(name: str, *suffixes: str) -> str:
    return "-".join([name.replace(" ", "_"), *suffixes])


def _kv_params() -> list[Any]:
    params = []
    for case in BASIC + UNLIMITED + EXTENDED:
        layouts = [None, case.partition] if case.partition else [None]
        variants = case.variants or {"": {}}
        for layout in layouts:
            for vname, vconfs in variants.items():
                suffixes = []
                if case.partition:
                    suffixes.append(f"partitionedBy_{layout}" if layout else "unpartitioned")
                if vname:
                    suffixes.append(vname)
                case_id = _id(case.name, *suffixes)
                marks = [pytest.mark.xfail(strict=True, reason=XFAIL[case_id])] if case_id in XFAIL else []
                params.append(pytest.param(case, layout, vconfs, id=case_id, marks=marks))
    return params


@pytest.mark.parametrize(("case", "partition", "variant_confs"), _kv_params())
def test_merge_key_value(
    spark, tmp_path, spark_conf, case: Case, partition: str | None, variant_confs: dict[str, str]
) -> None:
    spark_conf({**case.confs, **variant_confs})
    path = str(tmp_path / "target")
    target = spark.createDataFrame(case.target, case.target_schema).coalesce(case.target_files)
    deltamerge.write(target, path, mode="append", partition_by=partition)
    view = case.source_ref.split()[0]
    spark.createDataFrame(case.source, case.source_schema).createOrReplaceTempView(view)
    statement = _statement(path, case.target_alias, case.source_ref, case.condition, case.clauses)
    try:
        expected = _multiset(case.expected) if case.expected is not None else None
        _run(spark, path, statement, expected, case.errors)
    finally:
        spark.catalog.dropTempView(view)


def _json(spark: Any, text: str, ddl: str | None, *, fail_fast: bool = False) -> Any:
    """Delta's ``withJsonData`` (permissive) / ``readFromJSON`` (fail fast): one row per line."""
    lines = [line for line in text.split("\n") if line.strip()]
    reader = spark.read if ddl is None else spark.read.schema(ddl)
    if fail_fast:
        reader = reader.option("mode", "FAILFAST")
    return reader.json(spark.sparkContext.parallelize(lines, 1))


def _nested_params() -> list[Any]:
    params = []
    for case in NESTED:
        case_id = _id(case.name)
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[case_id])] if case_id in XFAIL else []
        params.append(pytest.param(case, id=case_id, marks=marks))
    return params


@pytest.mark.parametrize("case", _nested_params())
def test_merge_nested(spark, tmp_path, spark_conf, case: NestedCase) -> None:
    spark_conf(case.confs)
    path = str(tmp_path / "target")
    deltamerge.write(_json(spark, case.target, case.target_schema), path, mode="append")
    source_ddl = case.source_schema or case.target_schema
    _json(spark, case.source, source_ddl).createOrReplaceTempView("source")
    names = deltamerge.read(spark, path).schema.fieldNames()
    quoted = ", ".join(f"`{n}`" for n in names)
    clauses = case.clauses
    if clauses is None:
        insert_values = case.insert if case.insert is not None else f"({quoted}) VALUES ({quoted})"
        clauses = (update(", ".join(case.update)), insert(insert_values))
    statement = _statement(path, "t", "source s", f"s.`{names[0]}` = t.`{names[0]}`", clauses)
    try:
        expected = None
        if case.result is not None:
            expected = _multiset(_json(spark, case.result, case.target_schema, fail_fast=True).collect())
        _run(spark, path, statement, expected, case.errors)
    finally:
        spark.catalog.dropTempView("source")
