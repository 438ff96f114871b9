"""Row tracking on the data path: MERGE (every execution, copy-on-write and DV mode, with CDF),
UPDATE, DELETE and OPTIMIZE keep the rows' ids; updated rows take the new commit version, copied
rows keep theirs, inserted rows get fresh ids above the high-water mark (Delta's RowTracking
suites' rules). Enabling it on a table with history backfills ids; delta-rs reads the result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn import row_tracking
from merge_variants import VARIANTS, compared

pytestmark = pytest.mark.spark

ENABLED = {"delta.enableRowTracking": "true"}
DVS = {"delta.enableDeletionVectors": "true"}


def tracked(spark, path: str) -> dict[int, tuple[int, int, str]]:  # type: ignore[no-untyped-def]
    """key -> (row id, row commit version, value)."""
    df = deltamerge.read(spark, path, row_tracking=True)
    rows = df.select("k", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()
    return {r.k: (r.row_id, r.row_commit_version, r.v) for r in rows}


def create(spark, path: str, configuration: dict[str, str], n: int = 8) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(n).selectExpr("id AS k", "concat('v', id) AS v").repartition(2)
    deltamerge.write(df, path, configuration=configuration)


def high_water_mark(path: str) -> int:
    return row_tracking.high_water_mark(DeltaLog.for_table(path).update().domains)


def check_merge_result(before: dict, after: dict, version: int, mark: int) -> None:
    """Target keys 0..7; the merge updated 1, deleted 2, matched 5 without updating, inserted 100."""
    assert sorted(after) == [0, 1, 3, 4, 5, 6, 7, 100]
    for k in (0, 3, 4, 5, 6, 7):  # copied (or left behind a deletion vector): id and version kept
        assert after[k] == before[k], k
    assert after[1] == (before[1][0], version, "new1")  # updated: same id, the merge's version
    new_id, new_version, _ = after[100]
    assert new_version == version and new_id > mark  # inserted: a fresh id
    assert len({rid for rid, _, _ in after.values()}) == len(after)  # ids stay unique


def run_merge(spark, path: str) -> None:  # type: ignore[no-untyped-def]
    source = spark.createDataFrame(
        [(1, "new1", "u"), (2, None, "d"), (5, "no", "keep"), (100, "new100", "i")],
        "k long, v string, op string",
    )
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.k = s.k")
        .whenMatchedDelete("s.op = 'd'")
        .whenMatchedUpdate("s.op = 'u'", {"v": "s.v"})
        .whenNotMatchedInsert(values={"k": "s.k", "v": "s.v"})
        .execute()
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["cow", "dv", "cdf"])
def test_merge_keeps_row_ids_in_every_execution(spark, spark_conf, tmp_path: Path, mode: str) -> None:
    configuration = {**ENABLED, **(DVS if mode == "dv" else {})}
    if mode == "cdf":
        configuration["delta.enableChangeDataFeed"] = "true"
    # Each execution fills the materialized columns its own way; make test samples them.
    variants = (
        compared(VARIANTS) if mode != "cdf" else {k: VARIANTS[k] for k in ("single-pass", "delta-shaped")}
    )
    for name, settings in variants.items():
        path = str(tmp_path / name)
        create(spark, path, configuration)
        before = tracked(spark, path)
        assert sorted(rid for rid, _, _ in before.values()) == list(range(8))
        assert {v for _, v, _ in before.values()} == {0}
        mark = high_water_mark(path)
        assert mark == 7
        spark_conf(settings)
        run_merge(spark, path)
        for key in settings:
            spark.conf.unset(key)
        check_merge_result(before, tracked(spark, path), 1, mark)
        assert high_water_mark(path) > mark
    if mode == "cdf":
        changes = deltamerge.read_changes(spark, path, starting_version=1)
        assert "_metadata" not in changes.columns
        assert sorted(r._change_type for r in changes.collect()) == [
            "delete",
            "insert",
            "update_postimage",
            "update_preimage",
        ]
        # Data and change rows are written in one job (as Delta does), so the change data files carry
        # the materialized row-tracking columns too; a reader of the changes sees the table's columns.
        assert [c for c in changes.columns if c.startswith("_row")] == []
        cdc_dir = os.path.join(path, "_change_data")
        assert os.listdir(cdc_dir)


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv-column-mapping"])
def test_update_delete_optimize_and_deltars(spark, tmp_path: Path, dv: bool) -> None:
    path = str(tmp_path / "t")
    mapped = {"delta.columnMapping.mode": "name"}
    create(spark, path, {**ENABLED, **({**DVS, **mapped} if dv else {})})
    before = tracked(spark, path)
    table = DeltaTable.forPath(spark, path)
    table.update("k = 3", {"v": "'three'"})
    table.delete("k = 4")
    after = tracked(spark, path)
    # Delta tags the commits of row-preserving operations.
    assert DeltaLog.for_table(path).read_commit(1)[0].raw["tags"] == {"delta.rowTracking.preserved": "true"}
    assert after[3] == (before[3][0], 1, "three")
    assert 4 not in after
    assert all(after[k] == before[k] for k in (0, 1, 2, 5, 6, 7))
    # OPTIMIZE rewrites every row into one file: ids and commit versions stay.
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}`")
    snap = DeltaLog.for_table(path).update()
    assert snap.num_files == 1
    assert tracked(spark, path) == after
    names = row_tracking.materialized_columns(snap.protocol, snap.metadata)
    assert names is not None
    data = pq.read_table(os.path.join(path, snap.files[0].path))
    assert {names.row_id, names.row_commit_version} <= set(data.column_names)
    # Commit versions are materialized (the new file's default is the OPTIMIZE's version).
    assert snap.files[0].default_row_commit_version == snap.version
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    rows = pa.table(query.execute("SELECT * FROM t")).to_pylist()  # applies deletion vectors
    assert sorted((r["k"], r["v"]) for r in rows) == sorted((k, v) for k, (_, _, v) in after.items())
    assert set(rows[0]) == {"k", "v"}


def test_enabling_on_a_table_with_history_backfills_ids(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    create(spark, path, {})
    deltamerge.write(spark.range(8, 10).selectExpr("id AS k", "concat('v', id) AS v"), path, mode="append")
    with pytest.raises(DeltaMergeError) as exc:
        deltamerge.read(spark, path, row_tracking=True)
    assert exc.value.error_class == "DELTA_ROW_TRACKING_NOT_ENABLED"
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')"
    )
    snap = DeltaLog.for_table(path).update()
    assert {"rowTracking", "domainMetadata"} <= set(snap.protocol.writer_features or ())
    assert all(f.base_row_id is not None for f in snap.files)
    # The backfill re-adds the files without a data change: the table's rows are unchanged.
    log_file = Path(path, "_delta_log", f"{snap.version:020d}.json")
    commit = [json.loads(x) for x in log_file.read_text().splitlines()]
    assert all(a["add"]["dataChange"] is False for a in commit if "add" in a)
    before = tracked(spark, path)
    assert sorted(rid for rid, _, _ in before.values()) == list(range(10))
    run_merge(spark, path)
    after = tracked(spark, path)
    assert after[1] == (before[1][0], snap.version + 1, "new1")
    assert all(after[k] == before[k] for k in (0, 3, 4, 5, 6, 7, 8, 9))
    assert after[100][0] > 9
