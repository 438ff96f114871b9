"""ALTER TABLE ... DROP FEATURE [TRUNCATE HISTORY] and ``DeltaTable.dropFeatureSupport``: Delta's
checks and errors, each feature's clean-up commits, the fast drop with checkpoint protection, the
history-truncating drop, and protocol normalization."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.replay import list_log
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


def _snap(path: str):  # type: ignore[no-untyped-def]
    return DeltaLog.for_table(path).update()


def _proto(path: str) -> tuple:
    p = _snap(path).protocol
    return (
        p.min_reader_version,
        p.min_writer_version,
        None if p.reader_features is None else sorted(p.reader_features),
        None if p.writer_features is None else sorted(p.writer_features),
    )


def _ops(spark, path: str, since: int) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    rows = DeltaTable.forPath(spark, path).history().where(f"version > {since}").orderBy("version").collect()
    return [(r["operation"], dict(r["operationParameters"] or {})) for r in rows]


def _rows(spark, path: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in DeltaTable.forPath(spark, path).toDF().collect())


def _error(fn, error_class: str) -> DeltaMergeError:  # type: ignore[no-untyped-def]
    with pytest.raises(DeltaMergeError) as e:
        fn()
    assert e.value.error_class == error_class, str(e.value)
    return e.value


def _age_log(path: str, seconds: float) -> None:
    """Make every log file look ``seconds`` older (as Delta's tests move a manual clock)."""
    log_dir = Path(path) / "_delta_log"
    for f in log_dir.iterdir():
        if f.is_file():
            st = f.stat()
            os.utime(f, (st.st_atime - seconds, st.st_mtime - seconds))


def test_checks_and_errors_in_deltas_order(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(4).selectExpr("id", "id * 2 AS v"),
        path,
        configuration={"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"},
    )
    t = DeltaTable.forPath(spark, path)
    before = _snap(path).version
    sql = f"ALTER TABLE delta.`{path}` DROP FEATURE"
    e = _error(lambda: t.dropFeatureSupport("noSuchFeature"), "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    assert "Cannot drop noSuchFeature because it is not supported" in str(e)
    _error(lambda: deltamerge.sql(spark, f"{sql} appendOnly"), "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE")
    _error(lambda: deltamerge.sql(spark, f"{sql} changeDataFeed"), "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT")
    # the lookup ignores case, the presence check does not (as Delta)
    _error(lambda: deltamerge.sql(spark, f"{sql} DeletionVectors"), "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT")
    e = _error(
        lambda: deltamerge.sql(spark, f"{sql} `delta.enableDeletionVectors`"),
        "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY",
    )
    assert "`delta.enableDeletionVectors`" in str(e)
    _error(
        lambda: deltamerge.sql(spark, f"{sql} rowTracking TRUNCATE HISTORY"),
        "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED",
    )
    e = _error(
        lambda: deltamerge.sql(spark, f"{sql} 'domainMetadata'"), "DELTA_FEATURE_DROP_DEPENDENT_FEATURE"
    )
    assert "(rowTracking)" in str(e)
    _error(lambda: t.dropFeatureSupport("checkpointProtection"), "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT")
    with pytest.raises(ValueError, match="featureName needs to be a string"):
        t.dropFeatureSupport(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truncateHistory needs to be a boolean"):
        t.dropFeatureSupport("rowTracking", "yes")  # type: ignore[arg-type]
    assert _snap(path).version == before  # nothing was committed


def test_check_constraints_writer_feature(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3).selectExpr("id"), path)
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (id >= 0)")
    assert _proto(path) == (1, 3, None, None)
    e = _error(
        lambda: deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE checkConstraints"),
        "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE",
    )
    assert "`positive`" in str(e)
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT positive")
    v = _snap(path).version
    deltamerge.sql(spark, f'ALTER TABLE delta.`{path}` DROP FEATURE "checkConstraints"')
    assert _proto(path) == (1, 2, None, None)
    assert _ops(spark, path, v) == [
        ("DROP FEATURE", {"featureName": "checkConstraints", "truncateHistory": "false"})
    ]


def test_deletion_vectors_fast_drop(spark, tmp_path: Path) -> None:
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 20, 1, 2).selectExpr("id", "id % 5 AS g"),
        path,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    t = DeltaTable.forPath(spark, path)
    t.delete("g = 1")
    t.delete("g = 2")  # the first DV file is now referenced only by a tombstone
    expected = _rows(spark, path)
    assert any(f.deletion_vector is not None for f in _snap(path).files)
    v = _snap(path).version
    t.dropFeatureSupport("deletionVectors")
    snap = _snap(path)
    assert _rows(spark, path) == expected
    assert all(f.deletion_vector is None for f in snap.files)
    assert "delta.enableDeletionVectors" not in snap.metadata.configuration
    assert _proto(path) == (1, 7, None, ["appendOnly", "checkpointProtection", "invariants"])
    assert snap.metadata.configuration["delta.requireCheckpointProtectionBeforeVersion"] == str(snap.version)
    ops = [op for op, _ in _ops(spark, path, v)]
    assert ops == [
        "UNSET TBLPROPERTIES",
        "REORG",
        "Deletion Vector Tombstones",
        "Empty Commit",
        "Empty Commit",
        "Empty Commit",
        "DROP FEATURE",
    ]
    checkpoints = {c.version for c in list_log(snap.store, 0).checkpoints}
    assert {snap.version - 3, snap.version - 2, snap.version - 1, snap.version} <= checkpoints
    # the tombstones name both DV files, so VACUUM by any client can delete them
    tomb_commit = DeltaLog.for_table(path).read_commit(v + 3)
    dv_removes = [a for a in tomb_commit if type(a).__name__ == "RemoveFile"]
    assert len(dv_removes) == 2 and all("deletion_vector_" in r.path for r in dv_removes)
    assert all(not r.data_change for r in dv_removes)
    # delta-rs reads the result, and writes to it (no DV support needed any more)
    rs = RsTable(path)
    assert sorted(rs.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "g": g} for i, g in expected
    ]
    # turning deletion vectors back on re-adds the feature
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )
    assert "deletionVectors" in (_snap(path).protocol.reader_features or ())


