"""The materialized source's life (merge/source.py): dropped when the merge ends, and a merge
that lost blocks of it runs again (Delta's retry on CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import MaterializedSourceLostError
from py4j_trips import round_trips

pytestmark = pytest.mark.spark


def _persistent_rdds(spark) -> set[int]:  # type: ignore[no-untyped-def]
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def _rows(spark, path):  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


@pytest.fixture
def target(spark, tmp_path):  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(10).select("id", F.lit(0).alias("v")).coalesce(1), path)
    src = str(tmp_path / "src")  # a plain Parquet source: materialized in auto mode
    spark.range(5, 15).select("id", F.lit(1).alias("v")).coalesce(2).write.parquet(src)
    return path, src


def _upsert(spark, path, src):  # type: ignore[no-untyped-def]
    source = spark.read.parquet(src).alias("s")
    m = DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = s.id")
    return tuple(m.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0])


def test_materialized_source_is_dropped_after_the_merge(spark, target) -> None:
    path, src = target
    before = _persistent_rdds(spark)
    for _ in range(2):  # a MERGE per micro-batch must not pile up checkpoint blocks
        _upsert(spark, path, src)
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert int(metrics["materializeSourceTimeMs"]) > 0
    assert _persistent_rdds(spark) <= before  # none left by the merge (GC may drop older ones)
    # A source the user checkpointed is theirs: the merge leaves it alone.
    mine = spark.read.parquet(src).localCheckpoint(eager=True)
    DeltaTable.forPath(spark, path).alias("t").merge(
        mine.alias("s"), "t.id = s.id"
    ).whenMatchedDelete().execute()
    assert len(_persistent_rdds(spark) - before) == 1 and mine.count() == 10


def _lose_blocks(monkeypatch, times: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Drop the materialized source's blocks as the merge starts working, ``times`` times (what
    an executor lost mid-merge does); returns the attempts seen."""
    from deltamerge.merge import command
    from deltamerge.merge.source import _checkpoint_rdd

    real = command._execute
    seen: list[int] = []

    def execute(ctx, plan):  # type: ignore[no-untyped-def]
        seen.append(len(seen) + 1)
        if len(seen) <= times:
            # The renamed source is a projection of the checkpoint: its one leaf is the RDD.
            rdd = _checkpoint_rdd(ctx.source)
            assert rdd is not None
            rdd.unpersist(True)
        return real(ctx, plan)

    monkeypatch.setattr(command, "_execute", execute)
    return seen


def test_lost_source_blocks_run_the_merge_again(spark, target, monkeypatch) -> None:
    path, src = target
    seen = _lose_blocks(monkeypatch, times=1)
    before = _persistent_rdds(spark)
    assert _upsert(spark, path, src) == (10, 5, 0, 5)
    assert seen == [1, 2]
    assert _rows(spark, path) == [(i, 0) for i in range(5)] + [(i, 1) for i in range(5, 15)]
    table = DeltaTable.forPath(spark, path)
    assert table.version() == 1 and table.history(1).collect()[0]["operation"] == "MERGE"
    assert _persistent_rdds(spark) <= before  # none left by the merge (GC may drop older ones)


def test_source_blocks_lost_on_every_attempt(spark, target, monkeypatch, spark_conf) -> None:
    path, src = target
    spark_conf({"spark.databricks.delta.merge.materializeSource.maxAttempts": "2"})
    seen = _lose_blocks(monkeypatch, times=5)
    files = sorted(p.name for p in Path(path).rglob("*.parquet"))
    with pytest.raises(MaterializedSourceLostError, match="DELTA_MERGE_MATERIALIZE_SOURCE_FAILED_REPEATEDLY"):
        _upsert(spark, path, src)
    assert seen == [1, 2]
    assert DeltaTable.forPath(spark, path).version() == 0 and _rows(spark, path) == [
        (i, 0) for i in range(10)
    ]
    assert sorted(p.name for p in Path(path).rglob("*.parquet")) == files


