"""VACUUM LITE (Delta 3.3): the files to delete come from the log's remove and cdc actions past the
retention window, not from a directory listing; `_delta_log/_last_vacuum_info` carries the window."""

from __future__ import annotations

import json
import os

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for
from deltamerge.log.snapshot import DeltaLog

NO_CHECK = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}


def _vacuum(spark, path: str, mods: str) -> list[str]:
    out = deltamerge.sql(spark, f"VACUUM delta.`{path}` {mods}").collect()
    return sorted(os.path.relpath(r.path, path) for r in out)


def _data_files(path: str) -> set[str]:
    found = set()
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if x != "_delta_log"]
        found |= {os.path.relpath(os.path.join(d, n), path) for n in names if not n.startswith(".")}
    return found


def test_lite_deletes_what_the_log_removed_and_full_also_the_uncommitted(spark, tmp_path, spark_conf):
    spark_conf(NO_CHECK)
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 50).repartition(5), path, configuration={"delta.enableDeletionVectors": "true"}
    )
    stray = os.path.join(path, "UnCommittedFile.parquet")
    with open(stray, "w") as fh:
        fh.write("a crashed writer's file")
    os.utime(stray, (0, 0))
    deltamerge.sql(spark, f"DELETE FROM delta.`{path}` WHERE id % 2 = 0 AND id < 40")
    deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    live = {f.path for f in snapshot_for(path).files}
    before = _data_files(path)

    dry_lite = _vacuum(spark, path, "LITE DRY RUN RETAIN 0 HOURS")  # modifiers in any order
    assert _data_files(path) == before
    # The purged data files and the deletion vector file: what the log removed, nothing else.
    assert sum(p.endswith(".parquet") for p in dry_lite) >= 4
    assert sum(p.endswith(".bin") for p in dry_lite) >= 1
    assert not set(dry_lite) & live and "UnCommittedFile.parquet" not in dry_lite
    assert sorted(_vacuum(spark, path, "DRY RUN RETAIN 0 HOURS")) == sorted(
        [*dry_lite, "UnCommittedFile.parquet"]
    )

    assert _vacuum(spark, path, "LITE RETAIN 0 HOURS") == dry_lite
    assert _data_files(path) == before - set(dry_lite)
    assert os.path.exists(stray)
    with open(os.path.join(path, "_delta_log", "_last_vacuum_info")) as fh:
        info = json.load(fh)
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": DeltaTable.forPath(spark, path).version()}
    assert _vacuum(spark, path, "LITE RETAIN 0 HOURS") == []  # nothing new since the last window

    assert _vacuum(spark, path, "RETAIN 0 HOURS") == ["UnCommittedFile.parquet"]  # FULL by default
    with open(os.path.join(path, "_delta_log", "_last_vacuum_info")) as fh:
        assert json.load(fh) == {}  # as Delta: a FULL vacuum records no window
    with open(stray, "w") as fh:
        fh.write("again")
    os.utime(stray, (0, 0))
    assert _vacuum(spark, path, "FULL RETAIN 0 HOURS") == ["UnCommittedFile.parquet"]
    assert sorted(r.id for r in deltamerge.read(spark, path).collect()) == [
        i for i in range(50) if not (i % 2 == 0 and i < 40)
    ]


