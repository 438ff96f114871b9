"""ALTER TABLE column clauses through deltamerge.sql: ADD COLUMNS, RENAME COLUMN and DROP COLUMN(S)
(column mapping), ALTER / CHANGE COLUMN; metadata-only commits, refused changes leave the table as
it was, and delta-rs reads the result."""

from __future__ import annotations

import glob
import json

import pyarrow as pa
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.cdf_read import read_changes
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark

PHYS = "delta.columnMapping.physicalName"
ID = "delta.columnMapping.id"


def _sql(spark, text):
    return deltamerge.sql(spark, text)


def _table(spark, path: str, mode: str = "none", extra: str = "") -> str:
    props = f"'delta.columnMapping.mode' = '{mode}', 'delta.enableChangeDataFeed' = 'true'{extra}"
    _sql(
        spark,
        f"""CREATE TABLE delta.`{path}` (id INT, v STRING, s STRUCT<a: INT, b: STRING>, p STRING)
            USING delta PARTITIONED BY (p) TBLPROPERTIES ({props})""",
    )
    rows = [(1, "a", (1, "x"), "p1"), (2, "b", (2, "y"), "p2"), (3, "c", (3, "z"), "p1")]
    deltamerge.write(
        spark.createDataFrame(rows, "id int, v string, s struct<a:int,b:string>, p string"),
        path,
        mode="append",
    )
    return f"delta.`{path}`"


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _fields(path: str) -> list[dict]:
    return snapshot_for(path).metadata.schema["fields"]


def _last(spark, t: str):
    return _sql(spark, f"DESCRIBE HISTORY {t} LIMIT 1").collect()[0]


def _rs_rows(path: str) -> list[dict]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    out = QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t ORDER BY id").read_all()
    return pa.table(out).to_pylist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["none"])  # a mapped table's ADD COLUMNS: the rename test
def test_add_columns_top_level_nested_and_positioned(spark, tmp_path, mode: str) -> None:
    path = str(tmp_path / "t")
    t = _table(spark, path, mode)
    files = sorted(glob.glob(f"{path}/**/*.parquet", recursive=True))
    _sql(
        spark,
        f"ALTER TABLE {t} ADD COLUMNS (n BIGINT COMMENT 'count', s.c DOUBLE FIRST, "
        "m MAP<STRING, INT> AFTER v)",
    )
    _sql(spark, f"ALTER TABLE {t} ADD COLUMN z DECIMAL(10,2)")
    fields = _fields(path)
    assert [f["name"] for f in fields] == ["id", "v", "m", "s", "p", "n", "z"]
    assert [f["name"] for f in fields[3]["type"]["fields"]] == ["c", "a", "b"]
    assert fields[5]["metadata"]["comment"] == "count" and fields[6]["type"] == "decimal(10,2)"
    assert sorted(glob.glob(f"{path}/**/*.parquet", recursive=True)) == files  # metadata only
    assert _rows(spark, path)[0] == (1, "a", None, (None, 1, "x"), "p1", None, None)
    history = _sql(spark, f"DESCRIBE HISTORY {t} LIMIT 2").collect()
    assert [h["operation"] for h in history] == ["ADD COLUMNS", "ADD COLUMNS"]
    added = json.loads(history[1]["operationParameters"]["columns"])
    assert added[0] == {
        "column": {"name": "n", "type": "long", "nullable": True, "metadata": {"comment": "count"}}
    }
    assert added[1]["column"]["name"] == "s.c" and added[1]["position"] == "FIRST"
    assert added[2]["position"] == "AFTER v"
    if mode == "name":  # fresh ids and physical names, the old ones kept
        ids = [f["metadata"][ID] for f in fields]
        assert len(set(ids)) == len(ids) and fields[5]["metadata"][PHYS].startswith("col-")
    # The new columns take data: a MERGE and an append write them.
    source = spark.createDataFrame([(1, 10), (4, 40)], "id int, n bigint")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"n": "s.n", "s.c": "0.5"})
        .whenNotMatchedInsert(values={"id": "s.id", "n": "s.n", "p": "'p2'"})
        .execute()
    )
    got = {r[0]: r for r in _rows(spark, path)}
    assert got[1][3] == (0.5, 1, "x") and got[1][5] == 10 and got[4][5] == 40
    assert {r["id"]: r["n"] for r in _rs_rows(path)} == {1: 10, 2: None, 3: None, 4: 40}


