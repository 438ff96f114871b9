"""deltamerge's core paths on a Spark Connect session (see conftest.py for how these run)."""

from __future__ import annotations

import os
import shutil
import sys
import uuid

import pytest
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.io import snapshot_for
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import is_connect

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from builder_columns import CASES
from merge_variants import VARIANTS

pytestmark = pytest.mark.spark

SCHEMA = "id int, v int, flag string"
SOURCE_SCHEMA = "id int, v int, flag string, op string"


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "t")


def _target(spark, path, n=6, props=None):
    rows = [(i, i * 10, "old") for i in range(1, n + 1)]
    deltamerge.write(spark.createDataFrame(rows, SCHEMA), path, configuration=props)


def _source(spark):
    rows = [(1, 100, "s", "D"), (2, 200, "s", "U"), (3, 300, "s", "X"), (7, 700, "s", "I"), (8, 800, "s", "X")]  # noqa: E501
    return spark.createDataFrame(rows, SOURCE_SCHEMA)


def test_session_is_connect(connect_spark):
    assert is_connect(connect_spark)


def test_write_read_append_history_time_travel(connect_spark, path):
    spark = connect_spark
    assert deltamerge.write(spark.createDataFrame([(1, 10, "a"), (2, 20, "b")], SCHEMA), path) == 0
    assert deltamerge.write(spark.createDataFrame([(3, 30, "c")], SCHEMA), path, mode="append") == 1
    assert _rows(deltamerge.read(spark, path)) == [(1, 10, "a"), (2, 20, "b"), (3, 30, "c")]
    assert _rows(deltamerge.read(spark, path, version=0)) == [(1, 10, "a"), (2, 20, "b")]

    table = DeltaTable.forPath(spark, path)
    history = table.history().collect()
    assert [(h["version"], h["operation"]) for h in history] == [(1, "WRITE"), (0, "WRITE")]
    assert history[0]["operationParameters"]["mode"] == "Append"
    first_commit_ms = int(history[1]["timestamp"].timestamp() * 1000)
    assert _rows(deltamerge.read(spark, path, timestamp=first_commit_ms)) == [(1, 10, "a"), (2, 20, "b")]
    assert table.version() == 1
    detail = table.detail().collect()[0]
    assert detail["format"] == "delta" and detail["numFiles"] >= 2


def test_merge_builder_string_conditions_every_clause(connect_spark, path):
    spark = connect_spark
    _target(spark, path)
    result = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(_source(spark).alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.op = 'D'")
        .whenMatchedUpdate("s.op = 'U'", set={"v": "s.v"})
        .whenMatchedUpdateAll()
        .whenNotMatchedInsert("s.op = 'I'", values={"id": "s.id", "v": "s.v", "flag": "'new'"})
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceUpdate("t.id > 5", set={"flag": "'orphan'"})
        .whenNotMatchedBySourceDelete()
        .execute()
    )  # fmt: skip
    assert tuple(result.collect()[0]) == (8, 3, 3, 2)
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == [
        (2, 200, "old"), (3, 300, "s"), (6, 60, "orphan"), (7, 700, "new"), (8, 800, "s"),
    ]  # fmt: skip
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operation"] == "MERGE"
    assert last["operationMetrics"]["numTargetRowsInserted"] == "2"
    # Spark's refusal of an expression names the statement's columns, on Connect too
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match=r"BINARY_OP_DIFF_TYPES.*\(t\.v \+ s\.flag\)"):
        DeltaTable.forPath(spark, path).alias("t").merge(
            _source(spark).selectExpr("id", "v", "array(1) AS flag").alias("s"), "t.id = s.id"
        ).whenMatchedUpdate(set={"v": "t.v + s.flag"}).execute()


def test_merge_builder_column_conditions_every_clause(connect_spark, path):
    spark = connect_spark
    _target(spark, path)
    builder = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(_source(spark).alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedDelete(F.col("s.op") == F.lit("D"))
        .whenMatchedUpdate(
            F.col("s.op").isin("U"),
            set={"v": F.col("s.v") * 2, "flag": F.when(F.col("s.v") > 150, "big").otherwise("small")},
        )
        .whenMatchedUpdateAll(F.col("s.op") == "X")
        .whenNotMatchedInsert(
            F.col("s.op") == "I", values={"id": F.col("s.id"), "v": F.lit(0), "flag": F.lit("new")}
        )
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceUpdate(F.col("t.id") > 5, set={"flag": F.lit("orphan")})
        .whenNotMatchedBySourceDelete(F.col("t.id") == 4)
    )  # fmt: skip
    plan = builder.explain()
    assert "executor: classic" in plan
    assert tuple(builder.execute().collect()[0]) == (7, 3, 2, 2)
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == [
        (2, 400, "big"), (3, 300, "s"), (5, 50, "old"), (6, 60, "orphan"), (7, 0, "new"), (8, 800, "s"),
    ]  # fmt: skip


def test_insert_only_merge_and_source_alias_from_dataframe(connect_spark, path):
    spark = connect_spark
    _target(spark, path, n=3)
    src = spark.createDataFrame([(3, 0, "x", "I"), (9, 90, "x", "I")], SOURCE_SCHEMA).alias("src")
    table = DeltaTable.forPath(spark, path).alias("tgt")
    builder = table.merge(src, "tgt.id = src.id").whenNotMatchedInsertAll()
    assert "executor: insertOnly" in builder.explain()
    assert tuple(builder.execute().collect()[0]) == (1, 0, 0, 1)
    assert _rows(table.toDF()) == [(1, 10, "old"), (2, 20, "old"), (3, 30, "old"), (9, 90, "x")]
    # optimized writes (a rebalance hint and adaptive settings around the write) on Connect
    more = spark.createDataFrame([(i, i, "y", "I") for i in range(20, 40)], SOURCE_SCHEMA).repartition(4)
    deltamerge.write(more.drop("op"), path, mode="append", options={"optimizeWrite": "true"})
    adds = [a for a in DeltaLog.for_table(path).read_commit(2) if type(a).__name__ == "AddFile"]
    assert len(adds) == 1 and adds[0].num_records == 20


