"""Delta Lake's NOT MATCHED BY SOURCE, deletion-vector and Python-API MERGE tests, as data.

Ported from delta-io/delta:

- ``MergeIntoNotMatchedBySourceSuite.scala``: the CDC Part1 / Part2 traits (``NMBS`` below). Each
  scenario appends the target (``key``, ``value``) to a new table, partitioned by ``key`` or not, with
  ``delta.enableChangeDataFeed`` on or off, and runs the MERGE as SQL from the temp view ``source``
  (Scala ``Int`` tuples: NOT NULL columns). The table must hold ``table``; with the change data feed on,
  the feed of the MERGE commit must hold ``cdf``. Delta runs each scenario in all four variants; here
  each runs two complementary ones, alternating between scenarios so that every variant runs for half
  of them (``DELTAMERGE_FULL_MATRIX=1`` runs all four). Delta's generated suites also run these traits with
  deletion vectors (``...DVs...`` / ``...CDCOnDVs...``); the scenarios in ``NMBS_WITH_DVS`` run again
  with CDF and DVs on (a subset keeps this file fast). With DVs Delta makes no commit for a MERGE that
  changes nothing, so the feed checked is that of the commits after the target was written.
  The analysis-error trait is ``ANALYSIS_ERRORS`` (error class and message parameters), then the two
  special-character path tests.
- ``MergeIntoDVsSuite.scala``: the two operation-metrics tests (``numTargetDeletionVectors*`` etc.)
  with ``delta.enableDeletionVectors`` and ``spark.databricks.delta.merge.deletionVectors.persistent``.
- ``python/delta/tests/test_deltatable.py``: ``test_merge`` (every builder form, as ``PY_MERGES``, and
  its bad-argument checks, as ``PY_BAD_ARGS``) and ``test_merge_with_inconsistent_sessions``.

Not ported: Delta's "paths are not joined correctly" DV test (it calls Delta-internal bitmap builders
with a corrupted file list, which has no deltamerge counterpart), the column-mapping and name-based
generated variants (column mapping runs the shared conformance cases on mapped targets instead,
``tests/conformance``; tables here are path based) and the
predicate-pushdown on/off variants (a Delta-internal optimizer switch).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.pool import ThreadPool
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.functions import col, expr
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

CDF = "delta.enableChangeDataFeed"
DVS = "delta.enableDeletionVectors"
INSERT_ONLY = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
DV_PERSISTENT = "spark.databricks.delta.merge.deletionVectors.persistent"
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"


# --- clause helpers (Delta's MergeIntoTestUtils: one WHEN clause each) ---------------------------------


def _when(kind: str, condition: str | None, action: str) -> str:
    cond = f" AND {condition}" if condition is not None else ""
    return f"WHEN {kind}{cond} THEN {action}"


def update(set_: str, condition: str | None = None) -> str:
    return _when("MATCHED", condition, "UPDATE SET " + set_)


def delete(condition: str | None = None) -> str:
    return _when("MATCHED", condition, "DELETE")


def insert(values: str, condition: str | None = None) -> str:
    return _when("NOT MATCHED", condition, "INSERT " + values)


def update_nmbs(set_: str, condition: str | None = None) -> str:
    return _when("NOT MATCHED BY SOURCE", condition, "UPDATE SET " + set_)


def delete_nmbs(condition: str | None = None) -> str:
    return _when("NOT MATCHED BY SOURCE", condition, "DELETE")


def _statement(target: str, source: str, on: str, clauses: tuple[str, ...]) -> str:
    return "\n".join([f"MERGE INTO {target}", f"USING {source}", f"ON {on}", *clauses])


def _multiset(rows: Any) -> Counter:
    return Counter(tuple(r) for r in rows)


def _version(path: str) -> int:
    return deltamerge.io.snapshot_for(path).version


KEY_VALUE_NOT_NULL = StructType(
    [StructField("key", IntegerType(), False), StructField("value", IntegerType(), False)]
)


# --- MergeIntoNotMatchedBySourceSuite: CDC Part1 / Part2 ---------------------------------------------


@dataclass(frozen=True)
class Nmbs:
    name: str
    source: list[tuple[int, int]]
    target: list[tuple[int, int]]
    on: str
    clauses: tuple[str, ...]
    table: list[tuple[int, int]]
    cdf: list[tuple[int, int, str]]


def _updates(*pairs: tuple[int, int, int]) -> list[tuple[int, int, str]]:
    """(key, before, after) -> the pre- and postimage rows of one update."""
    out: list[tuple[int, int, str]] = []
    for key, before, after in pairs:
        out += [(key, before, "update_preimage"), (key, after, "update_postimage")]
    return out


NMBS: list[Nmbs] = [
    # Part 1
    Nmbs(
        "all 3 types of match clauses without conditions",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(2, 20), (1, 10), (5, 50)],
        on="s.key = t.key",
        clauses=(update("*"), insert("*"), delete_nmbs()),
        table=[(0, 0), (1, 1), (5, 5)],
        cdf=[(0, 0, "insert"), *_updates((1, 10, 1)), (2, 20, "delete"), *_updates((5, 50, 5))],
    ),
    Nmbs(
        "all 3 types of match clauses with conditions",
        source=[(0, 0), (1, 1), (5, 5), (6, 6)],
        target=[(1, 10), (2, 20), (5, 50), (7, 70)],
        on="s.key = t.key",
        clauses=(update("*", "t.value < 30"), insert("*", "s.value < 4"), delete_nmbs("t.value > 40")),
        table=[(0, 0), (1, 1), (2, 20), (5, 50)],
        cdf=[(0, 0, "insert"), *_updates((1, 10, 1)), (7, 70, "delete")],
    ),
    Nmbs(
        "unconditional delete only when not matched by source",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(2, 20), (1, 10), (5, 50), (6, 60)],
        on="s.key = t.key",
        clauses=(delete_nmbs(),),
        table=[(1, 10), (5, 50)],
        cdf=[(2, 20, "delete"), (6, 60, "delete")],
    ),
    Nmbs(
        "conditional delete only when not matched by source",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(1, 10), (2, 20), (5, 50), (6, 60)],
        on="s.key = t.key",
        clauses=(delete_nmbs("t.value > 40"),),
        table=[(1, 10), (2, 20), (5, 50)],
        cdf=[(6, 60, "delete")],
    ),
    Nmbs(
        "delete only matched and not matched by source",
        source=[(1, 1), (2, 2), (5, 5), (6, 6)],
        target=[(1, 10), (2, 20), (3, 30), (4, 40)],
        on="s.key = t.key",
        clauses=(delete("s.value % 2 = 0"), delete_nmbs("t.value % 20 = 0")),
        table=[(1, 10), (3, 30)],
        cdf=[(2, 20, "delete"), (4, 40, "delete")],
    ),
    Nmbs(
        "unconditionally delete matched and not matched by source",
        source=[(0, 0), (1, 1), (5, 5), (6, 6)],
        target=[(1, 10), (2, 20), (5, 50)],
        on="s.key = t.key",
        clauses=(delete(), delete_nmbs()),
        table=[],
        cdf=[(1, 10, "delete"), (2, 20, "delete"), (5, 50, "delete")],
    ),
    Nmbs(
        "unconditional not matched by source update",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(1, 10), (2, 20), (4, 40), (5, 50)],
        on="s.key = t.key",
        clauses=(update_nmbs("t.value = t.value + 1"),),
        table=[(1, 10), (2, 21), (4, 41), (5, 50)],
        cdf=_updates((2, 20, 21), (4, 40, 41)),
    ),
    Nmbs(
        "conditional not matched by source update",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(1, 10), (2, 20), (4, 40), (5, 50)],
        on="s.key = t.key",
        clauses=(update_nmbs("t.value = t.value + 1", "t.value = 20"),),
        table=[(1, 10), (2, 21), (4, 40), (5, 50)],
        cdf=_updates((2, 20, 21)),
    ),
    Nmbs(
        "not matched by source update and delete with skipping",
        source=[(0, 0), (1, 1), (2, 2), (5, 5)],
        target=[(1, 10), (2, 20), (4, 40), (5, 50)],
        on="s.key = t.key and t.key > 4",
        clauses=(update_nmbs("t.value = t.value + 1", "t.key = 1"), delete_nmbs("t.key = 4")),
        table=[(1, 11), (2, 20), (5, 50)],
        cdf=[*_updates((1, 10, 11)), (4, 40, "delete")],
    ),
    Nmbs(
        "matched delete and not matched by source update with skipping",
        source=[(0, 0), (1, 1), (2, 2), (5, 5), (6, 6)],
        target=[(1, 10), (2, 20), (4, 40), (5, 50), (6, 60)],
        on="s.key = t.key and t.key > 4",
        clauses=(delete("t.key = 5"), update_nmbs("t.value = t.value + 1", "t.key = 1")),
        table=[(1, 11), (2, 20), (4, 40), (6, 60)],
        cdf=[*_updates((1, 10, 11)), (5, 50, "delete")],
    ),
    # Part 2
    Nmbs(
        "not matched by source update + delete clauses",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(1, 10), (2, 20), (7, 70)],
        on="s.key = t.key",
        clauses=(delete_nmbs("t.value % 20 = 0"), update_nmbs("t.value = t.value + 1")),
        table=[(1, 10), (7, 71)],
        cdf=[(2, 20, "delete"), *_updates((7, 70, 71))],
    ),
    Nmbs(
        "unconditional not matched by source update + not matched insert",
        source=[(0, 0), (1, 1), (4, 4), (5, 5)],
        target=[(1, 10), (2, 20), (4, 40), (7, 70)],
        on="s.key = t.key",
        clauses=(insert("*"), update_nmbs("t.value = t.value + 1")),
        table=[(0, 0), (1, 10), (2, 21), (4, 40), (5, 5), (7, 71)],
        cdf=[(0, 0, "insert"), *_updates((2, 20, 21)), (5, 5, "insert"), *_updates((7, 70, 71))],
    ),
    Nmbs(
        "not matched by source delete + not matched insert",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(1, 10), (2, 20), (7, 70)],
        on="s.key = t.key",
        clauses=(insert("*"), delete_nmbs("t.value % 20 = 0")),
        table=[(0, 0), (1, 10), (5, 5), (7, 70)],
        cdf=[(0, 0, "insert"), (2, 20, "delete"), (5, 5, "insert")],
    ),
    Nmbs(
        "multiple not matched by source clauses",
        source=[(0, 0), (1, 1), (5, 5)],
        target=[(6, 6), (7, 7), (8, 8), (9, 9), (10, 10), (11, 11)],
        on="s.key = t.key",
        clauses=(
            update_nmbs("t.value = t.value + 5", "t.key % 6 = 0"),
            update_nmbs("t.value = t.value + 4", "t.key % 6 = 1"),
            update_nmbs("t.value = t.value + 3", "t.key % 6 = 2"),
            update_nmbs("t.value = t.value + 2", "t.key % 6 = 3"),
            update_nmbs("t.value = t.value + 1", "t.key % 6 = 4"),
            delete_nmbs(),
        ),
        table=[(6, 11), (7, 11), (8, 11), (9, 11), (10, 11)],
        cdf=[*_updates((6, 6, 11), (7, 7, 11), (8, 8, 11), (9, 9, 11), (10, 10, 11)), (11, 11, "delete")],
    ),
    Nmbs(
        "not matched by source update + conditional insert",
        source=[(1, 1), (0, 2), (5, 5)],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(insert("*", "s.value % 2 = 0"), update_nmbs("t.value = t.value + 1")),
        table=[(0, 2), (2, 3), (1, 4), (7, 4)],
        cdf=[(0, 2, "insert"), *_updates((2, 2, 3), (7, 3, 4))],
    ),
    Nmbs(
        "not matched by source delete + conditional insert",
        source=[(1, 1), (0, 2), (5, 5)],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(insert("*", "s.value % 2 = 0"), delete_nmbs("t.value > 2")),
        table=[(0, 2), (2, 2), (1, 4)],
        cdf=[(0, 2, "insert"), (7, 3, "delete")],
    ),
    Nmbs(
        "when not matched by source updates all rows",
        source=[(1, 1), (0, 2), (5, 5)],
        target=[(3, 3), (4, 4), (6, 6), (7, 7), (8, 8), (9, 9)],
        on="s.key = t.key",
        clauses=(update_nmbs("t.value = t.value + 1"),),
        table=[(3, 4), (4, 5), (6, 7), (7, 8), (8, 9), (9, 10)],
        cdf=_updates((3, 3, 4), (4, 4, 5), (6, 6, 7), (7, 7, 8), (8, 8, 9), (9, 9, 10)),
    ),
    Nmbs(
        "insert only with dummy not matched by source",
        source=[(1, 1), (0, 2), (5, 5)],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(insert("*", "s.value % 2 = 0"), delete_nmbs("t.value > 10")),
        table=[(0, 2), (2, 2), (1, 4), (7, 3)],
        cdf=[(0, 2, "insert")],
    ),
    Nmbs(
        "empty source",
        source=[],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(update_nmbs("value = t.value + 1", "t.key = 2"), delete_nmbs("t.key = 7")),
        table=[(2, 3), (1, 4)],
        cdf=[*_updates((2, 2, 3)), (7, 3, "delete")],
    ),
    Nmbs(
        "empty source delete only",
        source=[],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(delete_nmbs("t.key = 7"),),
        table=[(2, 2), (1, 4)],
        cdf=[(7, 3, "delete")],
    ),
    Nmbs(
        "all 3 clauses - no changes",
        source=[(1, 1), (0, 2), (5, 5)],
        target=[(2, 2), (1, 4), (7, 3)],
        on="s.key = t.key",
        clauses=(update("*", "t.value > 10"), insert("*", "s.value > 10"), delete_nmbs("t.value > 10")),
        table=[(2, 2), (1, 4), (7, 3)],
        cdf=[],
    ),
]

# Scenarios also run with CDF and deletion vectors: each kind of NOT MATCHED BY SOURCE change.
NMBS_WITH_DVS = {
    "all 3 types of match clauses without conditions",
    "not matched by source update and delete with skipping",
    "multiple not matched by source clauses",
    "empty source",
    "all 3 clauses - no changes",
}
assert NMBS_WITH_DVS.issubset(s.name for s in NMBS)


def _nmbs_id(sc: Nmbs, partitioned: bool, props: dict[str, str]) -> str:
    mode = "+".join(k.split("enable")[1] for k in props if props[k] == "true") or "plain"
    return f"{sc.name.replace(' ', '_')}-{'partitioned' if partitioned else 'unpartitioned'}-{mode}"


def _nmbs_variants(index: int) -> list[tuple[bool, dict[str, str]]]:
    """Delta runs every scenario partitioned and not, CDF on and off. To keep this file fast each
    scenario runs two complementary variants, alternating, so that each of the four combinations
    runs for half of the scenarios; ``DELTAMERGE_FULL_MATRIX=1`` runs all four for every scenario."""
    every = [(p, {CDF: c}) for p in (False, True) for c in ("false", "true")]
    if os.environ.get("DELTAMERGE_FULL_MATRIX") == "1":
        return every
    partitioned = index % 2 == 1
    return [(partitioned, {CDF: "true"}), (not partitioned, {CDF: "false"})]


NMBS_CASES = [
    pytest.param(sc, partitioned, props, id=_nmbs_id(sc, partitioned, props))
    for index, sc in enumerate(NMBS)
    for partitioned, props in _nmbs_variants(index)
] + [
    pytest.param(sc, False, {CDF: "true", DVS: "true"}, id=_nmbs_id(sc, False, {CDF: "true", DVS: "true"}))
    for sc in NMBS
    if sc.name in NMBS_WITH_DVS
]


@pytest.mark.parametrize(("sc", "partitioned", "props"), NMBS_CASES)
def test_not_matched_by_source(
    spark, tmp_path, spark_conf, sc: Nmbs, partitioned: bool, props: dict[str, str]
) -> None:
    spark_conf({INSERT_ONLY: "true", DV_PERSISTENT: "true"})
    path = str(tmp_path / "target")
    target = spark.createDataFrame(sc.target, KEY_VALUE_NOT_NULL).coalesce(2)
    deltamerge.write(
        target, path, mode="append", partition_by=["key"] if partitioned else None, configuration=props
    )
    before = _version(path)
    spark.createDataFrame(sc.source, KEY_VALUE_NOT_NULL).createOrReplaceTempView("source")
    try:
        deltamerge.sql(spark, _statement(f"delta.`{path}` t", "source s", sc.on, sc.clauses))
    finally:
        spark.catalog.dropTempView("source")

    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset(sc.table)
    if props[CDF] != "true":
        return
    after = _version(path)
    assert after - before in (0, 1), "a MERGE is one commit (none when it changes nothing)"
    changes: list[Any] = []
    if after > before:
        cdf = deltamerge.read_changes(spark, path, starting_version=after, ending_version=after)
        changes = cdf.drop("_commit_version", "_commit_timestamp").collect()
    assert _multiset(changes) == _multiset(sc.cdf)


# --- MergeIntoNotMatchedBySourceSuite: analysis errors ------------------------------------------------


@dataclass(frozen=True)
class AnalysisCase:
    name: str
    clauses: tuple[str, ...]
    error_class: str
    parameters: tuple[str, ...] = ()  # Delta's message parameters, each must be in the message


ANALYSIS_ERRORS = [
    AnalysisCase(
        "error on multiple not matched by source update clauses without condition",
        (
            update_nmbs("value = 2 * value", "t.key == 3"),
            update_nmbs("value = 3 * value"),
            update_nmbs("value = 4 * value"),
        ),
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
    ),
    AnalysisCase(
        "error on multiple not matched by source update/delete clauses without condition",
        (update_nmbs("value = 2 * value", "t.key == 3"), delete_nmbs(), update_nmbs("value = 4 * value")),
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
    ),
    AnalysisCase(
        "error on non-empty condition following empty condition in not matched by source update clauses",
        (update_nmbs("value = 2 * value"), update_nmbs("value = value", "t.key < 3")),
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
    ),
    AnalysisCase(
        "error on non-empty condition following empty condition in not matched by source delete clauses",
        (delete_nmbs(), delete_nmbs("t.key < 3")),
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
    ),
    AnalysisCase(
        "update not matched condition - unknown reference",
        (update_nmbs("tgtValue = tgtValue + 1", "unknownAttrib > 1"),),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        ("unknownAttrib", "UPDATE condition", "t.key, t.tgtValue"),
    ),
    AnalysisCase(
        "update not matched condition - aggregation function",
        (update_nmbs("tgtValue = tgtValue + 1", "max(0) > 0"),),
        "DELTA_AGGREGATION_NOT_SUPPORTED",
        ("UPDATE condition of MERGE operation", "(condition = (max(0) > 0))"),
    ),
    AnalysisCase(
        "update not matched condition - subquery",
        (update_nmbs("tgtValue = 1", "tgtValue in (select value from t)"),),
        "TABLE_OR_VIEW_NOT_FOUND",
        ("`t`",),
    ),
    AnalysisCase(
        "delete not matched condition - unknown reference",
        (delete_nmbs("unknownAttrib > 1"),),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        ("unknownAttrib", "DELETE condition", "t.key, t.tgtValue"),
    ),
    AnalysisCase(
        "delete not matched condition - aggregation function",
        (delete_nmbs("max(0) > 0"),),
        "DELTA_AGGREGATION_NOT_SUPPORTED",
        ("DELETE condition of MERGE operation", "(condition = (max(0) > 0))"),
    ),
    AnalysisCase(
        "delete not matched condition - subquery",
        (delete_nmbs("tgtValue in (select tgtValue from t)"),),
        "TABLE_OR_VIEW_NOT_FOUND",
        ("`t`",),
    ),
]


def _flat(text: str) -> str:
    return "".join(c for c in text.lower() if c not in " ()")


def _error_class(e: BaseException) -> str | None:
    for getter in ("getCondition", "getErrorClass"):
        if hasattr(e, getter):
            return getattr(e, getter)()
    return None


@pytest.mark.parametrize("case", ANALYSIS_ERRORS, ids=lambda c: c.name.replace(" ", "_"))
def test_not_matched_by_source_analysis_errors(spark, tmp_path, case: AnalysisCase) -> None:
    path = str(tmp_path / "target")
    tgt_schema = StructType(
        [StructField("key", IntegerType(), False), StructField("tgtValue", IntegerType(), False)]
    )
    src_schema = StructType(
        [StructField("key", IntegerType(), False), StructField("srcValue", IntegerType(), False)]
    )
    deltamerge.write(spark.createDataFrame([], tgt_schema), path, mode="append")
    before = _version(path)
    spark.createDataFrame([], src_schema).createOrReplaceTempView("source")
    try:
        with pytest.raises(Exception) as failure:
            deltamerge.sql(spark, _statement(f"delta.`{path}` t", "source s", "s.key = t.key", case.clauses))
    finally:
        spark.catalog.dropTempView("source")
    message = str(failure.value)
    got = _error_class(failure.value)
    assert got in (case.error_class, "DELTA_" + case.error_class), message
    # Expressions are rendered by SQLGlot, not Spark (``MAX(0) > 0`` for ``(max(0) > 0)``): compare
    # the parameters without case, blanks and parentheses.
    flat = _flat(message)
    for parameter in case.parameters:
        assert _flat(parameter) in flat, (parameter, message)
    assert _version(path) == before


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        pytest.param(delete_nmbs(), [0, 2, 4, 6, 8], id="not_matched_by_source_delete"),
        pytest.param(
            update_nmbs("id = t.id * 10"),
            [0, 10, 2, 30, 4, 50, 6, 70, 8, 90],
            id="not_matched_by_source_update",
        ),
    ],
)
def test_special_characters_in_paths(spark, tmp_path, clause: str, expected: list[int]) -> None:
    suffix = ("^", "=") if "DELETE" in clause else ("@", "#")
    source = str(tmp_path / f"sou rce{suffix[0]}")
    target = str(tmp_path / f"tar get{suffix[1]}")
    deltamerge.write(spark.range(0, 10, 2), source)
    deltamerge.write(spark.range(10), target)
    deltamerge.sql(spark, _statement(f"delta.`{target}` t", f"delta.`{source}` s", "t.id = s.id", (clause,)))
    assert sorted(r.id for r in deltamerge.read(spark, target).collect()) == sorted(expected)


# --- MergeIntoDVsSuite: operation metrics ---------------------------------------------------------------

DV_METRICS = (
    "numTargetRowsDeleted",
    "numTargetRowsUpdated",
    "numTargetRowsCopied",
    "numTargetFilesRemoved",
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsRemoved",
    "numTargetDeletionVectorsUpdated",
)


@dataclass(frozen=True)
class DvStep:
    clause: str
    table: list[int]
    metrics: tuple[int, ...]  # in the order of DV_METRICS


@dataclass(frozen=True)
class DvScenario:
    name: str
    source: tuple[int, int, int]  # spark.range(start, end, step) written as a Delta table
    steps: tuple[DvStep, ...]


DV_SCENARIOS = [
    DvScenario(
        "Merge with DVs metrics - Incremental Updates",
        (0, 10, 2),
        (
            # no file is fully rewritten: both target files get a DV
            DvStep(update_nmbs("id = t.id * 10"), [0, 10, 2, 30, 4, 50, 6, 70, 8, 90], (0, 5, 0, 0, 2, 0, 0)),
            # a second DV on the same file: one updated DV, counted as removed + added too
            DvStep(delete("t.id = 2"), [0, 10, 30, 4, 50, 6, 70, 8, 90], (1, 0, 0, 0, 1, 1, 1)),
            # every remaining row of a file deleted: the file goes, with its DV
            DvStep(delete("t.id < 5"), [10, 30, 50, 6, 70, 8, 90], (2, 0, 0, 1, 0, 1, 0)),
        ),
    ),
    DvScenario(
        "Merge with DVs metrics - delete entire file",
        (0, 7, 1),
        (DvStep(update("id = t.id * 10"), [0, 10, 20, 30, 40, 50, 60, 7, 8, 9], (0, 7, 0, 1, 1, 0, 0)),),
    ),
]


@pytest.mark.parametrize("sc", DV_SCENARIOS, ids=lambda s: s.name.replace(" ", "_"))
def test_merge_dv_metrics(spark, tmp_path, spark_conf, sc: DvScenario) -> None:
    spark_conf({DV_PERSISTENT: "true"})
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    deltamerge.write(spark.range(*sc.source), source)
    deltamerge.write(spark.range(0, 10, 1, 2), target, configuration={DVS: "true"})
    assert len(deltamerge.io.snapshot_for(target).files) == 2
    for step in sc.steps:
        deltamerge.sql(
            spark, _statement(f"delta.`{target}` t", f"delta.`{source}` s", "t.id = s.id", (step.clause,))
        )
        assert sorted(r.id for r in deltamerge.read(spark, target).collect()) == sorted(step.table)
        metrics = DeltaTable.forPath(spark, target).history(1).collect()[0]["operationMetrics"]
        got = tuple(int(metrics.get(name, -1)) for name in DV_METRICS)
        assert dict(zip(DV_METRICS, got, strict=True)) == dict(zip(DV_METRICS, step.metrics, strict=True))


# --- python/delta/tests/test_deltatable.py: test_merge ------------------------------------------------

PY_TARGET = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
PY_SOURCE = [("a", -1), ("b", 0), ("e", -5), ("f", -6)]


@dataclass(frozen=True)
class PyMerge:
    name: str
    run: Callable[[DeltaTable, Any], Any]  # (table, source with columns k, v) -> execute() result
    table: list[tuple[Any, ...]]
    columns: tuple[str, ...] = ("key", "value")


def _kv(source: Any) -> Any:
    return source.toDF("key", "value").alias("s")


PY_MERGES = [
    PyMerge(
        "string expressions in merge condition and dicts",
        lambda dt, src: (
            dt.merge(src, "key = k")
            .whenMatchedUpdate(set={"value": "v + 0"})
            .whenNotMatchedInsert(values={"key": "k", "value": "v + 0"})
            .whenNotMatchedBySourceUpdate(set={"value": "value + 0"})
            .execute()
        ),
        [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)],
    ),
    PyMerge(
        "column expressions in merge condition and dicts",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedUpdate(set={"value": col("v") + 0})
            .whenNotMatchedInsert(values={"key": "k", "value": col("v") + 0})
            .whenNotMatchedBySourceUpdate(set={"value": col("value") + 0})
            .execute()
        ),
        [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)],
    ),
    PyMerge(
        "multiple matched update clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedUpdate(condition="key = 'a'", set={"value": "5"})
            .whenMatchedUpdate(set={"value": "0"})
            .execute()
        ),
        [("a", 5), ("b", 0), ("c", 3), ("d", 4)],
    ),
    PyMerge(
        "multiple matched delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedDelete(condition="key = 'a'")
            .whenMatchedDelete()
            .execute()
        ),
        [("c", 3), ("d", 4)],
    ),
    PyMerge(
        "redundant matched update and delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedUpdate(condition="key = 'a'", set={"value": "5"})
            .whenMatchedUpdate(condition="key = 'a'", set={"value": "0"})
            .whenMatchedUpdate(condition="key = 'b'", set={"value": "6"})
            .whenMatchedDelete(condition="key = 'b'")
            .execute()
        ),
        [("a", 5), ("b", 6), ("c", 3), ("d", 4)],
    ),
    PyMerge(
        "interleaved matched update and delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedDelete(condition="key = 'a'")
            .whenMatchedUpdate(condition="key = 'a'", set={"value": "5"})
            .whenMatchedDelete(condition="key = 'b'")
            .whenMatchedUpdate(set={"value": "6"})
            .execute()
        ),
        [("c", 3), ("d", 4)],
    ),
    PyMerge(
        "multiple not matched insert clauses",
        lambda dt, src: (
            dt.alias("t")
            .merge(_kv(src), expr("t.key = s.key"))
            .whenNotMatchedInsert(condition="s.key = 'e'", values={"t.key": "s.key", "t.value": "5"})
            .whenNotMatchedInsertAll()
            .execute()
        ),
        [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5), ("f", -6)],
    ),
    PyMerge(
        "redundant not matched insert clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenNotMatchedInsert(condition="k = 'e'", values={"key": "k", "value": "5"})
            .whenNotMatchedInsert(condition="k = 'e'", values={"key": "k", "value": "6"})
            .whenNotMatchedInsert(condition="k = 'f'", values={"key": "k", "value": "7"})
            .whenNotMatchedInsert(condition="k = 'f'", values={"key": "k", "value": "8"})
            .execute()
        ),
        [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5), ("f", 7)],
    ),
    PyMerge(
        "multiple not matched by source update clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "5"})
            .whenNotMatchedBySourceUpdate(set={"value": "0"})
            .execute()
        ),
        [("a", 1), ("b", 2), ("c", 5), ("d", 0)],
    ),
    PyMerge(
        "multiple not matched by source delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenNotMatchedBySourceDelete(condition="key = 'c'")
            .whenNotMatchedBySourceDelete()
            .execute()
        ),
        [("a", 1), ("b", 2)],
    ),
    PyMerge(
        "redundant not matched by source update and delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "5"})
            .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "0"})
            .whenNotMatchedBySourceUpdate(condition="key = 'd'", set={"value": "6"})
            .whenNotMatchedBySourceDelete(condition="key = 'd'")
            .execute()
        ),
        [("a", 1), ("b", 2), ("c", 5), ("d", 6)],
    ),
    PyMerge(
        "interleaved not matched by source update and delete clauses",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenNotMatchedBySourceDelete(condition="key = 'c'")
            .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": "5"})
            .whenNotMatchedBySourceDelete(condition="key = 'd'")
            .whenNotMatchedBySourceUpdate(set={"value": "6"})
            .execute()
        ),
        [("a", 1), ("b", 2)],
    ),
    PyMerge(
        "string expressions in all conditions and dicts",
        lambda dt, src: (
            dt.merge(src, "key = k")
            .whenMatchedUpdate(condition="k = 'a'", set={"value": "v + 0"})
            .whenMatchedDelete(condition="k = 'b'")
            .whenNotMatchedInsert(condition="k = 'e'", values={"key": "k", "value": "v + 0"})
            .whenNotMatchedBySourceUpdate(condition="key = 'c'", set={"value": col("value") + 0})
            .whenNotMatchedBySourceDelete(condition="key = 'd'")
            .execute()
        ),
        [("a", -1), ("c", 3), ("e", -5)],
    ),
    PyMerge(
        "column expressions in all conditions and dicts",
        lambda dt, src: (
            dt.merge(src, expr("key = k"))
            .whenMatchedUpdate(condition=expr("k = 'a'"), set={"value": col("v") + 0})
            .whenMatchedDelete(condition=expr("k = 'b'"))
            .whenNotMatchedInsert(condition=expr("k = 'e'"), values={"key": "k", "value": col("v") + 0})
            .whenNotMatchedBySourceUpdate(condition=expr("key = 'c'"), set={"value": col("value") + 0})
            .whenNotMatchedBySourceDelete(condition=expr("key = 'd'"))
            .execute()
        ),
        [("a", -1), ("c", 3), ("e", -5)],
    ),
    PyMerge(
        "positional arguments",
        lambda dt, src: (
            dt.merge(src, "key = k")
            .whenMatchedUpdate("k = 'a'", {"value": "v + 0"})
            .whenMatchedDelete("k = 'b'")
            .whenNotMatchedInsert("k = 'e'", {"key": "k", "value": "v + 0"})
            .whenNotMatchedBySourceUpdate("key = 'c'", {"value": "value + 0"})
            .whenNotMatchedBySourceDelete("key = 'd'")
            .execute()
        ),
        [("a", -1), ("c", 3), ("e", -5)],
    ),
    PyMerge(
        "no clause conditions and insertAll/updateAll + aliases",
        lambda dt, src: (
            dt.alias("t")
            .merge(_kv(src), expr("t.key = s.key"))
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        ),
        [("a", -1), ("b", 0), ("c", 3), ("d", 4), ("e", -5), ("f", -6)],
    ),
    PyMerge(
        "string expressions in all clause conditions and insertAll/updateAll + aliases",
        lambda dt, src: (
            dt.alias("t")
            .merge(_kv(src), "s.key = t.key")
            .whenMatchedUpdateAll("s.key = 'a'")
            .whenNotMatchedInsertAll("s.key = 'e'")
            .execute()
        ),
        [("a", -1), ("b", 2), ("c", 3), ("d", 4), ("e", -5)],
    ),
    PyMerge(
        "column expressions in all clause conditions and insertAll/updateAll + aliases",
        lambda dt, src: (
            dt.alias("t")
            .merge(_kv(src), expr("t.key = s.key"))
            .whenMatchedUpdateAll(expr("s.key = 'a'"))
            .whenNotMatchedInsertAll(expr("s.key = 'e'"))
            .execute()
        ),
        [("a", -1), ("b", 2), ("c", 3), ("d", 4), ("e", -5)],
    ),
    PyMerge(
        "schema evolution",
        lambda dt, src: (
            dt.alias("t")
            .merge(src.toDF("key", "extra").alias("s"), expr("t.key = s.key"))
            .whenMatchedUpdate(set={"extra": "-1"})
            .whenNotMatchedInsertAll()
            .withSchemaEvolution()
            .execute()
        ),
        [("a", 1, -1), ("b", 2, -1), ("c", 3, None), ("d", 4, None), ("e", None, -5), ("f", None, -6)],
        ("key", "value", "extra"),
    ),
]


@pytest.mark.parametrize("case", PY_MERGES, ids=lambda c: c.name.replace(" ", "_"))
def test_python_merge(spark, tmp_path, case: PyMerge) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame(PY_TARGET, ["key", "value"]), path)
    source = spark.createDataFrame(PY_SOURCE, ["k", "v"])
    output = case.run(DeltaTable.forPath(spark, path), source)
    out = DeltaTable.forPath(spark, path).toDF()  # reloaded: the schema may have evolved
    assert tuple(out.columns) == case.columns
    assert _multiset(out.collect()) == _multiset(case.table)
    if case is PY_MERGES[0]:
        # 4 updated rows (a, b when matched; c, d when not matched by source), none deleted, e and f inserted
        assert output.collect() == [Row(6, 4, 0, 2)]
        assert output.schema == StructType(
            [
                StructField(name, LongType(), False)
                for name in ("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")
            ]
        )


# (builder call, expected exception type, message regex or None)
PY_BAD_ARGS: list[tuple[str, Callable[[Any, Any], Any], type[Exception], str | None]] = [
    ("merge_source_not_dataframe", lambda dt, s: dt.merge(1, "key = k"), TypeError, "must be DataFrame"),
    (
        "merge_condition_int",
        lambda dt, s: dt.merge(s, 1),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
    (
        "matched_update_dict_as_condition",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate({"value": "v"}),
        ValueError,
        "cannot be None",
    ),
    (
        "matched_update_int",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(1),
        ValueError,
        "cannot be None",
    ),
    (
        "matched_update_no_set",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(condition="key = 'a'"),
        ValueError,
        "cannot be None",
    ),
    (
        "matched_update_int_condition",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(1, {"value": "v"}),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
    (
        "matched_update_set_not_dict",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate("k = 'a'", 1),
        TypeError,
        "must be a dict",
    ),
    (
        "matched_update_int_value",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(set={"value": 1}),
        TypeError,
        "Values of dict in .* must contain only",
    ),
    (
        "matched_update_int_key",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(set={1: ""}),
        TypeError,
        "Keys of dict in .* must contain only",
    ),
    (
        "matched_update_swapped",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedUpdate(set="k = 'a'", condition={"value": 1}),
        TypeError,
        None,
    ),
    (
        "matched_delete_int",
        lambda dt, s: dt.merge(s, "key = k").whenMatchedDelete(1),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
    (
        "insert_dict_as_condition",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert({"value": "v"}),
        ValueError,
        "cannot be None",
    ),
    (
        "insert_int",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(1),
        ValueError,
        "cannot be None",
    ),
    (
        "insert_no_values",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(condition="key = 'a'"),
        ValueError,
        "cannot be None",
    ),
    (
        "insert_int_condition",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(1, {"value": "v"}),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
    (
        "insert_values_not_dict",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert("k = 'a'", 1),
        TypeError,
        "must be a dict",
    ),
    (
        "insert_int_value",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(values={"value": 1}),
        TypeError,
        "Values of dict in .* must contain only",
    ),
    (
        "insert_int_key",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(values={1: "value"}),
        TypeError,
        "Keys of dict in .* must contain only",
    ),
    (
        "insert_swapped",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedInsert(values="k = 'a'", condition={"value": 1}),
        TypeError,
        None,
    ),
    (
        "nmbs_update_dict_as_condition",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate({"value": "value"}),
        ValueError,
        "cannot be None",
    ),
    (
        "nmbs_update_int",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(1),
        ValueError,
        "cannot be None",
    ),
    (
        "nmbs_update_no_set",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(condition="key = 'a'"),
        ValueError,
        "cannot be None",
    ),
    (
        "nmbs_update_int_condition",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(1, {"value": "value"}),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
    (
        "nmbs_update_set_not_dict",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate("key = 'a'", 1),
        TypeError,
        "must be a dict",
    ),
    (
        "nmbs_update_int_value",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(set={"value": 1}),
        TypeError,
        "Values of dict in .* must contain only",
    ),
    (
        "nmbs_update_int_key",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(set={1: ""}),
        TypeError,
        "Keys of dict in .* must contain only",
    ),
    (
        "nmbs_update_swapped",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceUpdate(
            set="key = 'a'", condition={"value": 1}
        ),
        TypeError,
        None,
    ),
    (
        "nmbs_delete_int",
        lambda dt, s: dt.merge(s, "key = k").whenNotMatchedBySourceDelete(1),
        TypeError,
        "must be a Spark SQL Column or a string",
    ),
]


@pytest.fixture(scope="module")
def py_table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bad_args") / "t")
    deltamerge.write(spark.createDataFrame(PY_TARGET, ["key", "value"]), path)
    return DeltaTable.forPath(spark, path), spark.createDataFrame(PY_SOURCE, ["k", "v"])


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [pytest.param(*a[1:], id=a[0]) for a in PY_BAD_ARGS],
)
def test_python_merge_bad_args(py_table, call, error: type[Exception], pattern: str | None) -> None:
    dt, source = py_table
    with pytest.raises(error, match=pattern):
        call(dt, source)


def test_python_merge_with_inconsistent_sessions(spark, tmp_path, spark_conf) -> None:
    source_path, target_path = str(tmp_path / "source"), str(tmp_path / "target")

    def run(session: Any) -> int:
        source_df = session.range(20).withColumn("x", col("id")).withColumn("y", col("id"))
        deltamerge.write(source_df, source_path, mode="overwrite")
        deltamerge.write(session.range(1).withColumn("x", col("id")), target_path, mode="overwrite")
        target = DeltaTable.forPath(session, target_path)
        source = deltamerge.read(session, source_path).alias("s")
        target.alias("t").merge(source, "t.id = s.id").whenMatchedUpdate(
            set={"t.x": "t.x + 1"}
        ).whenNotMatchedInsertAll().execute()
        return deltamerge.read(session, target_path).count()

    spark_conf({AUTO_MERGE: "true"})
    with ThreadPool(3) as pool:
        assert pool.starmap(run, [(spark,)]) == [20]
    assert deltamerge.read(spark, target_path).columns == ["id", "x", "y"]
    assert os.path.isdir(os.path.join(target_path, "_delta_log"))
