"""Delta Lake's miscellaneous, analysis-error, SQL and Scala-API MERGE tests, as data.

Ported from delta-io/delta ``MergeIntoSuiteBase.scala`` (traits ``MergeIntoAnalysisExceptionTests``,
``MergeIntoSuiteBaseMiscTests``, ``MergeIntoNullTypeTests``), ``MergeIntoSQLSuite.scala``
(``MergeIntoSQLTests``, ``MergeIntoSQLNondeterministicOrderTests``) and ``MergeIntoScalaSuite.scala``
(``MergeIntoScalaTests``).

Each ``Case`` is one Delta test: the target rows are written to a new path-based table (partitioned
and coalesced as Delta's helpers do), the source rows become the temp view ``source`` and the
case's MERGE statement(s) run. Mode ``sql`` runs them as SQL (``MERGE INTO delta.`path` t USING ...``,
Delta's SQL path-based suites), mode ``scala`` through the ``DeltaTable`` merge builder, turning each
clause into builder calls the way Delta's Scala suites do (``UPDATE SET a = x, b = y`` becomes
``whenMatchedUpdate(set={"a": "x", "b": "y"})``, a source ``(SELECT ...) s`` becomes
``spark.sql(...).alias("s")``), and mode ``dvs`` is ``sql`` with deletion vectors and the change data
feed enabled on the target (Delta's ``...CDCOnDVs...`` suites; run for a subset to keep this fast).
Then the table must hold ``result`` (a multiset), or the statement must fail with ``error_class`` and
message fragments ``error`` (compared case-insensitively, as Delta's ``errorContains``). Metrics and
data-skipping checks read the MERGE commit's ``operationMetrics`` and ``explain()``'s files before /
after skipping (Delta reads the same numbers from its usage logs and scan reports). Builder-only
tests (Columns, pre-resolved ``df["col"]`` references, empty maps) are ``ApiCase``s.

Not ported:
- ``merge correctly handle field metadata``: ported to ``tests/spark/test_column_mapping.py``
  (``test_merge_keeps_comments_and_mapping_metadata``).
- ``UDT Data Types - simple and nested``: UDTs defined in Scala.
- ``merge execution is recorded with QueryExecutionListener`` and the exact ``opType`` sets of the
  ``recorded operations`` tests: Delta-internal plan capture and usage-log hooks (their rows, the
  executor and the files touched are checked).
- ``no column is used from source table - column pruning``: its rows are checked; the executed
  plan's scan schema is Spark-plan internals.
- ``Negative case - non-delta target``: ignored in Delta itself.
- ``merge into a dataset temp views with star``: ported to ``tests/spark/test_merge_temp_views.py``;
  ``Update specific column does not work in temp views``: a Delta limitation (see there).
- ``delta merge into clause with invalid data type.``: calls a Delta-internal helper directly.
- The column-mapping and predicate-pushdown generated variants (column mapping runs the shared
  conformance cases on mapped targets instead, ``tests/conformance``; predicate pushdown is a
  Delta-internal optimizer switch), and the name-based variants (deltamerge's names map to the same paths).
- ``merge after schema change``: Delta asserts that the second merge through a stale ``DeltaTable``
  throws (a Delta limitation its comment says should be fixed); deltamerge's ``DeltaTable`` reads
  the newest snapshot on every call, so the second merge is checked to succeed instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
INSERT_ONLY = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
MATCHED_ONLY = "spark.databricks.delta.merge.optimizeMatchedOnlyMerge.enabled"
REPARTITION = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"
MATERIALIZE = "spark.databricks.delta.merge.materializeSource"
FAIL_IF_CHANGED = "spark.databricks.delta.merge.failIfSourceChanged"
COLLECT_STATS = "spark.databricks.delta.stats.collect"
DROP_NULL_COLUMNS = "spark.databricks.delta.createDataFrame.dropNullColumns"
CROSS_JOIN = {"spark.sql.crossJoin.enabled": "true"}
DVS_AND_CDF = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}


# --- clauses (Delta's MergeHelpers) -----------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    kind: str  # "MATCHED", "NOT MATCHED" or "NOT MATCHED BY SOURCE"
    action: str  # "UPDATE SET ...", "DELETE" or "INSERT ..."
    condition: str | None = None

    def sql(self) -> str:
        cond = f" AND {self.condition}" if self.condition is not None else ""
        return f"WHEN {self.kind}{cond} THEN {self.action}"


def update(set_: str, condition: str | None = None) -> Clause:
    return Clause("MATCHED", f"UPDATE SET {set_}", condition)


def delete(condition: str | None = None) -> Clause:
    return Clause("MATCHED", "DELETE", condition)


def insert(values: str, condition: str | None = None) -> Clause:
    return Clause("NOT MATCHED", f"INSERT {values}", condition)


def update_nms(set_: str, condition: str | None = None) -> Clause:
    return Clause("NOT MATCHED BY SOURCE", f"UPDATE SET {set_}", condition)


def delete_nms(condition: str | None = None) -> Clause:
    return Clause("NOT MATCHED BY SOURCE", "DELETE", condition)


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes."""
    out, depth, quote, cur = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    out.append(cur.strip())
    return [p for p in out if p]


def _set_map(text: str) -> dict[str, str]:
    pairs = [p.split("=", 1) for p in _split_top(text)]
    return {k.strip(): v.strip() for k, v in pairs}


def _insert_map(text: str) -> dict[str, str]:
    cols, vals = re.split(r"\bVALUES\b", text, maxsplit=1, flags=re.IGNORECASE)
    names = _split_top(cols.strip()[1:-1])
    exprs = _split_top(vals.strip()[1:-1])
    assert len(names) == len(exprs)
    return dict(zip(names, exprs, strict=True))


def _apply(builder: Any, clause: Clause) -> Any:
    """One clause as builder calls (Delta's ``MergeIntoScalaTestUtils.getMergeBuilder``)."""
    cond = clause.condition
    action = clause.action.strip()
    if action == "DELETE":
        if clause.kind == "MATCHED":
            return builder.whenMatchedDelete(cond)
        return builder.whenNotMatchedBySourceDelete(cond)
    if action.startswith("UPDATE SET"):
        body = action[len("UPDATE SET") :].strip()
        if clause.kind == "MATCHED":
            if body == "*":
                return builder.whenMatchedUpdateAll(cond)
            return builder.whenMatchedUpdate(cond, _set_map(body))
        return builder.whenNotMatchedBySourceUpdate(cond, _set_map(body))
    body = action[len("INSERT") :].strip()
    if body == "*":
        return builder.whenNotMatchedInsertAll(cond)
    return builder.whenNotMatchedInsert(cond, _insert_map(body))


# --- data and cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    rows: list[tuple[Any, ...]]
    ddl: str  # Scala ``toDF`` of Int tuples: NOT NULL; Integer / String / JSON columns: nullable
    query: str | None = None  # a SQL query instead of rows

    def df(self, spark) -> DataFrame:
        if self.query is not None:
            return spark.sql(self.query)
        return spark.createDataFrame(self.rows, self.ddl)


def kv(rows: list[tuple[Any, ...]], k: str = "key", v: str = "value") -> Data:
    return Data(rows, f"{k} int not null, {v} int not null")


@dataclass(frozen=True)
class Step:
    using: str  # SQL text after USING; ``{target}`` is the target table, ``{other}`` a second table
    condition: str
    clauses: tuple[Clause, ...]
    target_alias: str | None = "t"
    cte: str | None = None
    confs: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a check callable sees: the table, the MERGE commit's metrics and the explained plan."""

    spark: Any
    path: str
    metrics: dict[str, str] | None  # None when the MERGE made no commit
    plan: str | None
    mode: str

    def files(self, which: str) -> tuple[int, int]:
        """(files, bytes) of the target ``before`` / ``after`` skipping, from ``explain()``."""
        assert self.plan is not None
        m = re.search(rf"target files {which} skipping: (\d+) \((\d+) bytes\)", self.plan)
        assert m, self.plan
        return int(m.group(1)), int(m.group(2))

    def metric(self, key: str) -> int:
        return 0 if self.metrics is None else int(self.metrics[key])


@dataclass(frozen=True)
class Case:
    name: str
    target: Data
    steps: tuple[Step, ...]
    source: Data | None = None  # the temp view ``source``
    other: Data | None = None  # a second Delta table, ``{other}`` in ``using``
    partition_by: tuple[str, ...] = ()
    coalesce: int | None = None
    result: list[tuple[Any, ...]] | None = None
    result_select: tuple[str, ...] | None = None  # columns / expressions read from the table
    result_where: str | None = None
    returns: tuple[int, ...] | None = None  # the MERGE's result row (affected, updated, deleted, inserted)
    error: tuple[str, ...] | None = None
    error_class: str | None = None
    confs: dict[str, str] = field(default_factory=dict)
    modes: tuple[str, ...] = ("sql", "scala")
    explain: bool = False
    check: Callable[[Outcome], None] | None = None
    xfail: dict[str, str] = field(default_factory=dict)  # mode -> reason
    dirs: tuple[str, str] = ("target", "other")  # directory names of the target and ``{other}``
    skip: str | None = None  # deltamerge cannot express the case at all
    target_subdir: str = ""  # MERGE INTO delta.`<target><target_subdir>`


def one(
    name: str,
    target: Data,
    using: str,
    condition: str,
    *clauses: Clause,
    target_alias: str | None = "t",
    **kw: Any,
) -> Case:
    return Case(name, target, (Step(using, condition, clauses, target_alias),), **kw)


def basic(
    name: str,
    target: Data,
    using: str,
    condition: str,
    update_set: str,
    insert_values: str,
    target_alias: str = "t",
    **kw: Any,
) -> Case:
    """Delta's ``executeMerge(target, source, condition, update, insert)``."""
    return one(
        name,
        target,
        using,
        condition,
        update(update_set),
        insert(insert_values),
        target_alias=target_alias,
        **kw,
    )


# --- MergeIntoAnalysisExceptionTests ------------------------------------------------------------------

AE_TARGET = kv([], "key", "tgtValue")
AE_SOURCE = kv([], "key", "srcValue")