def test_source_qualifiers_kept_under_other_operators(connect_spark, path):
    """``df.alias("src").where(...)`` and a temp view read with ``spark.table`` keep their columns'
    qualifiers, which the server resolves; a struct column named like a qualifier is the column."""
    spark = connect_spark
    _target(spark, path, n=3)
    src = spark.createDataFrame([(3, 0, "x", "I"), (9, 90, "x", "I"), (9, 90, "x", "I")], SOURCE_SCHEMA)
    table = DeltaTable.forPath(spark, path).alias("tgt")
    filtered = src.alias("src").where("v >= 0").dropDuplicates()
    result = table.merge(filtered, "tgt.id = src.id").whenMatchedUpdate(set={"v": "src.v"})
    result = result.whenNotMatchedInsertAll()
    assert tuple(result.execute().collect()[0]) == (2, 1, 0, 1)
    src.createOrReplaceTempView("qual_view")
    source = spark.table("qual_view").where("id = 9").distinct()
    result = table.merge(source, "tgt.id = QUAL_VIEW.ID").whenMatchedUpdate(set={"v": "qual_view.V + 1"})
    assert tuple(result.execute().collect()[0]) == (1, 1, 0, 0)
    nested = spark.sql("SELECT named_struct('id', 1) AS qual_view, 5 AS w")
    result = table.merge(nested, "tgt.id = qual_view.id").whenMatchedUpdate(set={"v": "w"})
    assert tuple(result.execute().collect()[0]) == (1, 1, 0, 0)
    assert _rows(table.toDF()) == [(1, 5, "old"), (2, 20, "old"), (3, 0, "old"), (9, 91, "x")]


def test_full_names_of_a_named_target_and_a_catalog_table_source(connect_spark, path):
    """``spark_catalog.default.<name>.id`` on a target opened by name; ``db.u.id`` on a source read
    from a catalog table with ``spark.table("db.u")``."""
    spark = connect_spark
    _target(spark, path, n=3)
    name = f"connect_{uuid.uuid4().hex[:8]}"
    deltamerge.register_table(spark, name, path)
    spark.sql("CREATE DATABASE IF NOT EXISTS qual_cdb")
    spark.createDataFrame([(2, 77)], "id long, v long").write.mode("overwrite").saveAsTable("qual_cdb.u")
    try:
        table = DeltaTable.forName(spark, f"default.{name}")
        on = f"spark_catalog.default.{name}.id = qual_cdb.u.id"
        result = table.merge(spark.table("qual_cdb.u"), on)
        result = result.whenMatchedUpdate(set={f"default.{name}.v": "u.v"})
        assert tuple(result.execute().collect()[0]) == (1, 1, 0, 0)
        assert _rows(table.toDF())[1] == (2, 77, "old")
    finally:
        deltamerge.unregister_table(spark, name)
        spark.sql("DROP DATABASE qual_cdb CASCADE")


def test_sql_merge_by_name_and_by_path(connect_spark, path):
    spark = connect_spark
    _target(spark, path, n=3)
    name = f"connect_{uuid.uuid4().hex[:8]}"
    deltamerge.register_table(spark, name, path)
    try:
        result = deltamerge.sql(
            spark,
            f"""MERGE INTO {name} t
                USING (SELECT * FROM VALUES (2, 200, 'u'), (4, 400, 'n') AS v(id, v, flag)) s
                ON t.id = s.id
                WHEN MATCHED THEN UPDATE SET *
                WHEN NOT MATCHED THEN INSERT *""",
        )
        assert tuple(result.collect()[0]) == (2, 1, 0, 1)
        assert spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 4  # the view follows commits
        # The name qualifies the columns of ``default.<name>`` (a DataFrame argument there).
        query = f"SELECT {name}.id FROM default.{name} WHERE default.{name}.id > 3"
        assert deltamerge.sql(spark, query).collect()[0][0] == 4
        delete_one = (
            f"MERGE INTO delta.`{path}` t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE"
        )
        plan = deltamerge.sql(spark, "EXPLAIN " + delete_one).collect()[0][0]
        assert "deltamerge MERGE plan" in plan
        deltamerge.sql(spark, delete_one)
        assert _rows(DeltaTable.forName(spark, name).toDF()) == [(2, 200, "u"), (3, 30, "old"), (4, 400, "n")]
        assert [r["operation"] for r in DeltaTable.forName(spark, name).history().collect()] == [
            "MERGE", "MERGE", "WRITE",
        ]  # fmt: skip
    finally:
        deltamerge.unregister_table(spark, name)


