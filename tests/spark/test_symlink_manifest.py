"""Symlink manifests (Delta's GenerateSymlinkManifest): ``GENERATE symlink_format_manifest`` and the
incremental post-commit hook under ``delta.compatibility.symlinkFormatManifest.enabled``."""

from __future__ import annotations

import glob
import os

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for
from deltamerge.log.paths import absolute_file_path

MANIFEST = "_symlink_format_manifest"
ENABLED = "delta.compatibility.symlinkFormatManifest.enabled"


def _manifests(path: str) -> dict[str, list[str]]:
    """Relative partition dir -> the lines of its manifest."""
    root = os.path.join(path, MANIFEST)
    out = {}
    for f in glob.glob(os.path.join(root, "**", "manifest"), recursive=True):
        rel = os.path.relpath(os.path.dirname(f), root)
        with open(f, encoding="utf-8") as fh:
            out["" if rel == "." else rel] = fh.read().splitlines()
    return out


def _assert_current(spark, path: str, expected_manifests: int) -> None:
    """The manifests list exactly the table's files, each line a path that exists, and (partitioned)
    the partition directories decode to the table's partition values."""
    manifests = _manifests(path)
    assert len(manifests) == expected_manifests
    lines = [line for ls in manifests.values() for line in ls]
    assert all(line.startswith("file:/") for line in lines)
    files = sorted(absolute_file_path(path, f.path) for f in snapshot_for(path).files)
    assert sorted(line[len("file:") :] for line in lines) == files
    assert all(os.path.exists(line[len("file:") :]) for line in lines)
    # External readers see the table's rows through the manifests.
    if lines:
        external = spark.read.parquet(*[line[len("file:") :] for line in lines])
        table = deltamerge.read(spark, path)
        data_cols = [c for c in table.columns if c in external.columns]
        assert sorted(map(tuple, external.select(*data_cols).collect())) == sorted(
            map(tuple, table.select(*data_cols).collect())
        )
    parts = snapshot_for(path).metadata.partition_columns
    if parts and lines:
        discovered = spark.read.text(os.path.join(path, MANIFEST)).select(*[f"`{p}`" for p in parts])
        data = deltamerge.read(spark, path).select(*[f"`{p}`" for p in parts])
        as_text = [F.col(f"`{p}`").cast("string") for p in parts]
        assert sorted(map(tuple, discovered.select(*as_text).distinct().collect()), key=str) == sorted(
            map(tuple, data.select(*as_text).distinct().collect()), key=str
        )


def test_generate_full_manifest_unpartitioned(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 70).repartition(7), path)
    assert _manifests(path) == {}
    DeltaTable.forPath(spark, path).generate("symlink_format_manifest")
    _assert_current(spark, path, 1)
    assert len(_manifests(path)[""]) == 7

    # Without the table property nothing follows the table: the manifest goes stale until regenerated.
    DeltaTable.forPath(spark, path).delete("id < 20")
    assert len(_manifests(path)[""]) == 7
    DeltaTable.forPath(spark, path).generate("SYMLINK_FORMAT_MANIFEST")  # mode names ignore case
    _assert_current(spark, path, 1)

    DeltaTable.forPath(spark, path).delete()
    DeltaTable.forPath(spark, path).generate("symlink_format_manifest")
    assert _manifests(path) == {"": []}  # an empty table has an empty manifest


