"""OPTIMIZE ... ZORDER BY (Delta's OptimizeTableCommand with ZOrderStrategy): every file of a selected
partition is rewritten, range-partitioned by the interleaved range ids of the Z-order columns."""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import json
import os

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for


def _rows(spark, path):
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _ranges(path, *cols):
    """Per file, the width (max - min) of each column's statistics."""
    out = []
    for f in snapshot_for(path).files:
        stats = json.loads(f.stats)
        out.append([stats["maxValues"][c] - stats["minValues"][c] for c in cols])
    return out


def test_zorder_clusters_every_column_and_keeps_the_rows(spark, tmp_path, spark_conf):
    path = str(tmp_path / "t")
    grid = spark.range(0, 10000).select(
        "id", (F.col("id") % 100).alias("x"), (F.col("id") / 100).cast("bigint").alias("y")
    )
    deltamerge.write(grid.repartition(6, "id"), path)
    before = _rows(spark, path)
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.parquet")))
    spark_conf({"spark.databricks.delta.optimize.maxFileSize": str(total // 8)})
    # Before: every file spans (nearly) the whole grid in both dimensions.
    assert min(min(r) for r in _ranges(path, "x", "y")) > 90

    out = DeltaTable.forPath(spark, path).optimize().executeZOrderBy("x", "y").collect()[0]
    metrics = out["metrics"]
    assert (metrics["numFilesRemoved"], metrics["partitionsOptimized"], metrics["numBins"]) == (6, 1, 1)
    assert 6 <= metrics["numFilesAdded"] <= 8
    z = metrics["zOrderStats"].asDict(recursive=True)
    removed = {"num": 6, "size": metrics["filesRemoved"]["totalSize"]}
    assert z == {
        "strategyName": "all",
        "inputCubeFiles": {"num": 0, "size": 0},
        "inputOtherFiles": removed,
        "inputNumCubes": 0,
        "mergedFiles": removed,
        "numOutputCubes": 1,
        "mergedNumCubes": None,
    }
    assert _rows(spark, path) == before
    # After: files are boxes of the grid, narrow in x and in y (a sort by x alone would leave every
    # file the full y range, a random layout both).
    widths = _ranges(path, "x", "y")
    assert sum(w[0] for w in widths) / len(widths) < 75
    assert sum(w[1] for w in widths) / len(widths) < 75
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operation"] == "OPTIMIZE"
    assert last["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": '["x","y"]',
        "clusterBy": "[]",
        "auto": "false",
    }
    commit = os.path.join(path, "_delta_log", f"{last['version']:020d}.json")
    with open(commit) as f:
        actions = [json.loads(line) for line in f]
    assert all(not a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a)
    assert RsTable(path).to_pyarrow_table().num_rows == 10000


def test_zorder_column_types_nulls_deletion_vectors_and_partitions(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        (
            i,
            str(i % 3),
            None if i % 7 == 0 else f"name-{(i * 37) % 101:03d}",
            dt.date(2020, 1, 1) + dt.timedelta(days=i % 50),
            dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i),
            i % 2 == 0,
            decimal.Decimal(i) / 4,
            (i % 11, f"s{i}"),
        )
        for i in range(300)
    ]
    ddl = (
        "id long, p string, name string, d date, ts timestamp, flag boolean, amount decimal(10,2), "
        "s struct<a:int,b:string>"
    )
    for part in range(3):
        deltamerge.write(
            spark.createDataFrame(rows[part * 100 : (part + 1) * 100], ddl),
            path,
            mode="append",
            partition_by=["p"],
            configuration={"delta.enableDeletionVectors": "true"},
        )
    deltamerge.sql(spark, f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    before = _rows(spark, path)
    files = snapshot_for(path).files
    untouched = {f.path for f in files if f.partition_values["p"] != "1"}
    assert any(f.deletion_vector is not None for f in files)

    cols = ("name", "d", "ts", "flag", "amount", "s.a")
    out = DeltaTable.forPath(spark, path).optimize().where("p = '1'").executeZOrderBy(*cols)
    metrics = out.collect()[0]["metrics"]
    assert metrics["partitionsOptimized"] == 1 and metrics["numFilesAdded"] == 1
    assert metrics["deletionVectorStats"]["numDeletionVectorsRemoved"] >= 1
    assert _rows(spark, path) == before
    after = snapshot_for(path).files
    assert untouched <= {f.path for f in after}
    rewritten = [f for f in after if f.partition_values["p"] == "1"]
    assert len(rewritten) == 1 and rewritten[0].deletion_vector is None
    # A single file of a partition is Z-ordered too (Delta rewrites it), and SQL takes the columns.
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` WHERE p = '1' ZORDER BY (`name`, s.a)")
    assert _rows(spark, path) == before
    assert {f.path for f in snapshot_for(path).files if f.partition_values["p"] == "1"}.isdisjoint(
        {f.path for f in rewritten}
    )


def test_zorder_refusals_leave_the_table_alone(spark, tmp_path, spark_conf):
    path = str(tmp_path / "t")
    df = spark.createDataFrame(
        [(i, i % 2, f"v{i}", (i, "x")) for i in range(20)], "a int, p int, b string, s struct<c:int,d:string>"
    )
    deltamerge.write(df, path, partition_by=["p"], configuration={"delta.dataSkippingNumIndexedCols": "1"})
    table = DeltaTable.forPath(spark, path)
    version = table.version()
    cases = [
        (("p",), "DELTA_ZORDERING_ON_PARTITION_COLUMN"),
        (("nope",), "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"),
        (("s.nope",), "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"),
        (("a", "b"), r"DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS.*\[b\].*checkStatsCollection"),
    ]
    for cols, error in cases:
        with pytest.raises(DeltaMergeError, match=error):
            table.optimize().executeZOrderBy(*cols)
    with pytest.raises(DeltaMergeError, match="DELTA_ZORDERING_ON_PARTITION_COLUMN"):
        deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY p")
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR"):
        deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY (a + 1)")
    assert table.version() == version
    # The statistics check can be turned off, as in Delta; a struct itself is no Z-order column.
    spark_conf({"spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled": "false"})
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_DATA_TYPES"):
        table.optimize().executeZOrderBy("s")
    assert table.version() == version
    rows = _rows(spark, path)
    table.optimize().executeZOrderBy(["a", "b"])
    assert table.version() == version + 1 and _rows(spark, path) == rows


def test_zorder_with_map_columns_and_quoted_names(spark, tmp_path):
    # Spark hashes no maps (the noise byte skips them); a backtick in a name is quoted.
    path = str(tmp_path / "t")
    rows = [(i, {f"k{i}": i}, i % 4) for i in range(40)]
    df = spark.createDataFrame(rows, "id long, m map<string,int>, `we``ird` int")
    deltamerge.write(df.repartition(3), path)
    before = sorted((r[0], tuple(r[1].items()), r[2]) for r in deltamerge.read(spark, path).collect())
    DeltaTable.forPath(spark, path).optimize().executeZOrderBy("`we``ird`", "id")
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY (`we``ird`)")
    after = sorted((r[0], tuple(r[1].items()), r[2]) for r in deltamerge.read(spark, path).collect())
    assert after == before and len(snapshot_for(path).files) == 1
