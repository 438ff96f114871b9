"""Column mapping (``delta.columnMapping.mode`` ``name`` and ``id``): physical names in the data files,
statistics and partition values; fresh ids and names for columns added by schema evolution; the
existing names kept when a table is upgraded from ``none``; tables of delta-rs read and written."""

from __future__ import annotations

import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.cdf_read import read_changes
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for
from deltamerge.spark.session import temporary_settings

pytestmark = pytest.mark.spark

PHYS = "delta.columnMapping.physicalName"
ID = "delta.columnMapping.id"


def _create(spark, path: str, mode: str, *, dv: bool = False, cdf: bool = False) -> None:
    df = spark.createDataFrame(
        [(1, "a", (1, "x"), "p1"), (2, "b", (2, "y"), "p2"), (3, "c", (3, "z"), "p1")],
        "id long, v string, s struct<a:int,b:string>, part string",
    ).coalesce(1)  # one file per partition
    conf = {"delta.columnMapping.mode": mode}
    if dv:
        conf["delta.enableDeletionVectors"] = "true"
    if cdf:
        conf["delta.enableChangeDataFeed"] = "true"
    deltamerge.write(df, path, mode="overwrite", partition_by=["part"], configuration=conf)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _fields(path: str) -> list[dict]:
    return snapshot_for(path).metadata.schema["fields"]


def _data_files(path: str) -> list[str]:
    return sorted(f for f in glob.glob(f"{path}/**/*.parquet", recursive=True) if "_change_data" not in f)


def _evolving_upsert(spark, path: str, source, key: str = "id") -> None:
    """UPDATE SET * / INSERT * on ``key`` with schema evolution."""
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), f"t.{key} = s.{key}")
        .withSchemaEvolution()
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def _rs_rows(path: str) -> list[dict]:
    # delta-rs reads column mapping through DataFusion (its pyarrow dataset path does not map names).
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    out = QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t ORDER BY id").read_all()
    return pa.table(out).to_pylist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_files_statistics_and_partition_values_use_physical_names(spark, tmp_path, mode: str) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, mode)
    snap = snapshot_for(path)
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (2, 5)
    fields = snap.metadata.schema["fields"]
    physical = {f["name"]: f["metadata"][PHYS] for f in fields}
    assert all(p.startswith("col-") for p in physical.values())
    nested = fields[2]["type"]["fields"]
    assert [f["metadata"][ID] for f in fields] + [f["metadata"][ID] for f in nested] != []
    ids = sorted([f["metadata"][ID] for f in fields] + [f["metadata"][ID] for f in nested])
    assert ids == list(range(1, 7))
    assert snap.metadata.configuration["delta.columnMapping.maxColumnId"] == "6"
    for add in snap.files:
        assert list(add.partition_values) == [physical["part"]]
        stats = json.loads(add.stats or "{}")
        assert set(stats["minValues"]) == {physical["id"], physical["v"], physical["s"]}
    schema = pq.read_schema(_data_files(path)[0])
    assert schema.names == [physical["id"], physical["v"], physical["s"]]
    inner = schema.field(physical["s"]).type
    assert [inner.field(i).name for i in range(inner.num_fields)] == [f["metadata"][PHYS] for f in nested]
    field_ids = [(schema.field(n).metadata or {}).get(b"PARQUET:field_id") for n in schema.names]
    if mode == "id":
        assert field_ids == [str(physical_id).encode() for physical_id in (1, 2, 3)]
    else:
        assert field_ids == [None, None, None]
    assert _rows(spark, path) == [
        (1, "a", (1, "x"), "p1"),
        (2, "b", (2, "y"), "p2"),
        (3, "c", (3, "z"), "p1"),
    ]
    assert deltamerge.read(spark, path).where("s.a >= 2 AND part = 'p1'").select("id").collect()[0][0] == 3