def analysis(name: str, clause: Clause, error_class: str, *fragments: str, xfail: str | None = None) -> Case:
    return one(
        f"analysis errors - {name}",
        AE_TARGET,
        "source s",
        "s.key = t.key",
        clause,
        source=AE_SOURCE,
        error_class=error_class,
        error=fragments,
        xfail={"sql": xfail, "scala": xfail} if xfail else {},
    )


def _unresolved(expr: str, clause: str, cols: str) -> str:
    return f"Cannot resolve {expr} in {clause} given columns {cols}."


BOTH_COLS = "t.key, t.tgtValue, s.key, s.srcValue"
INSERT_VALUES = "(key, tgtValue) VALUES (s.key, s.srcValue)"
AMBIGUOUS = ("AMBIGUOUS_REFERENCE", "`key`", "[`s`.`key`, `t`.`key`]")

ANALYSIS_CASES = [
    analysis("update condition - ambiguous reference", update("tgtValue = srcValue", "key > 1"), *AMBIGUOUS),
    analysis(
        "update condition - unknown reference",
        update("tgtValue = srcValue", "unknownAttrib > 1"),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        _unresolved("unknownAttrib", "UPDATE condition", BOTH_COLS),
    ),
    analysis(
        "update condition - aggregation function",
        update("tgtValue = srcValue", "max(0) > 0"),
        "DELTA_AGGREGATION_NOT_SUPPORTED",
        "UPDATE condition of MERGE operation",
        "(condition = (max(0) > 0))",
    ),
    analysis(
        "update condition - subquery",
        update("tgtValue = srcValue", "s.srcValue in (select value from t)"),
        "TABLE_OR_VIEW_NOT_FOUND",
        "`t`",
    ),
    analysis("delete condition - ambiguous reference", delete("key > 1"), *AMBIGUOUS),
    analysis(
        "delete condition - unknown reference",
        delete("unknownAttrib > 1"),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        _unresolved("unknownAttrib", "DELETE condition", BOTH_COLS),
    ),
    analysis(
        "delete condition - aggregation function",
        delete("max(0) > 0"),
        "DELTA_AGGREGATION_NOT_SUPPORTED",
        "DELETE condition of MERGE operation",
        "(condition = (max(0) > 0))",
    ),
    analysis(
        "delete condition - subquery",
        delete("s.srcValue in (select tgtValue from t)"),
        "TABLE_OR_VIEW_NOT_FOUND",
        "`t`",
    ),
    analysis(
        "insert condition - unknown reference",
        insert(INSERT_VALUES, "unknownAttrib > 1"),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        _unresolved("unknownAttrib", "INSERT condition", "s.key, s.srcValue"),
    ),
    analysis(
        "insert condition - reference to target table column",
        insert(INSERT_VALUES, "tgtValue > 1"),
        "DELTA_MERGE_UNRESOLVED_EXPRESSION",
        _unresolved("tgtValue", "INSERT condition", "s.key, s.srcValue"),
    ),
    analysis(
        "insert condition - aggregation function",
        insert(INSERT_VALUES, "max(0) > 0"),
        "DELTA_AGGREGATION_NOT_SUPPORTED",
        "INSERT condition of MERGE operation",
        "(condition = (max(0) > 0))",
    ),
    analysis(
        "insert condition - subquery",
        insert(INSERT_VALUES, "s.srcValue in (select srcValue from s)"),
        "TABLE_OR_VIEW_NOT_FOUND",
        "`s`",
    ),
]


# --- MergeIntoSuiteBaseMiscTests ----------------------------------------------------------------------

T_KEY2 = kv([(2, 2), (1, 4)], "key2", "value")
S_KEY1_OTHERS = Data([(1, 6, "a"), (0, 3, "b")], "key1 int not null, value int not null, others string")
TRG_UPDATE = "trg.key2 = 20 + key1, value = 20 + src.value"
TRG_INSERT = "(trg.key2, value) VALUES (key1 - 10, src.value + 10)"
KEY2_UPDATE = "key2 = 20 + key1, value = 20 + src.value"
KEY2_INSERT = "(key2, value) VALUES (key1 - 10, src.value + 10)"


def _no_changes_when_matched_only(matched_only: bool, target_only: bool) -> Callable[[Outcome], None]:
    """Delta's ``testMergeDataSkippingOnMatchPredicates`` assertions."""

    def check(o: Outcome) -> None:
        before, after = o.files("before")[0], o.files("after")[0]
        if matched_only:
            assert o.metric("numTargetFilesRemoved") == 0 and o.metric("numTargetFilesAdded") == 0
            if target_only:
                assert before > after
        else:
            if o.mode != "dvs":
                assert o.metric("numTargetFilesRemoved") > 0
            assert before == after
            assert o.metric("numTargetRowsUpdated") == 0

    return check


def skipping_on_match(
    name: str, target_only: bool, matched_only: bool, *clauses: Clause, result: list[tuple[int, int]]
) -> Case:
    return one(
        f"data skipping with matched predicates - {name}",
        kv([(1, 10), (2, 20), (3, 30)]),
        "source s",
        "s.key = t.key",
        *clauses,
        source=kv([(1, 100), (3, 300), (5, 500)]),
        coalesce=2,
        result=result,
        explain=True,
        check=_no_changes_when_matched_only(matched_only, target_only),
    )


def matched_only(name: str, source, target, condition: str, *clauses: Clause, result) -> list[Case]:
    return [
        one(
            f"matched only merge - {'enabled' if enabled else 'disabled'} - {name} - isPartitioned: {part}",
            kv(target),
            "source s",
            condition,
            *clauses,
            source=kv(source),
            coalesce=2,
            partition_by=("key",) if part else (),
            confs={MATCHED_ONLY: str(enabled).lower()},
            result=result,
            modes=("sql",) if (enabled, part) != (True, False) else ("sql", "scala"),
        )
        for enabled in (True, False)
        for part in (True, False)
    ]


def null_matched_only(name: str, source, target, result) -> list[Case]:
    ddl = "key int, value int"
    return [
        one(
            f"matched only merge - null handling - {name}, isPartitioned: {part}",
            Data(target, ddl),
            "source s",
            "s.key = t.key",
            update("t.value = s.value"),
            source=Data(source, ddl),
            partition_by=("key",) if part else (),
            result=result,
        )
        for part in (True, False)
    ]


def _removed_files(o: Outcome) -> None:
    if o.mode != "dvs":
        assert o.metric("numTargetFilesRemoved") > 0


def _no_files_removed(o: Outcome) -> None:
    assert o.metric("numTargetFilesRemoved") == 0


def _insert_only_executor(o: Outcome) -> None:
    assert o.plan is not None and "executor: insertOnly" in o.plan


def _target_skipped(o: Outcome) -> None:
    assert o.files("after")[1] < o.files("before")[1]  # Delta: scanned bytes != total bytes


def _insert_only_target_skipped(o: Outcome) -> None:
    _insert_only_executor(o)
    assert o.files("after")[0] < o.files("before")[0]
    assert o.files("after")[1] < o.files("before")[1]


PARTS = ("part%1", "part%2", "part%3")

