"""Clustered (liquid clustering) tables: CLUSTER BY at creation (SQL, the table builder, both
DataFrame writers), ALTER TABLE ... CLUSTER BY, OPTIMIZE clustering (Delta's incremental ZCube
rules), writes that leave new files unclustered, REPLACE / RESTORE / CLONE, and Delta's refusals."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.actions import DomainMetadata
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import temporary_settings
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark

MIN_CUBE = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"


def _clustered_table(spark, path: str) -> None:  # type: ignore[no-untyped-def]
    """As delta-spark leaves a table clustered by ``k``: the feature, the domain (physical names,
    as name-part lists) and files an OPTIMIZE clustered (``clusteringProvider = liquid``)."""
    df = spark.range(40).selectExpr("id AS k", "id % 3 AS g", "'x' AS note").repartition(2)
    deltamerge.write(
        df,
        path,
        configuration={
            "delta.feature.clustering": "supported",
            "delta.enableDeletionVectors": "true",
            "delta.columnMapping.mode": "name",
        },
    )
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log)
    snap = txn.snapshot
    assert snap is not None
    k_physical = snap.metadata.schema["fields"][0]["metadata"]["delta.columnMapping.physicalName"]
    tags = {"ZCUBE_ID": "cube-0", "ZCUBE_ZORDER_BY": '["k"]'}
    clustered = [replace(f, data_change=False, clustering_provider="liquid", tags=tags) for f in snap.files]
    domain = DomainMetadata("delta.clustering", json.dumps({"clusteringColumns": [[k_physical]]}))
    txn.commit([*clustered, domain], Operation("OPTIMIZE", {"clusterBy": '["k"]'}))


def test_writes_into_a_clustered_table(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _clustered_table(spark, path)
    table = DeltaTable.forPath(spark, path)
    source = spark.range(35, 45).selectExpr("id AS k", "7L AS g", "'new' AS note")
    table.alias("t").merge(
        source.alias("s"), "t.k = s.k"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    deltamerge.write(
        spark.range(100, 103).selectExpr("id AS k", "0L AS g", "'a' AS note"), path, mode="append"
    )
    snap = DeltaLog.for_table(path).update()
    providers = sorted((f.clustering_provider or "-", f.deletion_vector is not None) for f in snap.files)
    # The clustered file the merge touched stays clustered behind its deletion vector; what the
    # merge and the append wrote is unclustered.
    assert ("liquid", True) in providers and ("-", False) in providers
    assert snap.domains["delta.clustering"].configuration.startswith('{"clusteringColumns"')
    # OPTIMIZE clusters the new files together with the small cube the clustered ones form (Delta's
    # minCubeSize rule): one new cube.
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}`")
    after = DeltaLog.for_table(path).update()
    assert {f.clustering_provider for f in after.files} == {"liquid"}
    assert len({(f.tags or {})["ZCUBE_ID"] for f in after.files}) == 1
    assert {(f.tags or {})["ZCUBE_ZORDER_BY"] for f in after.files} == {'["k"]'}
    assert all(f.deletion_vector is None for f in after.files)
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert len(rows) == 48 and rows[-1] == (102, 0, "a") and (40, 7, "new") in rows
    for statement, error in [
        (f"OPTIMIZE delta.`{path}` ZORDER BY (g)", "DELTA_CLUSTERING_WITH_ZORDER_BY"),
        (f"ALTER TABLE delta.`{path}` DROP COLUMN k", "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN"),
    ]:
        with pytest.raises(DeltaMergeError) as exc:
            deltamerge.sql(spark, statement)
        assert exc.value.error_class == error
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP COLUMN note")  # not a clustering column
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    assert pa.table(query.execute("SELECT count(*) AS n FROM t")).to_pylist() == [{"n": 48}]


def _log_actions(path: str, version: int) -> list[dict]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def _detail(spark, path: str) -> list[str]:  # type: ignore[no-untyped-def]
    return list(DeltaTable.forPath(spark, path).detail().collect()[0]["clusteringColumns"])


def _raises(error_class: str, run) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DeltaMergeError) as exc:
        run()
    assert exc.value.error_class == error_class, str(exc.value)


def test_cluster_by_at_creation(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "sql")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (a INT, s STRUCT<b: STRING, c: BOOLEAN>, `x.y` LONG, v STRING) "
        "USING delta CLUSTER BY (a, s.b, `x.y`)",
    )
    actions = _log_actions(path, 0)
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert protocol["minWriterVersion"] == 7
    assert {"clustering", "domainMetadata"} <= set(protocol["writerFeatures"])
    domain = next(a["domainMetadata"] for a in actions if "domainMetadata" in a)
    assert domain["domain"] == "delta.clustering"
    assert json.loads(domain["configuration"]) == {"clusteringColumns": [["a"], ["s", "b"], ["x.y"]]}
    metadata = next(a["metaData"] for a in actions if "metaData" in a)
    assert "delta.feature.clustering" not in metadata["configuration"]  # a protocol feature, not stored
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert json.loads(info["operationParameters"]["clusterBy"]) == ["a", "s.b", "`x.y`"]
    assert _detail(spark, path) == ["a", "s.b", "`x.y`"]

    # CREATE ... AS SELECT, the table builder and both DataFrame writers.
    ctas = str(tmp_path / "ctas")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{ctas}` USING delta CLUSTER BY (k) AS SELECT id, id % 3 AS k FROM range(9)",
    )
    built = str(tmp_path / "built")
    DeltaTable.create(spark).location(built).addColumn("id", "long").addColumn("z", "string").clusterBy(
        "z"
    ).execute()
    assert _detail(spark, ctas) == ["k"] and _detail(spark, built) == ["z"]
    deltamerge.configure(spark)
    try:
        saved = str(tmp_path / "saved")
        frame = spark.range(6).selectExpr("id", "cast(id % 2 AS STRING) AS k")
        frame.write.format("delta").clusterBy("k").save(saved)
        assert _detail(spark, saved) == ["k"]
        frame.write.format("delta").mode("append").clusterBy("K").save(saved)  # the table's own: fine
        before = sorted(p.name for p in (Path(saved) / "_delta_log").iterdir())
        _raises(
            "DELTA_CLUSTERING_COLUMNS_MISMATCH",
            lambda: frame.write.format("delta").mode("append").clusterBy("id").save(saved),
        )
        assert sorted(p.name for p in (Path(saved) / "_delta_log").iterdir()) == before
        assert deltamerge.read(spark, saved).count() == 12
        frame.write.format("delta").mode("overwrite").clusterBy("id").save(saved)  # sets the columns
        assert _detail(spark, saved) == ["id"]
        frame.writeTo("clustered_v2").using("delta").clusterBy("id").create()
        assert DeltaTable.forName(spark, "clustered_v2").detail().collect()[0]["clusteringColumns"] == ["id"]
    finally:
        deltamerge.unconfigure()
        deltamerge.unregister_table(spark, "clustered_v2")
    assert deltamerge.read(spark, saved).count() == 6
    rs = pytest.importorskip("deltalake")
    assert rs.DeltaTable(ctas).to_pyarrow_table().num_rows == 9


@pytest.mark.parametrize(
    ("clause", "error_class"),
    [
        ("CLUSTER BY (s.c)", "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),  # boolean: no min/max
        ("CLUSTER BY (s)", "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),  # a whole struct
        ("CLUSTER BY (m)", "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),  # a map
        ("CLUSTER BY (nope)", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
        ("CLUSTER BY (a, v, s.b, w, a)", "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"),
        ("PARTITIONED BY (a) CLUSTER BY (v)", "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"),
        (
            "CLUSTER BY (a) TBLPROPERTIES ('delta.feature.clustering' = 'supported')",
            "DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED",
        ),
        (
            "CLUSTER BY (v) TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')",
            "DELTA_CLUSTERING_COLUMN_MISSING_STATS",
        ),
    ],
)
def test_cluster_by_refusals_leave_nothing(spark, tmp_path: Path, clause: str, error_class: str) -> None:
    path = tmp_path / "t"
    columns = "a INT, s STRUCT<b: STRING, c: BOOLEAN>, m MAP<STRING, INT>, v STRING, w DATE"
    _raises(
        error_class,
        lambda: deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` ({columns}) USING delta {clause}"),
    )
    assert not path.exists()


def test_alter_table_cluster_by(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (a INT, b STRING) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
    )
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY NONE")  # not clustered: nothing to do
    assert DeltaLog.for_table(path).update().version == 0
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY (b)")  # becomes a clustered table
    assert _detail(spark, path) == ["b"]
    snap = DeltaLog.for_table(path).update()
    b_physical = snap.metadata.schema["fields"][1]["metadata"]["delta.columnMapping.physicalName"]
    assert json.loads(snap.domains["delta.clustering"].configuration) == {"clusteringColumns": [[b_physical]]}
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY (a, b)")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` RENAME COLUMN b TO bee")  # physical names stay
    assert _detail(spark, path) == ["a", "bee"]
    _raises(
        "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN",
        lambda: deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP COLUMN bee"),
    )
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY NONE")
    assert _detail(spark, path) == []
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    assert [(h.operation, h.operationParameters) for h in history if h.operation == "CLUSTER BY"] == [
        ("CLUSTER BY", {"oldClusteringColumns": "", "newClusteringColumns": "b"}),
        ("CLUSTER BY", {"oldClusteringColumns": "b", "newClusteringColumns": "a,b"}),
        ("CLUSTER BY", {"oldClusteringColumns": "a,bee", "newClusteringColumns": ""}),
    ]
    _raises(
        "DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED",
        lambda: deltamerge.sql(
            spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.clustering' = 'supported')"
        ),
    )
    _raises(
        "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS",
        lambda: deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY (a, a, a, a, a)"),
    )
    parted = str(tmp_path / "p")
    deltamerge.sql(spark, f"CREATE TABLE delta.`{parted}` (a INT, b STRING) USING delta PARTITIONED BY (b)")
    _raises(
        "DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED",
        lambda: deltamerge.sql(spark, f"ALTER TABLE delta.`{parted}` CLUSTER BY (a)"),
    )


def _cube_files(path: str) -> list[tuple[str | None, str | None, str | None]]:
    return [
        (f.clustering_provider, (f.tags or {}).get("ZCUBE_ID"), (f.tags or {}).get("ZCUBE_ZORDER_BY"))
        for f in DeltaLog.for_table(path).update().files
    ]


def _optimize(spark, statement: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    metrics = deltamerge.sql(spark, statement).collect()[0]["metrics"]
    return metrics["numFilesAdded"], metrics["numFilesRemoved"]


def test_optimize_clusters_incrementally(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark, f"CREATE TABLE delta.`{path}` (id BIGINT, k STRING, v BIGINT) USING delta CLUSTER BY (v)"
    )
    for i in range(4):
        rows = spark.range(i, 4000, 4).selectExpr(
            "id", "cast(id % 7 AS STRING) AS k", "(id * 7919) % 4000 AS v"
        )
        deltamerge.write(rows.repartition(2), path, mode="append")
    expected = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    # Small target files: the clustered rows spread over several files, each a narrow range of v.
    with temporary_settings(spark, {"spark.databricks.delta.optimize.maxFileSize": "12000"}):
        added, removed = _optimize(spark, f"OPTIMIZE delta.`{path}`")
    assert removed == 8 and added > 2
    files = DeltaLog.for_table(path).update().files
    assert len({(f.tags or {})["ZCUBE_ID"] for f in files}) == 1
    assert {(f.clustering_provider, (f.tags or {})["ZCUBE_ZORDER_BY"]) for f in files} == {
        ("liquid", '["v"]')
    }
    ranges = sorted(
        (json.loads(f.stats)["minValues"]["v"], json.loads(f.stats)["maxValues"]["v"]) for f in files
    )
    # Each file holds a slice of v; neighbours share at most the values of one range boundary (the
    # noise byte against skew splits a range between two files).
    assert all(hi - lo < 2500 for lo, hi in ranges)
    assert all(hi - lo < 40 for (_, hi), (lo, _) in itertools.pairwise(ranges))
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == expected
    assert _optimize(spark, f"OPTIMIZE delta.`{path}`") == (0, 0)  # one cube alone: clustered already

    deltamerge.write(spark.range(5000, 5010).selectExpr("id", "'n' AS k", "id AS v"), path, mode="append")
    before = len(DeltaLog.for_table(path).update().files)
    assert _optimize(spark, f"OPTIMIZE delta.`{path}`") == (1, before)  # new data joins the small cube
    # A cube at least minCubeSize large stays: only the new file is clustered.
    deltamerge.write(
        spark.range(6000, 6010, 1, 1).selectExpr("id", "'m' AS k", "id AS v"), path, mode="append"
    )
    with temporary_settings(spark, {MIN_CUBE: "1"}):
        assert _optimize(spark, f"OPTIMIZE delta.`{path}`") == (1, 1)
    assert len({cube for _, cube, _ in _cube_files(path)}) == 2

    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` CLUSTER BY (k)")
    assert _optimize(spark, f"OPTIMIZE delta.`{path}`") == (0, 0)  # clustered by other columns: left
    files_before = len(DeltaLog.for_table(path).update().files)
    assert _optimize(spark, f"OPTIMIZE delta.`{path}` FULL") == (1, files_before)
    assert {(p, z) for p, _, z in _cube_files(path)} == {("liquid", '["k"]')}
    history = DeltaTable.forPath(spark, path).history().collect()[0]
    assert history.operationParameters["clusterBy"] == '["k"]'
    assert history.operationParameters["isFull"] == "true"
    assert history.operationParameters["zOrderBy"] == "[]"
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == sorted(
        expected + [(i, "n", i) for i in range(5000, 5010)] + [(i, "m", i) for i in range(6000, 6010)]
    )
    for clause, error_class in [
        ("ZORDER BY (id)", "DELTA_CLUSTERING_WITH_ZORDER_BY"),
        ("WHERE id > 1", "DELTA_CLUSTERING_WITH_PARTITION_PREDICATE"),
    ]:
        _raises(error_class, lambda clause=clause: deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` {clause}"))
    plain = str(tmp_path / "plain")
    deltamerge.write(spark.range(3), plain)
    _raises(
        "DELTA_OPTIMIZE_FULL_NOT_SUPPORTED", lambda: deltamerge.sql(spark, f"OPTIMIZE delta.`{plain}` FULL")
    )


def test_merge_replace_restore_and_clone(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` USING delta CLUSTER BY (id) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true') AS SELECT id, 'old' AS note FROM range(20)",
    )
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}`")
    source = spark.range(15, 25).selectExpr("id", "'new' AS note")
    DeltaTable.forPath(spark, path).alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    files = DeltaLog.for_table(path).update().files
    # The clustered file keeps its cube behind a deletion vector; the merged rows are unclustered.
    assert {(f.clustering_provider, f.deletion_vector is not None) for f in files} == {
        ("liquid", True),
        (None, False),
    }
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(i, "old") for i in range(15)] + [(i, "new") for i in range(15, 25)]
    rs = pytest.importorskip("deltalake")
    import pyarrow as pa

    query = rs.QueryBuilder().register("t", rs.DeltaTable(path))
    assert pa.table(query.execute("SELECT id, note FROM t ORDER BY id")).to_pylist() == [
        {"id": i, "note": n} for i, n in rows
    ]
    clustered_version = DeltaLog.for_table(path).update().version

    clone = str(tmp_path / "clone")
    deltamerge.sql(spark, f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{path}`")
    assert _detail(spark, clone) == ["id"]
    _raises(
        "DELTA_CLUSTERING_REPLACE_TABLE_WITH_PARTITIONED_TABLE",
        lambda: deltamerge.sql(
            spark, f"REPLACE TABLE delta.`{path}` (id BIGINT, note STRING) USING delta PARTITIONED BY (note)"
        ),
    )
    deltamerge.sql(spark, f"REPLACE TABLE delta.`{path}` (id BIGINT, note STRING) USING delta")
    assert _detail(spark, path) == []  # still a clustered table, without clustering columns
    assert "clustering" in DeltaTable.forPath(spark, path).detail().collect()[0]["tableFeatures"]
    deltamerge.sql(spark, f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {clustered_version}")
    assert _detail(spark, path) == ["id"]


def test_auto_compaction_clusters(spark, tmp_path: Path) -> None:
    """As Delta's AutoCompact hook, whose OPTIMIZE picks the clustering strategy on a clustered table."""
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id BIGINT, k STRING) USING delta CLUSTER BY (k) "
        "TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'true')",
    )
    with temporary_settings(spark, {"spark.databricks.delta.autoCompact.minNumFiles": "3"}):
        for i in range(3):
            rows = spark.range(i * 10, i * 10 + 10, 1, 1).selectExpr("id", "cast(id % 3 AS STRING) AS k")
            deltamerge.write(rows, path, mode="append")
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last.operation == "OPTIMIZE"
    assert last.operationParameters["auto"] == "true" and last.operationParameters["clusterBy"] == '["k"]'
    assert {(p, z) for p, _, z in _cube_files(path)} == {("liquid", '["k"]')}
    assert deltamerge.read(spark, path).count() == 30
