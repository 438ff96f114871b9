"""Delta Lake's MERGE change-data-feed suite (delta-io/delta ``MergeCDCSuite.scala``), as data.

Each ``Scenario`` is one Delta test: the target rows are appended to a new table with
``delta.enableChangeDataFeed`` on, the source becomes the temp view ``source``, and the MERGE runs as
SQL (``MERGE INTO delta.`path` t USING source s ON ... WHEN ...``), like Delta's SQL, path-based
generated suites. Then the table must hold ``table`` and the change data feed of the MERGE commit
must hold ``cdf`` (rows are the table's columns then ``_change_type``; ``_commit_version`` and
``_commit_timestamp`` are dropped), both compared as multisets. Scenarios with ``error`` must fail with
a message containing it.

Every scenario runs with the change data feed only (Delta's ``MergeCDCSQLPathBasedCDCOnSuite``); the
scenarios in ``WITH_DVS`` run again with deletion vectors enabled as well (Delta's ``...CDCOnDVs...``
generated suites run all of them; a subset keeps this file fast). With DVs Delta makes no commit for
a MERGE that changes nothing, so the change feed read here is that of the commit(s) made after the
target was set up, which is empty in that case too.

Ported from the Scala suite: all of its tests. Not ported: the ``readcdcv2`` generated variants (the
Spark 4.2 ``CHANGES`` clause read path with row tracking; row tracking under MERGE is ported in
``test_merge_row_tracking_delta.py``) and the
predicate-pushdown on/off variants (a Delta-internal optimizer switch with no deltamerge counterpart).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import (
    IntegerType,
    NullType,
    StringType,
    StructField,
    StructType,
)

import deltamerge
from delta_clauses import delete, insert, update  # tests/ is on sys.path
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
DROP_NULL_COLUMNS = "spark.databricks.delta.createDataFrame.dropNullColumns"

CDF_ONLY = {"delta.enableChangeDataFeed": "true"}
CDF_AND_DVS = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}


# --- schemas (Scala ``toDF`` of tuples: Int columns are NOT NULL, String / Integer / tuples nullable) --


def _ints(*names: str) -> StructType:
    return StructType([StructField(n, IntegerType(), False) for n in names])


KEY_N = _ints("key", "n")
KEY_N_TEXT = StructType([*KEY_N.fields, StructField("text", StringType(), True)])
KEY_N_VOID = StructType([*KEY_N.fields, StructField("text", NullType(), True)])
KEY_N_S_VOID = StructType([*KEY_N.fields, StructField("s", NullType(), True)])
KEY_N_S_STRUCT = StructType(
    [
        *KEY_N.fields,
        StructField(
            "s",
            StructType([StructField("_1", IntegerType(), False), StructField("_2", NullType(), True)]),
            True,
        ),
    ]
)
VALUE = _ints("value")
COL1_COL2 = _ints("col1", "col2")
KEY_VALUE = _ints("key", "value")
KEY_VAL = StructType([StructField("key", IntegerType(), False), StructField("val", StringType(), True)])
KEY_TARGETVAL = StructType(
    [StructField("key", IntegerType(), False), StructField("targetVal", StringType(), True)]
)
KEY_SRCVAL = StructType([StructField("key", IntegerType(), False), StructField("srcVal", StringType(), True)])


@dataclass(frozen=True)
class Scenario:
    name: str
    target_schema: StructType
    target: list[tuple[Any, ...]]
    source_schema: StructType
    source: list[tuple[Any, ...]]
    clauses: tuple[str, ...]
    condition: str = "s.key = t.key"
    table: list[tuple[Any, ...]] | None = None
    cdf: list[tuple[Any, ...]] | None = None
    error: str | None = None
    confs: dict[str, str] = field(default_factory=dict)
    # The target table is first created empty with this schema (Delta's ``targetTableSchema``).
    create_schema: StructType | None = None


def simple(
    name: str,
    *,
    delete_when: str | None = None,
    update_set: str | None = None,
    insert_values: str | None = None,
    **kw: Any,
) -> Scenario:
    """Delta's ``testMergeCdc``: at most one clause of each kind, in the order delete, update, insert."""
    clauses: list[str] = []
    if delete_when is not None:
        clauses.append(delete(delete_when))
    if update_set is not None:
        clauses.append(update(update_set))
    if insert_values is not None:
        clauses.append(insert(insert_values))
    return Scenario(name=name, clauses=tuple(clauses), **kw)


