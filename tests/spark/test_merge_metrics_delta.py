"""Delta Lake's MERGE operation-metrics tests (delta-io/delta ``MergeIntoMetricsBase.scala``, run by
``DescribeDeltaHistorySuite``), as data.

Each ``Scenario`` is one Delta test. The target and the source are ``spark.range(start, end, 1,
partitions)`` (``id`` is a non-null long) with two columns added the way Delta's helper adds them:
``partCol = floor(id / (rows // partitions))`` and ``extraCol = rows - id``. The target is written
as a new Delta table, one file per range partition (partitioned by ``partCol`` or not), so that the
file counts of the metrics match Delta's layout; then the MERGE runs through the builder API, and the
``operationMetrics`` of the last commit (``DeltaTable.history(1)``) are checked like Delta does:

* the key set is exactly Delta's ``DeltaOperationMetrics.MERGE`` and every value is >= 0;
* every row metric (``numSourceRows``, ``numTargetRows*``, ``numOutputRows``) equals the scenario's
  ``expected`` value, 0 when not listed; a file metric is compared only when listed (Delta's ``-1``
  "don't check" entries, e.g. ``numTargetFilesRemoved`` of "delete-only", are simply left out);
  ``overrides`` replace expected values for one (partitioned, cdf) variant;
* invariants: updated = matched + not-matched-by-source updated, same for deleted; files / bytes added
  are 0 when no row is written (inserted + updated + copied) and else between 1 and that row count
  (bytes > 0); files / bytes removed likewise against deleted + updated + copied rows; all four time
  metrics exist and ``executionTimeMs`` is the largest; ``numTargetChangeFilesAdded`` is 0 without the
  change data feed or when no row changed, and > 0 otherwise unless the MERGE only inserted;
* the DataFrame ``execute()`` returns is one row (affected, updated, deleted, inserted).

Delta runs each test four times: partitioned or not, with the change data feed on or off (as the
``spark.databricks.delta.properties.defaults.enableChangeDataFeed`` default; here the table property
is set when the target is written), with ``history.metricsEnabled`` on and
``skipRecordingEmptyCommits`` off so a MERGE that changes nothing still commits its metrics. So does
this file, but to stay fast it runs each scenario in one of the four variants (rotating), and only
those in ``ALL_VARIANTS`` and ``EXTRA_VARIANTS`` in more (all 136 Delta variants passed when run).
Deletion vectors are off: Delta's default, and the suite has no DV
variant (its DV metrics are only checked to be present and non-negative).

Delta itself ``ignore``s six tests ("delete-only with condition", "... with update with unsatisfied
condition", "... with unsatisfied condition", "... with target-only condition", "... with
source-only condition", "match-only with unsatisfied condition"): their expectations are what Delta
*should* report for ``numTargetRowsCopied`` and the file counts, not what it reports. They are ported
with Delta's expectations (``delta_ignored``): deltamerge meets them (it touches only the files
whose rows a clause acts on), so they run like the others.

Not ported: nothing of this suite. (The catalog-owned variant of ``DescribeDeltaHistorySuite`` only
changes how commits are coordinated, which deltamerge does not have.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable

pytestmark = pytest.mark.spark

CONFS = {
    "spark.databricks.delta.history.metricsEnabled": "true",
    "spark.databricks.delta.skipRecordingEmptyCommits": "false",
}

# Delta's DeltaOperationMetrics.MERGE, split as MergeIntoMetricsBase splits it.
ROW_METRICS = (
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsMatchedUpdated",
    "numTargetRowsNotMatchedBySourceUpdated",
    "numTargetRowsDeleted",
    "numTargetRowsMatchedDeleted",
    "numTargetRowsNotMatchedBySourceDeleted",
    "numTargetRowsCopied",
    "numOutputRows",
)
FILE_METRICS = (
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetBytesAdded",
    "numTargetBytesRemoved",
)
TIME_METRICS = ("executionTimeMs", "materializeSourceTimeMs", "scanTimeMs", "rewriteTimeMs")
CDF_METRICS = ("numTargetChangeFilesAdded",)
DV_METRICS = (
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsUpdated",
    "numTargetDeletionVectorsRemoved",
)
MERGE_METRICS = frozenset(ROW_METRICS + FILE_METRICS + TIME_METRICS + CDF_METRICS + DV_METRICS)

Range = tuple[int, int, int]  # spark.range(start, end, 1, numPartitions)
EMPTY: Range = (0, 0, 2)  # spark.range(0): the session's default parallelism (2 here and in Delta)


# --- clauses (delta-spark's builder calls) -----------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    method: str  # a DeltaMergeBuilder method
    condition: str | None = None
    set: dict[str, str] | None = None

    def apply(self, builder: Any) -> Any:
        kwargs: dict[str, Any] = {"condition": self.condition}
        if self.set is not None:
            kwargs["set"] = self.set
        return getattr(builder, self.method)(**kwargs)


def update_all(condition: str | None = None) -> Clause:
    return Clause("whenMatchedUpdateAll", condition)


def delete(condition: str | None = None) -> Clause:
    return Clause("whenMatchedDelete", condition)


def insert_all(condition: str | None = None) -> Clause:
    return Clause("whenNotMatchedInsertAll", condition)


def by_source_update(set_: dict[str, str], condition: str | None = None) -> Clause:
    return Clause("whenNotMatchedBySourceUpdate", condition, set_)


def by_source_delete(condition: str | None = None) -> Clause:
    return Clause("whenNotMatchedBySourceDelete", condition)


BUMP_EXTRA = {"t.extraCol": "t.extraCol + 1"}


@dataclass(frozen=True)
class Scenario:
    name: str
    target: Range
    source: Range
    clauses: tuple[Clause, ...]
    expected: dict[str, int]
    condition: str = "s.id = t.id"
    # (partitioned, cdf) -> metric values that replace ``expected`` for that variant
    overrides: dict[tuple[bool, bool], dict[str, int]] = field(default_factory=dict)
    halve_source_ids: bool = False  # source ``id`` becomes floor(id / 2): every key twice
    delta_ignored: bool = False  # Delta ``ignore``s this test (its own metrics are wrong)


def sc(name: str, target: Range, source: Range, clauses: list[Clause], **kw: Any) -> Scenario:
    return Scenario(name=name, target=target, source=source, clauses=tuple(clauses), **kw)


T100: Range = (0, 100, 5)
S50_150: Range = (50, 150, 10)
S100_200: Range = (100, 200, 10)

SCENARIOS: list[Scenario] = [
    # --- insert-only -------------------------------------------------------------------------------
    sc(
        "insert-only",
        T100,
        S50_150,
        [insert_all()],
        expected={"numSourceRows": 100, "numOutputRows": 50, "numTargetRowsInserted": 50},
    ),
    sc(
        "insert-only with skipping",
        T100,
        (100, 200, 5),
        [insert_all()],
        condition="s.id = t.id and t.partCol >= 2",
        expected={"numSourceRows": 100, "numOutputRows": 100, "numTargetRowsInserted": 100},
    ),
    sc(
        "insert-only with condition",
        T100,
        S50_150,
        [insert_all("s.id >= 125")],
        expected={"numSourceRows": 100, "numOutputRows": 25, "numTargetRowsInserted": 25},
    ),
    sc(
        "insert-only when all rows match",
        (0, 200, 5),
        S50_150,
        [insert_all()],
        expected={"numSourceRows": 100},
    ),
    sc(
        "insert-only with unsatisfied condition",
        T100,
        S50_150,
        [insert_all("s.id > 150")],
        expected={"numSourceRows": 100},
    ),
    sc("insert-only with empty source", (0, 200, 5), EMPTY, [insert_all()], expected={"numSourceRows": 0}),
    sc(
        "insert-only with empty target",
        EMPTY,
        S50_150,
        [insert_all()],
        expected={"numSourceRows": 100, "numOutputRows": 100, "numTargetRowsInserted": 100},
    ),
    sc(
        "insert-only with disjoint tables",
        T100,
        S100_200,
        [update_all(), insert_all()],
        expected={"numSourceRows": 100, "numOutputRows": 100, "numTargetRowsInserted": 100},
    ),
    sc(
        "insert-only with update/delete with unsatisfied conditions",
        (0, 50, 5),
        (0, 150, 10),
        [update_all("s.id + t.id > 200"), delete("s.id + t.id < 0"), insert_all()],
        expected={
            "numSourceRows": 150,
            "numOutputRows": 150,
            "numTargetRowsInserted": 100,
            "numTargetRowsCopied": 50,
            "numTargetFilesRemoved": 5,
        },
    ),
    # --- delete-only -------------------------------------------------------------------------------
    sc(
        "delete-only",
        T100,
        S50_150,
        [delete()],
        expected={
            "numSourceRows": 100,
            "numTargetRowsDeleted": 50,
            "numTargetRowsMatchedDeleted": 50,
            "numOutputRows": 10,
            "numTargetRowsCopied": 10,
            "numTargetFilesAdded": 1,
        },
    ),
    sc(
        "delete-only with skipping",
        T100,
        S50_150,
        [delete()],
        condition="s.id = t.id and t.partCol >= 2",
        expected={
            "numSourceRows": 100,
            "numOutputRows": 10,
            "numTargetRowsCopied": 10,
            "numTargetRowsDeleted": 50,
            "numTargetRowsMatchedDeleted": 50,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "delete-only with disjoint tables",
        T100,
        S100_200,
        [delete()],
        expected={"numSourceRows": 100, "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0},
    ),
    sc(
        "delete-only delete all rows",
        (100, 200, 5),
        (0, 300, 10),
        [delete()],
        expected={
            "numSourceRows": 300,
            "numOutputRows": 0,
            "numTargetRowsCopied": 0,
            "numTargetRowsDeleted": 100,
            "numTargetRowsMatchedDeleted": 100,
            "numTargetFilesAdded": 0,
            "numTargetFilesRemoved": 5,
        },
    ),
    sc(
        "delete-only with condition",
        T100,
        (0, 150, 10),
        [delete("s.id + t.id < 50")],
        expected={
            "numSourceRows": 150,
            "numOutputRows": 15,
            "numTargetRowsCopied": 15,
            "numTargetRowsDeleted": 25,
            "numTargetRowsMatchedDeleted": 25,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 2,
        },
        delta_ignored=True,
    ),
    sc(
        "delete-only with update with unsatisfied condition",
        T100,
        (0, 100, 10),
        [update_all("s.id + t.id > 1000"), delete("s.id + t.id < 50")],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 15,
            "numTargetRowsCopied": 15,
            "numTargetRowsDeleted": 25,
            "numTargetRowsMatchedDeleted": 25,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 2,
        },
        delta_ignored=True,
    ),
    sc(
        "delete-only with condition on delete and insert with no matching rows",
        T100,
        (0, 100, 10),
        [delete("s.id + t.id < 50"), insert_all()],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 75,
            "numTargetRowsCopied": 75,
            "numTargetRowsDeleted": 25,
            "numTargetRowsMatchedDeleted": 25,
            "numTargetFilesRemoved": 5,
        },
    ),
    sc(
        "delete-only with unsatisfied condition",
        T100,
        (0, 150, 15),
        [delete("s.id + t.id > 1000")],
        expected={"numSourceRows": 150, "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0},
        delta_ignored=True,
    ),
    sc(
        "delete-only with target-only condition",
        T100,
        (0, 150, 15),
        [delete("t.id >= 45")],
        expected={
            "numSourceRows": 150,
            "numOutputRows": 5,
            "numTargetRowsCopied": 5,
            "numTargetRowsDeleted": 55,
            "numTargetRowsMatchedDeleted": 55,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 3,
        },
        delta_ignored=True,
    ),
    sc(
        "delete-only with source-only condition",
        T100,
        (50, 150, 100),
        [delete("s.id >= 70")],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 10,
            "numTargetRowsCopied": 10,
            "numTargetRowsDeleted": 30,
            "numTargetRowsMatchedDeleted": 30,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 2,
        },
        delta_ignored=True,
    ),
    sc(
        "delete-only with empty source",
        (0, 100, 4),
        EMPTY,
        [delete("t.id > 25")],
        expected={"numSourceRows": 0, "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0},
    ),
    sc(
        "delete-only with empty target",
        EMPTY,
        (50, 150, 3),
        [delete()],
        expected={"numSourceRows": 100, "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0},
    ),
    sc(
        "delete-only without join empty source",
        T100,
        EMPTY,
        [delete()],
        condition="t.id >= 50",
        expected={"numSourceRows": 0, "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0},
    ),
    sc(
        "delete-only without join with source with 1 row",
        T100,
        (0, 1, 1),
        [delete()],
        condition="t.id >= 50",
        expected={
            "numSourceRows": 1,
            "numOutputRows": 10,
            "numTargetRowsCopied": 10,
            "numTargetRowsDeleted": 50,
            "numTargetRowsMatchedDeleted": 50,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "delete-only without join",
        T100,
        (0, 200, 10),
        [delete()],
        condition="t.id >= 50",
        expected={
            "numSourceRows": 200,
            "numOutputRows": 10,
            "numTargetRowsCopied": 10,
            "numTargetRowsDeleted": 50,
            "numTargetRowsMatchedDeleted": 50,
            "numTargetFilesAdded": 1,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "delete-only with duplicates",
        T100,
        (50, 150, 2),
        [delete()],
        halve_source_ids=True,  # source keys 25..74, each twice
        expected={
            "numSourceRows": 100,
            "numOutputRows": 10,
            "numTargetRowsDeleted": 50,
            "numTargetRowsMatchedDeleted": 50,
            "numTargetRowsCopied": 10,
            "numTargetFilesAdded": 2,
            "numTargetFilesRemoved": 3,
        },
        # Unpartitioned, the ten copied rows (two target files' worth) land in one new file.
        overrides={(False, True): {"numTargetFilesAdded": 1}, (False, False): {"numTargetFilesAdded": 1}},
    ),
    # --- match-only --------------------------------------------------------------------------------
    sc(
        "match-only",
        T100,
        S50_150,
        [update_all()],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 60,
            "numTargetRowsUpdated": 50,
            "numTargetRowsMatchedUpdated": 50,
            "numTargetRowsCopied": 10,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "match-only with skipping",
        T100,
        S50_150,
        [update_all()],
        condition="s.id = t.id and t.partCol >= 2",
        expected={
            "numSourceRows": 100,
            "numOutputRows": 60,
            "numTargetRowsUpdated": 50,
            "numTargetRowsMatchedUpdated": 50,
            "numTargetRowsCopied": 10,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "match-only with update/delete with unsatisfied conditions",
        T100,
        S50_150,
        [delete("s.id + t.id > 1000"), update_all("s.id + t.id < 1000"), insert_all("s.id > 1000")],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 60,
            "numTargetRowsUpdated": 50,
            "numTargetRowsMatchedUpdated": 50,
            "numTargetRowsCopied": 10,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "match-only with unsatisfied condition",
        T100,
        S50_150,
        [update_all("s.id + t.id > 1000")],
        expected={"numSourceRows": 100},
        delta_ignored=True,
    ),
    # --- not matched by source only ----------------------------------------------------------------
    sc(
        "not matched by source update only",
        T100,
        S50_150,
        [by_source_update(BUMP_EXTRA, "t.id < 20")],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 100,
            "numTargetRowsUpdated": 20,
            "numTargetRowsNotMatchedBySourceUpdated": 20,
            "numTargetRowsCopied": 80,
            "numTargetFilesRemoved": 5,
        },
    ),
    # --- full merges -------------------------------------------------------------------------------
    sc(
        "upsert",
        T100,
        S50_150,
        [update_all(), insert_all()],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 110,
            "numTargetRowsInserted": 50,
            "numTargetRowsUpdated": 50,
            "numTargetRowsMatchedUpdated": 50,
            "numTargetRowsCopied": 10,
            "numTargetFilesRemoved": 3,
        },
    ),
    sc(
        "replace target with source",
        T100,
        S50_150,
        [update_all(), insert_all(), by_source_delete()],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 100,
            "numTargetRowsInserted": 50,
            "numTargetRowsUpdated": 50,
            "numTargetRowsMatchedUpdated": 50,
            "numTargetRowsDeleted": 50,
            "numTargetRowsNotMatchedBySourceDeleted": 50,
            "numTargetRowsCopied": 0,
            "numTargetFilesRemoved": 5,
        },
    ),
    sc(
        "upsert and delete with conditions",
        (0, 100, 10),
        (50, 150, 3),
        [
            update_all("t.id >= 55 and t.id < 60"),
            delete("t.id < 70"),
            insert_all(),
            by_source_update(BUMP_EXTRA, "t.id < 10"),
            by_source_delete("t.id >= 45"),
        ],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 130,
            "numTargetRowsInserted": 50,
            "numTargetRowsUpdated": 15,
            "numTargetRowsMatchedUpdated": 5,
            "numTargetRowsNotMatchedBySourceUpdated": 10,
            "numTargetRowsDeleted": 20,
            "numTargetRowsMatchedDeleted": 15,
            "numTargetRowsNotMatchedBySourceDeleted": 5,
            "numTargetRowsCopied": 65,
            "numTargetFilesRemoved": 10,
        },
    ),
    sc(
        "update/delete/insert with some unsatisfied conditions",
        T100,
        S50_150,
        [
            delete("s.id + t.id > 1000"),
            by_source_delete("t.id > 1000"),
            by_source_update(BUMP_EXTRA, "t.id < 1000"),
            insert_all("s.id > 1000"),
        ],
        expected={
            "numSourceRows": 100,
            "numOutputRows": 100,
            "numTargetRowsUpdated": 50,
            "numTargetRowsNotMatchedBySourceUpdated": 50,
            "numTargetRowsCopied": 50,
            "numTargetFilesRemoved": 5,
        },
    ),
]
assert len(SCENARIOS) == 34 and len({s.name for s in SCENARIOS}) == 34

# (scenario, partitioned, cdf) variants deltamerge gets wrong -> reason.
XFAIL: dict[tuple[str, bool, bool], str] = {}


# --- checks (Delta's runMergeCmdAndTestMetrics) ------------------------------------------------------


def _with_extra_columns(df: DataFrame, rows: int, partitions: int) -> DataFrame:
    per_part = rows // partitions if rows > 0 else 1
    return df.withColumn("partCol", F.expr(f"floor(id / {per_part})")).withColumn(
        "extraCol", F.expr(f"{rows} - id")
    )


def _range_frame(spark: Any, r: Range, halve: bool = False) -> DataFrame:
    start, end, partitions = r
    df = spark.range(start, end, 1, partitions)
    if halve:
        df = df.select(F.floor(F.col("id") / 2).alias("id"))
    return _with_extra_columns(df, max(end - start, 0), partitions)


def _expected_metrics(sc_: Scenario, partitioned: bool, cdf: bool) -> dict[str, int]:
    expected = dict.fromkeys(ROW_METRICS, 0)
    expected.update(sc_.expected)
    expected.update(sc_.overrides.get((partitioned, cdf), {}))
    return expected


def _check_invariants(m: dict[str, int], cdf: bool) -> None:
    assert m["numTargetRowsUpdated"] == (
        m["numTargetRowsMatchedUpdated"] + m["numTargetRowsNotMatchedBySourceUpdated"]
    )
    assert m["numTargetRowsDeleted"] == (
        m["numTargetRowsMatchedDeleted"] + m["numTargetRowsNotMatchedBySourceDeleted"]
    )

    written = m["numTargetRowsInserted"] + m["numTargetRowsUpdated"] + m["numTargetRowsCopied"]
    if written == 0:
        assert (m["numTargetFilesAdded"], m["numTargetBytesAdded"]) == (0, 0), m
    else:
        assert 0 < m["numTargetFilesAdded"] <= written, m
        assert m["numTargetBytesAdded"] > 0, m

    touched = m["numTargetRowsDeleted"] + m["numTargetRowsUpdated"] + m["numTargetRowsCopied"]
    if touched == 0:
        assert (m["numTargetFilesRemoved"], m["numTargetBytesRemoved"]) == (0, 0), m
    else:
        assert 0 < m["numTargetFilesRemoved"] <= touched, m
        assert m["numTargetBytesRemoved"] > 0, m

    assert m["executionTimeMs"] == max(m[k] for k in TIME_METRICS), m

    inserted = m["numTargetRowsInserted"]
    changed = m["numTargetRowsUpdated"] + m["numTargetRowsDeleted"] + inserted
    if not cdf or changed == 0:
        assert m["numTargetChangeFilesAdded"] == 0, m
    elif not (inserted > 0 and changed == inserted):  # insert-only: change files are optional
        assert m["numTargetChangeFilesAdded"] > 0, m


VARIANTS = [(partitioned, cdf) for partitioned in (True, False) for cdf in (True, False)]
# Delta runs every scenario in all four variants; to keep this file fast, each scenario runs in one
# (rotating through the four in list order), the one with per-variant overrides in all four, and the
# unpartitioned CDF variant of "delete-only without join" as well (a case deltamerge gets wrong).
ALL_VARIANTS = {"delete-only with duplicates"}
EXTRA_VARIANTS = {("delete-only without join", False, True)}
assert ALL_VARIANTS.issubset(s.name for s in SCENARIOS)


def _id(sc_: Scenario, partitioned: bool, cdf: bool) -> str:
    name = sc_.name.replace(" ", "_").replace("/", "_")
    return f"{name}-{'partitioned' if partitioned else 'unpartitioned'}-{'cdf' if cdf else 'nocdf'}"


def _marks(sc_: Scenario, partitioned: bool, cdf: bool) -> list[Any]:
    reason = XFAIL.get((sc_.name, partitioned, cdf))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


CASES = [
    pytest.param(sc_, partitioned, cdf, id=_id(sc_, partitioned, cdf), marks=_marks(sc_, partitioned, cdf))
    for i, sc_ in enumerate(SCENARIOS)
    for partitioned, cdf in VARIANTS
    if sc_.name in ALL_VARIANTS
    or (partitioned, cdf) == VARIANTS[i % len(VARIANTS)]
    or (sc_.name, partitioned, cdf) in EXTRA_VARIANTS
]
assert all(key[0] in {s.name for s in SCENARIOS} for key in XFAIL)


@pytest.mark.parametrize(("sc_", "partitioned", "cdf"), CASES)
def test_merge_metrics(spark, tmp_path, spark_conf, sc_: Scenario, partitioned: bool, cdf: bool) -> None:
    spark_conf(CONFS)
    path = str(tmp_path / "target")
    deltamerge.write(
        _range_frame(spark, sc_.target),
        path,
        partition_by=["partCol"] if partitioned else None,
        configuration={"delta.enableChangeDataFeed": "true" if cdf else "false"},
    )
    source = _range_frame(spark, sc_.source, sc_.halve_source_ids)

    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), sc_.condition)
    for clause in sc_.clauses:
        builder = clause.apply(builder)
    result = builder.execute()

    expected = _expected_metrics(sc_, partitioned, cdf)
    updated, deleted, inserted = (
        expected["numTargetRowsUpdated"],
        expected["numTargetRowsDeleted"],
        expected["numTargetRowsInserted"],
    )
    assert [tuple(r) for r in result.collect()] == [
        (updated + deleted + inserted, updated, deleted, inserted)
    ]

    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["version"] == 1 and last["operation"] == "MERGE"
    raw = dict(last["operationMetrics"])
    assert set(raw) == MERGE_METRICS
    metrics = {k: int(v) for k, v in raw.items()}
    assert all(v >= 0 for v in metrics.values()), metrics
    assert {k: metrics[k] for k in expected} == expected
    _check_invariants(metrics, cdf)
