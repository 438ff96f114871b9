"""DeltaTable.create / createIfNotExists / replace / createOrReplace, restoreToVersion /
restoreToTimestamp and optimize().executeCompaction(): commits, metrics, isolation, delta-rs reads."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql.types import IntegerType, LongType, StringType, StructField

import deltamerge
from deltamerge import DeltaTable
from deltamerge.builders import compaction, creation, restoration
from deltamerge.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteReadError,
    DeltaMergeError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from deltamerge.io import snapshot_for
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark

DV = {"delta.enableDeletionVectors": "true"}
OPTIMIZE_KEYS = {
    "numAddedFiles",
    "numRemovedFiles",
    "numAddedBytes",
    "numRemovedBytes",
    "minFileSize",
    "p25FileSize",
    "p50FileSize",
    "p75FileSize",
    "maxFileSize",
    "numDeletionVectorsRemoved",
}
RESTORE_KEYS = {
    "tableSizeAfterRestore",
    "numOfFilesAfterRestore",
    "numRemovedFiles",
    "numRestoredFiles",
    "removedFilesSize",
    "restoredFilesSize",
}


def _rows(spark, path):
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _rs_rows(path, cols="id, v"):
    from deltalake import QueryBuilder

    result = pa.table(QueryBuilder().register("t", RsTable(path)).execute(f"SELECT {cols} FROM t"))
    return sorted(tuple(r.values()) for r in result.to_pylist())


def _last(spark, path):
    return DeltaTable.forPath(spark, path).history(1).collect()[0]


def _small_files(spark, path, n_files=6, per_file=5, props=None, partitioned=False):
    for i in range(n_files):
        df = spark.range(i * per_file, (i + 1) * per_file, 1, 1).selectExpr(
            "cast(id as int) as id", "cast(id * 10 as int) as v", "cast(id % 2 as string) as p"
        )
        deltamerge.write(
            df,
            path,
            mode="error" if i == 0 else "append",
            partition_by=["p"] if partitioned else None,
            configuration=props,
        )


# --- CREATE / REPLACE ---------------------------------------------------------------------------------


def test_create_commits_protocol_and_metadata_only(spark, tmp_path):
    path = str(tmp_path / "t")
    table = (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "INT", nullable=False, comment="key")
        .addColumn("name", StringType())
        .addColumns([StructField("p", StringType())])
        .partitionedBy("p")
        .property("delta.enableChangeDataFeed", "true")
        .comment("people")
        .execute()
    )
    assert isinstance(table, DeltaTable) and table.version() == 0
    snap = snapshot_for(path)
    assert snap.files == () and snap.metadata.partition_columns == ("p",)
    assert snap.metadata.description == "people"
    assert snap.metadata.configuration == {"delta.enableChangeDataFeed": "true"}
    fields = snap.metadata.schema["fields"]
    assert fields[0] == {"name": "id", "type": "integer", "nullable": False, "metadata": {"comment": "key"}}
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 4)
    last = _last(spark, path)
    assert last["operation"] == "CREATE TABLE" and last["operationMetrics"] == {}
    params = last["operationParameters"]
    assert params["partitionBy"] == '["p"]' and params["isManaged"] == "false"
    assert params["properties"] == '{"delta.enableChangeDataFeed":"true"}'
    assert table.toDF().count() == 0
    rs = RsTable(path)
    assert [f.name for f in rs.schema().fields] == ["id", "name", "p"] and rs.to_pyarrow_table().num_rows == 0
    # The new table takes writes like any other.
    one = spark.createDataFrame([(1, "a", "x")], "id int, name string, p string")
    deltamerge.write(one, path, mode="append")
    assert _rows(spark, path) == [(1, "a", "x")]


def test_create_if_not_exists_replace_and_errors(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3).selectExpr("cast(id as int) as id"), path)
    # As Delta: a builder with only a location names the table by path (delta.`path`), and the
    # catalog finds such a table exists when its directory is not empty: refused, matching or not.
    for column_type in ("int", "long"):
        with pytest.raises(TableAlreadyExistsError, match="TABLE_OR_VIEW_ALREADY_EXISTS") as err:
            DeltaTable.create(spark).location(path).addColumn("id", column_type).execute()
        assert err.value.sql_state == "42P07"
    # With a name, the location's table is verified (tests/spark/test_sql_statements.py).
    DeltaTable.create(spark).tableName("builder_existing").location(path).addColumn("id", "int").execute()
    deltamerge.unregister_table(spark, "builder_existing")
    DeltaTable.createIfNotExists(spark).location(path).addColumn("x", "string").execute()
    assert DeltaTable.forPath(spark, path).version() == 0  # untouched
    # A directory with other files counts as a table too: IF NOT EXISTS leaves it alone (and, as
    # delta-spark's builder, then finds no Delta table there).
    other = tmp_path / "not_delta"
    other.mkdir()
    (other / "data.csv").write_text("1\n")
    with pytest.raises(TableNotFoundError, match="DELTA_MISSING_DELTA_TABLE"):
        DeltaTable.createIfNotExists(spark).location(str(other)).addColumn("x", "string").execute()
    assert not (other / "_delta_log").exists()
    with pytest.raises(TableAlreadyExistsError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        DeltaTable.create(spark).location(str(other)).addColumn("x", "string").execute()
    with pytest.raises(TableNotFoundError, match="DELTA_CANNOT_REPLACE_MISSING_TABLE"):
        DeltaTable.replace(spark).location(str(tmp_path / "none")).addColumn("a", "int").execute()

    DeltaTable.replace(spark).location(path).addColumn("a", LongType()).addColumn("b", "string").execute()
    snap = snapshot_for(path)
    assert snap.files == () and [f["name"] for f in snap.metadata.schema["fields"]] == ["a", "b"]
    last = _last(spark, path)
    assert last["operation"] == "REPLACE TABLE" and last["readVersion"] == 0
    DeltaTable.createOrReplace(spark).location(path).addColumn("c", "int").execute()
    assert _last(spark, path)["operation"] == "CREATE OR REPLACE TABLE"
    new = str(tmp_path / "new")
    DeltaTable.createOrReplace(spark).location(new).addColumn("c", "int").execute()
    assert _last(spark, new)["operation"] == "CREATE OR REPLACE TABLE"
    # as Delta: a plain create may have no columns; a replacement must bring a schema
    DeltaTable.create(spark).location(str(tmp_path / "no_columns")).execute()
    assert snapshot_for(str(tmp_path / "no_columns")).metadata.schema["fields"] == []
    with pytest.raises(DeltaMergeError, match="DELTA_SCHEMA_NOT_PROVIDED"):
        DeltaTable.createOrReplace(spark).location(str(tmp_path / "y")).execute()
    with pytest.raises(DeltaMergeError, match="Table name or location has to be specified"):
        DeltaTable.create(spark).addColumn("a", "int").execute()
    with pytest.raises(DeltaMergeError, match="DELTA_PARTITION_COLUMN_NOT_FOUND"):
        DeltaTable.create(spark).location(str(tmp_path / "x")).addColumn("a", "int").partitionedBy(
            "b"
        ).execute()
    assert not os.path.exists(str(tmp_path / "x"))


def test_table_name_registers_and_defaults_to_warehouse(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(creation, "_warehouse", lambda _spark: str(tmp_path / "wh"))  # a static conf
    table = DeltaTable.create(spark).tableName("builder_people").addColumn("id", IntegerType()).execute()
    assert table.path == str(tmp_path / "wh" / "builder_people")
    assert _last(spark, table.path)["operationParameters"]["isManaged"] == "true"
    deltamerge.write(spark.range(2).selectExpr("cast(id as int) as id"), table.path, mode="append")
    assert sorted(r.id for r in spark.sql("SELECT id FROM builder_people").collect()) == [0, 1]
    assert DeltaTable.forName(spark, "builder_people").path == table.path
    deltamerge.unregister_table(spark, "builder_people")


def test_builder_argument_checks(spark):
    b = DeltaTable.create(spark)
    with pytest.raises(TypeError, match=r"^Identifier must be str\. Found 1 with type <class 'int'>$"):
        b.tableName(1)
    with pytest.raises(TypeError, match=r"^Location must be str\."):
        b.location(None)
    with pytest.raises(TypeError, match=r"^Column data type must be str or DataType\."):
        b.addColumn("a", 5)
    with pytest.raises(TypeError, match=r"^Column nullable must be bool\."):
        b.addColumn("a", "int", nullable="yes")
    with pytest.raises(TypeError, match=r"^Schema must be StructType or a list of StructField\."):
        b.addColumns("a int")
    with pytest.raises(TypeError, match=r"^Column in existing schema must be StructField\."):
        b.addColumns(["a"])
    with pytest.raises(TypeError, match=r"^Partitioning column must be str\."):
        b.partitionedBy(["a", 1])
    with pytest.raises(TypeError, match=r"^Key and value of property must be string\."):
        b.property("k", 1)
    with pytest.raises(TypeError, match=r"^Column nullable must be bool\."):
        DeltaTable.columnBuilder(spark, "a").dataType("int").nullable("no").build()
    with pytest.raises(DeltaMergeError, match="dataType"):
        DeltaTable.columnBuilder(spark, "a").build()


def test_column_builder(spark, tmp_path):
    """delta-spark's DeltaTable.columnBuilder: StructFields for addColumns, with generated and
    identity columns and comments."""
    path = str(tmp_path / "t")
    cols = [
        DeltaTable.columnBuilder(spark, "id").dataType("BIGINT").generatedAlwaysAsIdentity(10, 5).build(),
        DeltaTable.columnBuilder(spark, "v").dataType(IntegerType()).nullable(False).comment("value").build(),
        DeltaTable.columnBuilder(spark, "w").dataType("INT").generatedAlwaysAs("v * 2").build(),
    ]
    DeltaTable.create(spark).location(path).addColumns(cols).execute()
    fields = {f["name"]: f for f in snapshot_for(path).metadata.schema["fields"]}
    assert fields["v"]["nullable"] is False and fields["v"]["metadata"]["comment"] == "value"
    assert fields["w"]["metadata"]["delta.generationExpression"] == "v * 2"
    assert fields["id"]["metadata"]["delta.identity.start"] == 10
    deltamerge.write(spark.createDataFrame([(1,), (2,)], "v int"), path, mode="append")
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert [r[1:] for r in rows] == [(1, 2), (2, 4)] and {r[0] for r in rows} <= {10, 15, 20, 25}


# --- RESTORE ------------------------------------------------------------------------------------------


def test_restore_to_version_and_timestamp(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 10, 1, 2).selectExpr("cast(id as int) as id", "cast(id * 10 as int) as v")
    deltamerge.write(df, path)  # v0
    v0 = _rows(spark, path)
    table = DeltaTable.forPath(spark, path)
    table.delete("id < 3")  # v1
    table.update("id = 9", {"v": "-1"})  # v2
    time.sleep(0.05)
    ts_v2 = DeltaTable.forPath(spark, path).history(1).collect()[0]["timestamp"]
    deltamerge.write(df.limit(1), path, mode="append")  # v3
    v3 = _rows(spark, path)

    result = table.restoreToVersion(0)  # v4
    assert result.columns == [
        "table_size_after_restore",
        "num_of_files_after_restore",
        "num_removed_files",
        "num_restored_files",
        "removed_files_size",
        "restored_files_size",
    ]
    row = result.collect()[0]
    assert _rows(spark, path) == v0
    last = _last(spark, path)
    assert last["operation"] == "RESTORE" and set(last["operationMetrics"]) == RESTORE_KEYS
    assert last["operationParameters"] == {"version": "0", "timestamp": "null"}
    assert row["num_of_files_after_restore"] == len(snapshot_for(path).files) == 2
    assert row["num_restored_files"] == int(last["operationMetrics"]["numRestoredFiles"]) >= 1
    assert sorted(RsTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "v": i * 10} for i in range(10)
    ]

    table.restoreToTimestamp(ts_v2.strftime("%Y-%m-%d %H:%M:%S.%f"))  # v5: state of v2
    assert _rows(spark, path) == sorted([(i, -1 if i == 9 else i * 10) for i in range(3, 10)])
    assert _last(spark, path)["operationParameters"]["version"] == "null"
    assert v3 != _rows(spark, path)
    with pytest.raises(ValueError, match="Version to restore"):
        table.restoreToVersion(table.version())
    with pytest.raises(ValueError, match="version needs to be an int"):
        table.restoreToVersion("1")


def test_restore_with_deletion_vectors_and_missing_files(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 10, 1, 1).selectExpr("cast(id as int) as id", "cast(id * 10 as int) as v")
    deltamerge.write(df, path, configuration=DV)
    table = DeltaTable.forPath(spark, path)
    table.delete("id = 1")  # v1: DV on the file
    table.delete("id = 2")  # v2: updated DV
    table.restoreToVersion(1)  # the same file, back to its first DV
    assert _rows(spark, path) == [(i, i * 10) for i in range(10) if i != 1]
    assert _rs_rows(path) == [(i, i * 10) for i in range(10) if i != 1]
    table.restoreToVersion(0)
    assert _rows(spark, path) == [(i, i * 10) for i in range(10)]

    other = str(tmp_path / "o")
    deltamerge.write(df, other)
    DeltaTable.forPath(spark, other).delete()
    for name in os.listdir(other):
        if name.endswith(".parquet"):
            os.remove(os.path.join(other, name))  # as if vacuumed
    with pytest.raises(ValueError, match="Not all files from version 0 are available"):
        DeltaTable.forPath(spark, other).restoreToVersion(0)


def test_restore_conflicts_with_concurrent_append(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    df = spark.range(0, 4, 1, 1).selectExpr("cast(id as int) as id")
    deltamerge.write(df, path)
    deltamerge.write(df, path, mode="append")

    class Racing(OptimisticTransaction):
        def commit(self, actions, operation, **kw):
            deltamerge.write(df, path, mode="append")  # lands between the read and the commit
            return super().commit(actions, operation, **kw)

    monkeypatch.setattr(restoration, "OptimisticTransaction", Racing)
    with pytest.raises(ConcurrentAppendError):
        DeltaTable.forPath(spark, path).restoreToVersion(0)


# --- OPTIMIZE -----------------------------------------------------------------------------------------


def test_optimize_compacts_small_files_per_partition(spark, tmp_path):
    path = str(tmp_path / "t")
    _small_files(spark, path, partitioned=True)
    before = _rows(spark, path)
    assert len(snapshot_for(path).files) == 12
    out = DeltaTable.forPath(spark, path).optimize().where("p = '0'").executeCompaction()
    assert out.columns == ["path", "metrics"]
    metrics = out.collect()[0]["metrics"]
    assert (metrics["numFilesAdded"], metrics["numFilesRemoved"]) == (1, 6)
    assert metrics["partitionsOptimized"] == 1 and metrics["totalConsideredFiles"] == 6
    assert _rows(spark, path) == before
    files = snapshot_for(path).files
    assert len(files) == 7 and sum(1 for f in files if f.partition_values["p"] == "0") == 1
    last = _last(spark, path)
    assert last["operation"] == "OPTIMIZE" and set(last["operationMetrics"]) == OPTIMIZE_KEYS
    assert last["operationParameters"] == {
        "predicate": "[\"(p = '0')\"]",
        "zOrderBy": "[]",
        "clusterBy": "[]",
        "auto": "false",
    }
    assert last["isolationLevel"] == "SnapshotIsolation" and last["isBlindAppend"] is False
    log = os.path.join(path, "_delta_log", f"{last['version']:020d}.json")
    with open(log) as f:
        text = f.read()
    assert '"dataChange":true' not in text.replace(" ", "")

    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert len(snapshot_for(path).files) == 2
    assert _rows(spark, path) == before
    assert sorted(RsTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": r[0], "v": r[1], "p": r[2]} for r in before
    ]
    # Nothing left to compact: no commit.
    version = DeltaTable.forPath(spark, path).version()
    again = DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()[0]["metrics"]
    assert again["numFilesAdded"] == 0 and DeltaTable.forPath(spark, path).version() == version
    with pytest.raises(DeltaMergeError, match="DELTA_NON_PARTITION_COLUMN_REFERENCE"):
        DeltaTable.forPath(spark, path).optimize().where("id = 1").executeCompaction()


def test_optimize_bins_respect_target_file_size_and_drop_deleted_rows(spark, tmp_path):
    path = str(tmp_path / "t")
    _small_files(spark, path, n_files=4, props=DV)
    DeltaTable.forPath(spark, path).delete("id = 3 OR id = 12")
    size = max(f.size for f in snapshot_for(path).files)
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(2 * size + 1))
    try:
        metrics = DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()[0]["metrics"]
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    assert (metrics["numFilesAdded"], metrics["numFilesRemoved"]) == (2, 4)  # two bins of two files
    assert metrics["deletionVectorStats"]["numDeletionVectorsRemoved"] == 2
    files = snapshot_for(path).files
    assert all(f.deletion_vector is None for f in files) and sum(f.num_records for f in files) == 18
    assert _rows(spark, path) == [(i, i * 10, str(i % 2)) for i in range(20) if i not in (3, 12)]
    assert _rs_rows(path) == [(i, i * 10) for i in range(20) if i not in (3, 12)]
    assert _last(spark, path)["operationMetrics"]["numDeletionVectorsRemoved"] == "2"


def test_optimize_isolation_allows_appends_but_not_removals(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _small_files(spark, path, n_files=3)
    extra = spark.createDataFrame([(100, 0, "x")], "id int, v int, p string")

    class AppendMeanwhile(OptimisticTransaction):
        def commit(self, actions, operation, **kw):
            deltamerge.write(extra, path, mode="append")
            return super().commit(actions, operation, **kw)

    monkeypatch.setattr(compaction, "OptimisticTransaction", AppendMeanwhile)
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert len(_rows(spark, path)) == 16 and len(snapshot_for(path).files) == 2

    class DeleteMeanwhile(OptimisticTransaction):
        def commit(self, actions, operation, **kw):
            DeltaTable.forPath(spark, path).delete("id = 100")  # removes a file being compacted
            return super().commit(actions, operation, **kw)

    deltamerge.write(extra, path, mode="append")
    monkeypatch.setattr(compaction, "OptimisticTransaction", DeleteMeanwhile)
    before = {n for n in os.listdir(path) if n.endswith(".parquet")}
    with pytest.raises(ConcurrentDeleteReadError):
        DeltaTable.forPath(spark, path).optimize().executeCompaction()
    after = {n for n in os.listdir(path) if n.endswith(".parquet")}
    assert not (after - before - {f.path for f in snapshot_for(path).files})  # compacted output discarded


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (lambda b: b.partitionedBy("id", "id"), "PARTITION_COLUMNS"),
        (lambda b: b.partitionedBy("id", "ID"), "PARTITION_COLUMNS"),
        (lambda b: b.clusterBy("id", "id"), "CLUSTER_BY"),
    ],
)
def test_a_column_named_twice_in_partitioning_or_clustering_is_refused(spark, tmp_path, make, where) -> None:  # type: ignore[no-untyped-def]
    """Delta's validatePartitionColumn / validateClusterBySpec: the table was created with
    partitionColumns ["id", "id"] (or clustering columns [["id"], ["id"]])."""
    path = tmp_path / "t"
    builder = DeltaTable.create(spark).location(str(path)).addColumn("id", "INT").addColumn("v", "STRING")
    with pytest.raises(DeltaMergeError, match=rf"DELTA_DUPLICATE_COLUMNS_FOUND\.{where}.*`id`"):
        make(builder).execute()
    assert not (path / "_delta_log").exists()
    clause = "PARTITIONED BY (id, Id)" if where == "PARTITION_COLUMNS" else "CLUSTER BY (id, id)"
    with pytest.raises(DeltaMergeError, match=rf"DELTA_DUPLICATE_COLUMNS_FOUND\.{where}"):
        deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` (id INT, v STRING) USING delta {clause}")
