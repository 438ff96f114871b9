"""Clustered (liquid clustering) tables: deltamerge writes into them without clustering. New files
are unclustered (no ``clusteringProvider``), files a clustering implementation wrote keep their
provider under a deletion vector, OPTIMIZE compacts only unclustered files, and Delta's refusals
(ZORDER BY, dropping a clustering column) apply."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.actions import DomainMetadata
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark


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
    clustered = [replace(f, data_change=False, clustering_provider="liquid") for f in snap.files]
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
    # OPTIMIZE compacts the unclustered files only.
    clustered_before = {f.path for f in snap.files if f.clustering_provider}
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}`")
    after = DeltaLog.for_table(path).update()
    assert {f.path for f in after.files if f.clustering_provider} == clustered_before
    assert len([f for f in after.files if not f.clustering_provider]) == 1
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