EVOLVE = {AUTO_MERGE: "true"}
EVOLVE_KEEP_VOID = {AUTO_MERGE: "true", DROP_NULL_COLUMNS: "false"}

T3 = [(0, 0), (1, 10), (3, 30)]
T5 = [(0, 0), (1, 10), (3, 30), (4, 40), (6, 60)]
S6 = [(1, 1), (2, 2), (3, -1), (4, 4), (5, 0), (6, 0)]
S3_TEXT = [(1, 1, "a"), (2, 2, "b"), (3, -1, "c")]

SCENARIOS: list[Scenario] = [
    simple(
        "insert only",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N,
        source=[(1, 1), (2, 2)],
        insert_values="*",
        table=[(0, 0), (1, 10), (2, 2), (3, 30)],
        cdf=[(2, 2, "insert")],
    ),
    simple(
        "update only",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N,
        source=[(1, 1), (2, 2)],
        update_set="*",
        table=[(0, 0), (1, 1), (3, 30)],
        cdf=[(1, 10, "update_preimage"), (1, 1, "update_postimage")],
    ),
    simple(
        "delete only",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N,
        source=[(1, 1), (2, 2)],
        delete_when="true",
        table=[(0, 0), (3, 30)],
        cdf=[(1, 10, "delete")],
    ),
    simple(
        "delete only with duplicate matches",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N,
        source=[(1, 1), (1, 2), (2, 3)],
        delete_when="true",  # a (trivially true) condition: duplicates are not deduplicated
        error="attempted to modify the same\ntarget row",
    ),
    simple(
        "update + delete + insert together",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N,
        source=[(1, 1), (2, 2), (3, -1)],
        insert_values="*",
        update_set="*",
        delete_when="s.key = 3",
        table=[(0, 0), (1, 1), (2, 2)],
        cdf=[(2, 2, "insert"), (1, 10, "update_preimage"), (1, 1, "update_postimage"), (3, 30, "delete")],
    ),
    Scenario(
        "unlimited clauses - conditional final branch",
        target_schema=KEY_N,
        target=T5,
        source_schema=KEY_N,
        source=S6,
        clauses=(
            update("*", "s.key = 1"),
            update("n = 400", "s.key = 4"),
            delete("s.key = 3"),
            delete("s.key = 6"),
            insert("*", "s.key = 2"),
            insert("(key, n) VALUES (50, 50)", "s.key = 5"),
        ),
        table=[(0, 0), (1, 1), (2, 2), (4, 400), (50, 50)],
        cdf=[
            (2, 2, "insert"),
            (50, 50, "insert"),
            (1, 10, "update_preimage"),
            (1, 1, "update_postimage"),
            (4, 40, "update_preimage"),
            (4, 400, "update_postimage"),
            (3, 30, "delete"),
            (6, 60, "delete"),
        ],
    ),
    Scenario(
        "unlimited clauses - unconditional final branch",
        target_schema=KEY_N,
        target=T5,
        source_schema=KEY_N,
        source=S6,
        clauses=(
            update("*", "s.key = 1"),
            update("n = 400", "s.key = 4"),
            delete("s.key = 3"),
            delete(),
            insert("*", "s.key = 2"),
            insert("(key, n) VALUES (50, 50)"),
        ),
        table=[(0, 0), (1, 1), (2, 2), (4, 400), (50, 50)],
        cdf=[
            (2, 2, "insert"),
            (50, 50, "insert"),
            (1, 10, "update_preimage"),
            (1, 1, "update_postimage"),
            (4, 40, "update_preimage"),
            (4, 400, "update_postimage"),
            (3, 30, "delete"),
            (6, 60, "delete"),
        ],
    ),
    simple(
        "basic schema evolution",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N_TEXT,
        source=S3_TEXT,
        insert_values="*",
        update_set="*",
        delete_when="s.key = 3",
        table=[(0, 0, None), (1, 1, "a"), (2, 2, "b")],
        cdf=[
            (1, 10, None, "update_preimage"),
            (1, 1, "a", "update_postimage"),
            (2, 2, "b", "insert"),
            (3, 30, None, "delete"),
        ],
        confs=EVOLVE,
    ),
    # Delta runs the two VOID scenarios on Spark 4.1+ only (nullTypeColumnsSupported); this is 4.x.
    simple(
        "schema evolution from void",
        target_schema=KEY_N_VOID,
        target=[(0, 0, None), (1, 10, None), (3, 30, None)],
        source_schema=KEY_N_TEXT,
        source=S3_TEXT,
        insert_values="*",
        update_set="*",
        delete_when="s.key = 3",
        table=[(0, 0, None), (1, 1, "a"), (2, 2, "b")],
        cdf=[
            (1, 10, None, "update_preimage"),
            (1, 1, "a", "update_postimage"),
            (2, 2, "b", "insert"),
            (3, 30, None, "delete"),
        ],
        confs=EVOLVE_KEEP_VOID,
    ),
    simple(
        "schema evolution from void to struct with void",
        target_schema=KEY_N_S_VOID,
        target=[(0, 0, None), (1, 10, None), (3, 30, None)],
        source_schema=KEY_N_S_STRUCT,
        source=[(1, 1, (1, None)), (2, 2, (2, None)), (3, -1, (3, None))],
        insert_values="*",
        update_set="*",
        delete_when="s.key = 3",
        table=[(0, 0, None), (1, 1, (1, None)), (2, 2, (2, None))],
        cdf=[
            (1, 10, None, "update_preimage"),
            (1, 1, (1, None), "update_postimage"),
            (2, 2, (2, None), "insert"),
            (3, 30, None, "delete"),
        ],
        confs=EVOLVE_KEEP_VOID,
    ),
    Scenario(
        "schema evolution with non-nullable schema",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N_TEXT,
        source=S3_TEXT,
        condition="t.key = s.key",
        clauses=(delete("s.key = 3"), update("*"), insert("*")),
        table=[(0, 0, None), (1, 1, "a"), (2, 2, "b")],
        cdf=[
            (1, 10, None, "update_preimage"),
            (1, 1, "a", "update_postimage"),
            (2, 2, "b", "insert"),
            (3, 30, None, "delete"),
        ],
        confs=EVOLVE,
        create_schema=KEY_N,  # key INT NOT NULL, n INT NOT NULL
    ),
    Scenario(
        "schema evolution with non-nullable schema - matched only",
        target_schema=KEY_N,
        target=T3,
        source_schema=KEY_N_TEXT,
        source=S3_TEXT,
        condition="t.key = s.key",
        clauses=(delete("s.key = 3"), update("*")),
        table=[(0, 0, None), (1, 1, "a")],
        cdf=[
            (1, 10, None, "update_preimage"),
            (1, 1, "a", "update_postimage"),
            (3, 30, None, "delete"),
        ],
        confs=EVOLVE,
        create_schema=KEY_N,
    ),
    Scenario(
        "unconditional delete only with duplicate matches",
        target_schema=VALUE,
        target=[(0,), (1,)],
        source_schema=VALUE,
        source=[(1,), (1,)],
        condition="t.value = s.value",
        clauses=(delete(),),
        table=[(0,)],
        cdf=[(1, "delete")],
    ),
    Scenario(
        "unconditional delete only with duplicate matches without duplicates rows in the source",
        target_schema=VALUE,
        target=[(0,)],
        source_schema=COL1_COL2,
        source=[(0, 0), (0, 1)],
        condition="t.value = s.col1",
        clauses=(delete(),),
        table=[],
        cdf=[(0, "delete")],
    ),
    Scenario(
        "unconditional delete only with duplicate matches with duplicates in the target",
        target_schema=VALUE,
        target=[(0,), (1,), (1,)],
        source_schema=VALUE,
        source=[(1,), (1,)],
        condition="t.value = s.value",
        clauses=(delete(),),
        table=[(0,)],
        cdf=[(1, "delete"), (1, "delete")],
    ),
    Scenario(
        "unconditional delete only with target-only merge condition",
        target_schema=VALUE,
        target=[(0,), (1,)],
        source_schema=VALUE,
        source=[(0,), (1,)],
        condition="t.value > 0",
        clauses=(delete(),),
        table=[(0,)],
        cdf=[(1, "delete")],
    ),
    Scenario(
        "unconditional delete only with target-only merge condition with duplicates in the target",
        target_schema=VALUE,
        target=[(0,), (1,), (1,)],
        source_schema=VALUE,
        source=[(0,), (1,)],
        condition="t.value > 0",
        clauses=(delete(),),
        table=[(0,)],
        cdf=[(1, "delete"), (1, "delete")],
    ),
    Scenario(
        "unconditional delete only with source-only merge condition",
        target_schema=VALUE,
        target=[(0,), (1,)],
        source_schema=VALUE,
        source=[(0,), (1,)],
        condition="s.value < 2",
        clauses=(delete(),),
        table=[],
        cdf=[(0, "delete"), (1, "delete")],
    ),
    Scenario(
        "unconditional delete only with source-only merge condition with duplicates in the target",
        target_schema=VALUE,
        target=[(0,), (1,), (1,)],
        source_schema=VALUE,
        source=[(0,), (1,)],
        condition="s.value < 2",
        clauses=(delete(),),
        table=[],
        cdf=[(0, "delete"), (1, "delete"), (1, "delete")],
    ),
    Scenario(
        "unconditional delete with duplicate matches + insert",
        target_schema=KEY_VALUE,
        target=[(1, 1), (2, 2)],
        source_schema=KEY_VALUE,
        source=[(1, 10), (1, 100), (3, 30), (3, 300)],
        clauses=(delete(), insert("(key, value) VALUES (s.key, s.value)")),
        table=[(2, 2), (3, 30), (3, 300)],
        cdf=[(1, 1, "delete"), (3, 30, "insert"), (3, 300, "insert")],
    ),
    Scenario(
        "unconditional delete with duplicate matches + insert with duplicate rows",
        target_schema=KEY_VALUE,
        target=[(1, 1), (2, 2)],
        source_schema=KEY_VALUE,
        source=[(1, 10), (1, 100), (3, 30), (3, 300), (3, 300)],
        clauses=(delete(), insert("(key, value) VALUES (s.key, s.value)")),
        table=[(2, 2), (3, 30), (3, 300), (3, 300)],
        cdf=[(1, 1, "delete"), (3, 30, "insert"), (3, 300, "insert"), (3, 300, "insert")],
    ),
    Scenario(
        "unconditional delete with duplicate matches + insert a duplicate of the unmatched target rows",
        target_schema=VALUE,
        target=[(1,), (2,)],
        source_schema=COL1_COL2,
        source=[(1, 10), (1, 100), (3, 2)],
        condition="s.col1 = t.value",
        clauses=(delete(), insert("(value) VALUES (col2)")),
        table=[(2,), (2,)],
        cdf=[(1, "delete"), (2, "insert")],
    ),
    Scenario(
        "all conditions failed for all rows",
        target_schema=KEY_VAL,
        target=[(1, "a"), (2, "b")],
        source_schema=KEY_VAL,
        source=[(1, "t"), (2, "u")],
        clauses=(update("t.val = s.val", "s.key = 10"), insert("*", "s.key = 11")),
        table=[(1, "a"), (2, "b")],
        cdf=[],
    ),
    Scenario(
        "unlimited clauses schema evolution",
        # keys 1, 2 updated; 3, 4 deleted; 5 untouched; 6, 7 inserted; 8 matches no clause
        target_schema=KEY_TARGETVAL,
        target=[(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")],
        source_schema=KEY_SRCVAL,
        source=[(1, "t"), (2, "u"), (3, "v"), (4, "w"), (6, "x"), (7, "y"), (8, "z")],
        clauses=(
            update("targetVal = srcVal", "s.key = 1"),
            update("*", "s.key = 2"),
            delete("s.key = 3"),
            delete("s.key = 4"),
            insert("(key) VALUES (s.key)", "s.key = 6"),
            insert("*", "s.key = 7"),
        ),
        table=[(1, "t", None), (2, "b", "u"), (5, "e", None), (6, None, None), (7, None, "y")],
        cdf=[
            (1, "a", None, "update_preimage"),
            (1, "t", None, "update_postimage"),
            (2, "b", None, "update_preimage"),
            (2, "b", "u", "update_postimage"),
            (3, "c", None, "delete"),
            (4, "d", None, "delete"),
            (6, None, None, "insert"),
            (7, None, "y", "insert"),
        ],
        confs=EVOLVE,
    ),
]


def _norm(value: Any) -> Any:
    """Rows and structs become plain tuples, recursively, so that they hash and compare as data."""
    if isinstance(value, (tuple, list)):
        return tuple(_norm(v) for v in value)
    return value


def _multiset(rows: Any) -> Counter:
    return Counter(_norm(r) for r in rows)


def _version(path: str) -> int:
    return deltamerge.io.snapshot_for(path).version


# Scenarios also run with deletion vectors: each kind of change the DV write path handles differently.
WITH_DVS = {
    "update + delete + insert together",
    "unconditional delete only with duplicate matches with duplicates in the target",
    "unconditional delete with duplicate matches + insert with duplicate rows",
    "all conditions failed for all rows",
    "unlimited clauses schema evolution",
}
assert WITH_DVS.issubset(s.name for s in SCENARIOS)


def _id(sc: Scenario, mode: str) -> str:
    return f"{sc.name.replace(' ', '_')}-{mode}"


CASES = [pytest.param(sc, CDF_ONLY, id=_id(sc, "cdf")) for sc in SCENARIOS] + [
    pytest.param(sc, CDF_AND_DVS, id=_id(sc, "cdf+dvs")) for sc in SCENARIOS if sc.name in WITH_DVS
]


@pytest.mark.parametrize(("sc", "props"), CASES)
def test_merge_cdc(spark, tmp_path, spark_conf, sc: Scenario, props: dict[str, str]) -> None:
    spark_conf(sc.confs)
    path = str(tmp_path / "target")
    target = spark.createDataFrame(sc.target, sc.target_schema)
    if sc.create_schema is not None:
        builder = DeltaTable.create(spark).location(path).addColumns(sc.create_schema)
        for key, value in props.items():
            builder = builder.property(key, value)
        builder.execute()
        deltamerge.write(target, path, mode="append")
    else:
        deltamerge.write(target, path, mode="append", configuration=props)
    before = _version(path)

    spark.createDataFrame(sc.source, sc.source_schema).createOrReplaceTempView("source")
    statement = "\n".join(
        [f"MERGE INTO delta.`{path}` t", "USING source s", f"ON {sc.condition}", *sc.clauses]
    )
    try:
        if sc.error is not None:
            with pytest.raises(Exception) as failure:
                deltamerge.sql(spark, statement)
            assert sc.error in str(failure.value)
            return
        deltamerge.sql(spark, statement)
    finally:
        spark.catalog.dropTempView("source")

    assert _multiset(deltamerge.read(spark, path).collect()) == _multiset(sc.table)

    after = _version(path)
    assert after - before in (0, 1), "a MERGE is one commit (none when it changes nothing)"
    if not sc.cdf and after > before:  # a change feed with no rows is no change-data file
        with open(os.path.join(path, "_delta_log", f"{after:020d}.json")) as log:
            actions = [json.loads(line) for line in log if line.strip()]
        assert not any("cdc" in a for a in actions), "an empty _change_data file was committed"
    if after == before:
        changes: list[Any] = []
    else:
        cdf = deltamerge.read_changes(spark, path, starting_version=after, ending_version=after)
        changes = cdf.drop("_commit_version", "_commit_timestamp").collect()
    assert _multiset(changes) == _multiset(sc.cdf)