def test_sql_delta_paths_in_queries_args_and_kwargs(connect_spark, tmp_path):
    """On Connect a query's DataFrames are analysed lazily: delta.`<path>` in a MERGE source
    subquery, ``args`` markers and ``{df}`` fields must still reach the statement's execution."""
    spark = connect_spark
    src, tgt = str(tmp_path / "src"), str(tmp_path / "tgt")
    deltamerge.write(spark.createDataFrame([(1, "a")], "id int, v string"), src)
    deltamerge.write(spark.createDataFrame([(1, "b"), (2, "c")], "id int, v string"), src, mode="overwrite")
    deltamerge.write(spark.createDataFrame([(1, "x"), (5, "y")], "id int, v string"), tgt)
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{tgt}` t USING (SELECT * FROM delta.`{src}` VERSION AS OF 0 WHERE id > :lo) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET *",
        {"lo": 0},
    )
    assert _rows(deltamerge.read(spark, tgt)) == [(1, "a"), (5, "y")]
    extra = spark.createDataFrame([(7, "z")], "id int, v string")
    merge = "MERGE INTO delta.`" + tgt + "` t USING {extra} s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    deltamerge.sql(spark, merge, extra=extra)
    got = deltamerge.sql(
        spark, f"SELECT * FROM delta.`{tgt}` UNION ALL SELECT * FROM delta.`{src}` VERSION AS OF 0"
    )
    assert _rows(got) == [(1, "a"), (1, "a"), (5, "y"), (7, "z")]
    cdf = str(tmp_path / "cdf")
    deltamerge.write(spark.range(3), cdf, configuration={"delta.enableChangeDataFeed": "true"})
    query = f"SELECT id, _change_type FROM table_changes_by_path('{cdf}', 0) WHERE id > 0"
    changes = deltamerge.sql(spark, query)
    assert _rows(changes) == [(1, "insert"), (2, "insert")]


def test_dv_and_cdf_merge_then_read_changes(connect_spark, path):
    spark = connect_spark
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    df = spark.range(0, 10, 1, 2).selectExpr("cast(id as int) as id", "cast(id * 10 as int) as v")
    deltamerge.write(df, path, configuration=props)
    src = spark.createDataFrame([(1, -1), (3, -3), (100, 7)], "id int, v int")
    result = (
        DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.v = -3")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )  # fmt: skip
    assert tuple(result.collect()[0]) == (3, 1, 1, 1)
    snap = snapshot_for(path)
    assert any(f.deletion_vector is not None for f in snap.files)
    expected = [
        (1, -1, "update_postimage", 1), (1, 10, "update_preimage", 1),
        (3, 30, "delete", 1), (100, 7, "insert", 1),
    ]  # fmt: skip
    changes = deltamerge.read_changes(spark, path, starting_version=1)
    assert _rows(changes.select("id", "v", "_change_type", "_commit_version")) == expected
    assert deltamerge.read_changes(spark, path, 0).count() == 14
    expected_rows = sorted([(i, i * 10) for i in range(10) if i not in (1, 3)] + [(1, -1), (100, 7)])
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == expected_rows
    # REORG ... APPLY (PURGE) over Connect: the files with deletion vectors are rewritten without them.
    metrics = deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()[0]["metrics"]
    assert metrics["numFilesRemoved"] >= 1
    assert all(f.deletion_vector is None for f in snapshot_for(path).files)
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == expected_rows


def test_erase_writes_only_deletion_vectors(connect_spark, tmp_path, monkeypatch):
    """A GDPR erase on Connect (DV mode's one job writes no rows): repeated keys under a lone
    unconditional DELETE count once; conditional DELETEs pick rows."""
    from deltamerge.merge import one_job

    done, real = [], one_job._write
    monkeypatch.setattr(one_job, "_write", lambda *a, **k: done.append(real(*a, **k)) or done[-1])
    spark = connect_spark
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 400, 1, 4).selectExpr("id", "cast(id % 7 as int) as v"), path,
                     configuration={"delta.enableDeletionVectors": "true"})
    src = spark.range(0, 40).selectExpr("id * 13 % 500 as id", "cast(id % 3 as int) as w")
    erased = {i * 13 % 500 for i in range(40)} & set(range(400))
    res = DeltaTable.forPath(spark, path).alias("t").merge(src.unionAll(src).alias("s"), "t.id = s.id")
    assert tuple(res.whenMatchedDelete().execute().collect()[0]) == (len(erased), 0, len(erased), 0)
    picked = {i * 13 % 500 for i in range(40, 80) if i % 3 == 1 and i * 13 % 500 % 7 < 3}
    picked |= {i * 13 % 500 for i in range(40, 80) if i * 13 % 500 > 390}
    picked = (picked & set(range(400))) - erased
    src = spark.range(40, 80).selectExpr("id * 13 % 500 as id", "cast(id % 3 as int) as w")
    res = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
           .whenMatchedDelete("s.w = 1 AND t.v < 3").whenMatchedDelete("t.id > 390").execute())
    assert tuple(res.collect()[0]) == (len(picked), 0, len(picked), 0)
    # The conditional erase ran as the one job, writing no rows; on Connect the repeated keys take
    # the Delta-shaped path (the one job's repeat handling needs the noop sink, classic only).
    assert [len(w.adds) for w in done] == [0]
    snap = snapshot_for(path)
    assert all(f.deletion_vector is not None for f in snap.files if f.size and f.num_records)
    kept = {r[0] for r in DeltaTable.forPath(spark, path).toDF().collect()}
    assert kept == set(range(400)) - erased - picked


@pytest.mark.sampled
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_dv_merge_variants(connect_spark, tmp_path, variant):
    """Every execution of a DV-mode merge on Connect (observations read through
    ``Observation.get``, session settings left alone): same counters, rows and deletion vectors."""
    spark = connect_spark
    path = str(tmp_path / "t")
    df = spark.range(0, 400, 1, 4).selectExpr("id", "cast(id % 7 as int) as v")
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"})
    src = spark.range(0, 40).selectExpr("id * 13 % 500 as id", "cast(-id as int) as v")
    for key, value in VARIANTS[variant].items():
        spark.conf.set(key, value)
    try:
        result = (
            DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.v > -5")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )  # fmt: skip
    finally:
        for key in VARIANTS[variant]:
            spark.conf.unset(key)
    ids = [i * 13 % 500 for i in range(40)]
    deleted = {k for i, k in enumerate(ids) if -i > -5 and k < 400}
    updated = {k for k in ids if k < 400} - deleted
    inserted = {k for k in ids if k >= 400}
    assert tuple(result.collect()[0]) == (40, len(updated), len(deleted), len(inserted))
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numSourceRows"] == "40"
    snap = snapshot_for(path)
    masked = sum(f.deletion_vector.cardinality for f in snap.files if f.deletion_vector)
    assert masked == len(updated | deleted)
    by_id = dict(_rows(DeltaTable.forPath(spark, path).toDF()))
    assert set(by_id) == (set(range(400)) - deleted) | inserted
    assert all(by_id[k] == -ids.index(k) for k in updated | inserted)


def test_dv_two_job_upsert(connect_spark, tmp_path):
    """DV mode's two jobs with NOT MATCHED clauses: job 2 unions two plans built on job 1's rows,
    which PySpark 4.0's Connect client rejected while job 1's rows carried the source's row
    observation (``dict() got multiple values``); the source rows are counted in job 2 instead."""
    spark = connect_spark
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 60, 1, 3).selectExpr("id", "cast(id % 5 as int) as v"), path,
                     configuration={"delta.enableDeletionVectors": "true"})
    src = spark.range(0, 20).selectExpr("id * 7 as id", "cast(-id as int) as v")
    for key, value in VARIANTS["two-job"].items():
        spark.conf.set(key, value)
    try:
        result = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
                  .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    finally:
        for key in VARIANTS["two-job"]:
            spark.conf.unset(key)
    assert tuple(result.collect()[0]) == (20, 9, 0, 11)
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert (metrics["numSourceRows"], metrics["numTargetRowsUpdated"]) == ("20", "9")
    assert sorted(_rows(DeltaTable.forPath(spark, path).toDF().where("v < 0"))) == [
        (i * 7, -i) for i in range(1, 20)
    ]


def test_format_delta_reads_and_writes(connect_spark, tmp_path):
    spark = connect_spark
    deltamerge.configure(spark)
    try:
        path = str(tmp_path / "fmt")
        rows = [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")]
        df = spark.createDataFrame(rows, "id int, v string, p string")
        df.write.format("delta").partitionBy("p").save(path)
        assert snapshot_for(path).metadata.partition_columns == ("p",)
        more = spark.createDataFrame([(4, "d", "y", 1.5)], "id int, v string, p string, extra double")
        more.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
        read = spark.read.format("delta").load(path)
        assert read.columns == ["id", "v", "p", "extra"]
        assert read.count() == 4
        assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 3
        assert spark.read.format("DELTA").load(path + "@v0").count() == 3

        new = spark.createDataFrame([(10, "z", "x", None)], "id int, v string, p string, extra double")
        new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'x'").save(path)
        after = spark.read.format("delta").load(path).select("id", "p")
        assert _rows(after) == [(2, "y"), (4, "y"), (10, "x")]
        last = DeltaTable.forPath(spark, path).history(1).collect()[0]
        assert last["operation"] == "WRITE" and last["operationParameters"]["predicate"] == "[\"p = 'x'\"]"

        with pytest.raises(deltamerge.DeltaMergeError, match="DELTA_REPLACE_WHERE_MISMATCH"):
            new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'y'").save(path)

        cdf_path = str(tmp_path / "cdf")
        df.write.format("delta").option("delta.enableChangeDataFeed", "true").save(cdf_path)
        df.limit(1).write.format("delta").mode("append").save(cdf_path)
        reader = spark.read.format("delta").option("readChangeFeed", "true")
        feed = reader.option("startingVersion", 1).load(cdf_path)
        assert _rows(feed.select("id", "_change_type", "_commit_version")) == [(1, "insert", 1)]

        name = f"connect_tbl_{uuid.uuid4().hex[:8]}"
        try:
            df.write.format("delta").saveAsTable(name)
            assert spark.read.table(name).count() == 3
            assert spark.table(name).count() == 3
            df.write.format("delta").mode("append").saveAsTable(name)
            assert spark.read.option("versionAsOf", 0).table(name).count() == 3
            assert DeltaTable.forName(spark, name).toDF().count() == 6
            df.limit(1).write.insertInto(name)
            df.limit(1).write.insertInto(name, overwrite=True)
            assert spark.read.table(name).count() == 1
            # Spark 4's DataFrame MERGE API on a deltamerge table.
            (
                df.alias("s")
                .mergeInto(name, F.col(f"{name}.id") == F.col("s.id"))
                .whenMatched()
                .updateAll()
                .whenNotMatched()
                .insertAll()
                .merge()
            )
            assert _rows(spark.read.table(name)) == _rows(df)
            # DataFrameWriterV2 (df.writeTo) on the same table.
            df.writeTo(name).append()
            assert spark.read.table(name).count() == 2 * df.count()
            df.writeTo(name).overwritePartitions()  # unpartitioned: the whole table
            assert _rows(spark.read.table(name)) == _rows(df)
            v2_path = str(tmp_path / "v2")
            df.writeTo(f"delta.`{v2_path}`").using("delta").partitionedBy("p").create()
            assert snapshot_for(v2_path).metadata.partition_columns == ("p",)
            cond = F.col("p") == F.lit(_rows(df)[0][2])
            df.where(cond).writeTo(f"delta.`{v2_path}`").overwrite(cond)
            assert _rows(deltamerge.read(spark, v2_path)) == _rows(df)
            location = deltamerge.catalog.path_for_name(name)
            assert os.path.basename(location) == name
        finally:
            location = deltamerge.catalog.path_for_name(name)
            deltamerge.unregister_table(spark, name)
            if location:
                shutil.rmtree(location, ignore_errors=True)

        # spark.sql runs Delta statements (through deltamerge.sql), as with delta-spark's extension
        ids = _rows(spark.sql(f"SELECT id FROM delta.`{path}`"))
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = :id", args={"id": ids[-1][0]})
        assert _rows(spark.sql(f"SELECT id FROM delta.`{path}`")) == ids[:-1]
        assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "DELETE"
        assert spark.sql("SELECT 2 AS two").collect()[0]["two"] == 2

        other = str(tmp_path / "plain")
        spark.range(3).write.format("parquet").save(other)  # other formats are untouched
        assert spark.read.format("parquet").load(other).count() == 3
        assert not os.path.exists(os.path.join(other, "_delta_log"))
    finally:
        deltamerge.unconfigure()
    from pyspark.sql.connect.readwriter import DataFrameWriter

    assert not getattr(DataFrameWriter.save, "__deltamerge_wrapped__", False)


def _temporal_merge(spark, path):
    import datetime as dt

    from pyspark.sql import functions as F

    import deltamerge
    from deltamerge import DeltaTable

    schema = "id int, d date, ts timestamp, st struct<f:int>"
    utc = dt.timezone.utc
    target = [(1, dt.date(2023, 12, 31), dt.datetime(2023, 1, 1, tzinfo=utc), (1,)),
              (2, dt.date(2024, 1, 5), dt.datetime(2023, 1, 1, tzinfo=utc), (2,))]  # fmt: skip
    deltamerge.write(spark.createDataFrame(target, schema), path)
    source = [(1, None, None, (10,)), (2, None, None, (20,)), (3, dt.date(2024, 2, 1), None, (0,)),
              (4, dt.date(2024, 2, 2), None, (5,))]  # fmt: skip
    src = spark.createDataFrame(source, schema)
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(src.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedUpdate(
            F.col("t.d") >= F.lit(dt.date(2024, 1, 1)),
            set={"ts": F.lit(dt.datetime(2024, 5, 1, 12, 30, tzinfo=utc)), "st": F.col("s.st")},
        )
        .whenNotMatchedInsert(
            F.col("s.st")["f"] > 0,
            values={"id": "s.id", "d": "s.d", "ts": F.lit(dt.datetime(2024, 6, 1, tzinfo=utc)), "st": "s.st"},
        )
        .execute()
    )  # fmt: skip
    out = deltamerge.read(spark, path).selectExpr(
        "id", "CAST(d AS STRING)", "date_format(ts, 'yyyy-MM-dd HH:mm:ss')", "st.f"
    )
    return sorted(tuple(r) for r in out.collect())


TEMPORAL_EXPECTED = [
    (1, "2023-12-31", "2023-01-01 00:00:00", 1),
    (2, "2024-01-05", "2024-05-01 12:30:00", 20),
    (4, "2024-02-02", "2024-06-01 00:00:00", 5),
]


def test_temporal_literals_and_extract_value_in_column_arguments(connect_spark, tmp_path):
    assert _temporal_merge(connect_spark, str(tmp_path / "t")) == TEMPORAL_EXPECTED


@pytest.mark.parametrize("case", sorted(CASES))
def test_builder_columns_written_as_sql(connect_spark, tmp_path, case):
    """Column arguments deltamerge writes as SQL text itself (builder_columns.py): higher-order
    functions with Python lambdas, try_cast, Python UDFs, struct aliases, decimal and interval
    literals, withField / dropFields."""
    got, expected = CASES[case](connect_spark, str(tmp_path / "t"))
    assert got == expected


def test_pre_resolved_columns_in_the_builder(connect_spark, path):
    """df["col"] Columns carry their DataFrame's plan id on Connect: target ones come from
    DeltaTable.toDF(), source ones from the source (Delta's "pre-resolved exprs" cases)."""
    spark = connect_spark
    deltamerge.write(spark.createDataFrame([(1, 1), (2, 2)], "key int, value int"), path)
    table = DeltaTable.forPath(spark, path)
    tdf = table.toDF()
    src = spark.createDataFrame([(1, 10), (2, 20), (3, 30), (4, 40)], "key int, value int")
    (
        table.merge(src, tdf["key"] == src["key"])
        .whenMatchedUpdate((tdf["key"] == 1) & (src["value"] == 10), {"value": tdf["value"] + src["value"]})
        .whenMatchedDelete((tdf["key"] == 2) & (src["value"] == 20))
        .whenNotMatchedInsert((src["key"] == 3) & (src["value"] == 30), {"key": src["key"], "value": src["value"]})  # noqa: E501
        .execute()
    )  # fmt: skip
    assert _rows(table.toDF()) == [(1, 11), (3, 30)]
    other = spark.createDataFrame([(0, 0)], "key int, value int")
    with pytest.raises(deltamerge.DeltaMergeError, match="DELTA_MERGE_RESOLVED_ATTRIBUTE_MISSING_FROM_INPUT"):
        table.merge(src, tdf["key"] == other["key"]).whenMatchedDelete().execute()


def test_clock_read_once_and_temp_view_target(connect_spark, path):
    """Connect reads analysed plans through explain: a clock-reading source is pinned to the
    statement's instant, and a temp view over a Delta table can be the MERGE target."""
    spark = connect_spark
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "key int, value string"), path)
    deltamerge.read(spark, path).createOrReplaceTempView("connect_view_target")
    spark.createDataFrame([(1, "x"), (3, "y")], "key int, value string").withColumn(
        "at", F.current_timestamp()
    ).createOrReplaceTempView("connect_clock_source")
    try:
        deltamerge.sql(
            spark,
            "MERGE INTO connect_view_target t USING connect_clock_source s ON t.key = s.key "
            "WHEN MATCHED AND s.at = now() THEN UPDATE SET value = s.value "
            "WHEN NOT MATCHED AND s.at = current_timestamp() "
            "THEN INSERT (key, value) VALUES (s.key, s.value)",
        )
        assert _rows(spark.table("connect_view_target")) == [(1, "x"), (2, "b"), (3, "y")]
        assert _rows(deltamerge.read(spark, path)) == [(1, "x"), (2, "b"), (3, "y")]
    finally:
        spark.catalog.dropTempView("connect_view_target")
        spark.catalog.dropTempView("connect_clock_source")


def test_materialized_parquet_source(connect_spark, tmp_path):
    """A plain Parquet source is materialized (auto mode), on Connect as on classic (the release
    of the checkpoint is the server's when the DataFrame goes)."""
    spark = connect_spark
    path, src = str(tmp_path / "t"), str(tmp_path / "src")
    _target(spark, path)
    spark.createDataFrame([(2, -2, "new"), (9, 90, "new")], SCHEMA).write.parquet(src)
    source = spark.read.parquet(src).alias("s")
    m = DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = s.id")
    m.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert int(metrics["materializeSourceTimeMs"]) > 0 and metrics["numTargetRowsUpdated"] == "1"
    rows = _rows(deltamerge.read(spark, path))
    assert rows[1] == (2, -2, "new") and len(rows) == 7
    # Delta's order of the reasons from the Connect plan: a non-Delta leaf, non-determinism, a UDF.
    from deltamerge.merge import planner

    plus_one = F.udf(lambda x: x + 1, "int")
    delta = deltamerge.read(spark, path)
    for source, want in (
        (delta, planner.NOT_MATERIALIZED_AUTO),
        (delta.select(plus_one("v")), planner.WITH_UDF),
        (delta.select(plus_one("v"), F.rand()), planner.NON_DETERMINISTIC_OPERATORS),
        (spark.read.parquet(src).select(plus_one("v"), F.rand()), planner.NON_DELTA),
    ):
        assert planner.source_materialization_reason(spark, source) == want


def test_changing_sql_source_caught_on_connect(connect_spark, tmp_path):
    """``merge.failIfSourceChanged`` on Connect: a source given as SQL text (whose plan the client
    cannot see) that gives other rows on each read fails the merge, as on classic; the table stays."""
    import random

    spark = connect_spark
    keys = (
        "spark.databricks.delta.merge.materializeSource",
        "spark.databricks.delta.merge.failIfSourceChanged",
    )
    spark.conf.set(keys[0], "none")
    spark.conf.set(keys[1], "true")
    try:
        coin = F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
        spark.udf.register("dmRandom", coin)
        path = str(tmp_path / "t")
        target = spark.range(0, 2000, 1, 4).selectExpr("CAST(id AS INT) k", "CAST(id AS INT) v")
        deltamerge.write(target, path)
        source = spark.sql(
            "SELECT CAST(r.id AS INT) AS k, CAST(r.id AS INT) AS v FROM range(1, 1000000) AS r "
            "JOIN (SELECT dmRandom() * 1000000 AS bound) ON r.id < bound"
        )
        merge = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "s.k = t.k")
        with pytest.raises(Exception, match="source dataset is not deterministic"):
            merge.whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute()
        assert DeltaTable.forPath(spark, path).version() == 0
    finally:
        for key in keys:
            spark.conf.unset(key)


def test_repeatability_of_sources_the_client_cannot_see_into(connect_spark, tmp_path):
    """A view by name, SQL text or an expression text hides its plan from the Connect client; the
    server's physical plan says whether reading it again gives the same rows (no UDF, no
    non-deterministic function), which decides the insert-only merge's extra reads of the source."""
    import random

    from deltamerge.merge import planner

    spark = connect_spark
    coin = F.udf(lambda: random.random(), "double", useArrow=False).asNondeterministic()
    spark.udf.register("dmCoin", coin)
    views = {
        "dm_v_plain": ("id, id AS rand", True),  # a column named like a function is not a call
        "dm_v_rand": ("id, rand() AS r", False),
        "dm_v_uuid": ("id, uuid() AS u", False),
        "dm_v_udf": ("id, dmCoin() AS c", False),
    }
    try:
        for name, (columns, repeatable) in views.items():
            spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {columns} FROM range(5)")
            for source in (spark.table(name), spark.sql(f"SELECT * FROM {name}")):
                traits = planner.source_traits(spark, source)
                assert traits is not None and traits.opaque, name
                assert planner.opaque_source_repeatable(source) is repeatable, name
        seen = planner.source_traits(spark, spark.range(3).selectExpr("id", "id % 2 AS p"))
        assert seen is not None and not seen.opaque and not seen.nondeterministic
        rand = planner.source_traits(spark, spark.range(3).selectExpr("id", "rand() AS r"))
        assert rand is not None and rand.nondeterministic
        by_name = planner.source_traits(spark, spark.range(3).selectExpr("id", "dmCoin() AS c"))
        assert by_name is not None and by_name.opaque
        path = str(tmp_path / "t")
        deltamerge.write(spark.range(3), path)
        deltamerge.register_table(spark, "dm_registered_src", path)
        # A registered name's view reads one snapshot's files; resolved anew on each read, it stays
        # materialized for a matching merge (a commit to it may re-point the view mid-merge).
        registered = planner.source_traits(spark, spark.table("dm_registered_src"))
        assert registered is not None and registered.opaque and registered.non_delta
        assert planner.opaque_source_repeatable(spark.table("dm_registered_src"))
        # An insert-only merge from a view whose rows change on each read: every key it gives is
        # in the target, so nothing is inserted (read once, as Delta does). Summarised on a first
        # read, the second read's keys fell in pruned files and 101 duplicates were inserted.
        target = str(tmp_path / "target")
        deltamerge.write(spark.range(0, 200000, 1, 4).repartitionByRange(20, "id"), target)
        spark.sql(
            "CREATE OR REPLACE TEMP VIEW dm_v_moving AS SELECT r.id FROM range(0, 200000) r "
            "JOIN (SELECT CAST(dmCoin() * 190000 AS BIGINT) AS b) ON r.id BETWEEN b AND b + 100"
        )
        moving = spark.table("dm_v_moving").alias("s")
        merge = DeltaTable.forPath(spark, target).alias("t").merge(moving, "t.id = s.id")
        assert tuple(merge.whenNotMatchedInsertAll().execute().collect()[0]) == (0, 0, 0, 0)
    finally:
        for name in [*views, "dm_v_moving"]:
            spark.catalog.dropTempView(name)
        deltamerge.unregister_table(spark, "dm_registered_src")


def test_delta_source_summarised_from_statistics(connect_spark, tmp_path, monkeypatch):
    """A source that plainly reads a Delta table needs no source-key job on Connect either."""
    from deltamerge.merge import pruning

    calls: list[int] = []
    real = pruning.summarize_source_keys
    monkeypatch.setattr(pruning, "summarize_source_keys", lambda *a, **k: calls.append(1) or real(*a, **k))
    target, src = str(tmp_path / "t"), str(tmp_path / "s")
    deltamerge.write(connect_spark.range(0, 400, 1, 4).selectExpr("id", "CAST(id AS INT) AS v"), target)
    deltamerge.write(connect_spark.createDataFrame([(5, -1), (1000, -2)], "id long, v int"), src)
    res = (
        DeltaTable.forPath(connect_spark, target).alias("t")
        .merge(deltamerge.read(connect_spark, src).alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0]
    )  # fmt: skip
    assert tuple(res) == (2, 1, 0, 1) and not calls
    assert _rows(deltamerge.read(connect_spark, target).where("v < 0")) == [(5, -1), (1000, -2)]


def test_row_tracking_and_in_commit_timestamps(connect_spark, tmp_path):
    """Row tracking and in-commit timestamps on Connect: a DV MERGE keeps the rows' ids, the
    updated row takes the merge's commit version, the inserted one a fresh id."""
    spark = connect_spark
    path = str(tmp_path / "t")
    conf = {
        "delta.enableRowTracking": "true",
        "delta.enableDeletionVectors": "true",
        "delta.enableInCommitTimestamps": "true",
    }
    deltamerge.write(spark.range(6).selectExpr("id", "CAST(id AS INT) AS v"), path, configuration=conf)

    def ids():
        df = deltamerge.read(spark, path, row_tracking=True)
        return {
            r[0]: (r[1], r[2])
            for r in df.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect()
        }

    before = ids()
    source = spark.createDataFrame([(2, -2), (9, -9)], "id long, v int").alias("s")
    m = DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = s.id")
    m.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    after = ids()
    assert after[2] == (before[2][0], 1)
    assert all(after[k] == before[k] for k in (0, 1, 3, 4, 5))
    assert after[9][0] > max(rid for rid, _ in before.values()) and after[9][1] == 1
    info = DeltaLog.for_table(path).read_commit(1)[0]
    assert info.in_commit_timestamp is not None and info.raw["tags"] == {
        "delta.rowTracking.preserved": "true"
    }


def test_generated_columns(connect_spark, path):
    """A generated column is validated at creation, computed by an append and by MERGE, and a wrong
    explicit value fails with Delta's constraint error, on Spark Connect too."""
    from deltamerge.errors import AnalysisError, InvariantViolationError

    spark = connect_spark
    builder = DeltaTable.create(spark).location(path).addColumn("id", "BIGINT")
    with pytest.raises(AnalysisError):
        builder.addColumn("g", "INT", generatedAlwaysAs="id * 2").execute()
    builder = DeltaTable.create(spark).location(path).addColumn("id", "BIGINT")
    builder.addColumn("g", "BIGINT", generatedAlwaysAs="id * 2").execute()
    deltamerge.write(spark.createDataFrame([(1,)], "id bigint"), path, mode="append")
    table = DeltaTable.forPath(spark, path)
    src = spark.createDataFrame([(1,), (5,)], "id bigint")
    merge = table.alias("t").merge(src.alias("s"), "t.id = s.id")
    merge.whenMatchedUpdate(set={"id": "s.id + 1"}).whenNotMatchedInsert(values={"id": "s.id"}).execute()
    assert _rows(deltamerge.read(spark, path)) == [(2, 4), (5, 10)]
    with pytest.raises(InvariantViolationError):
        table.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"g": "0"}).execute()
    assert _rows(deltamerge.read(spark, path)) == [(2, 4), (5, 10)]


def test_variant_defaults_and_constraints(connect_spark, tmp_path):
    """A VARIANT column, a column DEFAULT and an added CHECK constraint on Connect: MERGE inserts
    ``parse_json`` values and the default, and a row breaking the constraint commits nothing."""
    from deltamerge.errors import InvariantViolationError

    spark = connect_spark
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    deltamerge.sql(
        spark,
        f"CREATE TABLE {t} (id BIGINT, v VARIANT, n INT DEFAULT 7) USING DELTA "
        "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
    )
    deltamerge.sql(spark, f"INSERT INTO {t} (id, v) VALUES (1, parse_json('[1]'))")
    deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT small CHECK (id < 100)")
    src = spark.createDataFrame([(1,), (2,)], "id bigint").alias("s")
    merge = DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id")
    merge.whenMatchedUpdate(set={"v": "parse_json('{\"a\": 1}')"}).whenNotMatchedInsert(
        values={"id": "s.id", "v": "parse_json('true')"}
    ).execute()
    rows = deltamerge.read(spark, path).selectExpr("id", "to_json(v)", "n").collect()
    assert sorted(tuple(r) for r in rows) == [(1, '{"a":1}', 7), (2, "true", 7)]
    with pytest.raises(InvariantViolationError):
        deltamerge.sql(spark, f"INSERT INTO {t} (id) VALUES (500)")
    assert deltamerge.read(spark, path).count() == 2


def test_identity_columns(connect_spark, path):
    """Identity values from an append and a MERGE insert, with the high-water mark recorded."""
    from deltamerge import IdentityGenerator

    spark = connect_spark
    builder = DeltaTable.create(spark).location(path)
    builder.addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator()).addColumn("k", "INT").execute()
    deltamerge.write(spark.createDataFrame([(1,), (2,)], "k int"), path, mode="append")
    table = DeltaTable.forPath(spark, path)
    src = spark.createDataFrame([(2,), (3,)], "k int")
    table.alias("t").merge(src.alias("s"), "t.k = s.k").whenNotMatchedInsert(values={"k": "s.k"}).execute()
    ids = [r.id for r in deltamerge.read(spark, path).collect()]
    assert len(ids) == 3 and len(set(ids)) == 3 and None not in ids
    schema = snapshot_for(path).metadata.schema
    mark = schema["fields"][0]["metadata"]["delta.identity.highWaterMark"]
    assert mark >= max(ids)


def test_column_mapping(connect_spark, path):
    """A column-mapped table (nested field, partition column) written, merged with schema
    evolution and read back over Connect: physical names in the files, logical names in the reads."""
    spark = connect_spark
    ddl = "id long, s struct<a:int,b:string>, part string"
    df = spark.createDataFrame([(1, (1, "x"), "p1"), (2, (2, "y"), "p2")], ddl)
    deltamerge.write(df, path, partition_by=["part"], configuration={"delta.columnMapping.mode": "id"})
    src = spark.createDataFrame([(2, (20, "yy"), "p2", 5), (3, (3, "z"), "p1", 6)], ddl + ", n int")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .withSchemaEvolution()
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(1, (1, "x"), "p1", None), (2, (20, "yy"), "p2", 5), (3, (3, "z"), "p1", 6)]
    fields = snapshot_for(path).metadata.schema["fields"]
    assert all(f["metadata"]["delta.columnMapping.physicalName"].startswith("col-") for f in fields)
    # ALTER TABLE column clauses over Connect: types parsed, metadata-only commits.
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ADD COLUMNS (note STRING COMMENT 'x' AFTER id)")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` RENAME COLUMN s.a TO alpha")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` DROP COLUMN n")
    back = deltamerge.read(spark, path)
    assert back.columns == ["id", "note", "s", "part"] and back.schema["s"].dataType.names == ["alpha", "b"]
    assert sorted(tuple(r) for r in back.collect())[1] == (2, None, (20, "yy"), "p2")
    # DROP FEATURE over Connect: every file rewritten under the logical names
    before = sorted(tuple(r) for r in back.collect())
    DeltaTable.forPath(spark, path).dropFeatureSupport("columnMapping")
    assert "delta.columnMapping" not in str(snapshot_for(path).metadata.schema)
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == before