MISC_CASES = [
    basic(
        "same column names in source and target",
        kv([(2, 2), (1, 4)]),
        "source src",
        "src.key = target.key",
        "target.key = 20 + src.key, target.value = 20 + src.value",
        "(key, value) VALUES (src.key - 10, src.value + 10)",
        target_alias="target",
        source=kv([(1, 5), (2, 9)]),
        result=[(21, 25), (22, 29)],
        modes=("sql", "scala"),
    ),
    Case(
        "Source is a query",
        T_KEY2,
        (
            Step(
                "(SELECT key1, value, others FROM source) src",
                "src.key1 = trg.key2",
                (update(TRG_UPDATE), insert(TRG_INSERT)),
                "trg",
            ),
            Step(
                "(SELECT 5 as key1, 5 as value) src",
                "src.key1 = trg.key2",
                (update(TRG_UPDATE), insert(TRG_INSERT)),
                "trg",
                confs=CROSS_JOIN,
            ),
        ),
        source=S_KEY1_OTHERS,
        result=[(2, 2), (21, 26), (-10, 13), (-5, 15)],
    ),
    basic(
        "self merge",
        T_KEY2,
        "{target} as src",
        "src.key2 = target.key2",
        "key2 = 20 + src.key2, value = 20 + src.value",
        "(key2, value) VALUES (src.key2 - 10, src.value + 10)",
        target_alias="target",
        result=[(22, 22), (21, 24)],
        modes=("sql", "scala", "dvs"),
    ),
    basic(
        "order by + limit in source query #1",
        T_KEY2,
        "(SELECT key1, value, others FROM source order by key1 limit 1) src",
        "src.key1 = trg.key2",
        TRG_UPDATE,
        TRG_INSERT,
        target_alias="trg",
        source=S_KEY1_OTHERS,
        result=[(1, 4), (2, 2), (-10, 13)],
    ),
    basic(
        "order by + limit in source query #2",
        T_KEY2,
        "(SELECT key1, value, others FROM source order by value DESC limit 1) src",
        "src.key1 = trg.key2",
        TRG_UPDATE,
        TRG_INSERT,
        target_alias="trg",
        source=S_KEY1_OTHERS,
        result=[(2, 2), (21, 26)],
    ),
    basic(
        "Negative case - more than one source rows match the same target row",
        T_KEY2,
        "source src",
        "src.key1 = target.key2",
        KEY2_UPDATE,
        KEY2_INSERT,
        target_alias="target",
        source=kv([(1, 1), (0, 3), (1, 5)], "key1", "value"),
        error_class="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE",
        error=("Cannot perform Merge as multiple source rows matched and attempted to modify the same",),
        modes=("sql", "scala"),
    ),
    basic(
        "More than one target rows match the same source row",
        T_KEY2,
        "source src",
        "key1 = 1",
        KEY2_UPDATE,
        KEY2_INSERT,
        target_alias="target",
        source=kv([(1, 5), (2, 9)], "key1", "value"),
        partition_by=("key2",),
        confs=CROSS_JOIN,
        result=[(-8, 19), (21, 25), (21, 25)],
    ),
    *[
        basic(
            f"Merge table using different data types - implicit casting, parts: {part}",
            T_KEY2,
            "source src",
            "key1 = key2",
            "key2 = 33 + cast(key2 as double), value = '20'",
            "(key2, value) VALUES ('44', try_cast(src.value as double) + 10)",
            target_alias="target",
            source=Data([(1, "5"), (3, "9"), (3, "a")], "key1 int not null, value string"),
            partition_by=("key2",) if part else (),
            result=[(44, 19), (44, None), (34, 20), (2, 2)],
        )
        for part in (True, False)
    ],
    *[
        basic(
            f"Negative case - basic syntax analysis - {name}",
            T_KEY2,
            "source src",
            condition,
            update_set,
            insert_values,
            target_alias="target",
            source=kv([(1, 1), (0, 3)], "key1", "value"),
            error=fragments,
        )
        for name, condition, update_set, insert_values, fragments in [
            (
                "insert expressions have target table reference",
                "src.key1 = target.key2",
                "key2 = key1, value = src.value",
                "(key2, value) VALUES (3, src.value + key2)",
                ("cannot resolve key2",),
            ),
            (
                "to-update columns have source table reference",
                "src.key1 = target.key2",
                "key1 = 1, value = 2",
                "(key2, value) VALUES (3, 4)",
                ("Cannot resolve key1 in UPDATE clause", "key2"),
            ),
            (
                "to-insert columns have source table reference",
                "src.key1 = target.key2",
                "key2 = 1, value = 2",
                "(key1, value) VALUES (3, 4)",
                ("Cannot resolve key1 in INSERT clause", "key2"),
            ),
            (
                "ambiguous reference",
                "src.key1 = target.key2",
                "key2 = 1, value = value",
                "(key2, value) VALUES (3, 4)",
                ("value", "is ambiguous", "could be"),
            ),
            (
                "non-deterministic search condition",
                "src.key1 = target.key2 and rand() > 0.5",
                "key2 = 1, value = 2",
                "(key2, value) VALUES (3, 4)",
                ("Non-deterministic functions are not supported in the search condition",),
            ),
            (
                "aggregate function",
                "src.key1 = target.key2 and max(target.key2) > 20",
                "key2 = 1, value = 2",
                "(key2, value) VALUES (3, 4)",
                ("Aggregate functions are not supported in the search condition",),
            ),
        ]
    ],
    basic(
        "Variant type",
        Data([], "", "SELECT parse_json(cast(id as string)) v, id i FROM range(2)"),
        "source src",
        "to_json(src.v) = to_json(trgNew.v)",
        "i = 10 + src.i + trgNew.i, v = trgNew.v",
        """(i, v) VALUES (i + 100, parse_json('"inserted"'))""",
        target_alias="trgNew",
        source=Data([], "", "SELECT parse_json(cast(id as string)) v, id + 1 i FROM range(1, 3)"),
        result_select=("i", "to_json(v)"),
        result=[(0, "0"), (13, "1"), (103, '"inserted"')],
    ),
    basic(
        "Negative case - update assignments conflict because same column with different references",
        T_KEY2,
        "source s",
        "s.key1 = t.key2",
        "key2 = key1, t.key2 = key1",
        "(key2, value) VALUES (3, 4)",
        source=kv([(1, 1), (0, 3), (1, 5)], "key1", "value"),
        error=("there is a conflict from these set columns",),
    ),
    basic(
        "Negative case - MERGE to the child directory",
        Data([(1, 1), (0, 3), (1, 5)], "key2 int not null, value int not null"),
        "(SELECT 5 as key1, 5 as value) src",
        "src.key1 = target.key2",
        KEY2_UPDATE,
        KEY2_INSERT,
        target_alias="target",
        partition_by=("key2",),
        target_subdir="/key2=1",
        error=("Expect a full scan of Delta sources, but found a partial scan",),
        modes=("sql",),  # the SQL target ``delta.`<table>/key2=1```; the builder has no such form
    ),
    one(
        "special character in path - matched delete",
        Data([(i,) for i in range(10)], "id bigint not null"),
        "{other} s",
        "t.id = s.id",
        delete(),
        other=Data([(i,) for i in range(0, 10, 2)], "id bigint not null"),
        dirs=("tar get>", "sou rce~"),
        result=[(1,), (3,), (5,), (7,), (9,)],
    ),
    one(
        "special character in path - matched update",
        Data([(i,) for i in range(10)], "id bigint not null"),
        "{other} s",
        "t.id = s.id",
        update("id = t.id * 10"),
        other=Data([(i,) for i in range(0, 10, 2)], "id bigint not null"),
        dirs=("tar get*", "sou rce("),
        result=[(0,), (1,), (20,), (3,), (40,), (5,), (60,), (7,), (80,), (9,)],
    ),
    *[
        basic(
            f"single file, isPartitioned: {part}",
            Data(
                [(i, i, i) for i in range(5)],
                "key1 bigint not null, key2 bigint not null, col1 bigint not null",
            ),
            "(SELECT key1 as srcKey, key2, col1 FROM source where key1 < 3) AS source",
            "srcKey = target.key1",
            "target.key1 = srcKey - 1000, target.key2 = source.key2 + 1000, target.col1 = source.col1",
            "(key1, key2, col1) VALUES (srcKey, source.key2, source.col1)",
            target_alias="target",
            source=Data(
                [(i, i, i) for i in range(5)],
                "key1 bigint not null, key2 bigint not null, col1 bigint not null",
            ),
            coalesce=1,
            partition_by=("key1", "key2") if part else (),
            result=[(-998, 1002, 2), (-999, 1001, 1), (-1000, 1000, 0), (4, 4, 4), (3, 3, 3)],
        )
        for part in (True, False)
    ],
    one(
        "star syntax - basic star expansion",
        Data([("a", 1), ("b", 2)], "key string, value bigint"),
        "source s",
        "s.key = t.key",
        update("*"),
        insert("*"),
        source=Data([("a", 10), ("c", 30)], "key string, value bigint"),
        result=[("a", 10), ("b", 2), ("c", 30)],
    ),
    one(
        "star syntax - multiples columns and extra columns in source",
        Data([("a", 1, 1), ("b", 2, 2)], "key string, value bigint, value2 bigint"),
        "source s",
        "s.key = t.key",
        update("*"),
        insert("*"),
        source=Data(
            [("a", 10, 100, 1000), ("c", 30, 300, 3000)],
            "key string, value bigint, value2 bigint, value3 bigint",
        ),
        result=[("a", 10, 100), ("b", 2, 2), ("c", 30, 300)],
    ),
    one(
        "insert only merge - turn off feature flag",
        kv([(1, 1)]),
        "source s",
        "s.key = t.key",
        insert("(key, value) VALUES (s.key, s.value)"),
        source=kv([(1, 10), (3, 30)]),
        coalesce=2,
        confs={INSERT_ONLY: "false"},
        result=[(1, 1), (3, 30)],
        check=_removed_files,
        modes=("sql", "scala", "dvs"),
    ),
    *matched_only(
        "with update",
        [(1, 100), (3, 300), (5, 500)],
        [(1, 10), (2, 20), (3, 30)],
        "s.key = t.key",
        update("t.key = s.key, t.value = s.value"),
        result=[(1, 100), (2, 20), (3, 300)],
    ),
    *matched_only(
        "with delete",
        [(1, 100), (3, 300), (5, 500)],
        [(1, 10), (2, 20), (3, 30)],
        "s.key = t.key",
        delete(),
        result=[(2, 20)],
    ),
    *matched_only(
        "with update and delete",
        [(1, 100), (3, 300), (5, 500)],
        [(1, 10), (3, 30), (5, 30)],
        "s.key = t.key",
        update("t.value = s.value", "t.key < 3"),
        delete("t.key > 3"),
        result=[(1, 100), (3, 30)],
    ),
    *null_matched_only("null in source", [(1, 10), (2, 20), (None, None)], [(1, 1)], [(1, 10)]),
    *null_matched_only(
        "null value in both source and target",
        [(1, 10), (2, 20), (None, 0)],
        [(1, 1), (None, None)],
        [(None, None), (1, 10)],
    ),
    basic(
        "data skipping - target-only condition",
        kv([(1, 1), (2, 2)]),
        "source s",
        "s.key = t.key AND t.key <= 1",
        "t.key = s.key, t.value = s.value",
        "(key, value) VALUES (s.key, s.value)",
        source=kv([(1, 10)]),
        coalesce=2,
        partition_by=("key",),
        result=[(1, 10), (2, 2)],
        explain=True,
        check=_target_skipped,
    ),
    one(
        "insert only merge - target data skipping",
        Data(
            [(i, i % 5, i + i) for i in range(10)],
            "id bigint not null, part bigint not null, value bigint not null",
        ),
        "{other} s",
        "s.id = t.id AND t.part = 1",
        insert("*", "s.id % 5 = s.part"),
        other=Data(
            [(i, 1, i + i) for i in range(20)], "id bigint not null, part int not null, value bigint not null"
        ),
        partition_by=("part",),
        confs={INSERT_ONLY: "true"},
        result_where="part = 1",
        result=[(1, 1, 2), (6, 1, 12), (11, 1, 22), (16, 1, 32)],
        explain=True,
        check=_insert_only_target_skipped,
    ),
    skipping_on_match(
        "match conditions on target fields only",
        True,
        True,
        update("*", "t.key == 10"),
        update("*", "t.value == 100"),
        result=[(1, 10), (2, 20), (3, 30)],
    ),
    skipping_on_match(
        "match conditions on source fields only",
        False,
        True,
        update("*", "s.key == 10"),
        update("*", "s.value == 10"),
        result=[(1, 10), (2, 20), (3, 30)],
    ),
    skipping_on_match(
        "match on source and target fields",
        False,
        True,
        update("*", "s.key == 10"),
        update("*", "s.value == 10"),
        delete("t.key == 4"),
        result=[(1, 10), (2, 20), (3, 30)],
    ),
    skipping_on_match(
        "with insert clause",
        False,
        False,
        update("*", "t.key == 10"),
        insert("(key, value) VALUES (s.key, s.value)"),
        result=[(1, 10), (2, 20), (3, 30), (5, 500)],
    ),
    skipping_on_match(
        "when matched and conjunction",
        True,
        True,
        update("*", "t.key == 1 AND t.value == 5"),
        result=[(1, 10), (2, 20), (3, 30)],
    ),
    one(
        "SC-70829 - prevent re-resolution with star and schema evolution",
        Data([], "id string, old string, date DATE"),
        "{other} s",
        "s.id = t.id AND t.date >= date_sub(current_date(), 3)",
        update("*"),
        insert("*"),
        other=Data([], "id string, new string, old string, date DATE"),
        confs={AUTO_MERGE: "true"},
        result=[],
    ),
    one(
        "recorded operations - write all changes",
        kv([(1, 1), (2, 2), (3, 3), (5, 5), (6, 6)]),
        "source s",
        "s.key = t.key",
        update("key = s.key, value = s.value", "s.key > 1"),
        insert("(key, value) VALUES (s.key, s.value)", "s.key < 1"),
        delete_nms("t.key > 5"),
        source=kv([(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]),
        coalesce=2,
        partition_by=("key",),
        result=[(0, 0), (1, 1), (2, 20), (3, 30), (5, 5)],
        modes=("sql", "scala", "dvs"),
    ),
    one(
        "insert only merge - recorded operation",
        kv([(1, 1), (2, 2), (3, 3)]),
        "source s",
        "s.key = t.key AND t.key > 1",
        insert("(key, value) VALUES (s.key, s.value)", "s.key = 4"),
        source=kv([(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]),
        coalesce=2,
        partition_by=("key",),
        confs={INSERT_ONLY: "true"},
        result=[(1, 1), (2, 2), (3, 3), (4, 40)],
        explain=True,
        check=_insert_only_executor,
    ),
    one(
        "recorded operations - write inserts only",
        kv([(1, 1), (2, 2), (3, 3)]),
        "source s",
        "s.key = t.key AND s.key > 5",
        update("key = s.key, value = s.value", "s.key > 10"),
        insert("(key, value) VALUES (s.key, s.value)", "s.key < 1"),
        source=kv([(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]),
        coalesce=2,
        partition_by=("key",),
        result=[(0, 0), (1, 1), (2, 2), (3, 3)],
        check=_no_files_removed,
    ),
    one(
        "merge on partitioned table with special chars",
        Data([(k, p) for p in PARTS for k in range(3)], "key bigint not null, value string"),
        "source s",
        "t.key = s.key AND t.value = s.value",
        delete(f"s.value = '{PARTS[1]}'"),
        update("t.key = -1"),
        insert("*"),
        source=Data(
            [
                (0, "part%1"),
                (0, "part%2"),
                (1, "part%2"),
                (0, "part%3"),
                (1, "part%3"),
                (2, "part%3"),
                (0, "part%4"),
            ],
            "key int not null, value string",
        ),
        partition_by=("value",),
        result=[
            (-1, "part%1"),
            (1, "part%1"),
            (2, "part%1"),
            (2, "part%2"),
            (-1, "part%3"),
            (-1, "part%3"),
            (-1, "part%3"),
            (0, "part%4"),
        ],
        modes=("sql", "scala", "dvs"),
    ),
]


# --- MergeIntoNullTypeTests (run with createDataFrame.dropNullColumns = false) ------------------------

KEEP_VOID = {DROP_NULL_COLUMNS: "false"}

NULL_TYPE_CASES = [
    basic(
        "NullType in source non-key column",
        T_KEY2,
        "source src",
        "src.key1 = key2",
        "key2 = 20 + key1, value = 20",
        "(key2, value) VALUES (key1 - 10, src.value)",
        target_alias="tgt",
        source=Data([(0, None), (1, None)], "key1 int not null, value void"),
        confs=KEEP_VOID,
        result=[(2, 2), (21, 20), (-10, None)],
    ),
    basic(
        "NullType in source key column",
        T_KEY2,
        "source src",
        "src.key1 = key2",
        "key2 = 20 + key1, value = 20",
        "(key2, value) VALUES (key1, src.value + 10)",
        target_alias="tgt",
        source=Data([(None, 1), (None, 3), (None, 6)], "key1 void, value int not null"),
        confs=KEEP_VOID,
        result=[(2, 2), (1, 4), (None, 11), (None, 13), (None, 16)],
    ),
    basic(
        "NullType in target key column, no schema changes",
        Data([(None, 2), (None, 4)], "key2 void, value int not null"),
        "source src",
        "src.key1 = key2",
        "key2 = null, value = 20 + src.value",
        "(key2, value) VALUES (null, src.value + 10)",
        target_alias="tgt",
        source=kv([(1, 1), (0, 3), (1, 6)], "key1", "value"),
        confs=KEEP_VOID,
        result=[(None, 2), (None, 4), (None, 11), (None, 13), (None, 16)],
    ),
    basic(
        "NullType in source key column with nulls in target key column",
        Data([(None, 2), (1, 4)], "key2 int, value int"),
        "source src",
        "src.key1 <=> key2",
        "key2 = 20 + key1, value = 20",
        "(key2, value) VALUES (key1, src.value + 10)",
        target_alias="tgt",
        source=Data([(None, 1)], "key1 void, value int not null"),
        confs=KEEP_VOID,
        result=[(1, 4), (None, 20)],
    ),
]


# --- MergeIntoSQLTests ----------------------------------------------------------------------------------

ARRAY_OF_STRUCT_SOURCE = (
    "smtUidNr STRING, evt ARRAY<STRUCT<busLinCd: STRING, cmyHdrOidNr: STRING, cmyLinNr: STRING, coeOidNr: "
    "STRING, dclOidNr: STRING, evtCd: STRING, evtDclUidNr: STRING, evtDscTe: STRING, evtDt: STRING, "
    "evtLclTmZnNa: STRING, evtLclTs: STRING, evtOidNr: STRING, evtRef: ARRAY<STRUCT<refDt: STRING, refNr: "
    "STRING, refTypCd: STRING, refTypDscTe: STRING>>, evtShu: ARRAY<STRUCT<ledPkgIr: STRING, shuNr: STRING, "
    "shuRef: ARRAY<STRUCT<shuRefDscTe: STRING, shuRefDt: STRING, shuRefEffDt: STRING, shuRefNr: STRING, "
    "shuRefTe: STRING, shuRefTypCd: STRING>>>>, evtTypCd: STRING, evtUsrNr: STRING, evtUtcTcfQy: STRING, "
    "evtUtcTs: STRING, evtWstNa: STRING, loc: ARRAY<STRUCT<adCnySdvCd: STRING, adMunNa: STRING, adPslCd: "
    "STRING, al1Te: STRING, al2Te: STRING, al3Te: STRING, locAdCnyCd: STRING, locOgzNr: STRING, "
    "locXcpDclPorCd: STRING, upsDisNr: STRING, upsRegNr: STRING>>, mltDelOdrNr: STRING, mltPrfOfDelNa: "
    "STRING, mltSmtConNr: STRING, mnfOidNr: STRING, rpnEntLinNr: STRING, rpnEntLvlStsCd: STRING, "
    "rpnGovAcoTe: STRING, rpnInfSrcCrtLclTmZnNa: STRING, rpnInfSrcCrtLclTs: STRING, rpnInfSrcCrtUtcTcfQy: "
    "STRING, rpnInfSrcCrtUtcTs: STRING, rpnLinLvlStsCd: STRING, rpnPgaLinNr: STRING, smtDcvDt: STRING, "
    "smtNr: STRING, smtUidNr: STRING, xcpCtmDspCd: STRING, xcpGovAcoTe: STRING, xcpPgmCd: STRING, "
    "xcpRlvCd: STRING, xcpRlvDscTe: STRING, xcpRlvLclTmZnNa: STRING, xcpRlvLclTs: STRING, xcpRlvUtcTcfQy: "
    "STRING, xcpRlvUtcTs: STRING, xcpRsnCd: STRING, xcpRsnDscTe: STRING, xcpStsCd: STRING, xcpStsDscTe: "
    "STRING>>, msgTs TIMESTAMP"
)
ARRAY_OF_STRUCT_TARGET = (
    "smtUidNr STRING, evt ARRAY<STRUCT<busLinCd: STRING, dclOidNr: STRING, evtCd: STRING, evtDclUidNr: "
    "STRING, evtDscTe: STRING, evtDt: STRING, evtLclTmZnNa: STRING, evtLclTs: STRING, evtOidNr: STRING, "
    "evtRef: ARRAY<STRUCT<refDt: STRING, refNr: STRING, refTypCd: STRING, refTypDscTe: STRING>>, evtShu: "
    "ARRAY<STRUCT<ledPkgIr: STRING, shuNr: STRING, shuRef: ARRAY<STRUCT<shuRefDscTe: STRING, shuRefDt: "
    "STRING, shuRefEffDt: STRING, shuRefNr: STRING, shuRefTe: STRING, shuRefTypCd: STRING>>>>, evtTypCd: "
    "STRING, evtUsrNr: STRING, evtUtcTcfQy: STRING, evtUtcTs: STRING, evtWstNa: STRING, loc: "
    "ARRAY<STRUCT<adCnySdvCd: STRING, adMunNa: STRING, adPslCd: STRING, al1Te: STRING, al2Te: STRING, "
    "al3Te: STRING, locAdCnyCd: STRING, locOgzNr: STRING, locXcpDclPorCd: STRING, upsDisNr: STRING, "
    "upsRegNr: STRING>>, mltDelOdrNr: STRING, mltPrfOfDelNa: STRING, mltSmtConNr: STRING, mnfOidNr: "
    "STRING, rpnEntLinNr: STRING, rpnEntLvlStsCd: STRING, rpnGovAcoTe: STRING, rpnInfSrcCrtLclTmZnNa: "
    "STRING, rpnInfSrcCrtLclTs: STRING, rpnInfSrcCrtUtcTcfQy: STRING, rpnInfSrcCrtUtcTs: STRING, "
    "rpnLinLvlStsCd: STRING, smtDcvDt: STRING, smtNr: STRING, smtUidNr: STRING, xcpCtmDspCd: STRING, "
    "xcpRlvCd: STRING, xcpRlvDscTe: STRING, xcpRlvLclTmZnNa: STRING, xcpRlvLclTs: STRING, xcpRlvUtcTcfQy: "
    "STRING, xcpRlvUtcTs: STRING, xcpRsnCd: STRING, xcpRsnDscTe: STRING, xcpStsCd: STRING, xcpStsDscTe: "
    "STRING, cmyHdrOidNr: STRING, cmyLinNr: STRING, coeOidNr: STRING, rpnPgaLinNr: STRING, xcpGovAcoTe: "
    "STRING, xcpPgmCd: STRING>>, msgTs TIMESTAMP"
)
ND_SOURCE = kv([(0, 0), (1, 10), (2, 20)])
ND_TARGET = kv([(-1, -10), (1, 1), (2, 2)])
NON_DETERMINISTIC = "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"


def nondeterministic(name: str, condition: str, clause: Clause, fails: bool) -> Case:
    return one(
        name,
        ND_TARGET,
        "source s",
        condition,
        clause,
        source=ND_SOURCE,
        error=(NON_DETERMINISTIC,) if fails else None,
        modes=("sql",),
    )


SQL_CASES = [
    Case(
        "CTE as a source in MERGE",
        T_KEY2,
        (
            Step(
                "cte1 src",
                "src.key3 = target.key2",
                (
                    update("key2 = 20 + src.key3, value = 20 + src.value"),
                    insert("(key2, value) VALUES (src.key3 - 10, src.value + 10)"),
                ),
                "target",
                cte="WITH cte1 AS (SELECT key1 + 2 AS key3, value FROM source)",
            ),
        ),
        source=kv([(1, 1), (0, 3)], "key1", "value"),
        returns=(2, 1, 0, 1),
        result=[(1, 4), (22, 23), (-7, 11)],
        modes=("sql",),
    ),
    basic(
        "inline tables with set operations in source query",
        T_KEY2,
        '( SELECT * FROM VALUES (1, 6, "a") as t1(key1, value, others) UNION '
        'SELECT * FROM VALUES (0, 3, "b") as t2(key1, value, others) ) src',
        "src.key1 = trg.key2",
        TRG_UPDATE,
        TRG_INSERT,
        target_alias="trg",
        result=[(2, 2), (21, 26), (-10, 13)],
        modes=("sql",),
    ),
    basic(
        "nested data support - analysis error - conflicting assignments between two nested fields",
        Data([("A", ((1,),))], "key string, value struct<a: struct<x: bigint>>"),
        "source s",
        "s.`key` = t.`key`",
        "value.a.x = 2, value.a.x = 3",
        "(`key`, `value`) VALUES (`key`, `value`)",
        source=Data([("A", ((0,),))], "key string, value struct<a: struct<x: bigint>>"),
        error=("There is a conflict from these SET columns",),
        modes=("sql",),
    ),
    basic(
        "Negative case - basic syntax analysis SQL - duplicate column names in update clause",
        T_KEY2,
        "source src",
        "src.key1 = target.key2",
        "key2 = 1, key2 = 2",
        "(key2, value) VALUES (3, 4)",
        target_alias="target",
        source=kv([(1, 1), (0, 3), (1, 5)], "key1", "value"),
        error=("There is a conflict from these SET columns",),
        modes=("sql",),
    ),
    basic(
        "Negative case - basic syntax analysis SQL - duplicate column names in insert clause",
        T_KEY2,
        "source src",
        "src.key1 = target.key2",
        "key2 = 1, value = 2",
        "(key2, key2) VALUES (3, 4)",
        target_alias="target",
        source=kv([(1, 1), (0, 3), (1, 5)], "key1", "value"),
        error=("Duplicate column names in INSERT clause",),
        modes=("sql",),
    ),
    *[
        basic(
            f"no column is used from source table - column pruning, isPartitioned: {part}",
            T_KEY2,
            "source src",
            "key2 < 0",
            "key2 = 20, value = 20",
            "(key2, value) VALUES (10, 10)",
            target_alias=None,  # type: ignore[arg-type]
            source=Data([(1, 1, "a"), (0, 3, "b")], "key1 int not null, value int not null, col1 string"),
            partition_by=("key2",) if part else (),
            confs=CROSS_JOIN,
            result=[(2, 2), (1, 4), (10, 10), (10, 10)],
            modes=("sql",),
        )
        for part in (True, False)
    ],
    one(
        "negative case - omit multiple insert conditions",
        kv([(2, 2), (1, 4)], "trgKey", "trgValue"),
        "source",
        "srcKey = trgKey",
        insert("(trgValue, trgKey) VALUES (srcValue, srcKey + 1)"),
        insert("(trgValue, trgKey) VALUES (srcValue, srcKey)"),
        target_alias=None,
        source=kv([(1, 1), (0, 3)], "srcKey", "srcValue"),
        error=("only the last NOT MATCHED [BY TARGET] clause can omit the condition",),
        modes=("sql",),
    ),
    nondeterministic(
        "detect nondeterministic merge condition",
        "s.key = t.key AND rand() > 0.5",
        update("key = s.key, value = s.value", "s.key < 2"),
        True,
    ),
    nondeterministic(
        "detect nondeterministic update condition in merge",
        "s.key = t.key",
        update("key = s.key, value = s.value", "rand() > 0.5"),
        True,
    ),
    nondeterministic(
        "detect nondeterministic delete condition in merge", "s.key = t.key", delete("rand() > 0.5"), True
    ),
    nondeterministic(
        "detect nondeterministic insert condition in merge",
        "s.key = t.key",
        insert("(key, value) VALUES (s.key, s.value)", "rand() > 0.5"),
        True,
    ),
    nondeterministic(
        "detect nondeterministic updateNotMatched condition in merge",
        "s.key = t.key",
        update_nms("key = t.key, value = t.value + 1", "rand() > 0.5"),
        True,
    ),
    nondeterministic(
        "detect nondeterministic deleteNotMatched condition in merge",
        "s.key = t.key",
        delete_nms("rand() > 0.5"),
        True,
    ),
    nondeterministic(
        "allow nondeterministic update action in merge",
        "s.key = t.key",
        update("key = s.key, value = rand()", "s.key < 2"),
        False,
    ),
    nondeterministic(
        "allow nondeterministic insert action in merge",
        "s.key = t.key",
        insert("(key, value) VALUES (s.key, rand())", "s.key < 2"),
        False,
    ),
    nondeterministic(
        "allow nondeterministic updateNotMatched action in merge",
        "s.key = t.key",
        update_nms("key = t.key, value = t.value + rand()", "t.key < 2"),
        False,
    ),
    one(
        "Complex Data Type - Array of Struct",
        Data([], ARRAY_OF_STRUCT_TARGET),
        "{other} as u",
        "u.smtUidNr = r.smtUidNr",
        update("*", "u.msgTs > r.msgTs"),
        insert("*"),
        target_alias="r",
        other=Data([], ARRAY_OF_STRUCT_SOURCE),
        result=[],
        modes=("sql",),
    ),
    one(
        "SET * with schema evolution",
        Data([], "id int, delicious string, dummy_col string"),
        "(select * from source) as source",
        "target.id=source.id",
        update("*"),
        insert("*"),
        target_alias="target",
        source=Data([], "id int, delicious string"),
        confs={AUTO_MERGE: "true"},
        result=[],
        modes=("sql",),
    ),
]


# --- MergeIntoScalaTests driven by SQL-string clauses ------------------------------------------------

SCALA_CASES = [
    one(
        "updateAll and insertAll",
        kv([(1, 10), (2, 20), (4, 40), (5, 50)]),
        "source s",
        "s.key = t.key",
        update("*"),
        insert("*"),
        source=kv([(1, 100), (3, 30), (4, 41), (5, 51), (6, 60)]),
        result=[(1, 100), (2, 20), (3, 30), (4, 41), (5, 51), (6, 60)],
        modes=("scala",),
    ),
]

CASES = ANALYSIS_CASES + MISC_CASES + NULL_TYPE_CASES + SQL_CASES + SCALA_CASES


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for mode in case.modes:
            marks = []
            if case.skip is not None:
                marks.append(pytest.mark.skip(reason=case.skip))
            if mode in case.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=case.xfail[mode]))
            out.append(pytest.param(case, mode, id=f"{case.name}-{mode}".replace(" ", "_"), marks=marks))
    return out


# --- running a case -----------------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return tuple(_norm(v) for v in value)
    if isinstance(value, (tuple, list)):
        return tuple(_norm(v) for v in value)
    return value


def _multiset(rows: Any) -> Counter:
    return Counter(_norm(r) for r in rows)


def _write(spark, path: str, data: Data, *, partition_by=(), coalesce=None, props=None) -> None:
    df = data.df(spark)
    if coalesce is not None:
        df = df.coalesce(coalesce)
    deltamerge.write(df, path, partition_by=list(partition_by) or None, configuration=props)


def _split_alias(text: str) -> tuple[str, str | None]:
    """Delta's ``parseTableAndAlias``: ``<table or (query)> [AS] alias``."""
    m = re.match(r"(?is)^(.*?\S)(?:\s+as)?\s+(\w+)$", text.strip())
    if m is None or (m.group(1).startswith("(") and not m.group(1).endswith(")")):
        return text.strip(), None
    return m.group(1), m.group(2)


def _source_df(spark, using: str, paths: dict[str, str]) -> DataFrame:
    table, alias = _split_alias(using)
    if table.startswith("{"):
        df = deltamerge.read(spark, paths[table.strip("{}")])
    elif table.startswith("("):
        df = spark.sql(table[1:-1])
    else:
        df = spark.table(table)
    return df.alias(alias) if alias else df


def _merge_sql(path: str, step: Step, paths: dict[str, str], explain: bool = False) -> str:
    using = step.using.format(**{k: f"delta.`{v}`" for k, v in paths.items()})
    alias = f" {step.target_alias}" if step.target_alias else ""
    lines = [
        *([step.cte] if step.cte else []),
        f"{'EXPLAIN ' if explain else ''}MERGE INTO delta.`{path}`{alias}",
        f"USING {using}",
        f"ON {step.condition}",
        *(c.sql() for c in step.clauses),
    ]
    return "\n".join(lines)


def _builder(spark, path: str, step: Step, paths: dict[str, str]) -> Any:
    table = DeltaTable.forPath(spark, path)
    if step.target_alias:
        table = table.alias(step.target_alias)
    builder = table.merge(_source_df(spark, step.using, paths), step.condition)
    for clause in step.clauses:
        builder = _apply(builder, clause)
    return builder


def _run_step(
    spark, mode: str, path: str, step: Step, paths: dict[str, str], explain: bool
) -> tuple[Any, Any]:
    plan = None
    if mode == "scala":
        builder = _builder(spark, path, step, paths)
        if explain:
            plan = builder.explain()
        return builder.execute(), plan
    if explain:
        plan = deltamerge.sql(spark, _merge_sql(path, step, paths, explain=True)).collect()[0][0]
    return deltamerge.sql(spark, _merge_sql(path, step, paths)), plan


def _check_error(failure: BaseException, case: Case) -> None:
    message = str(failure)
    if case.error_class is not None:
        assert f"[{case.error_class}]" in message, message
    for fragment in case.error or ():
        assert fragment.lower() in message.lower(), (fragment, message)


@pytest.mark.parametrize(("case", "mode"), _params())
def test_merge_misc(spark, tmp_path, spark_conf, case: Case, mode: str) -> None:
    spark_conf(case.confs)
    path = str(tmp_path / case.dirs[0])
    paths = {"target": path}
    _write(
        spark,
        path,
        case.target,
        partition_by=case.partition_by,
        coalesce=case.coalesce,
        props=DVS_AND_CDF if mode == "dvs" else None,
    )
    if case.other is not None:
        paths["other"] = str(tmp_path / case.dirs[1])
        _write(spark, paths["other"], case.other)
    if case.source is not None:
        case.source.df(spark).createOrReplaceTempView("source")
    try:
        before = DeltaTable.forPath(spark, path).version()
        steps = case.steps
        for step in steps[:-1]:
            with_confs(spark_conf, step.confs)
            _run_step(spark, mode, path, step, paths, False)
        with_confs(spark_conf, steps[-1].confs)
        if case.error is not None or case.error_class is not None:
            with pytest.raises(Exception) as failure:
                _run_step(spark, mode, path + case.target_subdir, steps[-1], paths, case.explain)
            _check_error(failure.value, case)
            assert DeltaTable.forPath(spark, path).version() == before
            return
        mid = DeltaTable.forPath(spark, path).version()
        result, plan = _run_step(spark, mode, path, steps[-1], paths, case.explain)
    finally:
        spark.catalog.dropTempView("source")

    if case.returns is not None:
        assert tuple(result.collect()[0]) == case.returns
    table = deltamerge.read(spark, path)
    if case.result_where is not None:
        table = table.where(case.result_where)
    if case.result_select is not None:
        table = table.selectExpr(*case.result_select)
    if case.result is not None:
        assert _multiset(table.collect()) == _multiset(case.result)
    if case.check is not None:
        dt = DeltaTable.forPath(spark, path)
        metrics = None
        if dt.version() > mid:
            metrics = dict(dt.history(1).collect()[0]["operationMetrics"])
        case.check(Outcome(spark, path, metrics, plan, mode))


def with_confs(spark_conf, confs: dict[str, str]) -> None:
    if confs:
        spark_conf(confs)


# --- MergeIntoScalaTests: builder calls with Columns, empty maps and pre-resolved references ---------


@dataclass(frozen=True)
class ApiCase:
    """A builder-only Delta test: ``build(table, target_df, source_df)`` returns the builder(s) to run."""

    name: str
    target: Data
    build: Callable[[Any, DataFrame, DataFrame], Any]
    source: Data | Callable[[DataFrame], DataFrame]  # rows, or derived from the target DataFrame
    result: list[tuple[Any, ...]] | None = None
    error: tuple[str, ...] | None = None
    confs: dict[str, str] = field(default_factory=dict)
    xfail: str | None = None


KV12 = kv([(1, 10), (2, 20)], "key1", "value1")
KV124 = kv([(1, 10), (2, 20), (4, 40)], "key1", "value1")
S2 = kv([(1, 100), (3, 30)], "key2", "value2")
S3 = kv([(1, 100), (3, 30), (4, 41)], "key2", "value2")
TRG = kv([(1, 10), (2, 20)], "trgKey", "trgValue")
SRC = kv([(1, 100), (3, 30)], "srcKey", "srcValue")
INS = {"trgKey": "srcKey", "trgValue": "srcValue"}
RANGE5 = Data([], "", "SELECT id AS key, id AS value FROM range(5)")


def _basic(t, _tdf, s):
    return (
        t.merge(s, "key1 = key2")
        .whenMatchedUpdate(set={"key1": "key2", "value1": "value2"})
        .whenNotMatchedInsert(values={"key1": "key2", "value1": "value2"})
    )


def _extended(t, _tdf, s):
    return (
        t.merge(s, "key1 = key2")
        .whenMatchedDelete("key1 = 4")
        .whenMatchedUpdate("key2 = 1", {"key1": "key2", "value1": "value2"})
        .whenNotMatchedInsert("key2 = 3", {"key1": "key2", "value1": "value2"})
    )


def _extended_columns(t, _tdf, s):
    return (
        t.merge(s, F.expr("key1 = key2"))
        .whenMatchedDelete(F.expr("key1 = 4"))
        .whenMatchedUpdate(F.expr("key2 = 1"), {"key1": F.col("key2"), "value1": F.col("value2")})
        .whenNotMatchedInsert(F.expr("key2 = 3"), {"key1": F.col("key2"), "value1": F.col("value2")})
    )


def _empty_map(t, _tdf, s):
    first = t.merge(s, "srcKey = trgKey").whenMatchedUpdate(set={}).whenNotMatchedInsert(values=INS)
    second = (
        t.merge(s, "srcKey = trgKey")
        .whenMatchedUpdate("trgKey = 1", {})
        .whenMatchedDelete()
        .whenNotMatchedInsert(values=INS)
    )
    return [first, second]


def _interleave(t, _tdf, s):
    return (
        t.merge(s, "srcKey = trgKey")
        .whenMatchedUpdate("trgKey = 1", INS)
        .whenNotMatchedInsert("srcKey = 3", INS)
        .whenMatchedDelete()
        .whenNotMatchedInsert(values=INS)
    )


def _pre_resolved(t, tdf, s):
    return (
        t.merge(s, tdf["key"] == s["key"])
        .whenMatchedUpdate(
            (tdf["key"] == F.lit(1)) & (s["value"] == F.lit(10)), {"value": tdf["value"] + s["value"]}
        )
        .whenMatchedDelete((tdf["key"] == F.lit(2)) & (s["value"] == F.lit(20)))
        .whenNotMatchedInsert(
            (s["key"] == F.lit(3)) & (s["value"] == F.lit(30)), {"key": s["key"], "value": s["value"]}
        )
    )


def _self_delete(t, _tdf, s):
    return t.alias("t").merge(s.alias("s"), "t.key = s.key").whenMatchedDelete()


def _self_not_matched(t, tdf, s):
    return (
        t.alias("t")
        .merge(s.alias("s"), "t.key = s.key")
        .whenNotMatchedInsert((s["value"] > 0) & (tdf["key"] > 0), {"key": s["key"], "value": tdf["value"]})
        .whenMatchedUpdate(set={"key": F.col("s.key")})
    )


def _self_non_duplicate(t, tdf, s):
    return (
        t.alias("t")
        .merge(s.alias("s"), F.expr("t.key = s.key") & (s["other"] == 0) & (tdf["value"] == 4))
        .whenMatchedUpdate(
            (s["value"] > 0) & (tdf["value"] > 0) & (s["other"] == 0),
            {"key": F.expr("s.key"), "value": tdf["value"] + s["value"] + s["other"]},
        )
        .whenNotMatchedInsert(
            (s["value"] > 0) & (s["other"] == 0), {"key": F.expr("s.key"), "value": s["value"] + s["other"]}
        )
    )


def _dummy(t) -> DataFrame:
    return t._spark.createDataFrame([(0, 0)], "key int not null, value int not null")


API_CASES = [
    ApiCase("basic scala API", KV12, _basic, S2, result=[(1, 100), (2, 20), (3, 30)]),
    ApiCase(
        "basic scala API - without stats",
        KV12,
        _basic,
        S2,
        result=[(1, 100), (2, 20), (3, 30)],
        confs={COLLECT_STATS: "false"},
    ),
    ApiCase("extended scala API", KV124, _extended, S3, result=[(1, 100), (2, 20), (3, 30)]),
    ApiCase(
        "extended scala API with Column", KV124, _extended_columns, S3, result=[(1, 100), (2, 20), (3, 30)]
    ),
    ApiCase(
        "updateAll and insertAll with columns containing dot",
        kv([(1, 10), (2, 20), (4, 40)], "key", "`the.value`"),
        lambda t, _tdf, s: (
            t.alias("t").merge(s.alias("s"), "t.key = s.key").whenMatchedUpdateAll().whenNotMatchedInsertAll()
        ),
        kv([(1, 100), (3, 30), (4, 41)], "key", "`the.value`"),
        result=[(1, 100), (2, 20), (4, 41), (3, 30)],
    ),
    ApiCase("update with empty map should do nothing", TRG, _empty_map, SRC, result=[(1, 10), (2, 20)]),
    ApiCase(
        "check invalid merge API calls - no WHEN clause",
        TRG,
        lambda t, _tdf, s: t.merge(s, "srcKey = trgKey"),
        SRC,
        error=("There must be at least one WHEN clause in a MERGE statement",),
    ),
    ApiCase(
        "check invalid merge API calls - first of two MATCHED clauses without condition",
        TRG,
        lambda t, _tdf, s: (
            t.merge(s, "srcKey = trgKey")
            .whenMatchedDelete()
            .whenMatchedUpdate("trgKey = 1", INS)
            .whenNotMatchedInsert(values=INS)
        ),
        SRC,
        error=(
            "When there are more than one MATCHED clauses in a MERGE statement, only the last MATCHED clause "
            "can omit the condition.",
        ),
    ),
    ApiCase(
        "check invalid merge API calls - star key in update",
        TRG,
        lambda t, _tdf, s: (
            t.merge(s, "srcKey = trgKey")
            .whenMatchedUpdate(set={"trgKey": "srcKey", "*": "*"})
            .whenNotMatchedInsert(values=INS)
        ),
        SRC,
        error=("cannot resolve `*` in UPDATE clause",),
    ),
    ApiCase(
        "check invalid merge API calls - star key in insert",
        TRG,
        lambda t, _tdf, s: (
            t.merge(s, "srcKey = trgKey").whenMatchedUpdate(set=INS).whenNotMatchedInsert(values={"*": "*"})
        ),
        SRC,
        error=("cannot resolve `*` in INSERT clause",),
    ),
    ApiCase(
        "check invalid merge API calls - star key in not matched by source update",
        TRG,
        lambda t, _tdf, s: t.merge(s, "srcKey = trgKey").whenNotMatchedBySourceUpdate(set={"*": "*"}),
        SRC,
        error=("cannot resolve `*` in UPDATE clause",),
    ),
    ApiCase(
        "merge without table alias",
        Data([(1, 1, 1), (2, 2, 2)], "part int not null, id int not null, n int not null"),
        lambda t, _tdf, s: (
            t.alias("t").merge(s, "t.part = part2").whenMatchedUpdateAll().whenNotMatchedInsertAll()
        ),
        Data(
            [(2, 2, 4, 2), (9, 3, 6, 9), (3, 3, 9, 3)],
            "part int not null, id int not null, n int not null, part2 int not null",
        ),
        result=[(1, 1, 1), (2, 2, 4), (9, 3, 6), (3, 3, 9)],
    ),
    ApiCase(
        "pre-resolved exprs: should work in all expressions in absence of duplicate refs",
        kv([(1, 1), (2, 2)]),
        _pre_resolved,
        kv([(1, 10), (2, 20), (3, 30), (4, 40)]),
        result=[(1, 11), (3, 30)],
    ),
    *[
        ApiCase(
            f"pre-resolved exprs: negative cases with refs resolved to wrong Dataframes - {name}",
            kv([(1, 1), (2, 2)]),
            build,
            kv([(1, 10), (2, 20), (3, 30), (4, 40)]),
            error=("Resolved attribute", "missing from"),
        )
        for name, build in [
            (
                "merge condition",
                lambda t, tdf, s: t.merge(s, tdf["key"] == _dummy(t)["key"]).whenMatchedDelete(),
            ),
            (
                "matched condition",
                lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenMatchedUpdateAll(
                    _dummy(t)["key"] == F.lit(1)
                ),
            ),
            (
                "matched update",
                lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenMatchedUpdate(
                    set={"key": _dummy(t)["key"]}
                ),
            ),
            (
                "not matched condition",
                lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenNotMatchedInsertAll(
                    _dummy(t)["key"] == F.lit(1)
                ),
            ),
            (
                "not matched insert",
                lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenNotMatchedInsert(
                    values={"key": _dummy(t)["key"]}
                ),
            ),
        ]
    ],
    ApiCase(
        "self-merge: duplicate attrib refs should be removed",
        RANGE5,
        _self_delete,
        lambda tdf: tdf.filter("key = 4"),
        result=[(i, i) for i in range(4)],
    ),
    ApiCase(
        "self-merge + pre-resolved exprs: merge condition fails with pre-resolved, duplicate refs",
        RANGE5,
        lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenMatchedDelete(),
        lambda tdf: tdf.filter("key = 4"),
        error=("ambiguous",),
    ),
    ApiCase(
        "self-merge + pre-resolved exprs: duplicate refs should resolve in not-matched clauses",
        RANGE5,
        _self_not_matched,
        lambda tdf: tdf.filter("key = 4"),
        result=[(i, i) for i in range(5)],
    ),
    ApiCase(
        "self-merge + pre-resolved exprs: non-duplicate but pre-resolved refs should still resolve",
        RANGE5,
        _self_non_duplicate,
        lambda tdf: (
            tdf.filter("key = 0")
            .drop("value")
            .withColumn("value", F.col("key") + F.lit(0))
            .withColumn("other", F.lit(0))
        ),
        result=[(i, i) for i in range(5)],
    ),
    *[
        ApiCase(
            f"self-merge + pre-resolved exprs: negative cases in matched clauses with duplicate refs: {name}",
            RANGE5,
            build,
            lambda tdf: tdf.filter("key = 4"),
            error=("ambiguous",),
        )
        for name, build in [
            ("merge condition", lambda t, tdf, s: t.merge(s, tdf["key"] == s["key"]).whenMatchedDelete()),
            (
                "update condition",
                lambda t, tdf, s: (
                    t.alias("t")
                    .merge(s.alias("s"), "t.key = s.key")
                    .whenMatchedUpdateAll(tdf["key"] == F.lit(4))
                ),
            ),
            (
                "update value",
                lambda t, tdf, s: (
                    t.alias("t")
                    .merge(s.alias("s"), "t.key = s.key")
                    .whenMatchedUpdate(set={"value": tdf["value"] + 1})
                ),
            ),
            (
                "delete condition",
                lambda t, tdf, s: (
                    t.alias("t")
                    .merge(s.alias("s"), "t.key = s.key")
                    .whenMatchedDelete(tdf["key"] == F.lit(4))
                ),
            ),
        ]
    ],
    ApiCase(
        "merge clause matched and not matched can interleave",
        TRG,
        _interleave,
        kv([(1, 100), (2, 200), (3, 300), (4, 400)], "srcKey", "srcValue"),
        result=[(1, 100), (3, 300), (4, 400)],
    ),
    ApiCase(
        "schema evolution with multiple update clauses",
        Data([(1, "a"), (2, "b"), (3, "c")], "id int not null, targetValue string"),
        lambda t, _tdf, s: (
            t.merge(s, F.col("target.id") == s["id"])
            .whenMatchedUpdate("target.id = 1", {"targetValue": "srcValue"})
            .whenMatchedUpdateAll("target.id = 2")
            .whenNotMatchedInsertAll()
        ),
        Data([(1, "x"), (2, "y"), (4, "z")], "id int not null, srcValue string"),
        result=[(1, "x", None), (2, "b", "y"), (3, "c", None), (4, None, "z")],
        confs={AUTO_MERGE: "true"},
    ),
]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.name.replace(" ", "_"),
            marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [],
        )
        for c in API_CASES
    ],
)
def test_merge_scala_api(spark, tmp_path, spark_conf, case: ApiCase) -> None:
    spark_conf(case.confs)
    path = str(tmp_path / "target")
    deltamerge.write(case.target.df(spark), path)
    deltamerge.register_table(spark, "target", path)  # DeltaTable.forName("target") in Delta's test
    try:
        table = DeltaTable.forName(spark, "target")
        tdf = table.toDF()
        source = case.source(tdf) if callable(case.source) else case.source.df(spark)
        before = table.version()
        if case.error is not None:
            with pytest.raises(Exception) as failure:
                built = case.build(table, tdf, source)
                for b in built if isinstance(built, list) else [built]:
                    b.execute()
            for fragment in case.error:
                assert fragment.lower() in str(failure.value).lower(), (fragment, str(failure.value))
            assert table.version() == before
            return
        built = case.build(table, tdf, source)
        for b in built if isinstance(built, list) else [built]:
            b.execute()
        assert _multiset(DeltaTable.forPath(spark, path).toDF().collect()) == _multiset(case.result)
    finally:
        deltamerge.unregister_table(spark, "target")