def test_add_columns_refusals_leave_the_table_as_it_was(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    t = _table(spark, path)
    version = DeltaTable.forPath(spark, path).version()
    for statement, error in [
        ("ADD COLUMNS (x INT NOT NULL)", "DELTA_OPERATION_NOT_ALLOWED"),
        ("ADD COLUMNS (x STRUCT<y: INT NOT NULL>)", "DELTA_OPERATION_NOT_ALLOWED"),
        ("ADD COLUMNS (V STRING)", "FIELD_ALREADY_EXISTS"),
        ("ADD COLUMNS (s.A INT)", "FIELD_ALREADY_EXISTS"),
        ("ADD COLUMNS (v.x INT)", "DELTA_ADD_COLUMN_PARENT_NOT_STRUCT"),
        ("ADD COLUMNS (nope.x INT)", "UNRESOLVED_COLUMN"),
        ("ADD COLUMNS (x INT AFTER nope)", "UNRESOLVED_COLUMN"),
        ("ADD COLUMNS (x NOTATYPE)", "PARSE_SYNTAX_ERROR"),
        ("RENAME COLUMN v TO w", "DELTA_UNSUPPORTED_RENAME_COLUMN"),
        ("DROP COLUMN v", "DELTA_UNSUPPORTED_DROP_COLUMN"),
        ("ALTER COLUMN id SET NOT NULL", "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"),
        ("ALTER COLUMN id TYPE BIGINT", "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"),
        ("ALTER COLUMN nope COMMENT 'x'", "UNRESOLVED_COLUMN"),
        ("CHANGE COLUMN v w STRING", "RENAME COLUMN instead"),
    ]:
        with pytest.raises(DeltaMergeError, match=error):
            _sql(spark, f"ALTER TABLE {t} {statement}")
    assert DeltaTable.forPath(spark, path).version() == version
    assert "Column Mapping" in _error(spark, f"ALTER TABLE {t} RENAME COLUMN v TO w")


def _error(spark, statement: str) -> str:
    try:
        _sql(spark, statement)
    except DeltaMergeError as e:
        return str(e)
    raise AssertionError("no error")


@pytest.mark.parametrize("mode", ["id"])  # name mode: the drop test and the Connect suite
def test_rename_columns_keeps_the_data_under_the_new_names(spark, tmp_path, mode: str) -> None:
    path = str(tmp_path / "t")
    t = _table(spark, path, mode)
    before = {f["name"]: f["metadata"][PHYS] for f in _fields(path)}
    top = max(f["metadata"][ID] for f in _fields(path))
    _sql(spark, f"ALTER TABLE {t} ADD COLUMNS (s.c DOUBLE FIRST)")  # a fresh id and physical name
    added = _fields(path)[2]["type"]["fields"][0]
    assert added["name"] == "c" and added["metadata"][ID] > top and added["metadata"][PHYS].startswith("col-")
    _sql(spark, f"ALTER TABLE {t} DROP COLUMN s.c")
    _sql(spark, f"ALTER TABLE {t} RENAME COLUMN v TO value")
    _sql(spark, f"ALTER TABLE {t} RENAME COLUMN s.a TO `a.b`")
    _sql(spark, f"ALTER TABLE {t} RENAME COLUMN p TO part")
    last = _last(spark, t)
    assert last["operation"] == "RENAME COLUMN"
    assert last["operationParameters"] == {"oldColumnPath": "p", "newColumnPath": "part"}
    meta = snapshot_for(path).metadata
    assert list(meta.partition_columns) == ["part"]
    after = {f["name"]: f["metadata"][PHYS] for f in _fields(path)}
    assert after["value"] == before["v"] and after["part"] == before["p"]
    df = deltamerge.read(spark, path)
    assert df.columns == ["id", "value", "s", "part"] and df.schema["s"].dataType.names == ["a.b", "b"]
    assert _rows(spark, path) == [
        (1, "a", (1, "x"), "p1"),
        (2, "b", (2, "y"), "p2"),
        (3, "c", (3, "z"), "p1"),
    ]
    # Partition pruning, data skipping and a MERGE by the new names.
    assert [r[0] for r in df.where("part = 'p2'").collect()] == [2]
    source = spark.createDataFrame([(3, "C", "p1"), (5, "e", "p2")], "id int, value string, part string")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id AND t.part = s.part")
        .whenMatchedUpdate(set={"value": "s.value", "s.`a.b`": "30"})
        .whenNotMatchedInsert(values={"id": "s.id", "value": "s.value", "part": "s.part"})
        .execute()
    )
    assert _rows(spark, path)[2:] == [(3, "C", (30, "z"), "p1"), (5, "e", None, "p2")]
    changes = read_changes(spark, path, DeltaTable.forPath(spark, path).version())
    assert sorted((r["id"], r["value"], r["_change_type"]) for r in changes.collect()) == [
        (3, "C", "update_postimage"),
        (3, "c", "update_preimage"),
        (5, "e", "insert"),
    ]
    # Time travel shows the names of its version; delta-rs reads the renamed table.
    assert deltamerge.read(spark, path, version=1).columns == ["id", "v", "s", "p"]
    assert [(r["id"], r["value"], r["part"]) for r in _rs_rows(path)] == [
        (1, "a", "p1"),
        (2, "b", "p2"),
        (3, "C", "p1"),
        (5, "e", "p2"),
    ]