def test_optimize_zorder(connect_spark, path):
    spark = connect_spark
    for part in range(3):
        rows = [(i, i % 7, f"n{i % 5}") for i in range(part * 20, (part + 1) * 20)]
        deltamerge.write(spark.createDataFrame(rows, SCHEMA), path, mode="append")
    before = _rows(deltamerge.read(spark, path))
    files = len(snapshot_for(path).files)
    out = DeltaTable.forPath(spark, path).optimize().executeZOrderBy("v", "flag").collect()[0]["metrics"]
    assert (out["numFilesRemoved"], out["numFilesAdded"]) == (files, 1)
    assert out["zOrderStats"]["strategyName"] == "all"
    assert _rows(deltamerge.read(spark, path)) == before
    deltamerge.sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY (id)")
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operationParameters"]["zOrderBy"] == '["id"]'


def test_symlink_manifest(connect_spark, path):
    spark = connect_spark
    rows = [(i, i % 3, f"n{i}") for i in range(9)]
    deltamerge.write(spark.createDataFrame(rows, SCHEMA), path, partition_by="v")
    deltamerge.sql(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`")
    root = os.path.join(path, "_symlink_format_manifest")
    assert sorted(os.listdir(root)) == ["v=0", "v=1", "v=2"]
    prop = "delta.compatibility.symlinkFormatManifest.enabled"
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{prop}' = 'true')")
    DeltaTable.forPath(spark, path).delete("v = 2")
    assert sorted(os.listdir(root)) == ["v=0", "v=1"]
    DeltaTable.forPath(spark, path).generate("symlink_format_manifest")
    with open(os.path.join(root, "v=1", "manifest")) as fh:
        listed = fh.read().split()
    assert listed and all(os.path.exists(p[len("file:") :]) for p in listed)


def test_shallow_clone(connect_spark, path):
    spark = connect_spark
    rows = [(i, i % 3, f"n{i}") for i in range(6)]
    deltamerge.write(spark.createDataFrame(rows, SCHEMA), path)
    target = path + "_clone"
    clone = DeltaTable.forPath(spark, path).clone(target, isShallow=True)
    assert _rows(clone.toDF()) == _rows(deltamerge.read(spark, path))
    statement = f"CREATE TABLE delta.`{target}_sql` SHALLOW CLONE delta.`{path}` VERSION AS OF 0"
    out = deltamerge.sql(spark, statement)
    assert out.collect()[0]["source_num_of_files"] == len(snapshot_for(path).files)
    clone.delete("v = 0")
    assert len(_rows(deltamerge.read(spark, path))) == 6


def test_table_properties_checked_and_auto_compaction(connect_spark, path):
    spark = connect_spark
    from deltamerge.errors import DeltaMergeError

    with pytest.raises(DeltaMergeError, match="DELTA_UNKNOWN_CONFIGURATION"):
        _target(spark, path, props={"delta.autoOptimize.autoCompactt": "true"})
    assert not os.path.exists(path)
    _target(spark, path, n=2, props={"DELTA.autoOptimize.AUTOCOMPACT": "true"})
    assert snapshot_for(path).metadata.configuration["delta.autoOptimize.autoCompact"] == "true"
    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "3")
    try:
        for i in (3, 4):
            deltamerge.write(spark.createDataFrame([(i, i, "new")], SCHEMA), path, mode="append")
    finally:
        spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")
    history = DeltaTable.forPath(spark, path).history().collect()
    auto = [r for r in history if r["operation"] == "OPTIMIZE"]
    assert auto and all(r["operationParameters"]["auto"] == "true" for r in auto)
    assert len(snapshot_for(path).files) < 3 and len(_rows(deltamerge.read(spark, path))) == 4


def test_clustered_tables(connect_spark, tmp_path):
    spark = connect_spark
    from deltamerge.errors import DeltaMergeError

    saved, sql_made = str(tmp_path / "saved"), str(tmp_path / "sql")
    frame = spark.range(40).selectExpr("id", "cast(id % 4 AS STRING) AS k")
    deltamerge.configure(spark)
    try:
        frame.write.format("delta").clusterBy("k").save(saved)
        with pytest.raises(DeltaMergeError, match="DELTA_CLUSTERING_COLUMNS_MISMATCH"):
            frame.write.format("delta").mode("append").clusterBy("id").save(saved)
        # a location of its own: the Connect server's warehouse is shared by test runs
        v2 = str(tmp_path / "v2")
        writer = frame.writeTo("connect_clustered").using("delta").tableProperty("location", v2)
        writer.clusterBy("id").create()
        detail = DeltaTable.forName(spark, "connect_clustered").detail().collect()[0]
        assert detail["clusteringColumns"] == ["id"]
    finally:
        deltamerge.unconfigure()
        deltamerge.unregister_table(spark, "connect_clustered")
    assert DeltaTable.forPath(spark, saved).detail().collect()[0]["clusteringColumns"] == ["k"]
    deltamerge.sql(spark, f"CREATE TABLE delta.`{sql_made}` (id BIGINT, k STRING) USING delta CLUSTER BY (k)")
    for _ in range(2):
        deltamerge.write(frame, sql_made, mode="append")
    deltamerge.sql(spark, f"OPTIMIZE delta.`{sql_made}`")
    files = DeltaLog.for_table(sql_made).update().files
    assert {f.clustering_provider for f in files} == {"liquid"}
    deltamerge.sql(spark, f"ALTER TABLE delta.`{sql_made}` CLUSTER BY (id)")
    deltamerge.sql(spark, f"OPTIMIZE delta.`{sql_made}` FULL")
    last = DeltaTable.forPath(spark, sql_made).history(1).collect()[0]
    assert (
        last["operationParameters"]["clusterBy"] == '["id"]'
        and last["operationParameters"]["isFull"] == "true"
    )
    assert len(_rows(deltamerge.read(spark, sql_made))) == 80


def test_streaming_sink(connect_spark, tmp_path):
    """writeStream.format("delta") over Connect: the server runs the sink's foreachBatch."""
    spark = connect_spark
    path, inbox, cp = str(tmp_path / "t"), str(tmp_path / "in"), str(tmp_path / "cp")
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string").write.mode("append").json(inbox)
    deltamerge.configure(spark)
    try:
        stream = spark.readStream.schema("id long, p string").json(inbox)
        query = (
            stream.writeStream.format("delta")
            .partitionBy("p")
            .option("checkpointLocation", cp)
            .trigger(availableNow=True)
            .start(path)
        )
        query.awaitTermination(300)
        assert query.exception() is None
    finally:
        deltamerge.unconfigure()
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(1, "a"), (2, "b")]
    assert snapshot_for(path).metadata.partition_columns == ("p",)
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "STREAMING UPDATE"
    # toTable with a new name: created with the stream's schema (in the server's warehouse,
    # removed again: test runs share it)
    import shutil

    from deltamerge import catalog

    deltamerge.configure(spark)
    try:
        query = (
            spark.readStream.schema("id long, p string")
            .json(inbox)
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "cp2"))
            .trigger(availableNow=True)
            .toTable("connect_stream_new")
        )
        query.awaitTermination(300)
        assert query.exception() is None
        assert DeltaTable.forName(spark, "connect_stream_new").toDF().count() == 2
    finally:
        deltamerge.unconfigure()
        location = catalog.path_for_name("connect_stream_new")
        deltamerge.unregister_table(spark, "connect_stream_new")
        if location:
            shutil.rmtree(location, ignore_errors=True)


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("replace", [False, True], ids=["upsert", "replace"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_join_free_upsert_and_replace(connect_spark, tmp_path, monkeypatch, dv, replace):
    """``UPDATE SET *`` / ``INSERT *`` (and "replace the target with the source") write the source
    rows in a thread beside job 1 (merge/uniform_upsert.py): on Connect too."""
    from deltamerge.merge import uniform_upsert

    spark = connect_spark
    taken: list[str] = []
    for name in ("try_write", "try_rewrite", "try_replace"):
        real = getattr(uniform_upsert, name)

        def spy(*a, real=real, name=name, **k):  # type: ignore[no-untyped-def]
            out = real(*a, **k)
            if out is not None:
                taken.append(name)
            return out

        monkeypatch.setattr(uniform_upsert, name, spy)
    path = str(tmp_path / "t")
    df = spark.range(0, 400, 1, 4).selectExpr("id", "cast(id % 7 as int) as v")
    deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)
    src = spark.range(300, 500, 2).selectExpr("id", "cast(-id as int) as v")  # 50 matched, 50 new
    merge = (
        DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
    )  # fmt: skip
    if replace:
        merge = merge.whenNotMatchedBySourceDelete()
    result = tuple(merge.execute().collect()[0])
    assert taken == ["try_replace" if replace else ("try_write" if dv else "try_rewrite")]
    assert result == ((450, 50, 350, 50) if replace else (100, 50, 0, 50))
    expected = {i: -i for i in range(300, 500, 2)}
    if not replace:
        expected = {**{i: i % 7 for i in range(400)}, **expected}
    assert _rows(DeltaTable.forPath(spark, path).toDF()) == sorted(expected.items())


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_insert_only_semi_join(connect_spark, tmp_path, monkeypatch, dv):
    """An insert-only merge anti-joins the source with the matched target rows only
    (merge/insert_only.py ``_target_side``): on Connect too, with the same rows as every row."""
    from deltamerge.merge import insert_only

    spark = connect_spark
    seen: list[bool] = []
    real = insert_only._target_side

    def spy(ctx, files):  # type: ignore[no-untyped-def]
        df = real(ctx, files)
        seen.append("JOIN_TYPE_LEFT_SEMI" in str(df._plan.plan(df._session.client)))
        return df

    monkeypatch.setattr(insert_only, "_target_side", spy)
    results = []
    for least in ("0", "-1"):
        path = str(tmp_path / f"t{least}")
        df = spark.range(0, 400, 1, 4).selectExpr("id", "cast(id % 7 as int) as v")
        deltamerge.write(df, path, configuration={"delta.enableDeletionVectors": "true"} if dv else None)
        src = spark.range(0, 600, 9).selectExpr("id", "cast(-id as int) as v")  # 45 matched, 22 new
        spark.conf.set("spark.deltamerge.merge.insertOnly.semiJoinMinRows", least)
        try:
            cond = "t.id = s.id AND t.v < 6"
            merge = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), cond)
            result = tuple(merge.whenNotMatchedInsertAll().execute().collect()[0])
        finally:
            spark.conf.unset("spark.deltamerge.merge.insertOnly.semiJoinMinRows")
        results.append((result, _rows(DeltaTable.forPath(spark, path).toDF())))
    assert seen == [True, False]
    assert results[0] == results[1]
    # 22 new keys, plus the matching keys whose target row has v = 6 (ids 6 mod 7 among multiples of 9).
    assert results[0][0][3] == 22 + len([i for i in range(0, 400, 9) if i % 7 == 6])


def test_merge_reads_settings_in_one_round_trip(connect_spark, tmp_path, monkeypatch):
    """Each ``spark.conf.get`` is a round trip on Connect (~45 settings per merge, ~0.15 s): a
    merge reads them all at once (``settings_snapshot``), a setting changed before it still
    counts."""
    spark = connect_spark
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(0, 40, 1, 2).selectExpr("id", "cast(id as int) as v"), path,
                     configuration={"delta.enableDeletionVectors": "true"})
    conf_type = type(spark.conf)
    reads, real = [], conf_type.get
    monkeypatch.setattr(conf_type, "get", lambda self, *a, **k: reads.append(a) or real(self, *a, **k))
    spark.conf.set("spark.databricks.delta.history.metricsEnabled", "false")
    try:
        src = spark.range(30, 50).selectExpr("id", "cast(-id as int) as v")
        result = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
                  .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    finally:
        spark.conf.unset("spark.databricks.delta.history.metricsEnabled")
    assert tuple(result.collect()[0]) == (20, 10, 0, 10)
    assert len(reads) <= 5, reads  # PySpark's own (e.g. binaryAsBytes), not one per setting
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"] in (None, {})