# --- tests whose setup does not fit a Case ------------------------------------------------------------


@dataclass(frozen=True)
class RepartitionCase:
    name: str
    partition_by: tuple[str, ...]
    source_ids: range
    fewer_files: bool  # with repartitionBeforeWrite than without
    clauses: tuple[Clause, ...]


REPARTITION_CASES = [
    RepartitionCase(
        "partition on multiple columns",
        ("part1", "part2"),
        range(80, 110),
        True,
        (update("t.part2 = 1"), insert("(id, part1, part2) VALUES (id, part1, part2)")),
    ),
    RepartitionCase(
        "insert only merge",
        ("part1",),
        range(110, 150),
        True,
        (insert("(id, part1, part2) VALUES (id, part1, part2)"),),
    ),
    RepartitionCase(
        "non partitioned table",
        (),
        range(80, 180),
        False,
        (update("t.part2 = 1"), insert("(id, part1, part2) VALUES (id, part1, part2)")),
    ),
]


@pytest.mark.parametrize("case", REPARTITION_CASES, ids=lambda c: c.name.replace(" ", "_"))
def test_merge_with_repartition(spark, tmp_path, spark_conf, case: RepartitionCase) -> None:
    """Delta's ``testMergeWithRepartition`` (AQE off): same rows, fewer files with repartitioning."""
    spark_conf({"spark.sql.adaptive.enabled": "false"})
    df = spark.range(100).selectExpr("id", "id % 5 AS part1", "id % 3 AS part2")
    plain, repartitioned = str(tmp_path / "target"), str(tmp_path / "targetRepartitioned")
    for path in (plain, repartitioned):
        deltamerge.write(df, path, partition_by=list(case.partition_by) or None)
    spark.range(case.source_ids.start, case.source_ids.stop).selectExpr(
        "id", "id % 5 AS part1", "id % 3 AS part2"
    ).createOrReplaceTempView("source")
    try:
        for path, repartition in ((plain, "false"), (repartitioned, "true")):
            spark_conf({REPARTITION: repartition})
            step = Step("source src", "src.id = t.id", case.clauses)
            deltamerge.sql(spark, _merge_sql(path, step, {}))
    finally:
        spark.catalog.dropTempView("source")
    assert _multiset(deltamerge.read(spark, repartitioned).collect()) == _multiset(
        deltamerge.read(spark, plain).collect()
    )
    files_plain = len(deltamerge.io.snapshot_for(plain).files)
    files_repartitioned = len(deltamerge.io.snapshot_for(repartitioned).files)
    if case.fewer_files:
        assert files_plain > files_repartitioned
    else:
        assert files_plain == files_repartitioned