@pytest.mark.sampled
@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "deletion-vectors"])
@pytest.mark.parametrize("mode", ["name", "id"])
def test_merge_upsert_delete_and_change_data(spark, tmp_path, mode: str, dv: bool) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, mode, dv=dv, cdf=True)
    source = spark.createDataFrame(
        [(2, "B", (20, "yy"), "p2"), (3, None, None, "p1"), (4, "d", (4, "w"), "p2")],
        "id long, v string, s struct<a:int,b:string>, part string",
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.v IS NULL")
        .whenMatchedUpdate(set={"v": "s.v", "s.a": "s.s.a"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert _rows(spark, path) == [
        (1, "a", (1, "x"), "p1"),
        (2, "B", (20, "y"), "p2"),
        (4, "d", (4, "w"), "p2"),
    ]
    changes = read_changes(spark, path, 1, 1)
    got = sorted((r.id, r.v, r._change_type) for r in changes.collect())
    assert got == [
        (2, "B", "update_postimage"),
        (2, "b", "update_preimage"),
        (3, "c", "delete"),
        (4, "d", "insert"),
    ]
    snap = snapshot_for(path)
    if dv:
        assert any(f.deletion_vector is not None for f in snap.files)
    assert _rs_rows(path) == [
        {"id": 1, "v": "a", "s": {"a": 1, "b": "x"}, "part": "p1"},
        {"id": 2, "v": "B", "s": {"a": 20, "b": "y"}, "part": "p2"},
        {"id": 4, "v": "d", "s": {"a": 4, "b": "w"}, "part": "p2"},
    ]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_schema_evolution_gives_new_columns_fresh_ids_and_names(spark, tmp_path, mode: str) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, mode)
    before = {f["name"]: f["metadata"] for f in _fields(path)}
    source = spark.createDataFrame(
        [(3, "C", (30, "zz", True), 9), (5, "e", (5, "q", False), 7)],
        "id long, v string, s struct<a:int,b:string,c:boolean>, extra int",
    )
    _evolving_upsert(spark, path, source, "id")
    fields = _fields(path)
    after = {f["name"]: f["metadata"] for f in fields}
    for name, md in before.items():
        assert after[name][PHYS] == md[PHYS] and after[name][ID] == md[ID]
    assert after["extra"][PHYS].startswith("col-") and after["extra"][ID] > 6
    nested = {f["name"]: f["metadata"] for f in fields[2]["type"]["fields"]}
    assert nested["c"][ID] > 6 and nested["c"][ID] != after["extra"][ID]
    top = max(after["extra"][ID], nested["c"][ID])
    assert snapshot_for(path).metadata.configuration["delta.columnMapping.maxColumnId"] == str(top)
    assert _rows(spark, path) == [
        (1, "a", (1, "x", None), "p1", None),
        (2, "b", (2, "y", None), "p2", None),
        (3, "C", (30, "zz", True), "p1", 9),
        (5, "e", (5, "q", False), None, 7),
    ]
    # An append with mergeSchema maps its new column too, and older files still read.
    more = spark.createDataFrame([(6, "f", "p2", "n")], "id long, v string, part string, note string")
    deltamerge.write(more, path, mode="append", merge_schema=True)
    note = {f["name"]: f["metadata"] for f in _fields(path)}["note"]
    assert note[ID] == top + 1
    assert deltamerge.read(spark, path).where("note = 'n'").select("id").collect()[0][0] == 6
    assert deltamerge.read(spark, path).where("extra = 9").select("id").collect()[0][0] == 3


@pytest.mark.parametrize("mode", ["name", "id"])
def test_not_null_nested_fields_and_a_void_column_evolved_to_a_struct(spark, tmp_path, mode: str) -> None:
    # The physical rename is a cast; it must not narrow a nullable nested field to NOT NULL (the
    # written and read columns are nullable anyway), or the plan fails before any row is written.
    from pyspark.sql.types import IntegerType, NullType, StructField, StructType

    if tuple(int(p) for p in spark.version.split(".")[:2]) < (4, 1):
        pytest.skip("Spark 4.0's Parquet source reads and writes no VOID field nested in a struct")
    path = str(tmp_path / "t")
    void = StructType([StructField("key", IntegerType(), False), StructField("s", NullType(), True)])
    inner = StructType([StructField("_1", IntegerType(), False), StructField("_2", NullType(), True)])
    struct = StructType([StructField("key", IntegerType(), False), StructField("s", inner, True)])
    conf = {"delta.columnMapping.mode": mode, "delta.enableChangeDataFeed": "true"}
    deltamerge.write(spark.createDataFrame([(0, None), (1, None)], void), path, configuration=conf)
    source = spark.createDataFrame([(1, (1, None)), (2, (2, None))], struct)
    _evolving_upsert(spark, path, source, "key")
    assert _rows(spark, path) == [(0, None), (1, (1, None)), (2, (2, None))]
    first = _fields(path)[1]["type"]["fields"][0]
    assert first["nullable"] is False and first["metadata"][PHYS].startswith("col-")
    # A NOT NULL nested field is still enforced when the struct is set.
    bad = spark.createDataFrame([(5, (None, None))], "key int, s struct<_1:int,_2:void>")
    with pytest.raises(DeltaMergeError, match="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"):
        deltamerge.write(bad, path, mode="append")
    assert _rows(spark, path) == [(0, None), (1, (1, None)), (2, (2, None))]
    changes = read_changes(spark, path, 1).select("key", "_change_type").collect()
    assert sorted(tuple(r) for r in changes) == [
        (1, "update_postimage"),
        (1, "update_preimage"),
        (2, "insert"),
    ]


def test_update_and_delete(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "name")
    table = DeltaTable.forPath(spark, path)
    table.update("part = 'p1'", {"v": "upper(v)", "s.b": "'!'"})
    table.delete("id = 2")
    assert _rows(spark, path) == [(1, "A", (1, "!"), "p1"), (3, "C", (3, "!"), "p1")]


def test_data_skipping_and_file_pruning_read_the_physical_statistics(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    df = spark.range(0, 400, 1, 4).selectExpr("id", "CAST(id AS STRING) AS v")
    deltamerge.write(df, path, mode="overwrite", configuration={"delta.columnMapping.mode": "name"})
    assert len(snapshot_for(path).files) == 4
    source = spark.createDataFrame([(5, "five")], "id long, v string")
    row = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .execute()
        .collect()[0]
    )
    assert row["num_updated_rows"] == 1
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numTargetFilesRemoved"] == "1"  # the source keys pruned the other three files
    assert DeltaTable.forPath(spark, path).toDF().where("id = 5").collect()[0]["v"] == "five"


def test_sql_create_and_upgrade_from_none_keeps_existing_names(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
    )
    assert all(f["metadata"][PHYS].startswith("col-") for f in _fields(path))

    plain = str(tmp_path / "plain")
    deltamerge.write(
        spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string"), plain, mode="overwrite"
    )
    files = _data_files(plain)
    deltamerge.sql(
        spark, f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    fields = _fields(plain)
    assert [f["metadata"][PHYS] for f in fields] == ["id", "v"]
    source = spark.createDataFrame([(2, "B", 1.5), (3, "c", 2.5)], "id long, v string, w double")
    _evolving_upsert(spark, plain, source, "id")
    w = {f["name"]: f["metadata"] for f in _fields(plain)}["w"]
    assert w[PHYS].startswith("col-") and w[ID] == 3
    assert _rows(spark, plain) == [(1, "a", None), (2, "B", 1.5), (3, "c", 2.5)]
    assert set(files) <= set(_data_files(plain))  # the untouched file was not rewritten


def test_changing_the_mode_of_a_mapped_table_is_refused(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _create(spark, path, "name")
    version = snapshot_for(path).version
    alter = f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = '{{}}')"
    with pytest.raises(DeltaMergeError, match="column mapping mode"):
        deltamerge.sql(spark, alter.format("id"))
    no_removal = temporary_settings(spark, {"spark.databricks.delta.columnMapping.allowRemoval": "false"})
    with no_removal, pytest.raises(DeltaMergeError, match="column mapping mode"):
        deltamerge.sql(spark, alter.format("none"))
    with pytest.raises(DeltaMergeError, match="DELTA_MODE_NOT_SUPPORTED"):
        deltamerge.write(
            spark.range(1),
            str(tmp_path / "bad"),
            configuration={"delta.columnMapping.mode": "names"},
        )
    assert snapshot_for(path).version == version
    assert not os.path.exists(str(tmp_path / "bad" / "_delta_log"))
    # mode none removes column mapping, as Delta's RemoveColumnMappingCommand: every file is
    # rewritten under the logical names, the schema loses the mapping metadata
    rows = _rows(spark, path)
    deltamerge.sql(spark, alter.format("none"))
    snap = snapshot_for(path)
    assert snap.metadata.configuration["delta.columnMapping.mode"] == "none"
    assert "delta.columnMapping.maxColumnId" not in snap.metadata.configuration
    assert "delta.columnMapping" not in json.dumps(snap.metadata.schema)
    assert _rows(spark, path) == rows
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "REMOVE COLUMN MAPPING"


def test_tables_of_delta_rs_are_read_and_merged(spark, tmp_path) -> None:
    from deltalake import write_deltalake

    path = str(tmp_path / "rs")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"], "part": ["x", "y", "x"]})
    write_deltalake(path, data, partition_by=["part"], configuration={"delta.columnMapping.mode": "name"})
    assert _rows(spark, path) == [(1, "a", "x"), (2, "b", "y"), (3, "c", "x")]
    source = spark.createDataFrame([(2, "B", "y"), (4, "d", "y")], "id long, v string, part string")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    expected = [(1, "a", "x"), (2, "B", "y"), (3, "c", "x"), (4, "d", "y")]
    assert _rows(spark, path) == expected
    assert [(r["id"], r["v"], r["part"]) for r in _rs_rows(path)] == expected


def test_merge_keeps_comments_and_mapping_metadata(spark, tmp_path) -> None:
    """Delta's ``merge correctly handle field metadata`` (MergeIntoSuiteBase): a target with user
    metadata (comments) and column mapping on a top-level column and a nested field, created with
    the protocol versions in TBLPROPERTIES as Delta's documentation does it."""
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (key INT NOT NULL COMMENT 'data column', value INT NOT NULL, "
        "cstruct STRUCT<foo: INT COMMENT 'foo field'>) USING delta TBLPROPERTIES ("
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', "
        "'delta.columnMapping.mode' = 'name')",
    )
    snap = snapshot_for(path)
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (2, 5)
    assert "delta.minReaderVersion" not in snap.metadata.configuration
    deltamerge.sql(spark, f"INSERT INTO delta.`{path}` VALUES (0, 0, null)")
    spark.createDataFrame([(1, 1)], "key int, value int").createOrReplaceTempView("cm_source")
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` AS target USING cm_source AS source ON source.key = target.key "
        "WHEN MATCHED AND target.key = 1 THEN UPDATE SET target.value = 42 "
        "WHEN NOT MATCHED BY SOURCE AND target.key = 100 THEN UPDATE SET target.value = 22",
    )
    fields = _fields(path)
    assert fields[0]["metadata"]["comment"] == "data column" and PHYS in fields[0]["metadata"]
    nested = fields[2]["type"]["fields"][0]["metadata"]
    assert nested["comment"] == "foo field" and PHYS in nested
    assert _rows(spark, path) == [(0, 0, None)]
    read = deltamerge.read(spark, path).schema
    assert read["key"].metadata == {"comment": "data column"}  # the mapping stays internal


def test_alter_table_with_protocol_versions_enables_column_mapping(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a")], "id long, v string"), path, mode="overwrite")
    deltamerge.sql(
        spark,
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')",
    )
    snap = snapshot_for(path)
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (2, 5)
    assert [f["metadata"][PHYS] for f in _fields(path)] == ["id", "v"]
    assert _rows(spark, path) == [(1, "a")]
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_PROTOCOL_VERSION"):
        deltamerge.sql(
            spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.minWriterVersion' = '8')"
        )
    assert snapshot_for(path).version == snap.version


@pytest.mark.parametrize("mode", ["name", "id"])
def test_delta_rs_merges_into_a_mapped_table_of_deltamerge(spark, tmp_path, mode: str) -> None:
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    _create(spark, path, mode)
    source = pa.table({"id": pa.array([1, 7], pa.int64()), "v": ["A", "g"], "part": ["p1", "p2"]})
    (
        RsTable(path)
        .merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(updates={"v": "s.v"})
        .when_not_matched_insert(updates={"id": "s.id", "v": "s.v", "part": "s.part"})
        .execute()
    )
    assert _rows(spark, path) == [
        (1, "A", (1, "x"), "p1"),
        (2, "b", (2, "y"), "p2"),
        (3, "c", (3, "z"), "p1"),
        (7, "g", None, "p2"),
    ]


def test_compaction_and_replace_where_keep_physical_names(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    conf = {"delta.columnMapping.mode": "name"}
    cols = ("id", "CAST(id % 2 AS STRING) AS p", "named_struct('a', id) AS s")
    df = spark.range(0, 40, 1, 4).selectExpr(*cols)
    deltamerge.write(df, path, mode="overwrite", partition_by=["p"], configuration=conf)
    # An append of a struct column: the table's nested field carries mapping metadata, the data not.
    deltamerge.write(spark.range(40, 41).selectExpr(*cols), path, mode="append")
    before = _rows(spark, path)
    assert len(before) == 41
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    snap = snapshot_for(path)
    assert len(snap.files) == 2 and _rows(spark, path) == before
    physical = {f["name"]: f["metadata"][PHYS] for f in snap.metadata.schema["fields"]}
    for f in _data_files(path):
        if any(f.endswith(a.path.split("/")[-1]) for a in snap.files):
            assert pq.read_schema(f).names == [physical["id"], physical["s"]]
    from deltamerge.configure.replace import replace_rows  # format("delta")'s replaceWhere

    new = spark.createDataFrame([(100, "0", (100,))], "id long, p string, s struct<a:long>")
    replace_rows(new, path, (), False, predicate="p = '0'")
    assert _rows(spark, path) == sorted([(100, "0", (100,)), *[r for r in before if r[1] == "1"]])


@pytest.mark.parametrize("case_max_files", [0, 8])
def test_partition_values_and_row_ids_from_a_case_or_a_frame_of_paths(
    spark, tmp_path, monkeypatch, case_max_files: int
) -> None:
    """A scan takes each file's partition values (column mapping: not from the directory names)
    and row-tracking bases from a CASE over the paths (few files) or a broadcast frame of paths
    (many): the same rows and row ids either way, NULL and odd partition values included."""
    from deltamerge.spark import scan

    monkeypatch.setattr(scan, "CASE_MAX_FILES", case_max_files)
    frames: list[int] = []
    real = scan.local_frame
    monkeypatch.setattr(scan, "local_frame", lambda *a: frames.append(len(a[1])) or real(*a))
    path = str(tmp_path / "t")
    parts = ["a b", "50%", "it's", "back\\slash", None]
    rows = [(i, parts[i % len(parts)], i * 10) for i in range(20)]
    conf = {
        "delta.columnMapping.mode": "name",
        "delta.enableRowTracking": "true",
        "delta.enableDeletionVectors": "true",
    }
    deltamerge.write(
        spark.createDataFrame(rows, "id long, p string, v long").coalesce(1),
        path,
        partition_by=["p"],
        configuration=conf,
    )
    before = {
        r.id: r.row_id
        for r in deltamerge.read(spark, path, row_tracking=True).select("id", "_metadata.row_id").collect()
    }
    source = spark.createDataFrame(
        [(i, parts[i % len(parts)], -i) for i in range(0, 20, 3)] + [(99, "50%", 1)],
        "id long, p string, v long",
    )
    result = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id AND t.p <=> s.p")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0]
    )  # fmt: skip
    assert tuple(result) == (8, 7, 0, 1)
    after = (
        deltamerge.read(spark, path, row_tracking=True).select("id", "p", "v", "_metadata.row_id").collect()
    )
    expected = {i: (parts[i % len(parts)], -i if i % 3 == 0 else i * 10) for i in range(20)} | {
        99: ("50%", 1)
    }
    assert {r.id: (r.p, r.v) for r in after} == expected
    assert all(r.row_id == before[r.id] for r in after if r.id in before)  # updated rows keep their ids
    assert len({r.row_id for r in after}) == len(after)
    # Five partitions, one file each: a frame of paths only when the CASE is off.
    assert bool(frames) == (case_max_files == 0)
