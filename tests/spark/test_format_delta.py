"""``format("delta")`` on classic PySpark after ``deltamerge.configure(spark)``."""

from __future__ import annotations

import os
import shutil
import threading
import uuid

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError, SchemaMismatchError, TableAlreadyExistsError
from deltamerge.io import snapshot_for
from deltamerge.log.paths import table_root

pytestmark = pytest.mark.spark

SCHEMA = "id int, v string, p string"


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture
def base(dspark):
    return dspark.createDataFrame([(1, "a", "x"), (2, "b", "y"), (3, "c", "x")], SCHEMA)


def _ops(spark, path):
    return [r["operation"] for r in DeltaTable.forPath(spark, path).history().collect()]


def test_save_modes_partitioning_and_time_travel(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").partitionBy("p").save(path)
    snap = snapshot_for(path)
    assert snap.metadata.partition_columns == ("p",)
    assert _rows(dspark.read.format("delta").load(path)) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")]

    with pytest.raises(TableAlreadyExistsError):
        base.write.format("delta").save(path)  # mode "error" by default
    base.write.format("delta").mode("ignore").save(path)
    assert snapshot_for(path).version == 0
    base.limit(1).write.save(path, format="delta", mode="append")  # save()'s keyword arguments
    assert dspark.read.format("delta").load(path).count() == 4
    base.where("id = 2").write.format("delta").mode("overwrite").option("path", path).save()
    assert _rows(dspark.read.load(path, format="delta")) == [(2, "b", "y")]

    assert dspark.read.format("delta").option("versionAsOf", 0).load(path).count() == 3
    assert dspark.read.format("delta").option("versionAsOf", "1").load(path).count() == 4
    assert dspark.read.format("delta").load(path + "@v1").count() == 4
    first = DeltaTable.forPath(dspark, path).history().collect()[-1]["timestamp"]
    at = first.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert dspark.read.format("delta").option("timestampAsOf", at).load(path).count() == 3
    assert _ops(dspark, path) == ["WRITE", "WRITE", "WRITE"]
    params = DeltaTable.forPath(dspark, path).history().collect()
    assert [h["operationParameters"]["mode"] for h in params] == ["Overwrite", "Append", "ErrorIfExists"]


def test_merge_schema_and_overwrite_schema_options(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").save(path)
    wider = dspark.createDataFrame([(4, "d", "y", 1.5)], SCHEMA + ", extra double")
    with pytest.raises(SchemaMismatchError):
        wider.write.format("delta").mode("append").save(path)
    wider.write.format("delta").mode("append").option("mergeSchema", True).save(path)
    assert dspark.read.format("delta").load(path).columns == ["id", "v", "p", "extra"]

    other = dspark.createDataFrame([("k", 1)], "key string, n int")
    other.write.format("delta").mode("overwrite").options(overwriteSchema="true").partitionBy("key").save(
        path
    )
    snap = snapshot_for(path)
    assert [f["name"] for f in snap.metadata.schema["fields"]] == ["key", "n"]
    assert snap.metadata.partition_columns == ("key",)
    with pytest.raises(DeltaMergeError, match="DELTA_ILLEGAL_OPTION"):
        other.write.format("delta").mode("append").option("mergeSchema", "maybe").save(path)


def test_replace_where_is_one_commit_and_checks_the_data(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").partitionBy("p").option("delta.enableChangeDataFeed", "true").save(path)
    assert snapshot_for(path).metadata.configuration["delta.enableChangeDataFeed"] == "true"
    new = dspark.createDataFrame([(10, "z", "x"), (11, "w", "x")], SCHEMA)
    new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'x'").save(path)
    assert _rows(dspark.read.format("delta").load(path)) == [(2, "b", "y"), (10, "z", "x"), (11, "w", "x")]
    last = DeltaTable.forPath(dspark, path).history(1).collect()[0]
    assert (last["version"], last["operation"]) == (1, "WRITE")
    assert last["operationParameters"]["predicate"] == "[\"p = 'x'\"]"
    assert last["operationMetrics"]["numDeletedRows"] == "2"
    # The change feed sees exactly the replaced rows and the new ones.
    feed = dspark.read.format("delta").options(readChangeFeed="true", startingVersion=1).load(path)
    expected = [(1, "delete"), (3, "delete"), (10, "insert"), (11, "insert")]
    assert _rows(feed.select("id", "_change_type")) == expected

    with pytest.raises(DeltaMergeError, match="DELTA_REPLACE_WHERE_MISMATCH"):
        new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'y'").save(path)
    assert snapshot_for(path).version == 1

    # A predicate on a data column rewrites the matching rows only.
    upd = dspark.createDataFrame([(2, "B", "y")], SCHEMA)
    upd.write.format("delta").mode("overwrite").option("replaceWhere", "id = 2").save(path)
    assert _rows(dspark.read.format("delta").load(path)) == [(2, "B", "y"), (10, "z", "x"), (11, "w", "x")]


def test_partial_overwrite_option_rules(dspark, base, tmp_path, spark_conf):
    """Delta's WriteIntoDelta: replaceWhere with partitionOverwriteMode=dynamic among the writer
    options is refused (on a partitioned table), replaceWhere wins over the session's dynamic mode,
    overwriteSchema is ignored beside replaceWhere, and an unpartitioned table ignores the
    dynamic mode (so overwriteSchema works there)."""
    path = str(tmp_path / "t")
    base.write.format("delta").partitionBy("p").save(path)
    new = dspark.createDataFrame([(10, "z", "x")], SCHEMA)

    def writer():  # a DataFrameWriter keeps every option set on it: a fresh one each time
        return new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'x'")

    with pytest.raises(DeltaMergeError, match="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE"):
        writer().option("partitionOverwriteMode", "dynamic").save(path)
    spark_conf({"spark.sql.sources.partitionOverwriteMode": "dynamic"})
    writer().option("overwriteSchema", "true").save(path)
    assert _rows(dspark.read.format("delta").load(path)) == [(2, "b", "y"), (10, "z", "x")]
    wider = new.withColumn("extra", new.id)
    with pytest.raises(DeltaMergeError, match=r"DELTA_METADATA_MISMATCH.*extra.*replaceWhere"):
        wider.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'x'").option(
            "overwriteSchema", "true"
        ).save(path)
    flat = str(tmp_path / "flat")
    base.write.format("delta").save(flat)
    wider.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(flat)
    assert _rows(dspark.read.format("delta").load(flat)) == [(10, "z", "x", 10)]
    # spark.databricks.delta.dynamicPartitionOverwrite.enabled=false refuses the mode where Delta
    # reads it (a partitioned table, no replaceWhere beside a session-wide mode).
    spark_conf({"spark.databricks.delta.dynamicPartitionOverwrite.enabled": "false"})
    with pytest.raises(DeltaMergeError, match="DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED"):
        new.write.format("delta").mode("overwrite").save(path)
    writer().save(path)  # replaceWhere: the session's mode is not read
    new.write.format("delta").mode("overwrite").save(flat)  # unpartitioned: not read either
    assert snapshot_for(path).version == 2


def test_dynamic_partition_overwrite(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").partitionBy("p").save(path)
    new = dspark.createDataFrame([(20, "q", "y"), (21, "r", "z")], SCHEMA)
    new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(path)
    assert _rows(dspark.read.format("delta").load(path)) == [
        (1, "a", "x"), (3, "c", "x"), (20, "q", "y"), (21, "r", "z"),
    ]  # fmt: skip
    assert snapshot_for(path).version == 1


def test_change_feed_options(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
    base.limit(1).write.format("delta").mode("append").save(path)
    reader = dspark.read.format("delta").option("readChangeFeed", "true")
    all_changes = reader.option("startingVersion", 0).option("endingVersion", 1).load(path)
    assert all_changes.count() == 4
    assert all_changes.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    same = deltamerge.read_changes(dspark, path, 0, 1)
    assert _rows(all_changes) == _rows(same)
    with pytest.raises(DeltaMergeError, match="DELTA_NO_START_FOR_CDC_READ"):
        dspark.read.format("delta").option("readChangeFeed", "true").load(path)


def test_save_as_table_with_a_name_that_needs_quotes(dspark, base, tmp_path):
    """``saveAsTable("`sales q4`")`` failed in Spark's parser (its existence check passed the name
    unquoted); the name now reads back through spark.table and SQL."""
    name = "`sales q4`"
    try:
        base.write.format("delta").option("path", str(tmp_path / "q")).saveAsTable(name)
        assert dspark.table(name).count() == 3
        assert dspark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 3
    finally:
        deltamerge.unregister_table(dspark, name)


def test_save_as_table_and_read_table(dspark, base, tmp_path):
    name = f"fmt_{uuid.uuid4().hex[:8]}"
    try:
        base.write.format("delta").saveAsTable(name)
        location = deltamerge.catalog.path_for_name(name)
        warehouse = dspark.conf.get("spark.sql.warehouse.dir")
        assert location == os.path.join(table_root(warehouse), name)
        assert dspark.read.table(name).count() == 3
        assert dspark.read.format("delta").table(name).count() == 3
        assert dspark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 3
        with pytest.raises(TableAlreadyExistsError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
            base.write.format("delta").saveAsTable(name)
        base.write.format("delta").mode("append").saveAsTable(name)
        assert dspark.read.option("versionAsOf", 0).table(name).count() == 3
        assert DeltaTable.forName(dspark, name).toDF().count() == 6
        assert dspark.read.table(f"delta.`{location}`").count() == 6
        joined = dspark.read.table(name).join(dspark.range(1), "id").select(f"{name}.v")
        assert joined.count() == 0  # the frame is aliased by the table name, as spark.table's
        # The session catalog's qualifiers name it too (its temp view has one part): spark.table
        # and spark.sql, as with a catalog table (TABLE_OR_VIEW_NOT_FOUND before).
        assert dspark.table(f"default.{name}").select(f"{name}.id").count() == 6
        assert dspark.table(f"spark_catalog.default.{name}").count() == 6
        assert dspark.table(f"delta.`{location}`").count() == 6
        query = f"SELECT count(*) FROM default.{name} WHERE {name}.id > :lo"
        assert dspark.sql(query, args={"lo": 1}).collect()[0][0] == 4
        assert dspark.sql(f"SELECT count(*) FROM {name} VERSION AS OF 0").collect()[0][0] == 3
    finally:
        location = deltamerge.catalog.path_for_name(name)
        deltamerge.unregister_table(dspark, name)
        if location:
            shutil.rmtree(location, ignore_errors=True)


def test_insert_into_by_position(dspark, base, tmp_path, spark_conf):
    name = f"ins_{uuid.uuid4().hex[:8]}"
    path = str(tmp_path / "t")
    base.write.format("delta").partitionBy("p").save(path)
    deltamerge.register_table(dspark, name, path)
    try:
        # By position, not by name, and cast to the table's types (as Spark's insertInto does).
        new = dspark.createDataFrame([(4, 9, "x")], "v long, id int, p string").select("v", "id", "p")
        new.write.insertInto(name)
        assert (4, "9", "x") in _rows(dspark.read.table(name))
        assert _ops(dspark, path)[0] == "WRITE"
        # overwrite=True replaces the table (static); the writer's mode counts when overwrite is None.
        dspark.createDataFrame([(7, "g", "y")], SCHEMA).write.insertInto(name, overwrite=True)
        assert _rows(dspark.read.table(name)) == [(7, "g", "y")]
        dspark.createDataFrame([(8, "h", "z")], SCHEMA).write.mode("append").insertInto(f"delta.`{path}`")
        assert _rows(dspark.read.table(name)) == [(7, "g", "y"), (8, "h", "z")]
        # Dynamic partition overwrite from the session setting: only partition z is replaced.
        spark_conf({"spark.sql.sources.partitionOverwriteMode": "dynamic"})
        dspark.createDataFrame([(9, "i", "z")], SCHEMA).write.mode("overwrite").insertInto(name)
        assert _rows(dspark.read.table(name)) == [(7, "g", "y"), (9, "i", "z")]
        # SQL INSERT OVERWRITE honours it too.
        deltamerge.sql(dspark, f"INSERT OVERWRITE {name} SELECT 10, 'j', 'y'")
        assert _rows(dspark.read.table(name)) == [(9, "i", "z"), (10, "j", "y")]
        version = DeltaTable.forPath(dspark, path).version()
        with pytest.raises(DeltaMergeError, match="INSERT_COLUMN_ARITY_MISMATCH"):
            dspark.createDataFrame([(1, "a")], "id int, v string").write.insertInto(name)
        with pytest.raises(DeltaMergeError, match="partitionBy"):
            base.write.partitionBy("p").insertInto(name)
        assert DeltaTable.forPath(dspark, path).version() == version
    finally:
        deltamerge.unregister_table(dspark, name)


def test_dataframe_merge_into_api(dspark, base, tmp_path):
    from pyspark.sql import functions as F

    from deltamerge.configure.merge_into import DeltaMergeIntoWriter

    name = f"mrg_{uuid.uuid4().hex[:8]}"
    path = str(tmp_path / "t")
    base.write.format("delta").save(path)  # (1,a,x) (2,b,y) (3,c,x)
    deltamerge.register_table(dspark, name, path)
    try:
        src = dspark.createDataFrame(
            [(1, "A", "U"), (2, "B", "D"), (9, "I", "I")], "id int, v string, op string"
        ).alias("s")
        writer = src.mergeInto(name, F.col(f"{name}.id") == F.col("s.id"))
        assert isinstance(writer, DeltaMergeIntoWriter)
        result = (
            writer.whenMatched(F.col("s.op") == "D")
            .delete()
            .whenMatched()
            .update({"v": F.col("s.v")})
            .whenNotMatched()
            .insert({"id": F.col("s.id"), "v": F.col("s.v"), "p": F.lit("new")})
            .whenNotMatchedBySource(F.col(f"{name}.p") == "x")
            .update({"v": F.lit("orphan")})
            .merge()
        )
        assert result is None
        assert _rows(dspark.read.table(name)) == [(1, "A", "x"), (3, "orphan", "x"), (9, "I", "new")]
        last = DeltaTable.forPath(dspark, path).history(1).collect()[0]
        assert last["operation"] == "MERGE"
        m = last["operationMetrics"]
        assert (m["numTargetRowsUpdated"], m["numTargetRowsDeleted"], m["numTargetRowsInserted"]) == (
            "2",
            "1",
            "1",
        )

        # A qualified name, insertAll / updateAll and schema evolution (a new column w).
        more = dspark.createDataFrame(
            [(3, "C", "z", 7), (4, "D", "z", 8)], "id int, v string, p string, w int"
        )
        (
            more.alias("n")
            .mergeInto(f"spark_catalog.default.{name}", F.expr(f"{name}.id = n.id"))
            .whenMatched()
            .updateAll()
            .whenNotMatched()
            .insertAll()
            .withSchemaEvolution()
            .merge()
        )
        assert deltamerge.read(dspark, path).columns == ["id", "v", "p", "w"]
        assert {(3, "C", "z", 7), (4, "D", "z", 8)} <= set(_rows(deltamerge.read(dspark, path)))
        # A delta.`path` target (its columns unqualified; the source's keys named apart).
        keyed = dspark.createDataFrame([(9, "J")], "k int, val string").alias("s")
        keyed.mergeInto(f"delta.`{path}`", F.expr("id = s.k")).whenMatched().update(
            {"v": F.col("s.val")}
        ).merge()
        assert (9, "J", "new", None) in _rows(deltamerge.read(dspark, path))

        version = DeltaTable.forPath(dspark, path).version()
        with pytest.raises(DeltaMergeError, match="NOT MATCHED BY SOURCE cannot UPDATE SET"):
            src.mergeInto(name, F.expr(f"{name}.id = s.id")).whenNotMatchedBySource().updateAll().merge()
        assert DeltaTable.forPath(dspark, path).version() == version
        # Duplicate source matches are Delta's error, as through any other MERGE front.
        dup = dspark.createDataFrame([(1, "x", "U"), (1, "y", "U")], "id int, v string, op string").alias("s")
        with pytest.raises(DeltaMergeError, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
            dup.mergeInto(name, F.expr(f"{name}.id = s.id")).whenMatched().update({"v": F.col("s.v")}).merge()
        assert DeltaTable.forPath(dspark, path).version() == version
    finally:
        deltamerge.unregister_table(dspark, name)
    # Other targets keep Spark's own writer.
    assert not isinstance(base.mergeInto("not_a_deltamerge_table", F.lit(True)), DeltaMergeIntoWriter)


def test_dataframe_writer_v2(dspark, base, tmp_path):
    from pyspark.sql import functions as F

    name = f"v2_{uuid.uuid4().hex[:8]}"
    location = str(tmp_path / "v2")
    try:
        (
            base.writeTo(name)
            .using("delta")
            .partitionedBy(F.col("p"))
            .tableProperty("delta.enableChangeDataFeed", "true")
            .tableProperty("location", location)
            .create()
        )
        snap = snapshot_for(location)
        assert snap.metadata.partition_columns == ("p",)
        assert snap.metadata.configuration["delta.enableChangeDataFeed"] == "true"
        assert deltamerge.catalog.path_for_name(name) == table_root(location)
        with pytest.raises(TableAlreadyExistsError):
            base.writeTo(name).using("delta").create()

        dspark.createDataFrame([(4, "d", "y")], SCHEMA).writeTo(name).append()
        assert dspark.read.table(name).count() == 4
        # overwrite(condition): the rows matching it are replaced (replaceWhere), in one WRITE commit.
        dspark.createDataFrame([(5, "e", "x")], SCHEMA).writeTo(name).overwrite(F.col("p") == "x")
        assert _rows(dspark.read.table(name)) == [(2, "b", "y"), (4, "d", "y"), (5, "e", "x")]
        with pytest.raises(DeltaMergeError, match="DELTA_REPLACE_WHERE_MISMATCH"):
            dspark.createDataFrame([(6, "f", "y")], SCHEMA).writeTo(name).overwrite(F.col("p") == "x")
        # overwritePartitions(): only partition y is replaced.
        dspark.createDataFrame([(7, "g", "y")], SCHEMA).writeTo(f"delta.`{location}`").overwritePartitions()
        assert _rows(dspark.read.table(name)) == [(5, "e", "x"), (7, "g", "y")]
        assert _ops(dspark, location) == ["WRITE", "WRITE", "WRITE", "CREATE TABLE AS SELECT"]

        base.limit(1).writeTo(name).using("delta").createOrReplace()
        assert dspark.read.table(name).count() == 1
        assert snapshot_for(location).metadata.partition_columns == ()
        base.writeTo(name).replace()  # a registered name needs no using("delta")
        assert dspark.read.table(name).count() == 3
        with pytest.raises(DeltaMergeError, match="DELTA_CANNOT_REPLACE_MISSING_TABLE"):
            base.writeTo(f"delta.`{tmp_path / 'missing'}`").replace()
        with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_PARTITION_TRANSFORM"):
            base.writeTo(f"delta.`{tmp_path / 'bucketed'}`").partitionedBy(
                F.partitioning.bucket(4, "id")
            ).create()
        assert not os.path.exists(str(tmp_path / "bucketed"))
    finally:
        deltamerge.unregister_table(dspark, name)


def test_idempotent_writes_and_user_metadata(dspark, base, tmp_path, spark_conf):
    path = str(tmp_path / "t")
    base.write.format("delta").save(path)

    def append(df, **opts):
        df.write.format("delta").mode("append").options(**opts).save(path)

    append(base.limit(1), txnAppId="job", txnVersion=1, userMetadata="batch 1")
    append(base.limit(1), txnAppId="job", txnVersion=1)  # a replay: skipped
    assert DeltaTable.forPath(dspark, path).version() == 1 and deltamerge.read(dspark, path).count() == 4
    last = DeltaTable.forPath(dspark, path).history(1).collect()[0]
    assert last["userMetadata"] == "batch 1"
    assert dict(snapshot_for(path).app_versions) == {"job": 1}
    # replaceWhere writes are idempotent too, and carry their userMetadata.
    x = dspark.createDataFrame([(9, "z", "x")], SCHEMA)
    for _ in range(2):
        x.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'x'").options(
            txnAppId="job", txnVersion="2", userMetadata="fix x"
        ).save(path)
    assert DeltaTable.forPath(dspark, path).version() == 2
    assert DeltaTable.forPath(dspark, path).history(1).collect()[0]["userMetadata"] == "fix x"
    assert dict(snapshot_for(path).app_versions) == {"job": 2}

    # So are dynamic partition overwrites (this table is unpartitioned: the whole table).
    for _ in range(2):
        x.write.format("delta").mode("overwrite").options(
            partitionOverwriteMode="dynamic", txnAppId="job", txnVersion=3, userMetadata="all"
        ).save(path)
    assert DeltaTable.forPath(dspark, path).version() == 3 and deltamerge.read(dspark, path).count() == 1
    assert DeltaTable.forPath(dspark, path).history(1).collect()[0]["userMetadata"] == "all"
    with pytest.raises(DeltaMergeError, match="MISSING_DATAFRAME_WRITE_OPTIONS"):
        append(base.limit(1), txnAppId="job")
    with pytest.raises(DeltaMergeError, match="DELTA_ILLEGAL_OPTION"):
        append(base.limit(1), txnAppId="job", txnVersion="-1")
    # The session settings: one without the other is refused; with autoReset the version is unset.
    spark_conf({"spark.databricks.delta.write.txnVersion": "5"})
    with pytest.raises(DeltaMergeError, match="MISSING_SESSION_CONFS"):
        append(base.limit(1))
    spark_conf(
        {
            "spark.databricks.delta.write.txnAppId": "session-job",
            "spark.databricks.delta.write.txnVersion.autoReset.enabled": "true",
            "spark.databricks.delta.commitInfo.userMetadata": "from the session",
        }
    )
    append(base.limit(1))
    assert dspark.conf.get("spark.databricks.delta.write.txnVersion", None) is None
    assert dict(snapshot_for(path).app_versions) == {"job": 3, "session-job": 5}
    dspark.conf.unset("spark.databricks.delta.write.txnAppId")
    # The session's userMetadata goes on every commit, a MERGE's too.
    table = DeltaTable.forPath(dspark, path)
    table.alias("t").merge(base.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert [r["userMetadata"] for r in table.history(2).collect()] == ["from the session"] * 2
    assert DeltaTable.forPath(dspark, path).version() == 5


def test_reader_errors(dspark, base, tmp_path):
    path = str(tmp_path / "t")
    base.write.format("delta").save(path)
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_SCHEMA_DURING_READ"):
        dspark.read.format("delta").schema("id int").load(path)
    with pytest.raises(DeltaMergeError, match="DELTA_MISSING_DELTA_TABLE"):
        dspark.read.format("delta").load(str(tmp_path / "nothing"))
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_TIME_TRAVEL_MULTIPLE_FORMATS"):
        dspark.read.format("delta").option("versionAsOf", 0).load(path + "@v0")
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_TIME_TRAVEL_VIEWS"):
        dspark.read.format("delta").option("readChangeFeed", "true").option("versionAsOf", 0).load(path)
    with pytest.raises(Exception, match=r"(?i)save mode"):  # PySpark's own check of the mode name
        base.write.format("delta").save(path, mode="sideways")


def test_other_formats_untouched_and_configure_is_reversible(spark, tmp_path):
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter

    deltamerge.configure(spark)
    wrapped = DataFrameWriter.save
    threads = [threading.Thread(target=deltamerge.configure, args=(spark,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert DataFrameWriter.save is wrapped  # idempotent, also from several threads
    out = str(tmp_path / "pq")
    spark.range(3).write.format("parquet").mode("overwrite").save(out)
    assert spark.read.format("parquet").load(out).count() == 3
    assert not os.path.exists(os.path.join(out, "_delta_log"))

    deltamerge.configure(spark, enable=False)
    assert not getattr(DataFrameWriter.save, "__deltamerge_wrapped__", False)
    assert not getattr(DataFrameReader.load, "__deltamerge_wrapped__", False)
    assert not deltamerge.configure.is_configured()
    deltamerge.configure(spark)  # the module fixture's state for the remaining tests


def test_spark_sql_runs_delta_statements(dspark, base, tmp_path):
    """After configure, plain spark.sql runs MERGE and the other Delta statements (as with
    delta-spark's extension); other statements are Spark's own."""
    spark = dspark
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, v STRING, p STRING) USING delta")
    base.createOrReplaceTempView("sql_src")
    out = spark.sql(
        f"""MERGE INTO delta.`{path}` t USING sql_src s ON t.id = s.id
            WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"""
    ).collect()[0]
    assert tuple(out) == (3, 0, 0, 3)
    spark.sql(f"UPDATE delta.`{path}` SET v = upper(v) WHERE id = :id", args={"id": 2})
    spark.sql(f"/* a comment */ DELETE FROM delta.`{path}` WHERE id = 3")
    assert _rows(spark.sql(f"SELECT * FROM delta.`{path}` WHERE p = {{p}}", p="x")) == [(1, "a", "x")]
    old = spark.sql(f"SELECT id, v FROM delta.`{path}` VERSION AS OF 1")
    assert _rows(old) == [(1, "a"), (2, "b"), (3, "c")]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [r["operation"] for r in history][:3] == ["DELETE", "UPDATE", "MERGE"]
    assert spark.sql("SELECT 1 AS one").collect()[0]["one"] == 1  # Spark's own
    deltamerge.register_table(spark, "sql_named", path)
    try:
        spark.sql("INSERT INTO sql_named VALUES (9, 'z', 'y')")  # a registered name: deltamerge's
        spark.sql("ALTER TABLE sql_named SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
        assert _rows(spark.sql("SELECT id FROM sql_named")) == [(1,), (2,), (9,)]
        assert snapshot_for(path).metadata.configuration["delta.appendOnly"] == "true"
    finally:
        deltamerge.unregister_table(spark, "sql_named")
    deltamerge.unconfigure()
    try:
        with pytest.raises(Exception) as e:  # Spark alone cannot MERGE into a path
            spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1").collect()
        assert not isinstance(e.value, deltamerge.errors.DeltaMergeError)
    finally:
        deltamerge.configure(spark)


def test_which_statements_spark_sql_sends_to_deltamerge():
    from deltamerge.configure.sql import delta_statement

    for text in (
        "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "  -- note\n update t set a = 1",
        "WITH s AS (SELECT 1) MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE",
        "CREATE TABLE t (a INT) USING DELTA",
        "CREATE OR REPLACE TABLE c SHALLOW CLONE t",
        "describe history t",
        "SELECT * FROM delta.`/tmp/x`",
        "SELECT * FROM table_changes('t', 1)",
        "VACUUM t RETAIN 200 HOURS",
        "EXPLAIN MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "WITH s AS (SELECT 1 AS id) INSERT INTO delta.`/tmp/x` SELECT * FROM s",
    ):
        assert delta_statement(text), text
    spark_own = (
        *("SELECT 1", "CREATE TEMP VIEW v AS SELECT 1", "DESCRIBE TABLE t", "SHOW TABLES", "(SELECT)"),
        *("WITH s AS (SELECT 1) SELECT * FROM s", "EXPLAIN SELECT 1"),
        *("INSERT INTO not_registered VALUES (1)", "ALTER TABLE not_registered ADD COLUMNS (c INT)"),
    )
    for text in spark_own:
        assert not delta_statement(text), text
    assert delta_statement("CREATE TABLE t (a INT)", lambda: "delta")
    assert not delta_statement("CREATE TABLE t (a INT)", lambda: "parquet")