@dataclass(frozen=True)
class UnsupportedCase:
    function_type: str
    merge_condition: str
    clause_condition: str
    clause_action: str
    condition_regex: str | None = None


UNSUPPORTED_REGEX = r".*unsupported.*Invalid expressions.*"  # Delta's, with its (?s) and (?i) flags
UNSUPPORTED_CASES = [
    UnsupportedCase(
        "Window",
        "(row_number() over (order by s.c)) = (row_number() over (order by t.c))",
        "row_number() over (order by s.c) > 1",
        "row_number() over (order by s.c)",
    ),
    UnsupportedCase(
        "Aggregate",
        "t.a = max(s.a)",
        "max(s.b) > 1",
        "max(s.c)",
        r"Aggregate functions are not supported in the .* condition of MERGE operation.*",
    ),
]


@pytest.mark.parametrize("case", UNSUPPORTED_CASES, ids=lambda c: c.function_type)
def test_unsupported_expression(spark, tmp_path, case: UnsupportedCase) -> None:
    """Delta's ``testUnsupportedExpression``: the function in the merge condition, an update condition,
    an update action, an insert condition and (after the source's ``a`` becomes 2) an insert action;
    each fails with a message matching Delta's regex (after ``[ERROR_CLASS] ``) and changes nothing."""
    target, source = str(tmp_path / "target"), str(tmp_path / "source")
    deltamerge.write(
        spark.createDataFrame([(1, 5, 6)], "a int not null, b int not null, c int not null"), target
    )
    deltamerge.write(
        spark.createDataFrame([(1, 2, 3)], "a int not null, b int not null, c int not null"), source
    )
    paths = {"target": target, "other": source}

    def check(condition: str | None, clause: Clause | None, regex: str | None) -> None:
        before = _multiset(deltamerge.read(spark, target).collect())
        step = Step("{other} as s", condition or "s.a = t.a", (clause or update("b = s.b"),))
        with pytest.raises(Exception) as failure:
            deltamerge.sql(spark, _merge_sql(target, step, paths))
        error_class = getattr(failure.value, "error_class", None)
        prefix = rf"\[{error_class}\] " if error_class else ""
        message = str(failure.value)
        flags = 0 if regex else re.IGNORECASE | re.DOTALL
        assert re.fullmatch(prefix + (regex or UNSUPPORTED_REGEX), message, flags), message
        assert _multiset(deltamerge.read(spark, target).collect()) == before

    check(case.merge_condition, None, case.condition_regex)
    check(None, update("b = s.b", case.clause_condition), case.condition_regex)
    check(None, update(f"b = {case.clause_action}"), None)
    check(None, insert("(a, b, c) VALUES (s.a, s.b, s.c)", case.clause_condition), case.condition_regex)
    DeltaTable.forPath(spark, source).update(set={"a": "2"})
    check(None, insert(f"(a, b, c) VALUES ({case.clause_action}, s.b, s.c)"), None)