def test_storage_levels_follow_delta_settings(spark, target, monkeypatch, spark_conf) -> None:
    """``merge.materializeSource.rddStorageLevel`` / ``...FirstRetry`` / ``...Retry`` choose where
    each attempt pins the source (Delta's defaults DISK_ONLY, DISK_ONLY_2, DISK_ONLY_3); a name
    PySpark does not know keeps the default."""
    from pyspark import StorageLevel

    from deltamerge.merge import source as source_mod

    df = spark.range(3)
    assert [source_mod.storage_level(df, a) for a in (1, 2, 3, 4)] == [
        StorageLevel.DISK_ONLY, StorageLevel.DISK_ONLY_2, StorageLevel.DISK_ONLY_3, StorageLevel.DISK_ONLY_3
    ]  # fmt: skip
    prefix = "spark.databricks.delta.merge.materializeSource.rddStorageLevel"
    spark_conf(
        {prefix: "memory_and_disk", prefix + "FirstRetry": "MEMORY_ONLY_2", prefix + "Retry": "NO_SUCH"}
    )
    assert [source_mod.storage_level(df, a) for a in (1, 2, 3)] == [
        StorageLevel.MEMORY_AND_DISK, StorageLevel.MEMORY_ONLY_2, StorageLevel.DISK_ONLY_3
    ]  # fmt: skip
    # A merge that loses its source once pins it with the first level, then the first retry's.
    path, src = target
    levels: list[str] = []
    real = source_mod.storage_level

    def recorded(df, attempt):  # type: ignore[no-untyped-def]
        level = real(df, attempt)
        levels.append(str(level))
        return level

    monkeypatch.setattr(source_mod, "storage_level", recorded)
    _lose_blocks(monkeypatch, times=1)
    assert _upsert(spark, path, src) == (10, 5, 0, 5)
    assert levels == [str(StorageLevel.MEMORY_AND_DISK), str(StorageLevel.MEMORY_ONLY_2)]


def test_materialization_reason_from_the_plan_json_agrees_with_the_walk(spark, target, spark_conf) -> None:
    """Auto mode's reason from the plan's JSON text (expressions) and a walk over the plan nodes
    (leaves) is the walk over every node's reason, for sources of each kind; a source of 300
    computed columns costs a few dozen py4j round trips, not ~5 per expression node."""
    from deltamerge.merge import planner

    path, parquet = target
    delta = deltamerge.read(spark, path)
    other = spark.read.parquet(parquet)
    plus_one = F.udf(lambda x: x + 1, "long")
    delta.createOrReplaceTempView("dm_mat_delta")
    other.createOrReplaceTempView("dm_mat_parquet")
    wide = delta.select("id", *[(F.col("id") * i % 7).alias(f"c{i}") for i in range(300)]).alias("s")
    sources = {
        "delta": (delta, planner.NOT_MATERIALIZED_AUTO),
        "aliased": (delta.alias("s"), planner.NOT_MATERIALIZED_AUTO),
        "delta filtered": (
            delta.where("id > 3").select("id", (F.col("v") + 1).alias("v")),
            planner.NOT_MATERIALIZED_AUTO,
        ),
        "parquet": (other, planner.NON_DELTA),
        "local": (spark.createDataFrame([(1, 2)], "id long, v long"), planner.NON_DELTA),
        "udf": (delta.select("id", plus_one("v").alias("v")), planner.WITH_UDF),
        # Delta's order of the reasons: a non-Delta leaf, then non-determinism, then a UDF.
        "parquet udf": (other.select("id", plus_one("v").alias("v")), planner.NON_DELTA),
        "rand udf": (
            delta.select("id", plus_one("v").alias("v"), F.rand().alias("r")),
            planner.NON_DETERMINISTIC_OPERATORS,
        ),
        "rand": (
            delta.select("id", (F.rand() * 10).cast("long").alias("v")),
            planner.NON_DETERMINISTIC_OPERATORS,
        ),
        "join": (delta.join(other, "id"), planner.NON_DELTA),
        "delta subquery": (
            spark.sql("SELECT * FROM dm_mat_delta WHERE id IN (SELECT id FROM dm_mat_delta)"),
            planner.NOT_MATERIALIZED_AUTO,
        ),
        "parquet subquery": (
            spark.sql("SELECT id, (SELECT max(v) FROM dm_mat_parquet) AS v FROM dm_mat_delta"),
            planner.NON_DELTA,
        ),
        "wide": (wide, planner.NOT_MATERIALIZED_AUTO),
    }
    for name, (df, want) in sources.items():
        walked = planner._classic_walk_traits(df._jdf.queryExecution().analyzed())
        assert planner._classic_traits(df) == walked and walked.reason(False) == want, name

    # ignoreCorruptFiles / ignoreMissingFiles come after a non-Delta leaf and non-determinism and
    # before a UDF, unless merge.forceSourceMaterializationWithUnreadableFilesConfig is off.
    force = "spark.databricks.delta.merge.forceSourceMaterializationWithUnreadableFilesConfig"
    for key in ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles"):
        spark_conf({key: "true", force: "true"})
        got = [
            planner.source_materialization_reason(spark, sources[n][0])
            for n in ("delta", "udf", "parquet", "rand")
        ]
        assert got == [planner.IGNORE_UNREADABLE] * 2 + [
            planner.NON_DELTA,
            planner.NON_DETERMINISTIC_OPERATORS,
        ]
        spark_conf({force: "false"})
        got = [planner.source_materialization_reason(spark, sources[n][0]) for n in ("delta", "udf")]
        assert got == [planner.NOT_MATERIALIZED_AUTO, planner.WITH_UDF]
        spark_conf({key: "false"})

    # A Delta source of 60 files: its relation's root paths come back as one text.
    many = str(Path(path).parent / "many")
    deltamerge.write(spark.range(600).repartition(60), many)
    many_files = deltamerge.read(spark, many).alias("s")
    trips = []
    for df in (wide, many_files):
        with round_trips() as calls:
            assert planner._classic_traits(df).reason(False) == planner.NOT_MATERIALIZED_AUTO
        trips.append(len(calls))
    assert max(trips) < 60, trips