def test_truncate_history_drop_then_checkpoint_protection(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 10, 1, 1).selectExpr("id"),
        path,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    DeltaTable.forPath(spark, path).delete("id < 3")
    sql = f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors TRUNCATE HISTORY"
    e = _error(lambda: deltamerge.sql(spark, sql), "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD")
    assert "delta.logRetentionDuration=30 days" in str(e) and "(24 hours)" in str(e)
    assert "deletionVectors" in _proto(path)[3]  # cleaned, not yet dropped
    assert all(f.deletion_vector is None for f in _snap(path).files)
    _error(lambda: deltamerge.sql(spark, sql), "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST")
    _age_log(path, 2 * 86_400)  # the history is now older than the 24 hours TRUNCATE HISTORY keeps
    deltamerge.sql(spark, sql)
    assert _proto(path) == (1, 2, None, None)
    assert list_log(_snap(path).store, 0).commits.keys().__contains__(0) is False  # history truncated
    assert _rows(spark, path) == [(i,) for i in range(3, 10)]
    # a (1,2) table: delta-rs writes to it again, and deltamerge reads what it wrote
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.table({"id": pa.array([42], pa.int64())}), mode="append")
    assert _rows(spark, path) == [(i,) for i in [*range(3, 10), 42]]

    # checkpointProtection: set by a fast drop, removable only by truncating history
    path2 = str(tmp_path / "t2")
    deltamerge.write(spark.range(5).selectExpr("id"), path2)
    t2 = DeltaTable.forPath(spark, path2)
    t2.addFeatureSupport("vacuumProtocolCheck")
    t2.dropFeatureSupport("vacuumProtocolCheck")
    assert _proto(path2) == (1, 7, None, ["appendOnly", "checkpointProtection", "invariants"])
    _error(
        lambda: t2.dropFeatureSupport("checkpointProtection"),
        "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
    )
    _error(
        lambda: t2.dropFeatureSupport("checkpointProtection", truncateHistory=True),
        "DELTA_FEATURE_DROP_CHECKPOINT_PROTECTION_WAIT_FOR_RETENTION_PERIOD",
    )
    _age_log(path2, 2 * 86_400)
    v = _snap(path2).version
    t2.dropFeatureSupport("checkpointProtection", truncateHistory=True)
    assert _proto(path2) == (1, 2, None, None)
    assert "delta.requireCheckpointProtectionBeforeVersion" not in _snap(path2).metadata.configuration
    assert [op for op, _ in _ops(spark, path2, v)] == ["Empty Commit", "UNSET TBLPROPERTIES", "DROP FEATURE"]
    assert _rows(spark, path2) == [(i,) for i in range(5)]