@pytest.mark.parametrize(
    ("insert_only", "materialize", "fail_if_changed", "fails"),
    [
        pytest.param(
            False,
            "none",
            "true",
            True,
            id="flag_on",
        ),
        pytest.param(True, "none", "true", False, id="flag_on-insertOnly"),
        pytest.param(False, "none", "false", False, id="flag_off"),
        pytest.param(False, "all", "true", False, id="flag_on-materialized"),
    ],
)
def test_detect_nondeterministic_source(
    spark, tmp_path, spark_conf, insert_only: bool, materialize: str, fail_if_changed: str, fails: bool
) -> None:
    """Delta's ``MergeIntoSQLNondeterministicOrderTests``: a source that differs on every evaluation
    (a nondeterministic Python UDF bounds a range) fails only when it is not materialized and
    ``failIfSourceChanged`` is on, and only when the merge reads the source twice (not insert-only)."""
    import random

    spark_conf({MATERIALIZE: materialize, FAIL_IF_CHANGED: fail_if_changed})
    spark.udf.register(
        "trueRandom", F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
    )
    path = str(tmp_path / "target")
    deltamerge.write(spark.createDataFrame([(1, 2), (3, 4)], "trgKey int, trgValue int"), path)
    source = (
        "(SELECT r.id AS srcKey, r.id AS srcValue FROM range(1, 100000) as r "
        "JOIN (SELECT trueRandom() * 100000 AS bound) ON r.id < bound) AS source"
    )
    clauses = [] if insert_only else ["WHEN MATCHED THEN UPDATE SET trgValue = srcValue"]
    statement = "\n".join(
        [
            f"MERGE INTO delta.`{path}`",
            f"USING {source}",
            "ON srcKey = trgKey",
            *clauses,
            "WHEN NOT MATCHED THEN INSERT (trgValue, trgKey) VALUES (srcValue, srcKey)",
        ]
    )
    if fails:
        with pytest.raises(Exception, match="source dataset is not deterministic"):
            deltamerge.sql(spark, statement)
    else:
        deltamerge.sql(spark, statement)