def test_drop_columns_and_add_them_back_empty(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    t = _table(spark, path, "name")
    files = sorted(glob.glob(f"{path}/**/*.parquet", recursive=True))
    _sql(spark, f"ALTER TABLE {t} DROP COLUMNS (v, s.b)")
    assert _last(spark, t)["operationParameters"] == {"columns": '["v","s.b"]'}
    assert sorted(glob.glob(f"{path}/**/*.parquet", recursive=True)) == files  # the files keep the data
    assert _rows(spark, path) == [(1, (1,), "p1"), (2, (2,), "p2"), (3, (3,), "p1")]
    # A column added back under the same name is a new column: no old values show through.
    _sql(spark, f"ALTER TABLE {t} ADD COLUMNS (v STRING)")
    assert _rows(spark, path) == [(1, (1,), "p1", None), (2, (2,), "p2", None), (3, (3,), "p1", None)]
    assert [r["v"] for r in _rs_rows(path)] == [None, None, None]
    version = DeltaTable.forPath(spark, path).version()
    # The change data feed is not read across the drop in the new schema (Delta blocks it too),
    # unless asked to; up to the version before the drop it reads in that version's schema.
    with pytest.raises(DeltaMergeError, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"):
        read_changes(spark, path, 1)
    assert read_changes(spark, path, 1, version - 2).columns[:4] == ["id", "v", "s", "p"]
    unsafe = "spark.databricks.delta.changeDataFeed.unsafeBatchReadOnIncompatibleSchemaChanges.enabled"
    spark.conf.set(unsafe, "true")
    try:
        assert sorted(r["id"] for r in read_changes(spark, path, 1).collect()) == [1, 2, 3]
    finally:
        spark.conf.unset(unsafe)
    _sql(spark, f"ALTER TABLE {t} DROP COLUMN IF EXISTS nope")
    assert DeltaTable.forPath(spark, path).version() == version
    for statement, error in [
        ("DROP COLUMN nope", "UNRESOLVED_COLUMN"),
        ("DROP COLUMN p", "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN"),
        ("DROP COLUMN s.a", "DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA"),
        ("DROP COLUMN id.x", "DELTA_UNSUPPORTED_DROP_NESTED_COLUMN_FROM_NON_STRUCT_TYPE"),
    ]:
        with pytest.raises(DeltaMergeError, match=error):
            _sql(spark, f"ALTER TABLE {t} {statement}")
    assert DeltaTable.forPath(spark, path).version() == version


def test_constraints_and_generated_columns_keep_their_columns(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _sql(
        spark,
        f"""CREATE TABLE delta.`{path}` (id INT, v STRING, g INT GENERATED ALWAYS AS (id * 2), w INT)
            USING delta
            TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.constraints.pos' = 'w > 0')""",
    )
    t = f"delta.`{path}`"
    version = DeltaTable.forPath(spark, path).version()
    for statement, error in [
        ("RENAME COLUMN w TO w2", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"),
        ("DROP COLUMN w", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"),
        ("RENAME COLUMN id TO key", "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE"),
        ("DROP COLUMNS (v, id)", "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE"),
        ("ADD COLUMNS (h INT GENERATED ALWAYS AS (id + 1))", "DELTA_OPERATION_NOT_ALLOWED|not supported"),
    ]:
        with pytest.raises(DeltaMergeError, match=error):
            _sql(spark, f"ALTER TABLE {t} {statement}")
    assert DeltaTable.forPath(spark, path).version() == version
    _sql(spark, f"ALTER TABLE {t} RENAME COLUMN v TO name")  # no rule names it
    _sql(spark, f"ALTER TABLE {t} DROP COLUMN g")  # the generated column itself may go
    assert [f["name"] for f in _fields(path)] == ["id", "name", "w"]


def test_alter_column_comment_nullability_position_and_type(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _sql(spark, f"CREATE TABLE delta.`{path}` (id INT NOT NULL, v STRING, n INT) USING delta")
    t = f"delta.`{path}`"
    deltamerge.write(spark.createDataFrame([(1, "a", 5)], "id int, v string, n int"), path, mode="append")
    _sql(spark, f"ALTER TABLE {t} ALTER COLUMN v COMMENT 'the value'")
    _sql(spark, f"ALTER TABLE {t} ALTER COLUMN id DROP NOT NULL")
    _sql(spark, f"ALTER TABLE {t} ALTER COLUMN n FIRST")
    _sql(spark, f"ALTER TABLE {t} CHANGE COLUMN id id INT COMMENT 'key' AFTER v")
    last = _last(spark, t)
    assert last["operation"] == "CHANGE COLUMN" and last["operationParameters"]["position"] == "AFTER v"
    assert json.loads(last["operationParameters"]["column"])["metadata"] == {"comment": "key"}
    fields = _fields(path)
    assert [f["name"] for f in fields] == ["n", "v", "id"]
    assert fields[1]["metadata"] == {"comment": "the value"} and fields[2]["nullable"] is True
    assert _rows(spark, path) == [(5, "a", 1)]
    deltamerge.write(spark.createDataFrame([(6, "b", None)], "n int, v string, id int"), path, mode="append")
    # A type change needs type widening, and then only a widening.
    _sql(spark, f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"):
        _sql(spark, f"ALTER TABLE {t} ALTER COLUMN n TYPE SMALLINT")
    _sql(spark, f"ALTER TABLE {t} ALTER COLUMN n TYPE BIGINT")
    n = _fields(path)[0]
    assert n["type"] == "long"
    assert n["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert deltamerge.read(spark, path).schema["n"].dataType.simpleString() == "bigint"
    assert _rows(spark, path) == [(5, "a", 1), (6, "b", None)]
    deltamerge.write(
        spark.createDataFrame([(2**40, "c", 3)], "n long, v string, id int"), path, mode="append"
    )
    assert max(r[0] for r in _rows(spark, path)) == 2**40