def test_column_mapping_removal_rewrites_files_under_logical_names(spark, tmp_path: Path) -> None:
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(6).selectExpr("id", "id % 2 AS part", "named_struct('a', id, 'b', 'x') AS s"),
        path,
        partition_by=["part"],
        configuration={"delta.columnMapping.mode": "name"},
    )
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` RENAME COLUMN part TO p")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` RENAME COLUMN s.a TO a2")
    expected = _rows(spark, path)
    v = _snap(path).version
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE columnMapping")
    snap = _snap(path)
    assert _rows(spark, path) == expected
    assert "delta.columnMapping" not in json.dumps(snap.metadata.schema)
    assert "delta.columnMapping.mode" not in snap.metadata.configuration
    # (2,5) implied five writer features besides columnMapping: they are listed now (as Delta)
    assert _proto(path) == (
        1,
        7,
        None,
        [
            "appendOnly",
            "changeDataFeed",
            "checkConstraints",
            "checkpointProtection",
            "generatedColumns",
            "invariants",
        ],
    )
    assert _ops(spark, path, v)[0][0] == "REMOVE COLUMN MAPPING"
    for f in snap.files:
        assert set(f.partition_values) == {"p"}
        names = pq.read_schema(os.path.join(path, f.path)).names
        assert names == ["id", "s"]
    rs = RsTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["p"], r["s"]["a2"]) for r in rs) == sorted(
        (i, p, s["a2"]) for i, p, s in expected
    )


def test_column_mapping_removal_refuses_names_parquet_cannot_hold(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(2).selectExpr("id AS `a b`"), path, configuration={"delta.columnMapping.mode": "name"}
    )
    v = _snap(path).version
    e = _error(
        lambda: DeltaTable.forPath(spark, path).dropFeatureSupport("columnMapping"),
        "DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING",
    )
    assert "a b" in str(e)
    assert _snap(path).version == v


def test_type_widening_rewrites_only_files_with_the_old_type(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(3).selectExpr("CAST(id AS INT) AS n"),
        path,
        configuration={"delta.enableTypeWidening": "true"},
    )
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ALTER COLUMN n TYPE BIGINT")
    deltamerge.write(spark.range(3, 5).selectExpr("id AS n"), path, mode="append")
    old_files = {f.path for f in _snap(path).files}
    assert "delta.typeChanges" in json.dumps(_snap(path).metadata.schema)
    v = _snap(path).version
    DeltaTable.forPath(spark, path).dropFeatureSupport("typeWidening")
    snap = _snap(path)
    assert _rows(spark, path) == [(i,) for i in range(5)]
    assert "delta.typeChanges" not in json.dumps(snap.metadata.schema)
    assert "typeWidening" not in (_proto(path)[3] or [])
    ops = _ops(spark, path, v)
    assert [op for op, _ in ops][:3] == ["UNSET TBLPROPERTIES", "REORG", "DROP FEATURE"]
    assert "columns" in ops[2][1]
    kept = old_files & {f.path for f in snap.files}
    assert len(kept) >= 1  # the appended file already held BIGINT and was not rewritten
    for f in snap.files:
        assert str(pq.read_schema(os.path.join(path, f.path)).field("n").type) == "int64"


