"""Port of Delta's ``RowTrackingMergeSuite`` (own format, smaller tables).

The target holds keys 0..19 (``stored_id`` = key, ``last_modified_version`` = 0) in two files; the
source keys 10..29 with ``last_modified_version`` = 1. Every row a MERGE writes carries the version
that wrote it in ``last_modified_version``, so after each merge a row's row commit version must
equal that column; a row that existed keeps its row id, an inserted row gets a fresh one above the
ids before the merge. Row tracking comes from the session default, as in Delta's suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import deltamerge
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn import row_tracking

pytestmark = pytest.mark.spark

N_ROWS, N_UNMATCHED = 20, 10
DEFAULT = {"spark.databricks.delta.properties.defaults.enableRowTracking": "true"}


def _table(spark, path: str, partitioned: bool = False, dvs: bool = False) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(N_ROWS).selectExpr("id AS key", "id AS stored_id", "0L AS last_modified_version")
    if partitioned:
        df = df.selectExpr("*", "0 AS partition")
    configuration = {"delta.enableDeletionVectors": "true"} if dvs else None
    deltamerge.write(
        df.repartition(2),
        path,
        partition_by=["partition"] if partitioned else None,
        configuration=configuration,
    )


def _source(spark, partitioned: bool = False) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(N_UNMATCHED, N_UNMATCHED + N_ROWS).selectExpr(
        "id AS key", "id AS stored_id", "1L AS last_modified_version"
    )
    if partitioned:
        df = df.selectExpr("*", "0 AS partition")
    df.createOrReplaceTempView("rt_source")


def _state(spark, path: str) -> list[tuple[int, int, int, int]]:  # type: ignore[no-untyped-def]
    df = deltamerge.read(spark, path, row_tracking=True)
    cols = ["stored_id", "last_modified_version", "_metadata.row_id", "_metadata.row_commit_version"]
    return [tuple(r) for r in df.select(*cols).collect()]


def _merge(spark, path: str, clauses: str, source: str = "rt_source") -> None:  # type: ignore[no-untyped-def]
    deltamerge.sql(spark, f"MERGE INTO delta.`{path}` AS t USING {source} AS s ON s.key = t.key {clauses}")


def _validate(before: list, after: list, expected: list[tuple[int, int]], path: str) -> None:
    assert sorted((s, v) for s, v, _, _ in after) == sorted(expected)
    # Delta's validateRowCommitVersionsPostMerge: the version that last wrote each row.
    assert all(version == lmv for _, lmv, _, version in after), after
    # validateRowIdsPostMerge: old rows keep their ids, new rows get fresh distinct ones.
    old_ids = {stored: rid for stored, _, rid, _ in before}
    highest = max(old_ids.values())
    ids = [rid for _, _, rid, _ in after]
    assert len(ids) == len(set(ids))
    for stored, _, rid, _ in after:
        if stored in old_ids:
            assert rid == old_ids[stored], (stored, rid)
        else:
            assert rid > highest, (stored, rid, highest)
    snap = DeltaLog.for_table(path).update()
    assert row_tracking.high_water_mark(snap.domains) >= max(ids)
    info = DeltaLog.for_table(path).read_commit(snap.version)[0]
    assert info.operation == "MERGE" and info.raw["tags"] == {"delta.rowTracking.preserved": "true"}


U = range(N_UNMATCHED)  # target keys the source does not have
M = range(N_UNMATCHED, N_ROWS)  # keys in both
NEW = range(N_ROWS, N_ROWS + N_UNMATCHED)  # source keys the target does not have

CASES = {
    "insert_not_matched_only": (
        "WHEN NOT MATCHED THEN INSERT *",
        [(k, 0) for k in (*U, *M)] + [(k, 1) for k in NEW],
    ),
    "delete_matched_only": ("WHEN MATCHED THEN DELETE", [(k, 0) for k in U]),
    "update_matched_only": ("WHEN MATCHED THEN UPDATE SET *", [(k, 0) for k in U] + [(k, 1) for k in M]),
    "delete_not_matched_by_source_only": ("WHEN NOT MATCHED BY SOURCE THEN DELETE", [(k, 0) for k in M]),
    "update_not_matched_by_source_only": (
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET last_modified_version = 1",
        [(k, 1) for k in U] + [(k, 0) for k in M],
    ),
    "update_and_delete_not_matched_by_source": (
        "WHEN NOT MATCHED BY SOURCE AND t.stored_id % 2 = 0 THEN DELETE "
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET last_modified_version = 1",
        [(k, 1) for k in U if k % 2] + [(k, 0) for k in M],
    ),
    "every_clause_kind": (
        "WHEN MATCHED AND s.key % 2 = 0 THEN UPDATE SET * WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN DELETE",
        [(k, 1) for k in M if k % 2 == 0] + [(k, 1) for k in NEW],
    ),
}


@pytest.mark.parametrize("table", ["plain", "partitioned", "deletion_vectors"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_row_tracking_merge(spark, spark_conf, tmp_path: Path, case: str, table: str) -> None:
    spark_conf(DEFAULT)
    path = str(tmp_path / "t")
    partitioned = table == "partitioned"
    _table(spark, path, partitioned=partitioned, dvs=table == "deletion_vectors")
    _source(spark, partitioned=partitioned)
    before = _state(spark, path)
    clauses, expected = CASES[case]
    _merge(spark, path, clauses)
    _validate(before, _state(spark, path), expected, path)


@pytest.mark.parametrize("clause", ["UPDATE SET t.last_modified_version = 2", "DELETE"])
def test_source_rows_matching_several_target_rows(spark, spark_conf, tmp_path: Path, clause: str) -> None:
    spark_conf(DEFAULT)
    path = str(tmp_path / "t")
    _table(spark, path)
    copy = deltamerge.read(spark, path).selectExpr(
        "key", f"stored_id + {N_ROWS * 2} AS stored_id", "1L AS lmv"
    )
    deltamerge.write(copy.withColumnRenamed("lmv", "last_modified_version"), path, mode="append")
    _source(spark)
    before = _state(spark, path)
    _merge(spark, path, f"WHEN MATCHED THEN {clause}")
    dup = N_ROWS * 2
    kept = [(k, 0) for k in U] + [(k + dup, 1) for k in U]
    updated = [(k, 2) for k in M] + [(k + dup, 2) for k in M] if clause.startswith("UPDATE") else []
    _validate(before, _state(spark, path), kept + updated, path)


def test_source_is_the_target(spark, spark_conf, tmp_path: Path) -> None:
    spark_conf(DEFAULT)
    path = str(tmp_path / "t")
    _table(spark, path)
    before = _state(spark, path)
    source = f"(SELECT key, stored_id, 1L AS last_modified_version FROM delta.`{path}`)"
    _merge(spark, path, "WHEN MATCHED THEN UPDATE SET *", source=source)
    _validate(before, _state(spark, path), [(k, 1) for k in range(N_ROWS)], path)


def test_multiple_merges_and_schema_evolution(spark, spark_conf, tmp_path: Path) -> None:
    spark_conf({**DEFAULT, "spark.databricks.delta.schema.autoMerge.enabled": "true"})
    path = str(tmp_path / "t")
    _table(spark, path)
    expected = dict.fromkeys(range(N_ROWS), 0)
    before = _state(spark, path)
    for i, key in enumerate((3, N_ROWS + 1, 5)):
        # One row at a time; the second merge adds a column (schema evolution).
        extra = ", 'x' AS note" if i == 1 else ""
        row = f"SELECT {key}L AS key, {key}L AS stored_id, {i + 1}L AS last_modified_version{extra}"
        spark.sql(row).createOrReplaceTempView("one")
        _merge(spark, path, "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", source="one")
        expected[key] = i + 1
        after = _state(spark, path)
        _validate(before, after, list(expected.items()), path)
        before = after
    assert "note" in deltamerge.read(spark, path).columns
