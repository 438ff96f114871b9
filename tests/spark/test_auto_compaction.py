"""Auto compaction (builders/auto_compaction.py): after a write, the partitions it wrote to are
compacted in an OPTIMIZE commit with auto = true once they hold autoCompact.minNumFiles small files."""

from __future__ import annotations

import logging

import pytest
from deltalake import DeltaTable as RsTable

import deltamerge
from deltamerge import DeltaTable
from deltamerge.builders import compaction
from deltamerge.io import snapshot_for
from deltamerge.spark.session import temporary_settings

pytestmark = pytest.mark.spark

PREFIX = "spark.databricks.delta.autoCompact."


def _settings(spark, **values):
    """Delta's autoCompact.* settings for a block (``nonBlindAppend_enabled`` is
    ``autoCompact.nonBlindAppend.enabled``)."""
    keys = {PREFIX + k.replace("_", "."): str(v) for k, v in values.items()}
    return temporary_settings(spark, keys, on_connect=True)


def _append(spark, path, rows, **kwargs):
    deltamerge.write(spark.createDataFrame(rows, "id int, p string").coalesce(1), path, "append", **kwargs)


def _files(path):
    counts: dict[str, int] = {}
    for f in snapshot_for(path).files:
        counts[f.partition_values["p"]] = counts.get(f.partition_values["p"], 0) + 1
    return counts


def _operations(spark, path):
    return [r["operation"] for r in DeltaTable.forPath(spark, path).history().collect()][::-1]


def test_writes_compact_the_partitions_they_filled_with_small_files(spark, tmp_path):
    path = str(tmp_path / "t")
    configuration = {"delta.autoOptimize.autoCompact": "true"}
    with _settings(spark, minNumFiles=3):
        _append(spark, path, [(0, "a"), (100, "b")], partition_by=["p"], configuration=configuration)
        _append(spark, path, [(1, "a")])
        _append(spark, path, [(101, "b")])
        assert _files(path) == {"a": 2, "b": 2}  # below minNumFiles: nothing compacted yet
        _append(spark, path, [(2, "a")])  # a third small file in "a"
        assert _files(path) == {"a": 1, "b": 2}  # only the partition the write filled
        ops = _operations(spark, path)
        assert ops == ["WRITE", "WRITE", "WRITE", "WRITE", "OPTIMIZE"]
        last = DeltaTable.forPath(spark, path).history(1).collect()[0]
        assert last["operationParameters"]["auto"] == "true"
        assert last["operationParameters"]["predicate"] == "[\"(p = 'a')\"]"
        assert last["operationMetrics"]["numRemovedFiles"] == "3"

        # A MERGE is a write too; the session setting wins over the table property.
        src = spark.createDataFrame([(101, "b"), (102, "b")], "id int, p string").coalesce(1)
        with _settings(spark, enabled="false"):
            (
                DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
                .whenNotMatchedInsertAll().execute()
            )  # fmt: skip
        assert _files(path) == {"a": 1, "b": 3}
    with _settings(spark, minNumFiles=2):
        (
            DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id AND t.p = s.p")
            .whenMatchedUpdate(set={"id": "s.id + 1000"}).execute()
        )  # fmt: skip
        assert _files(path) == {"a": 1, "b": 1}  # the rewritten file and the untouched one
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(0, "a"), (1, "a"), (2, "a"), (100, "b"), (1101, "b"), (1102, "b")]
    assert sorted(RsTable(path).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 100, 1101, 1102]


def test_session_setting_and_options(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [[(0, "a"), (10, "a")], [(1, "a")], [(2, "a")]]
    # The session setting turns it on for a table without the property; blind appends can be excluded.
    with _settings(spark, enabled="true", minNumFiles=2, nonBlindAppend_enabled="true"):
        for r in rows:
            _append(spark, path, r, partition_by=["p"])
        assert _files(path) == {"a": 3}
        DeltaTable.forPath(spark, path).delete("id = 0")  # rewrites a file; not a blind append
        assert _files(path) == {"a": 1}
    assert _operations(spark, path)[-2:] == ["DELETE", "OPTIMIZE"]
    assert sorted(r["id"] for r in deltamerge.read(spark, path).collect()) == [1, 2, 10]

    # modifiedPartitionsOnly = false: the whole table once any partition qualifies.
    other = str(tmp_path / "u")
    _append(spark, other, [(0, "a")], partition_by=["p"])
    _append(spark, other, [(1, "a")])
    _append(spark, other, [(2, "b")])
    with _settings(spark, enabled="true", minNumFiles=2, modifiedPartitionsOnly_enabled="false"):
        _append(spark, other, [(3, "b")])
    assert _files(other) == {"a": 1, "b": 1}
    last = DeltaTable.forPath(spark, other).history(1).collect()[0]
    assert last["operation"] == "OPTIMIZE" and last["operationParameters"]["predicate"] == "[]"


def test_a_failed_compaction_never_fails_the_write(spark, tmp_path, monkeypatch, caplog):
    path = str(tmp_path / "t")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("deltamerge.builders.auto_compaction.optimize", broken)
    with _settings(spark, enabled="true", minNumFiles=2), caplog.at_level(logging.WARNING):
        _append(spark, path, [(0, "a")], partition_by=["p"])
        _append(spark, path, [(1, "a")])
    assert _operations(spark, path) == ["WRITE", "WRITE"] and _files(path) == {"a": 2}
    assert any("post-commit hook failed" in r.getMessage() for r in caplog.records)


def test_predicate_names_odd_columns_values_and_nulls():
    from deltamerge.dml import predicate_parameter

    auto = compaction.AutoCompaction(frozenset({(("a b", "it's"), ("d", None))}), 1, 2)
    assert predicate_parameter(auto.condition(["a b", "d"])) == ["((`a b` = 'it\\'s') AND (d IS NULL))"]
    assert compaction.AutoCompaction(None, 1, 2).condition(["d"]) is None
