"""MERGE in deletion-vector mode and with the Change Data Feed, checked against delta-rs."""

from __future__ import annotations

import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import InvariantViolationError
from deltamerge.log.actions import AddCDCFile, AddFile
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

DV = {"delta.enableDeletionVectors": "true"}
CDF = {"delta.enableChangeDataFeed": "true"}


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def _rs_rows(path, cols):
    # delta-rs's pyarrow export refuses DV tables; its SQL engine reads them (and applies the DVs).
    from deltalake import QueryBuilder

    result = pa.table(QueryBuilder().register("t", RsTable(path)).execute(f"SELECT {', '.join(cols)} FROM t"))
    return sorted(tuple(r.values()) for r in result.to_pylist())


def _target(spark, path, n=20, files=2, props=None):
    df = spark.range(0, n, 1, files).selectExpr("cast(id as int) as id", "cast(id * 10 as int) as v")
    deltamerge.write(df, path, configuration=props)


def _upsert(spark, path, keys, extra=()):
    src = spark.createDataFrame([(k, -k) for k in keys] + list(extra), "id int, v int")
    return (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.v = -3")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
        .collect()[0]
    )


def test_dv_merge_masks_rows_and_writes_only_changes(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, props=DV)
    result = _upsert(spark, path, [1, 3, 5], extra=[(100, 7)])
    assert tuple(result) == (4, 2, 1, 1)
    expected = sorted([(i, i * 10) for i in range(20) if i not in (1, 3, 5)] + [(1, -1), (5, -5), (100, 7)])
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == expected
    assert _rs_rows(path, ["id", "v"]) == expected  # delta-rs honours our DVs

    snap = deltamerge.io.snapshot_for(path)
    with_dv = [f for f in snap.files if f.deletion_vector is not None]
    assert len(with_dv) == 1 and with_dv[0].deletion_vector.cardinality == 3
    new_rows = sum(f.num_records for f in snap.files if f.deletion_vector is None) - 10
    assert new_rows == 3  # two updated rows and one inserted row, nothing copied
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numTargetRowsCopied"] == "0"
    assert metrics["numTargetDeletionVectorsAdded"] == "1"
    assert metrics["numTargetFilesRemoved"] == "0"


def test_dv_merge_updates_existing_dv_and_removes_full_files(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, props=DV)
    _upsert(spark, path, [1])
    _upsert(spark, path, [2])  # second DV on the same file: an updated DV
    m = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert m["numTargetDeletionVectorsUpdated"] == "1"
    assert m["numTargetDeletionVectorsAdded"] == "1"  # Delta reports added + updated
    src = spark.range(10, 20).selectExpr("cast(id as int) as id", "0 as v")
    DeltaTable.forPath(spark, path).alias("t").merge(
        src.alias("s"), "t.id = s.id"
    ).whenMatchedDelete().execute()
    m = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert m["numTargetFilesRemoved"] == "1"  # every row of the second file is gone
    expected = sorted([(i, i * 10) for i in range(10) if i not in (1, 2)] + [(1, -1), (2, -2)])
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == expected
    assert _rs_rows(path, ["id", "v"]) == expected
    # time travel still sees the older versions through their own DVs
    assert len(_rows(deltamerge.read(spark, path, version=1))) == 20


def test_cdf_merge_matches_deltars_change_feed(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, n=6, files=1, props=CDF)
    _upsert(spark, path, [1, 3], extra=[(9, 90)])
    version = DeltaTable.forPath(spark, path).version()
    ours = deltamerge.read_changes(spark, path, version, version).select("id", "v", "_change_type")
    expected = sorted(
        [(1, 10, "update_preimage"), (1, -1, "update_postimage"), (3, 30, "delete"), (9, 90, "insert")]
    )
    assert _rows(ours) == expected
    theirs = pa.table(RsTable(path).load_cdf(starting_version=version, ending_version=version).read_all())
    rs = sorted(
        (r["id"], r["v"], r["_change_type"]) for r in theirs.select(["id", "v", "_change_type"]).to_pylist()
    )
    assert rs == expected


def test_cdf_and_dv_together(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, n=6, files=1, props={**DV, **CDF})
    _upsert(spark, path, [2, 3])
    version = DeltaTable.forPath(spark, path).version()
    changes = _rows(deltamerge.read_changes(spark, path, version, version).select("id", "v", "_change_type"))
    assert changes == sorted([(2, 20, "update_preimage"), (2, -2, "update_postimage"), (3, 30, "delete")])
    assert _rs_rows(path, ["id", "v"]) == sorted([(0, 0), (1, 10), (2, -2), (4, 40), (5, 50)])


def test_insert_only_merge_on_cdf_table_writes_no_change_files(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, n=3, files=1, props=CDF)
    src = spark.createDataFrame([(7, 70), (1, 1)], "id int, v int")
    DeltaTable.forPath(spark, path).alias("t").merge(
        src.alias("s"), "t.id = s.id"
    ).whenNotMatchedInsertAll().execute()

    snap = deltamerge.io.snapshot_for(path)
    assert not any(isinstance(a, AddCDCFile) for a in DeltaLog.for_table(path).read_commit(snap.version))
    changes = deltamerge.read_changes(spark, path, snap.version, snap.version)
    assert _rows(changes.select("id", "v", "_change_type")) == [(7, 70, "insert")]