_NONDETERMINISTIC_CLAUSES = {
    # one per execution that reads the source once after the source-key summary
    "cow-single-pass": (
        False,
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)",
    ),
    "cow-uniform-upsert": (False, "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"),
    "dv-one-job": (True, "WHEN MATCHED THEN UPDATE SET v = s.v + 1"),
    "dv-replace": (
        True,
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT * "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE",
    ),
    "cow-insert-only": (False, "WHEN NOT MATCHED THEN INSERT *"),
}


@pytest.mark.parametrize("case", list(_NONDETERMINISTIC_CLAUSES))
def test_a_changing_source_is_caught_by_every_execution(spark, tmp_path, spark_conf, case: str) -> None:
    """Delta's ``failIfSourceChanged`` with an unmaterialized source that gives other rows on each
    read: the merge fails and leaves the table as it was, whichever execution the merge takes (the
    broadcast variants read the source once after the summary; they stand aside here, as the check
    needs two counted reads). An insert-only merge reads it once, as in Delta: no error."""
    import random

    deletion_vectors, clauses = _NONDETERMINISTIC_CLAUSES[case]
    spark_conf(
        {
            "spark.databricks.delta.merge.materializeSource": "none",
            "spark.databricks.delta.merge.failIfSourceChanged": "true",
        }
    )
    spark.udf.register(
        "dmRandom", F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
    )
    path = str(tmp_path / "t")
    target = spark.range(0, 2000, numPartitions=4).selectExpr("CAST(id AS INT) k", "CAST(id AS INT) v")
    deltamerge.write(
        target, path, configuration={"delta.enableDeletionVectors": str(deletion_vectors).lower()}
    )
    source = (
        "(SELECT CAST(r.id AS INT) AS k, CAST(r.id AS INT) AS v FROM range(1, 100000) AS r "
        "JOIN (SELECT dmRandom() * 100000 AS bound) ON r.id < bound) AS s"
    )
    statement = f"MERGE INTO delta.`{path}` t USING {source} ON s.k = t.k {clauses}"
    if case.endswith("insert-only"):
        deltamerge.sql(spark, statement)
        assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "MERGE"
        return
    with pytest.raises(Exception, match="source dataset is not deterministic"):
        deltamerge.sql(spark, statement)
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["version"] == 0
    assert _rows(spark, path) == [(i, i) for i in range(2000)]