def test_lite_matches_full_after_merges_with_change_data(spark, tmp_path, spark_conf):
    spark_conf({**NO_CHECK, "spark.databricks.delta.vacuum.lite.enabled": "true"})
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(0, 40).selectExpr("id", "id % 4 AS p", "'a' AS v").repartition(4),
        path,
        partition_by="p",
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    table = DeltaTable.forPath(spark, path)
    src = spark.range(30, 50).selectExpr("id", "id % 4 AS p", "'b' AS v")
    table.alias("t").merge(
        src.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    table.update("id < 5", {"v": "'c'"})
    table.delete("p = 3")
    assert os.path.isdir(os.path.join(path, "_change_data"))
    full = _vacuum(spark, path, "FULL DRY RUN RETAIN 0 HOURS")
    assert any(p.startswith("_change_data") for p in full)
    # The session setting makes LITE the default.
    assert _vacuum(spark, path, "DRY RUN RETAIN 0 HOURS") == full
    assert DeltaTable.forPath(spark, path).vacuum(0).count() == len(full)
    assert _vacuum(spark, path, "FULL DRY RUN RETAIN 0 HOURS") == []
    assert deltamerge.read(spark, path).count() == 50 - len([i for i in range(50) if i % 4 == 3])


def test_lite_refuses_when_commits_it_needs_are_gone(spark, tmp_path, spark_conf):
    spark_conf(NO_CHECK)
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(10), path)
    deltamerge.write(spark.range(10), path, mode="append")
    DeltaTable.forPath(spark, path).delete()
    log = DeltaLog.for_table(path)
    log.checkpoint(log.update())
    os.remove(os.path.join(path, "_delta_log", f"{0:020d}.json"))
    files = _data_files(path)
    with pytest.raises(DeltaMergeError) as e:
        _vacuum(spark, path, "LITE DRY RUN RETAIN 0 HOURS")
    assert e.value.error_class == "DELTA_CANNOT_VACUUM_LITE" and "run VACUUM FULL" in str(e.value)
    assert _data_files(path) == files
    # FULL works, and LITE after it still needs the window a LITE run records.
    assert len(_vacuum(spark, path, "RETAIN 0 HOURS")) == len(files)
    with pytest.raises(DeltaMergeError):
        _vacuum(spark, path, "LITE RETAIN 0 HOURS")


def test_lite_resumes_after_the_last_window_when_old_commits_are_cleaned(spark, tmp_path, spark_conf):
    spark_conf(NO_CHECK)
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(10).coalesce(1), path)
    table = DeltaTable.forPath(spark, path)
    table.delete("id < 3")
    assert len(_vacuum(spark, path, "LITE RETAIN 0 HOURS")) == 1
    window = table.version()
    table.delete("id > 7")
    log = DeltaLog.for_table(path)
    log.checkpoint(log.update())
    for v in range(window):  # log cleanup removed every commit before the recorded window
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    deleted = _vacuum(spark, path, "LITE RETAIN 0 HOURS")
    assert len(deleted) == 1 and not any(os.path.exists(os.path.join(path, p)) for p in deleted)
    assert sorted(r.id for r in deltamerge.read(spark, path).collect()) == [3, 4, 5, 6, 7]
    # As in Delta, the commit of the recorded window itself must still be there.
    with open(os.path.join(path, "_delta_log", "_last_vacuum_info")) as fh:
        window = json.load(fh)["latestCommitVersionOutsideOfRetentionWindow"]
    table.delete("id = 5")
    log.checkpoint(log.update())
    for v in range(window + 1):  # cleanup took the window's own commit too
        if os.path.exists(os.path.join(path, "_delta_log", f"{v:020d}.json")):
            os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    with pytest.raises(DeltaMergeError, match="DELTA_CANNOT_VACUUM_LITE"):
        _vacuum(spark, path, "LITE RETAIN 0 HOURS")


def test_vacuum_modifier_errors(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3), path)
    for mods, clause in [
        ("FULL LITE", "LITE/FULL"),
        ("DRY RUN DRY RUN", "DRY RUN"),
        ("RETAIN 200 HOURS RETAIN 200 HOURS", "RETAIN"),
    ]:
        with pytest.raises(DeltaMergeError) as e:
            _vacuum(spark, path, mods)
        assert e.value.error_class == "DUPLICATE_CLAUSES" and f"Found duplicate clauses: {clause}" in str(
            e.value
        )
    with pytest.raises(DeltaMergeError) as e:
        _vacuum(spark, path, "LITE RETAIN 1 HOURS")
    assert e.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