def test_deltars_reads_dv_merge_history(spark, tmp_path):
    path = str(tmp_path / "t")
    _target(spark, path, props=DV)
    _upsert(spark, path, [4])
    history = RsTable(path).history()
    assert history[0]["operation"] == "MERGE"
    assert history[0]["operationMetrics"]["numTargetDeletionVectorsAdded"] in ("1", 1)


def test_cdf_preimage_of_evolved_nested_struct_is_cast_by_name(spark, tmp_path):
    """Schema evolution adds a struct field in the middle: the pre-image keeps each old value under
    its own field name (a positional cast would shift ``b`` into the new field)."""
    from deltamerge import DeltaTable

    path = str(tmp_path / "t")
    first = spark.createDataFrame([(1, (10, "x"))], "id long, s struct<a: long, b: string>")
    deltamerge.write(first, path, configuration=CDF)
    version = deltamerge.DeltaTable.forPath(spark, path).history(1).collect()[0]["version"] + 1
    src = spark.createDataFrame([(1, (11, 5, "y"))], "id long, s struct<a: long, c: int, b: string>")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .withSchemaEvolution()
        .whenMatchedUpdateAll()
        .execute()
    )
    changes = deltamerge.read_changes(spark, path, version, version)
    got = {r["_change_type"]: r["s"].asDict() for r in changes.collect()}
    assert got["update_preimage"] == {"a": 10, "b": "x", "c": None}
    assert got["update_postimage"] == {"a": 11, "b": "y", "c": 5}


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_cdf_merge_writes_data_and_change_files_in_one_write(spark, tmp_path, dv):
    """Data rows and change rows leave one Spark write partitioned by the change kind (as Delta's
    ``__is_cdc``): data files carry the NULL ``_change_type`` column as Delta's do (readers read the
    table's columns; statistics leave it out), change files go below ``_change_data/<partition>``.
    A row that breaks a CHECK constraint still fails the merge, leaving nothing behind."""
    path = str(tmp_path / "t")
    df = spark.range(0, 12, 1, 2).selectExpr(
        "cast(id as int) as id", "cast(id % 2 as int) as p", "id * 10 as v"
    )
    deltamerge.write(df, path, partition_by=["p"], configuration={**CDF, **(DV if dv else {})})
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT v_small CHECK (v < 1000)")
    src = spark.createDataFrame([(1, 1, -1), (2, 0, -2), (4, 0, 5000), (20, 0, 200)], "id int, p int, v long")

    def merge(source):
        return (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.v = 5000")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    old_files = {f.path for f in deltamerge.io.snapshot_for(path).files}
    merge(src)
    version = DeltaTable.forPath(spark, path).version()
    actions = DeltaLog.for_table(path).read_commit(version)
    adds = [a for a in actions if isinstance(a, AddFile) and a.path not in old_files]  # not DV-only re-adds
    cdcs = [a for a in actions if isinstance(a, AddCDCFile)]
    assert adds and {c.partition_values["p"] for c in cdcs} == {"0", "1"}
    assert all(c.path.startswith(f"_change_data/p={c.partition_values['p']}/") for c in cdcs)
    for a in adds:
        assert "_change_type" in pq.read_schema(os.path.join(path, a.path)).names
        assert "_change_type" not in json.dumps(json.loads(a.stats))
    changes = deltamerge.read_changes(spark, path, version, version).select("id", "p", "v", "_change_type")
    expected = [
        (1, 1, 10, "update_preimage"),
        (1, 1, -1, "update_postimage"),
        (2, 0, 20, "update_preimage"),
        (2, 0, -2, "update_postimage"),
        (4, 0, 40, "delete"),
        (20, 0, 200, "insert"),
    ]
    assert _rows(changes) == sorted(expected)
    table = sorted(tuple(r) for r in deltamerge.read(spark, path).select("id", "p", "v").collect())
    assert table == sorted(
        [(i, i % 2, i * 10) for i in range(12) if i not in (1, 2, 4)] + [(1, 1, -1), (2, 0, -2), (20, 0, 200)]
    )
    assert sorted(tuple(r) for r in _rs_rows(path, ["id", "p", "v"])) == table
    if not dv:  # delta-rs's change-feed reader is checked on the copy-on-write table
        theirs = pa.table(RsTable(path).load_cdf(starting_version=version, ending_version=version).read_all())
        rs = [
            (r["id"], r["p"], r["v"], r["_change_type"])
            for r in theirs.select(["id", "p", "v", "_change_type"]).to_pylist()
        ]
        assert sorted(rs) == sorted(expected)
        # delta-rs merges into the files that carry the extra column; both read the result.
        rs_source = pa.table({"id": pa.array([3], pa.int32()), "p": pa.array([1], pa.int32()), "v": [33]})
        RsTable(path).merge(rs_source, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update(
            {"v": "s.v"}
        ).execute()
        table = sorted((i, q, 33 if i == 3 else w) for i, q, w in table)
        assert (
            sorted(tuple(r) for r in deltamerge.read(spark, path).select("id", "p", "v").collect()) == table
        )
        version = DeltaTable.forPath(spark, path).version()

    files_before = sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))
    with pytest.raises(InvariantViolationError, match="v_small"):
        merge(spark.createDataFrame([(3, 1, 7000)], "id int, p int, v long"))
    assert DeltaTable.forPath(spark, path).version() == version
    assert sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)) == files_before
