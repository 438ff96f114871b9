"""SHALLOW CLONE (Delta's CloneTableCommand): DeltaTable.clone / cloneAtVersion / cloneAtTimestamp and
``CREATE [OR REPLACE] TABLE ... SHALLOW CLONE ...``."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for
from deltamerge.log.snapshot import DeltaLog

NO_CHECK = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}


def _rows(spark, path):
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _data_files(path):
    out = set()
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if x != "_delta_log"]
        out |= {os.path.join(d, n) for n in names if not n.startswith(".")}
    return out


def _source(spark, tmp_path, **conf):
    path = str(tmp_path / "source dir")
    df = spark.range(0, 40).select("id", (F.col("id") % 3).alias("p"), F.lit("a").alias("v"))
    deltamerge.write(df.repartition(4), path, partition_by="p", configuration=conf or None)
    deltamerge.write(df.where("id < 5").withColumn("id", F.col("id") + 100), path, mode="append")
    return path


def test_shallow_clone_reads_the_source_files_and_writes_only_its_own(spark, tmp_path, spark_conf):
    spark_conf(NO_CHECK)
    source = _source(spark, tmp_path)
    source_rows = _rows(spark, source)
    source_files = _data_files(source)
    target = str(tmp_path / "clone")
    clone = DeltaTable.forPath(spark, source).clone(target, isShallow=True)
    assert isinstance(clone, DeltaTable) and clone.version() == 0
    assert _rows(spark, target) == source_rows
    assert _data_files(target) == set()  # nothing copied
    snap = snapshot_for(target)
    assert snap.metadata.id != snapshot_for(source).metadata.id
    assert snap.metadata.partition_columns == ("p",)
    src_meta = snapshot_for(source).metadata
    assert (snap.metadata.schema, snap.metadata.configuration) == (src_meta.schema, src_meta.configuration)
    assert (snap.metadata.name, snap.metadata.description, snap.app_versions) == (None, None, {})
    assert all(f.path.startswith("file:/") and f.data_change for f in snap.files)
    last = clone.history(1).collect()[0]
    assert last["operation"] == "CLONE"
    assert last["operationParameters"] == {"source": f"delta.`{source}`", "sourceVersion": "1"}
    metrics = last["operationMetrics"]
    assert metrics["sourceNumOfFiles"] == str(len(snapshot_for(source).files))
    assert metrics["sourceTableSize"] == str(sum(f.size for f in snapshot_for(source).files))
    assert metrics["numCopiedFiles"] == "0" and metrics["numRemovedFiles"] == "0"
    # delta-rs 1.6 joins an absolute add path to the table root (a limitation for Delta's clones too).
    with pytest.raises(Exception, match="not found"):
        RsTable(target).to_pyarrow_table()

    # Writes to the clone land in the clone; the source does not change.
    src = spark.createDataFrame([(0, 0, "u"), (500, 2, "n")], "id long, p long, v string")
    (
        clone.alias("t")
        .merge(src.alias("s"), "t.id = s.id AND t.p = s.p")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    clone.delete("p = 1")
    assert (0, 0, "u") in _rows(spark, target) and (500, 2, "n") in _rows(spark, target)
    assert not any(r[1] == 1 for r in _rows(spark, target))
    assert _rows(spark, source) == source_rows
    assert all(f.startswith(target) for f in _data_files(target))
    # VACUUM of the clone never touches the source's files.
    DeltaTable.forPath(spark, target).vacuum(0)
    assert _data_files(source) == source_files
    assert _rows(spark, source) == source_rows
    assert (0, 0, "u") in _rows(spark, target)


def test_clone_at_version_timestamp_and_sql(spark, tmp_path):
    source = _source(spark, tmp_path)
    table = DeltaTable.forPath(spark, source)
    v0 = sorted(tuple(r) for r in deltamerge.read(spark, source, version=0).collect())
    at0 = table.cloneAtVersion(0, str(tmp_path / "v0"), True)
    assert _rows(spark, str(tmp_path / "v0")) == v0 and at0.version() == 0
    ts = DeltaLog.for_table(source).commit_infos()[-1][1]  # version 0's commit time
    when = dt.datetime.fromtimestamp(ts / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    table.cloneAtTimestamp(when, str(tmp_path / "ts"), True)
    assert _rows(spark, str(tmp_path / "ts")) == v0

    out = deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{tmp_path / 'sql'}` SHALLOW CLONE delta.`{source}` VERSION AS OF 0 "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', 'team' = 'cdc')",
    ).collect()
    assert out[0].asDict() == {
        "source_table_size": sum(f.size for f in snapshot_for(source, 0).files),
        "source_num_of_files": len(snapshot_for(source, 0).files),
        "num_removed_files": 0,
        "num_copied_files": 0,
        "removed_files_size": 0,
        "copied_files_size": 0,
    }
    conf = snapshot_for(str(tmp_path / "sql")).metadata.configuration
    assert conf["delta.enableChangeDataFeed"] == "true" and conf["team"] == "cdc"
    assert _rows(spark, str(tmp_path / "sql")) == v0

    # A name as the target registers it.
    deltamerge.sql(
        spark, f"CREATE TABLE clone_by_name SHALLOW CLONE delta.`{source}` LOCATION '{tmp_path / 'nm'}'"
    )
    assert sorted(tuple(r) for r in DeltaTable.forName(spark, "clone_by_name").toDF().collect()) == _rows(
        spark, source
    )
    spark.catalog.dropTempView("clone_by_name")


def test_clone_of_a_deletion_vector_table(spark, tmp_path):
    source = _source(spark, tmp_path, **{"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, source).delete("id % 5 = 0")
    target = str(tmp_path / "clone")
    DeltaTable.forPath(spark, source).clone(target, True)
    assert _rows(spark, target) == _rows(spark, source)
    dvs = [f.deletion_vector for f in snapshot_for(target).files if f.deletion_vector is not None]
    assert dvs and all(d.storage_type == "p" and d.path_or_inline_dv.startswith("file:/") for d in dvs)
    assert "deletionVectors" in (snapshot_for(target).protocol.writer_features or ())
    # A DV merge on the clone writes its new deletion vectors under the clone.
    src = spark.createDataFrame([(1, 1, "x"), (2, 2, "x")], "id long, p long, v string")
    DeltaTable.forPath(spark, target).alias("t").merge(
        src.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().execute()
    assert {(1, 1, "x"), (2, 2, "x")} <= set(_rows(spark, target))
    assert all(f.startswith(target) for f in _data_files(target))

    with pytest.raises(DeltaMergeError) as e:
        DeltaTable.forPath(spark, source).clone(
            str(tmp_path / "nodv"), True, properties={"delta.enableDeletionVectors": "false"}
        )
    assert e.value.error_class == "DELTA_ADDING_DELETION_VECTORS_DISALLOWED"
    assert not os.path.exists(str(tmp_path / "nodv" / "_delta_log"))


def test_replace_and_clone_unto_itself_keep_the_files(spark, tmp_path, spark_conf):
    spark_conf(NO_CHECK)
    source = _source(spark, tmp_path)
    rows = _rows(spark, source)
    other = str(tmp_path / "other")
    deltamerge.write(spark.range(3).selectExpr("id", "'x' AS w"), other)
    DeltaTable.forPath(spark, source).clone(other, True, replace=True)
    assert _rows(spark, other) == rows
    assert deltamerge.read(spark, other).columns == ["id", "p", "v"]
    assert DeltaTable.forPath(spark, other).history(1).collect()[0]["operation"] == "CLONE"

    deltamerge.sql(spark, f"CREATE OR REPLACE TABLE delta.`{source}` SHALLOW CLONE delta.`{source}`")
    assert _rows(spark, source) == rows
    # The table now names its own files by absolute path: VACUUM must still keep them.
    DeltaTable.forPath(spark, source).vacuum(0)
    deltamerge.sql(spark, f"VACUUM delta.`{source}` LITE RETAIN 0 HOURS")
    assert _rows(spark, source) == rows
    assert _rows(spark, other) == rows


def test_clone_refusals_leave_no_table(spark, tmp_path):
    source = _source(spark, tmp_path)
    table = DeltaTable.forPath(spark, source)
    existing = str(tmp_path / "existing")
    deltamerge.write(spark.range(2), existing)
    plain = str(tmp_path / "plain")
    spark.range(2).write.parquet(plain)
    missing = tmp_path / "missing"
    cases = [
        (lambda: table.clone(str(tmp_path / "deep")), "DELTA_UNSUPPORTED_DEEP_CLONE"),
        (lambda: deltamerge.sql(spark, f"CREATE TABLE delta.`{tmp_path / 'deep2'}` CLONE delta.`{source}`"),
         "DELTA_UNSUPPORTED_DEEP_CLONE"),
        (lambda: table.clone(existing, True), "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"),
        (lambda: table.clone(plain, True), "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"),
        (lambda: deltamerge.sql(spark, f"REPLACE TABLE delta.`{missing}` SHALLOW CLONE delta.`{source}`"),
         "DELTA_CANNOT_REPLACE_MISSING_TABLE"),
        (lambda: table.clone("relative/dir", True), "DELTA_INVALID_CLONE_PATH"),
        (lambda: table.clone(str(tmp_path / "cm"), True, properties={"delta.columnMapping.mode": "name"}),
         "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE"),
        (lambda: table.cloneAtVersion(7, str(tmp_path / "v7"), True), "DELTA_VERSION_NOT_FOUND"),
    ]  # fmt: skip
    for run, error_class in cases:
        with pytest.raises(DeltaMergeError) as e:
            run()
        assert e.value.error_class == error_class, (error_class, e.value)
    for name in ("deep", "deep2", "missing", "cm", "v7"):
        assert not os.path.exists(str(tmp_path / name / "_delta_log"))
    assert (
        DeltaTable.forPath(spark, existing).version() == 0 and deltamerge.read(spark, existing).count() == 2
    )
    with pytest.raises(ValueError, match="isShallow needs to be a boolean"):
        table.clone(str(tmp_path / "x"), "yes")  # type: ignore[arg-type]
    # The metrics row of a successful SQL clone; IF NOT EXISTS on a registered name does nothing.
    deltamerge.register_table(spark, "clone_ine", existing)
    try:
        out = deltamerge.sql(spark, f"CREATE TABLE IF NOT EXISTS clone_ine SHALLOW CLONE delta.`{source}`")
        assert out.collect() == [] and deltamerge.read(spark, existing).count() == 2
    finally:
        spark.catalog.dropTempView("clone_ine")
    assert not os.path.exists(os.path.join(existing, "_delta_log", f"{1:020d}.json"))  # nothing committed