def test_row_tracking_then_domain_metadata(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(4).selectExpr("id"), path, configuration={"delta.enableRowTracking": "true"})
    assert all(f.base_row_id is not None for f in _snap(path).files)
    v = _snap(path).version
    DeltaTable.forPath(spark, path).dropFeatureSupport("rowTracking")
    snap = _snap(path)
    assert all(f.base_row_id is None and f.default_row_commit_version is None for f in snap.files)
    assert not any(
        k.startswith("delta.rowTracking") or k == "delta.enableRowTracking"
        for k in snap.metadata.configuration
    )
    assert "delta.rowTracking" not in snap.domains
    assert _proto(path) == (1, 7, None, ["appendOnly", "domainMetadata", "invariants"])
    assert [op for op, _ in _ops(spark, path, v)] == [
        "SET TBLPROPERTIES",
        "ROW TRACKING UNBACKFILL",
        "DROP FEATURE",
    ]
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE domainMetadata")
    assert _proto(path) == (1, 2, None, None)
    assert _rows(spark, path) == [(i,) for i in range(4)]


def test_in_commit_timestamps_v2_checkpoints_and_normalization(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(2).selectExpr("id"), path)
    deltamerge.sql(
        spark,
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true', "
        "'delta.checkpointPolicy' = 'v2', 'delta.enableChangeDataFeed' = 'true')",
    )
    assert {"inCommitTimestamp", "v2Checkpoint", "changeDataFeed"} <= set(_proto(path)[3])
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE inCommitTimestamp")
    conf = _snap(path).metadata.configuration
    assert conf["delta.enableInCommitTimestamps"] == "false"  # as Delta leaves it
    assert not any(k.startswith("delta.inCommitTimestampEnablement") for k in conf)
    assert "inCommitTimestamp" not in _proto(path)[3]
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE v2Checkpoint")
    assert _snap(path).metadata.configuration["delta.checkpointPolicy"] == "classic"
    assert _proto(path)[:2] == (1, 7)
    assert "v2Checkpoint" not in _proto(path)[3]
    assert _rows(spark, path) == [(0,), (1,)]


def test_column_mapping_removal_keeps_clustering_columns(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (k BIGINT, g BIGINT) USING delta CLUSTER BY (k) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
    )
    deltamerge.write(spark.range(8).selectExpr("id AS k", "id % 2 AS g"), path, mode="append")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` RENAME COLUMN k TO key")
    DeltaTable.forPath(spark, path).dropFeatureSupport("columnMapping")
    snap = _snap(path)
    assert json.loads(snap.domains["delta.clustering"].configuration) == {"clusteringColumns": [["key"]]}
    assert DeltaTable.forPath(spark, path).detail().collect()[0]["clusteringColumns"] == ["key"]
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}`")
    assert {f.clustering_provider for f in _snap(path).files} == {"liquid"}
    assert _rows(spark, path) == [(i, i % 2) for i in range(8)]


def test_a_concurrent_write_before_the_drop_commit_fails_the_drop(spark, tmp_path: Path, monkeypatch) -> None:
    from deltamerge.errors import ConcurrentModificationError
    from deltamerge.log import feature_removal

    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(4).selectExpr("id"), path, configuration={"delta.enableDeletionVectors": "true"}
    )
    original = feature_removal.with_checkpoint_protection

    def racing(protocol, feature):  # type: ignore[no-untyped-def]
        # another writer commits after the drop checked the table, before its commit
        deltamerge.write(spark.range(10, 12).selectExpr("id"), path, mode="append")
        return original(protocol, feature)

    monkeypatch.setattr(feature_removal, "with_checkpoint_protection", racing)
    with pytest.raises(ConcurrentModificationError):
        DeltaTable.forPath(spark, path).dropFeatureSupport("deletionVectors")
    assert "deletionVectors" in (_snap(path).protocol.reader_features or ())
    assert _rows(spark, path) == [(i,) for i in [0, 1, 2, 3, 10, 11]]
