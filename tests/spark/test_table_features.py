"""Protocol changes asked for by table properties: ``delta.feature.<name>`` (SQL, builder, session
defaults), ``DeltaTable.upgradeTableProtocol`` and ``DeltaTable.addFeatureSupport``."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.actions import Protocol
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


def _snap(path):
    return DeltaLog.for_table(path).update()


def _table(spark, path):
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string"), path)


def test_feature_properties_add_to_the_protocol_and_are_not_stored(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    assert _snap(path).protocol == Protocol(1, 2)
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.deletionVectors' = 'supported')"
    )
    snap = _snap(path)
    assert snap.protocol == Protocol(
        3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")
    )
    assert not any(k.startswith("delta.feature.") for k in snap.metadata.configuration)
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operation"] == "SET TBLPROPERTIES"
    # Supported is not enabled: deletes still rewrite files until delta.enableDeletionVectors is set.
    DeltaTable.forPath(spark, path).delete("id = 1")
    assert not any(f.deletion_vector for f in _snap(path).files)
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )
    DeltaTable.forPath(spark, path).alias("t").merge(
        spark.createDataFrame([(2, "B"), (3, "c")], "id long, v string").alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    out = QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t ORDER BY id").read_all()
    assert pa.table(out).to_pylist() == [{"id": 2, "v": "B"}, {"id": 3, "v": "c"}]

    # CREATE TABLE and the builder take them too; the deprecated status 'enabled' as well.
    created = str(tmp_path / "created")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{created}` (id LONG) USING delta "
        "TBLPROPERTIES ('delta.feature.changeDataFeed' = 'enabled')",
    )
    assert _snap(created).protocol == Protocol(1, 7, None, ("appendOnly", "changeDataFeed", "invariants"))
    built = str(tmp_path / "built")
    DeltaTable.create(spark).location(built).addColumn("id", "LONG").property(
        "delta.feature.timestampNtz", "supported"
    ).execute()
    assert _snap(built).protocol.reader_features == ("timestampNtz",)


def test_feature_properties_refused_leave_the_table_as_it_was(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    version = _snap(path).version
    for props, error in [
        ("'delta.feature.deletionVectors' = 'disabled'", "DELTA_UNSUPPORTED_FEATURE_STATUS"),
        ("'delta.feature.noSuchThing' = 'supported'", "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"),
        ("'delta.feature.icebergCompatV2' = 'supported'", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"),
    ]:
        with pytest.raises(DeltaMergeError, match=error):
            deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({props})")
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"):
        DeltaTable.forPath(spark, path).addFeatureSupport("noSuchThing")
    assert _snap(path).version == version and _snap(path).protocol == Protocol(1, 2)


def test_session_default_feature_applies_to_new_tables(spark, tmp_path, spark_conf):
    spark_conf({"spark.databricks.delta.properties.defaults.feature.deletionVectors": "supported"})
    path = str(tmp_path / "t")
    _table(spark, path)
    assert _snap(path).protocol.reader_features == ("deletionVectors",)


def test_upgrade_table_protocol_and_add_feature_support(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    table = DeltaTable.forPath(spark, path)
    table.upgradeTableProtocol(1, 4)
    assert _snap(path).protocol == Protocol(1, 4)
    table.upgradeTableProtocol(1, 2)  # never lowered: a no-op on the protocol, as in Delta
    assert _snap(path).protocol == Protocol(1, 4)
    table.addFeatureSupport("changeDataFeed")  # implied by (1, 4) already
    assert _snap(path).protocol == Protocol(1, 4)
    table.addFeatureSupport("deletionVectors")
    assert _snap(path).protocol == Protocol(
        3,
        7,
        ("deletionVectors",),
        (
            "appendOnly",
            "changeDataFeed",
            "checkConstraints",
            "deletionVectors",
            "generatedColumns",
            "invariants",
        ),
    )
    ops = [r["operation"] for r in table.history().collect()]
    assert ops[:4] == ["SET TBLPROPERTIES"] * 4
    with pytest.raises(ValueError, match="readerVersion"):
        table.upgradeTableProtocol("1", 2)  # type: ignore[arg-type]
    assert RsTable(path).protocol().min_reader_version == 3
    assert QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t").read_all().num_rows == 2