def test_merge_into_cached_table(spark, tmp_path) -> None:
    """Delta's ``merge into cached table``: a cached read of the table does not hide rows appended
    later from the MERGE, and the rows read after it are the merged ones."""
    path = str(tmp_path / "target")
    deltamerge.write(spark.createDataFrame([(2, 2), (1, 4)], "key2 int not null, value int not null"), path)
    deltamerge.register_table(spark, "target", path)
    try:
        cached = spark.table("target").cache()
        cached.collect()
        deltamerge.write(
            spark.createDataFrame([(100, 100), (3, 5)], "key2 int not null, value int not null"),
            path,
            mode="append",
        )
        assert _multiset(spark.table("target").collect()) == _multiset([(2, 2), (1, 4), (100, 100), (3, 5)])
        spark.createDataFrame(
            [(1, 1), (0, 3), (3, 3)], "key1 int not null, value int not null"
        ).createOrReplaceTempView("source")
        deltamerge.sql(
            spark,
            "MERGE INTO target AS trgNew USING source src ON src.key1 = key2 "
            "WHEN MATCHED THEN UPDATE SET value = trgNew.value + 3 "
            "WHEN NOT MATCHED THEN INSERT (key2, value) VALUES (key1, src.value + 10)",
        )
        assert _multiset(spark.table("target").collect()) == _multiset(
            [(100, 100), (2, 2), (1, 7), (3, 8), (0, 13)]
        )
        cached.unpersist()
    finally:
        spark.catalog.dropTempView("source")
        deltamerge.unregister_table(spark, "target")