def test_generate_full_manifest_special_partition_values(spark, tmp_path):
    path = str(tmp_path / "path with space")
    rows = [
        (1, "$0$"),
        (None, "_1_"),
        (1, ""),
        (None, " "),
        (1, "  "),
        (None, "/"),
        (1, None),
        (2, "a=b%c:d"),
    ]
    df = spark.createDataFrame(rows, "part1 int, part2 string").withColumn("value", F.lit(1))
    deltamerge.write(df, path, partition_by=["part1", "part2"])
    deltamerge.sql(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`")
    # "" and NULL share Hive's default partition directory.
    _assert_current(spark, path, 7)

    # A full generation deletes the manifests of partitions that are gone.
    DeltaTable.forPath(spark, path).delete("part1 IS NULL")
    DeltaTable.forPath(spark, path).generate("symlink_format_manifest")
    _assert_current(spark, path, 4)
    assert not any(k.startswith("part1=__HIVE_DEFAULT_PARTITION__") for k in _manifests(path))


def test_incremental_manifests_follow_merge_append_and_overwrite(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 40).select("id", (F.col("id") % 4).alias("p"), F.lit("x").alias("v"))
    deltamerge.write(df.repartition(8), path, partition_by="p")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'true')")
    # Setting the property commits no file: no manifest yet (Delta's hook runs on file actions).
    assert _manifests(path) == {}

    deltamerge.write(spark.createDataFrame([(100, 1, "y")], "id long, p long, v string"), path, mode="append")
    _assert_current(spark, path, 4)  # the first hook run finds no manifests and writes them all
    stamp = os.path.getmtime(os.path.join(path, MANIFEST, "p=3", "manifest"))

    # MERGE: update rows of p=0, delete every row of p=2, insert a new partition p=9.
    deletes = [(i, 2, "d") for i in range(2, 40, 4)]
    src = spark.createDataFrame(
        [(0, 0, "u"), (4, 0, "u"), *deletes, (900, 9, "n")], "id long, p long, v string"
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "t.id = s.id AND t.p = s.p")
        .whenMatchedDelete("s.v = 'd'")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    _assert_current(spark, path, 4)
    manifests = _manifests(path)
    assert "p=2" not in manifests and "p=9" in manifests
    # p=3 was not touched: its manifest was not rewritten.
    assert os.path.getmtime(os.path.join(path, MANIFEST, "p=3", "manifest")) == stamp

    deltamerge.write(df.where("p = 1"), path, mode="overwrite")
    _assert_current(spark, path, 1)
    assert list(_manifests(path)) == ["p=1"]

    # Turning the property off stops the hook.
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'false')")
    deltamerge.write(df.where("p = 3"), path, mode="append")
    assert list(_manifests(path)) == ["p=1"]


def test_incremental_manifest_unpartitioned_delete_and_update(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 30).repartition(3), path, configuration={ENABLED: "true"})
    # The creating commit adds files, so its hook writes the first manifest.
    _assert_current(spark, path, 1)
    DeltaTable.forPath(spark, path).update("id < 5", {"id": "id + 100"})
    _assert_current(spark, path, 1)
    deltamerge.sql(spark, f"DELETE FROM delta.`{path}` WHERE id >= 100")
    _assert_current(spark, path, 1)


def test_manifests_and_deletion_vectors_exclude_each_other(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 100).coalesce(1), path, configuration={"delta.enableDeletionVectors": "true"}
    )
    table = DeltaTable.forPath(spark, path)
    with pytest.raises(DeltaMergeError) as e:
        deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'true')")
    assert e.value.error_class == (
        "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED.PERSISTENT_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION"
    )
    version = table.version()
    table.delete("id IN (1, 42, 43)")  # a deletion vector
    assert any(f.deletion_vector is not None for f in snapshot_for(path).files)
    with pytest.raises(DeltaMergeError) as e:
        table.generate("symlink_format_manifest")
    assert e.value.error_class == "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS"
    assert not os.path.exists(os.path.join(path, MANIFEST))

    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    with pytest.raises(DeltaMergeError) as e:
        deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'true')")
    assert e.value.error_class.endswith(".EXISTING_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION")
    assert table.version() == version + 2  # the refused ALTERs committed nothing
    deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'true')")
    table.delete("id = 7")
    _assert_current(spark, path, 1)


def test_forced_property_with_deletion_vectors_fails_after_the_commit(spark, tmp_path, spark_conf):
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 100).coalesce(1), path, configuration={"delta.enableDeletionVectors": "true"}
    )
    table = DeltaTable.forPath(spark, path)
    table.delete("id = 1")
    spark_conf({"spark.databricks.delta.tablePropertyConstraintsCheck.enabled": "false"})
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{ENABLED}' = 'true')")
    version = table.version()
    with pytest.raises(DeltaMergeError) as e:
        deltamerge.write(spark.range(200, 210), path, mode="append")
    assert e.value.error_class == "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS"
    assert table.version() == version + 1  # the append itself landed, as in Delta
    deltamerge.write(spark.range(0, 10), path, mode="overwrite")  # the new version has no DV: fine
    _assert_current(spark, path, 1)


def test_column_mapping_and_bad_requests_are_refused(spark, tmp_path):
    mapped = str(tmp_path / "mapped")
    deltamerge.write(spark.range(0, 5), mapped, configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(DeltaMergeError) as e:
        DeltaTable.forPath(spark, mapped).generate("symlink_format_manifest")
    assert e.value.error_class == "DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING"

    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 5), path)
    with pytest.raises(DeltaMergeError) as e:
        deltamerge.sql(spark, f"GENERATE xyz FOR TABLE delta.`{path}`")
    assert e.value.error_class == "DELTA_MODE_NOT_SUPPORTED"
    assert "symlink_format_manifest" in str(e.value) and isinstance(e.value, ValueError)

    plain = str(tmp_path / "plain")
    spark.range(2).write.parquet(plain)
    with pytest.raises(DeltaMergeError, match="not a Delta table"):
        deltamerge.sql(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{plain}`")
    assert not os.path.exists(os.path.join(path, MANIFEST))


def test_hook_failure_reports_the_landed_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 4).select("id", (F.col("id") % 2).alias("p"))
    deltamerge.write(df, path, partition_by="p", configuration={ENABLED: "true"})
    _assert_current(spark, path, 2)
    # A file where the new partition's manifest directory must go: the hook cannot write it.
    with open(os.path.join(path, MANIFEST, "p=5"), "w") as fh:
        fh.write("in the way")
    table = DeltaTable.forPath(spark, path)
    version = table.version()
    with pytest.raises(DeltaMergeError) as e:
        deltamerge.write(spark.createDataFrame([(9, 5)], "id long, p long"), path, mode="append")
    assert e.value.error_class == "DELTA_POST_COMMIT_HOOK_FAILED"
    assert f"version {version + 1} succeeded" in str(e.value)
    assert table.version() == version + 1
    assert deltamerge.read(spark, path).count() == 5
    # The same through MERGE: its files stay, as the commit landed.
    with open(os.path.join(path, MANIFEST, "p=6"), "w") as fh:
        fh.write("in the way")
    src = spark.createDataFrame([(10, 6), (0, 0)], "id long, p long")
    merge = (
        table.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedDelete().whenNotMatchedInsertAll()
    )
    with pytest.raises(DeltaMergeError) as e:
        merge.execute()
    assert e.value.error_class == "DELTA_POST_COMMIT_HOOK_FAILED"
    assert table.version() == version + 2
    assert sorted(r.id for r in deltamerge.read(spark, path).collect()) == [1, 2, 3, 9, 10]
    for blocker in ("p=5", "p=6"):
        os.remove(os.path.join(path, MANIFEST, blocker))
    table.generate("symlink_format_manifest")
    _assert_current(spark, path, 4)
