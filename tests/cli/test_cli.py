"""The ``deltamerge`` CLI, driven through typer's CliRunner against real tables (one shared session)."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import deltamerge
from deltamerge import DeltaTable
from deltamerge.cli import app
from deltamerge.spark.session import phase_listener

pytestmark = pytest.mark.spark

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def _rows(spark, path):
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / "target")
    df = spark.createDataFrame([(i, i * 10, f"n{i}") for i in range(1, 5)], "id int, v int, name string")
    deltamerge.write(df, path, configuration={"delta.enableChangeDataFeed": "true"})
    return path


@pytest.fixture
def csv_source(tmp_path):
    path = tmp_path / "changes.csv"
    path.write_text("id,v,name,op\n1,100,one,U\n2,0,two,D\n9,90,nine,I\n")
    return str(path)


def test_history_and_describe_read_the_log(spark, table):
    result = _run("history", table, "--json")
    assert result.exit_code == 0, result.output
    commits = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(c["version"], c["operation"]) for c in commits] == [(0, "WRITE")]
    assert commits[0]["operationMetrics"]["numOutputRows"] == "4"
    assert "WRITE" in _run("history", table).stdout

    result = _run("describe", table, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["version"] == 0 and info["numRecords"] == 4
    assert [c["name"] for c in info["schema"]] == ["id", "v", "name"]
    assert info["properties"] == {"delta.enableChangeDataFeed": "true"} and info["clusteringColumns"] == []
    assert "Schema" in _run("describe", table).stdout


def test_generate_symlink_manifest(spark, table):
    result = _run("generate", table)
    assert result.exit_code == 0, result.output
    assert "1 manifest(s) written" in result.stdout
    with open(os.path.join(table, "_symlink_format_manifest", "manifest")) as fh:
        lines = fh.read().splitlines()
    assert lines and all(os.path.exists(line[len("file:") :]) for line in lines)
    result = _run("generate", table, "--mode", "xyz")
    assert result.exit_code == 1 and "DELTA_MODE_NOT_SUPPORTED" in result.stderr


def test_not_a_table_is_exit_2(tmp_path):
    for command in (["history"], ["describe"], ["changes"], ["vacuum"], ["optimize"], ["generate"]):
        result = _run(*command, str(tmp_path / "nothing"))
        assert result.exit_code == 2, (command, result.output)
        assert "is not a Delta table" in result.stderr


def test_merge_with_clause_options_reports_phases(spark, table, csv_source):
    phases = []
    with phase_listener(lambda description, started: started and phases.append(description)):
        result = _run(
            "merge", table, "--source", csv_source, "--on", "t.id = s.id",
            "--when-matched-delete", "s.op = 'D'",
            "--when-matched-update-all",
            "--when-not-matched-insert-all=s.op = 'I'",
            "--json",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "num_affected_rows": 3, "num_updated_rows": 1, "num_deleted_rows": 1, "num_inserted_rows": 1,
    }  # fmt: skip
    assert _rows(spark, table) == [(1, 100, "one"), (3, 30, "n3"), (4, 40, "n4"), (9, 90, "nine")]
    assert any("scanning files for matches" in p for p in phases)


def test_merge_parquet_and_json_sources_and_not_matched_by_source(spark, table, tmp_path):
    parquet = str(tmp_path / "src.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "v": pa.array([7, 8], pa.int32())}), parquet)
    result = _run(
        "merge", table, "-s", parquet, "--on", "t.id = s.id",
        "--when-not-matched-by-source-delete", "t.id > 3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "num_deleted_rows" in result.stdout
    assert [r[0] for r in _rows(spark, table)] == [1, 2, 3]

    source = tmp_path / "src.json"
    source.write_text('{"id": 3, "v": 33, "name": "x"}\n{"id": 5, "v": 55, "name": "y"}\n')
    result = _run(
        "merge", table, "-s", str(source), "--on", "t.id = CAST(s.id AS INT)",
        "--when-matched-delete", "--when-not-matched-insert-all", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_deleted_rows"] == 1
    assert [r[0] for r in _rows(spark, table)] == [1, 2, 5]


def test_merge_sql_file_and_explain(spark, table, tmp_path):
    sql = tmp_path / "merge.sql"
    sql.write_text(
        f"MERGE INTO delta.`{table}` t USING (SELECT 4 AS id, -4 AS v, 'x' AS name) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v"
    )
    result = _run("explain", "--sql", str(sql))
    assert result.exit_code == 0, result.output
    assert "deltamerge MERGE plan" in result.stdout
    result = _run("merge", "--sql", str(sql), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_updated_rows"] == 1
    assert (4, -4, "n4") in _rows(spark, table)

    result = _run("explain", table, "-s", table, "--on", "t.id = s.id", "--when-not-matched-insert-all")
    assert result.exit_code == 0, result.output
    assert "executor: insertOnly" in result.stdout


def test_operation_errors_are_exit_1_with_the_error_class(spark, table, tmp_path):
    dup = tmp_path / "dup.csv"
    dup.write_text("id,v,name\n1,1,a\n1,2,b\n")
    result = _run("merge", table, "-s", str(dup), "--on", "t.id = s.id", "--when-matched-update-all")
    assert result.exit_code == 1
    assert "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in result.stderr
    result = _run("merge", table, "-s", str(dup), "--on", "t.nope = s.id", "--when-matched-delete")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: [")
    assert _rows(spark, table)[0] == (1, 10, "n1")


def test_usage_errors_are_exit_2(table, csv_source, tmp_path):
    assert _run("merge", table, "-s", csv_source, "--when-matched-delete").exit_code == 2  # no --on
    result = _run("merge", table, "-s", csv_source, "--on", "t.id = s.id", "--when-matchd-delete")
    assert result.exit_code == 2 and "No such option" in result.output
    assert _run("merge", table, "-s", csv_source, "--on", "t.id = s.id").exit_code == 2  # no clause
    assert _run("merge", table, "-s", str(tmp_path / "x" / "missing.csv"), "--on", "1=1",
                "--when-matched-delete").exit_code == 2  # fmt: skip
    assert _run("merge", "--sql", str(tmp_path / "missing.sql")).exit_code == 2
    assert _run("--conf", "novalue", "changes", table).exit_code == 2
    assert _run("history").exit_code == 2


def test_changes(spark, table, csv_source):
    _run("merge", table, "-s", csv_source, "--on", "t.id = s.id", "--when-matched-delete", "s.op = 'D'")
    result = _run("changes", table, "--from", "1", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["id"], r["_change_type"], r["_commit_version"]) for r in rows] == [(2, "delete", 1)]
    result = _run("changes", table, "--from", "0", "--to", "0")
    assert result.exit_code == 0 and "insert" in result.stdout
    result = _run("changes", table, "--from", "5")
    assert result.exit_code == 1 and "DELTA_" in result.stderr


def test_vacuum(spark, table):
    orphan = os.path.join(table, "part-orphan.parquet")
    with open(orphan, "wb") as fh:
        fh.write(b"x")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    result = _run("vacuum", table, "--retain-hours", "0", "--dry-run")
    assert result.exit_code == 1 and "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT" in result.stderr
    check_off = "spark.databricks.delta.retentionDurationCheck.enabled=false"
    try:
        result = _run("-c", check_off, "vacuum", table, "--retain-hours", "0", "--dry-run")
        assert result.exit_code == 0, result.output
        assert "Would delete 1 file(s)" in result.stdout and os.path.exists(orphan)
        # LITE reads the log only: no commit names the orphan.
        result = _run("-c", check_off, "vacuum", table, "--retain-hours", "0", "--lite")
        assert result.exit_code == 0, result.output
        assert "Deleted 0 file(s)" in result.stdout and os.path.exists(orphan)
        result = _run("-c", check_off, "vacuum", table, "--retain-hours", "0")
        assert result.exit_code == 0, result.output
        assert "Deleted 1 file(s)" in result.stdout and not os.path.exists(orphan)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert len(_rows(spark, table)) == 4
    assert _run("vacuum", table).stdout.startswith("Deleted 0 file(s)")


def test_optimize(spark, table):
    if not hasattr(DeltaTable, "optimize"):
        pytest.skip("DeltaTable.optimize has not landed")
    more = spark.createDataFrame([(5, 50, "n5")], "id int, v int, name string")
    deltamerge.write(more, table, mode="append")
    result = _run("optimize", table, "--json")
    assert result.exit_code == 0, result.output
    assert len(deltamerge.io.snapshot_for(table).files) == 1
    assert len(_rows(spark, table)) == 5


def test_reorg_purges_deleted_rows(spark, tmp_path):
    path = str(tmp_path / "dv")
    rows = spark.createDataFrame([(i, i * 10) for i in range(6)], "id int, v int")
    deltamerge.write(rows.coalesce(1), path, configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, path).delete("id < 2")
    assert deltamerge.io.snapshot_for(path).files[0].deletion_vector is not None
    result = _run("reorg", path, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["metrics"]["numFilesRemoved"] == 1
    assert all(f.deletion_vector is None for f in deltamerge.io.snapshot_for(path).files)
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "REORG"
    assert sorted(r[0] for r in deltamerge.read(spark, path).collect()) == [2, 3, 4, 5]


def test_drop_feature(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3).selectExpr("id"), path, configuration={"delta.enableRowTracking": "true"})
    result = _run("drop-feature", path, "rowTracking")
    assert result.exit_code == 0, result.output
    assert "dropped rowTracking: protocol (1, 7) with appendOnly, domainMetadata, invariants" in result.output
    result = _run("drop-feature", path, "appendOnly")
    assert result.exit_code == 1 and "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE" in result.output
    result = _run("drop-feature", path, "domainMetadata", "--truncate-history")
    assert result.exit_code == 1 and "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED" in result.output


def test_demo_runs_the_bundled_demo(monkeypatch, tmp_path):
    import deltamerge.demo

    called = []
    monkeypatch.setattr(deltamerge.demo, "main", lambda path=None: called.append(path))
    result = _run("demo", "--path", str(tmp_path / "demo"))
    assert result.exit_code == 0, result.output
    assert called == [str(tmp_path / "demo")]