def test_merge_uses_the_tables_spark_session(spark, tmp_path, spark_conf) -> None:
    """Delta's ``Merge should use the same SparkSession consistently``: the builder runs in the
    session of the target ``DeltaTable`` (schema evolution on there, off in the source's session)."""
    spark_conf({AUTO_MERGE: "false"})
    source_path, target_path = str(tmp_path / "source"), str(tmp_path / "target")
    deltamerge.write(spark.range(20).selectExpr("id", "id AS x", "id AS y"), source_path)
    deltamerge.write(spark.range(1).selectExpr("id", "id AS x"), target_path)
    spark2 = spark.newSession()
    spark2.conf.set(AUTO_MERGE, "true")
    target = DeltaTable.forPath(spark2, target_path)
    source = deltamerge.read(spark, source_path).alias("s")
    target.alias("t").merge(source, "t.id = s.id").whenMatchedUpdate(
        set={"t.x": "t.x + 1"}
    ).whenNotMatchedInsertAll().execute()
    assert deltamerge.read(spark, target_path).count() == 20


@pytest.mark.parametrize("partitioned", [True, False])
def test_user_defined_change_type_column(spark, tmp_path, partitioned: bool) -> None:
    """Delta's ``User defined _change_type column doesn't get dropped``: with the change data feed
    off, a data column named ``_change_type`` is an ordinary column that MERGE keeps and writes."""
    path = str(tmp_path / "target")
    deltamerge.write(
        spark.range(1000).selectExpr("id", "int(id / 10) AS part", "'foo' AS _change_type"),
        path,
        partition_by=["part"] if partitioned else None,
        configuration={"delta.enableChangeDataFeed": "false"},
    )
    step = Step(
        "(SELECT id * 42 AS id, int(id / 10) AS part, 'bar' AS _change_type FROM RANGE(33)) s",
        "t.id = s.id",
        (update("*"), insert("*")),
    )
    deltamerge.sql(spark, _merge_sql(path, step, {}))
    rows = deltamerge.read(spark, path).select("id", "_change_type").collect()
    assert all(r["_change_type"] in ("foo", "bar") for r in rows)
    assert Counter(r["_change_type"] for r in rows) == Counter({"foo": 1000 - 24, "bar": 33})


def test_merge_after_schema_change(spark, tmp_path, spark_conf) -> None:
    """Delta's ``merge after schema change`` (see the module docstring): the first merge adds
    ``newCol1``; the second, through the same ``DeltaTable``, adds ``newCol2``."""
    spark_conf({AUTO_MERGE: "true"})
    path = str(tmp_path / "target")
    deltamerge.write(spark.range(10), path)
    t = DeltaTable.forPath(spark, path).alias("t")
    assert t.toDF().schema.simpleString() == "struct<id:bigint>"
    for value, column in ((11, "newCol1"), (12, "newCol2")):
        src = spark.createDataFrame([(value, f"newVal{value}")], f"id bigint, {column} string").alias("s")
        t.merge(src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert DeltaTable.forPath(spark, path).toDF().columns == ["id", "newCol1", "newCol2"]
    assert deltamerge.read(spark, path).count() == 12
