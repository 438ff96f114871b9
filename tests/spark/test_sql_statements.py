"""Delta SQL statements through deltamerge.sql: UPDATE, DELETE, CREATE TABLE [AS SELECT], ALTER TABLE
SET/UNSET TBLPROPERTIES, DESCRIBE HISTORY/DETAIL, VACUUM, RESTORE, OPTIMIZE and table_changes."""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql.types import StructType

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError, TableNotFoundError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark


def _sql(spark, text, args=None, **kwargs):
    return deltamerge.sql(spark, text, args, **kwargs)


@pytest.fixture
def people(spark, tmp_path):
    path = str(tmp_path / "people")
    _sql(
        spark,
        f"""CREATE TABLE people (id INT NOT NULL COMMENT 'key', name STRING, p STRING) USING delta
            PARTITIONED BY (p) LOCATION '{path}' COMMENT 'the people'
            TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', owner = 'me')""",
    )
    rows = [(i, f"n{i}", str(i % 2)) for i in range(8)]
    deltamerge.write(spark.createDataFrame(rows, "id int, name string, p string"), path, mode="append")
    yield path
    deltamerge.unregister_table(spark, "people")


def _rows(spark, query):
    return sorted(tuple(r) for r in _sql(spark, query).collect())


def test_create_table_and_describe(spark, people):
    detail = _sql(spark, "DESCRIBE DETAIL people").collect()[0]
    assert detail["name"] == "people" and detail["description"] == "the people"
    assert detail["partitionColumns"] == ["p"] and detail["numFiles"] == len(snapshot_for(people).files)
    assert detail["properties"] == {"delta.enableChangeDataFeed": "true", "owner": "me"}
    schema = snapshot_for(people).metadata.schema["fields"]
    assert schema[0] == {"name": "id", "type": "integer", "nullable": False, "metadata": {"comment": "key"}}
    history = _sql(spark, "DESCRIBE HISTORY people").collect()
    assert [h["operation"] for h in history] == ["WRITE", "CREATE TABLE"]
    latest = _sql(spark, f"describe history delta.`{people}` limit 1").collect()
    assert [h["version"] for h in latest] == [1]
    with pytest.raises(TableNotFoundError, match="TABLE_OR_VIEW_NOT_FOUND"):
        _sql(spark, "DESCRIBE HISTORY no_such_table")


def test_update_and_delete(spark, people):
    assert _sql(spark, "UPDATE people SET name = upper(name) WHERE id < 3").collect()[0][0] == 3
    assert _sql(spark, "DELETE FROM people AS x WHERE x.id = 5;").columns == ["num_affected_rows"]
    assert _sql(spark, "DELETE FROM people WHERE p = '0'").collect()[0][0] == 4  # metadata-only
    assert _rows(spark, "SELECT id, name FROM people") == [(1, "N1"), (3, "n3"), (7, "n7")]
    history = _sql(spark, "DESCRIBE HISTORY people LIMIT 3").collect()
    assert [h["operation"] for h in history] == ["DELETE", "DELETE", "UPDATE"]
    assert history[1]["operationParameters"] == {"predicate": '["(x.id = 5)"]'}
    changes = _rows(
        spark,
        "SELECT id, _change_type, _commit_version FROM table_changes('people', 2, 4) WHERE id <= 2",
    )
    assert changes == sorted(
        [
            (0, "update_preimage", 2),
            (0, "update_postimage", 2),
            (1, "update_preimage", 2),
            (1, "update_postimage", 2),
            (2, "update_preimage", 2),
            (2, "update_postimage", 2),
            (0, "delete", 4),
            (2, "delete", 4),
        ]
    )
    # SHOW TABLES rather than spark.catalog.listTables(): its Dataset[Table] cannot be decoded with
    # Spark's interpreted expressions, which make test runs with (tests/spark_settings.py).
    shown = [r["tableName"] for r in spark.sql("SHOW TABLES").collect()]
    assert [n for n in shown if n.startswith("__dm_table_changes")] == []
    by_path = _sql(spark, f"SELECT count(*) FROM table_changes_by_path('{people}', 3, 3)").collect()[0][0]
    assert by_path == 1
    with pytest.raises(DeltaMergeError, match=r"UPDATE \.\.\. FROM"):
        _sql(spark, "UPDATE people SET name = 'x' FROM people")


def test_alter_table_properties_enable_deletion_vectors(spark, people):
    _sql(spark, "ALTER TABLE people SET TBLPROPERTIES ('delta.enableDeletionVectors' = true, 'a.b' = 1)")
    last = _sql(spark, "DESCRIBE HISTORY people LIMIT 1").collect()[0]
    assert last["operation"] == "SET TBLPROPERTIES"
    assert last["operationParameters"] == {"properties": '{"delta.enableDeletionVectors":"true","a.b":"1"}'}
    snap = snapshot_for(people)
    assert "deletionVectors" in snap.protocol.reader_features and snap.files  # upgraded, data untouched
    _sql(spark, "DELETE FROM people WHERE id = 3")
    assert [f.deletion_vector.cardinality for f in snapshot_for(people).files if f.deletion_vector] == [1]
    _sql(spark, "ALTER TABLE people UNSET TBLPROPERTIES IF EXISTS ('a.b', 'missing')")
    assert "a.b" not in snapshot_for(people).metadata.configuration
    with pytest.raises(DeltaMergeError, match="DELTA_UNSET_NON_EXISTENT_PROPERTY"):
        _sql(spark, "ALTER TABLE people UNSET TBLPROPERTIES ('missing')")
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_CONFIGURATION_VALUE"):
        _sql(spark, "ALTER TABLE people SET TBLPROPERTIES ('delta.appendOnly' = 'maybe')")
    with pytest.raises(DeltaMergeError, match="not implemented"):
        _sql(spark, "ALTER TABLE people SET SERDEPROPERTIES ('k' = 'v')")


def test_restore_optimize_vacuum(spark, people):
    version = DeltaTable.forPath(spark, people).version()
    files = len(snapshot_for(people).files)
    _sql(spark, "DELETE FROM people WHERE id > 2")
    restored = _sql(spark, f"RESTORE TABLE people TO VERSION AS OF {version}").collect()[0]
    assert restored["num_of_files_after_restore"] == files
    assert len(_rows(spark, "SELECT * FROM people")) == 8
    ts = _sql(spark, "DESCRIBE HISTORY people LIMIT 1").collect()[0]["timestamp"]
    _sql(spark, "DELETE FROM people WHERE id = 0")
    _sql(spark, f"RESTORE people TIMESTAMP AS OF '{ts.strftime('%Y-%m-%d %H:%M:%S.%f')}'")
    assert len(_rows(spark, "SELECT * FROM people")) == 8

    deltamerge.write(
        spark.createDataFrame([(9, "n9", "1")], "id int, name string, p string"), people, mode="append"
    )
    out = _sql(spark, "OPTIMIZE people WHERE p = '1'").collect()[0]
    assert out["path"] == "file:" + people and out["metrics"]["numFilesRemoved"] >= 2
    assert (
        _sql(spark, "DESCRIBE HISTORY people LIMIT 1").collect()[0]["isolationLevel"] == "SnapshotIsolation"
    )
    assert len(_rows(spark, "SELECT * FROM people")) == 9
    with pytest.raises(DeltaMergeError, match="DELTA_ZORDERING_ON_PARTITION_COLUMN"):
        _sql(spark, "OPTIMIZE people ZORDER BY (p)")
    out = _sql(spark, "OPTIMIZE people WHERE p = '1' ZORDER BY id, name").collect()[0]
    assert out["metrics"]["zOrderStats"]["strategyName"] == "all"
    assert len(_rows(spark, "SELECT * FROM people")) == 9
    with pytest.raises(DeltaMergeError, match="DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"):
        _sql(spark, "VACUUM people RETAIN 0 HOURS")
    assert _sql(spark, "VACUUM people").count() == 0  # nothing is past the default retention
    assert RsTable(people).to_pyarrow_table().num_rows == 9


def test_create_table_as_select_and_replace(spark, tmp_path):
    path = str(tmp_path / "ctas")
    spark.createDataFrame([(1, "a"), (2, "b")], "id int, p string").createOrReplaceTempView("ctas_src")
    _sql(spark, f"CREATE TABLE delta.`{path}` USING DELTA PARTITIONED BY (p) AS SELECT * FROM ctas_src")
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(1, "a"), (2, "b")]
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    assert last["operation"] == "CREATE TABLE AS SELECT"
    assert set(last["operationMetrics"]) == {"numFiles", "numOutputRows", "numOutputBytes"}
    assert last["operationMetrics"]["numOutputRows"] == "2"
    _sql(spark, f"CREATE TABLE IF NOT EXISTS delta.`{path}` (x INT) USING delta")  # exists: no-op
    assert DeltaTable.forPath(spark, path).version() == 0
    _sql(spark, f"REPLACE TABLE delta.`{path}` (x BIGINT, y STRING) USING delta")
    assert deltamerge.read(spark, path).columns == ["x", "y"] and deltamerge.read(spark, path).count() == 0
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["operation"] == "REPLACE TABLE"
    _sql(spark, f"CREATE OR REPLACE TABLE delta.`{path}` USING delta AS SELECT id FROM ctas_src WHERE id = 2")
    assert [tuple(r) for r in deltamerge.read(spark, path).collect()] == [(2,)]
    assert RsTable(path).to_pyarrow_table().to_pylist() == [{"id": 2}]
    # An existing table gets a name with CREATE TABLE name ... LOCATION, without a commit.
    _sql(spark, f"CREATE TABLE ctas_named USING delta LOCATION '{path}'")
    assert _rows(spark, "SELECT * FROM ctas_named") == [(2,)]
    assert DeltaTable.forPath(spark, path).version() == 2
    deltamerge.unregister_table(spark, "ctas_named")
    # Other statements still go to Spark.
    _sql(spark, "CREATE OR REPLACE TEMPORARY VIEW passthrough_view AS SELECT 1 AS one")
    assert _sql(spark, "SELECT one FROM passthrough_view").collect()[0]["one"] == 1


def test_create_without_using_follows_the_default_source(spark, tmp_path):
    """Without USING, CREATE TABLE makes a table of spark.sql.sources.default: a Delta table when that
    is delta (as on Databricks); a delta.`path` target otherwise says to add USING delta."""
    path, named = str(tmp_path / "d"), str(tmp_path / "named")
    for text in (f"CREATE TABLE delta.`{path}` AS SELECT 1 AS id", f"CREATE TABLE delta.`{path}` (id INT)"):
        with pytest.raises(DeltaMergeError, match=r"SCHEMA_NOT_FOUND.*Add USING delta"):
            _sql(spark, text)
    assert not os.path.exists(path)
    spark.conf.set("spark.sql.sources.default", "delta")
    try:
        _sql(spark, f"CREATE TABLE delta.`{path}` AS SELECT 1 AS id")
        _sql(spark, f"CREATE TABLE no_using (id INT, s STRING) LOCATION '{named}'")
        _sql(spark, "INSERT INTO no_using VALUES (7, 'x')")
    finally:
        spark.conf.unset("spark.sql.sources.default")
        deltamerge.unregister_table(spark, "no_using")
    assert [tuple(r) for r in deltamerge.read(spark, path).collect()] == [(1,)]
    assert [tuple(r) for r in deltamerge.read(spark, named).collect()] == [(7, "x")]


def test_insert_into_and_overwrite(spark, people):
    _sql(spark, "INSERT INTO people VALUES (10, 'ten', '0'), (11, 'eleven', '1')")
    _sql(spark, "INSERT INTO people (p, id) SELECT '1', 12")  # a column list: name becomes NULL
    _sql(spark, f"WITH s AS (SELECT 13L AS id) INSERT INTO delta.`{people}` SELECT id, 'x', '0' FROM s")
    _sql(spark, "INSERT INTO people BY NAME SELECT '1' AS p, 14 AS id, 'y' AS name")
    assert _rows(spark, "SELECT id, name, p FROM people WHERE id >= 10") == [
        (10, "ten", "0"),
        (11, "eleven", "1"),
        (12, None, "1"),
        (13, "x", "0"),
        (14, "y", "1"),
    ]
    ops = [h["operation"] for h in _sql(spark, "DESCRIBE HISTORY people LIMIT 4").collect()]
    assert ops == ["WRITE"] * 4
    with pytest.raises(DeltaMergeError, match=r"INSERT_COLUMN_ARITY_MISMATCH\.NOT_ENOUGH_DATA_COLUMNS"):
        _sql(spark, "INSERT INTO people VALUES (20, 'twenty')")
    with pytest.raises(DeltaMergeError, match="UNRESOLVED_COLUMN"):
        _sql(spark, "INSERT INTO people (id, nope) VALUES (20, 'twenty')")
    with pytest.raises(Exception, match=r"CAST_OVERFLOW|CAST_INVALID_INPUT"):
        _sql(spark, "INSERT INTO people VALUES (99999999999, 'big', '0')")
    _sql(spark, "INSERT OVERWRITE TABLE people SELECT 1, 'one', '1'")
    assert _rows(spark, "SELECT * FROM people") == [(1, "one", "1")]
    assert RsTable(people).to_pyarrow_table().to_pylist() == [{"id": 1, "name": "one", "p": "1"}]


def test_insert_with_partition_clauses_and_replace_where(spark, spark_conf, people):
    """INSERT ... PARTITION (p = v) takes p from the clause and the other columns from the query;
    INSERT OVERWRITE ... PARTITION (p = v) replaces that partition only; REPLACE WHERE replaces the
    rows matching its condition (rows outside it are refused, as by Delta's replaceWhere);
    ``TABLE t`` is a query. Before, all but the last were refused (DELTA_UNSUPPORTED_OPERATION) and
    ``TABLE t`` failed with a Python AttributeError."""
    _sql(spark, "INSERT INTO people PARTITION (p = '2') VALUES (20, 'a')")
    _sql(spark, "INSERT INTO people PARTITION (p = '2') (name, id) SELECT 'b', 21")
    _sql(spark, "INSERT OVERWRITE people PARTITION (p = '0') SELECT 30, 'c'")
    assert _rows(spark, "SELECT id, name, p FROM people WHERE p <> '1'") == [
        (20, "a", "2"),
        (21, "b", "2"),
        (30, "c", "0"),
    ]
    assert _rows(spark, "SELECT count(*) FROM people WHERE p = '1'") == [(4,)]
    _sql(spark, "INSERT INTO people REPLACE WHERE p = '2' AND id > 20 SELECT 22, 'd', '2'")
    assert _rows(spark, "SELECT id, name FROM people WHERE p = '2'") == [(20, "a"), (22, "d")]
    with pytest.raises(DeltaMergeError, match="DELTA_REPLACE_WHERE_MISMATCH"):
        _sql(spark, "INSERT INTO people REPLACE WHERE p = '2' SELECT 23, 'e', '0'")
    with pytest.raises(DeltaMergeError, match="NON_PARTITION_COLUMN"):
        _sql(spark, "INSERT INTO people PARTITION (name = 'x') SELECT 24, '0'")
    spark_conf({"spark.sql.sources.partitionOverwriteMode": "dynamic"})
    _sql(spark, "INSERT OVERWRITE people PARTITION (p) SELECT 40, 'f', '2'")  # only partition 2
    assert _rows(spark, "SELECT p, count(*) FROM people GROUP BY p") == [("0", 1), ("1", 4), ("2", 1)]
    _sql(spark, f"INSERT INTO people TABLE delta.`{people}`")
    assert _rows(spark, "SELECT count(*) FROM people") == [(12,)]
    assert RsTable(people).to_pyarrow_table().num_rows == 12


def test_empty_schema_target(spark, spark_conf, tmp_path):
    """Delta's MergeIntoEmptySchemaTargetSuite: CREATE TABLE without columns makes a table with an empty
    schema; MERGE into it fails without schema evolution and adopts the source schema with it."""
    try:
        _sql(spark, f"CREATE TABLE empty_schema_target USING delta LOCATION '{tmp_path / 'target'}'")
        _sql(
            spark,
            f"CREATE TABLE populated_source (id INT, name STRING) USING delta LOCATION '{tmp_path / 's'}'",
        )
        _sql(spark, "INSERT INTO populated_source VALUES (1, 'a'), (2, 'b')")
        target = DeltaTable.forName(spark, "empty_schema_target")
        assert snapshot_for(target.path).metadata.schema["fields"] == []
        statement = (
            "INTO empty_schema_target USING populated_source AS s ON false WHEN NOT MATCHED THEN INSERT *"
        )
        with pytest.raises(DeltaMergeError, match="DELTA_MERGE_INTO_EMPTY_SCHEMA_TARGET") as err:
            _sql(spark, "MERGE " + statement)
        assert err.value.sql_state == "428GU"
        assert target.version() == 0
        # Delta (TahoeFileIndex): the empty table can be named and its schema seen, not scanned.
        assert spark.table("empty_schema_target").schema == StructType([])
        with pytest.raises(Exception, match="DELTA_READ_TABLE_WITHOUT_COLUMNS"):
            spark.table("empty_schema_target").count()
        with pytest.raises(Exception, match="DELTA_READ_TABLE_WITHOUT_COLUMNS"):
            deltamerge.read(spark, target.path).collect()
        spark_conf({"spark.databricks.delta.schema.autoMerge.enabled": "true"})
        _sql(spark, "MERGE WITH SCHEMA EVOLUTION " + statement)
        assert spark.table("empty_schema_target").schema == spark.table("populated_source").schema
        assert _rows(spark, "SELECT * FROM empty_schema_target") == [(1, "a"), (2, "b")]
        assert sorted(RsTable(target.path).to_pyarrow_table().to_pylist(), key=str) == [
            {"id": 1, "name": "a"},
            {"id": 2, "name": "b"},
        ]
        with pytest.raises(DeltaMergeError, match="DELTA_SCHEMA_NOT_PROVIDED"):
            _sql(spark, "CREATE OR REPLACE TABLE empty_schema_target USING delta")
    finally:
        for name in ("empty_schema_target", "populated_source"):
            deltamerge.unregister_table(spark, name)


def test_char_and_varchar_columns(spark, tmp_path):
    """CHAR(n) / VARCHAR(n) are stored as Delta strings with the declared type in the field metadata
    (as Spark and Delta store them, so delta-rs reads the table), and writes check the length
    (Spark's EXCEED_LIMIT_LENGTH; trailing spaces do not count) without leaving anything behind;
    CHAR values are padded to their length."""
    path = str(tmp_path / "cv")
    t = f"delta.`{path}`"
    _sql(spark, f"CREATE TABLE {t} (id INT, v VARCHAR(3), c CHAR(2), s STRUCT<x: VARCHAR(2)>) USING delta")
    fields = snapshot_for(path).metadata.schema["fields"]
    assert [(f["type"] if isinstance(f["type"], str) else "struct", f["metadata"]) for f in fields] == [
        ("integer", {}),
        ("string", {"__CHAR_VARCHAR_TYPE_STRING": "varchar(3)"}),
        ("string", {"__CHAR_VARCHAR_TYPE_STRING": "char(2)"}),
        ("struct", {"__CHAR_VARCHAR_TYPE_STRING": "struct<x:varchar(2)>"}),
    ]
    _sql(spark, f"INSERT INTO {t} VALUES (1, 'abc', 'x', named_struct('x', 'ab')), (2, 'de  ', NULL, NULL)")
    version = DeltaTable.forPath(spark, path).version()
    for statement in [
        f"INSERT INTO {t} VALUES (3, 'abcd', 'x', NULL)",
        f"INSERT INTO {t} VALUES (3, 'a', 'xyz', NULL)",
        f"INSERT INTO {t} VALUES (3, 'a', 'x', named_struct('x', 'abc'))",
        f"UPDATE {t} SET v = concat(v, 'zz') WHERE id = 1",
    ]:
        with pytest.raises(DeltaMergeError, match="EXCEED_LIMIT_LENGTH"):
            _sql(spark, statement)
    assert DeltaTable.forPath(spark, path).version() == version
    source = spark.createDataFrame([(1, "xyzw"), (5, "q")], "id int, v string")
    with pytest.raises(DeltaMergeError, match="limitation: 3"):
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(
            set={"v": "s.v"}
        ).execute()
    _sql(spark, f"ALTER TABLE {t} ADD COLUMNS (w VARCHAR(5))")
    assert snapshot_for(path).metadata.schema["fields"][-1]["metadata"] == {
        "__CHAR_VARCHAR_TYPE_STRING": "varchar(5)"
    }
    rows = sorted((r["id"], r["v"], r["c"]) for r in RsTable(path).to_pyarrow_table().to_pylist())
    assert rows == [(1, "abc", "x "), (2, "de  ", None)]  # CHAR stored padded, as Spark writes it


def test_create_over_an_existing_table_verifies_it(spark, tmp_path):
    """Delta's verifyTableMetadata: CREATE TABLE of a new name with the LOCATION of an existing
    table succeeds without a commit when the columns, partitioning, clustering and properties it
    gives match the table, and names the difference otherwise. By path (``delta.`path```) the
    catalog already finds the table exists: TABLE_OR_VIEW_ALREADY_EXISTS, IF NOT EXISTS a no-op."""
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    columns = "id BIGINT NOT NULL, s STRUCT<a: INT, b: STRING> COMMENT 'payload', c CHAR(3), p STRING"
    _sql(
        spark,
        f"CREATE TABLE {t} ({columns}) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.appendOnly' = 'false')",
    )
    for statement in (
        f"({columns}) USING delta PARTITIONED BY (p)",
        "USING delta",
        "USING delta AS SELECT 1L AS id",
    ):
        with pytest.raises(DeltaMergeError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
            _sql(spark, f"CREATE TABLE {t} {statement}")
        _sql(spark, f"CREATE TABLE IF NOT EXISTS {t} {statement}")
    props = "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.appendOnly' = 'false')"
    _sql(
        spark, f"CREATE TABLE existing_t ({columns}) USING delta PARTITIONED BY (p) LOCATION '{path}' {props}"
    )
    try:
        assert DeltaTable.forName(spark, "existing_t").version() == 0
    finally:
        deltamerge.unregister_table(spark, "existing_t")
    assert DeltaTable.forPath(spark, path).version() == 0
    _sql(spark, f"CREATE TABLE existing_t2 USING delta LOCATION '{path}'")  # nothing to compare
    deltamerge.unregister_table(spark, "existing_t2")
    for statement, error_class in [
        (f"({columns.replace('id BIGINT', 'id INT')}) USING delta PARTITIONED BY (p)", "SCHEME_MISMATCH"),
        (f"({columns.replace(' NOT NULL', '')}) USING delta PARTITIONED BY (p)", "SCHEME_MISMATCH"),
        (f"({columns.replace(', p STRING', '')}) USING delta", "SCHEME_MISMATCH"),
        (f"({columns.replace('payload', 'other')}) USING delta PARTITIONED BY (p)", "SCHEME_MISMATCH"),
        (f"({columns}) USING delta", "WITH_DIFFERENT_PARTITIONING"),
        ("USING delta TBLPROPERTIES ('delta.appendOnly' = 'true')", "WITH_DIFFERENT_PROPERTY"),
    ]:
        with pytest.raises(DeltaMergeError, match=f"DELTA_CREATE_TABLE_{error_class}"):
            _sql(spark, f"CREATE TABLE existing_t3 {statement} LOCATION '{path}'")
    assert DeltaTable.forPath(spark, path).version() == 0
    clustered = str(tmp_path / "c")
    _sql(spark, f"CREATE TABLE delta.`{clustered}` (id BIGINT, k STRING) USING delta CLUSTER BY (k)")
    at = f"LOCATION '{clustered}'"
    _sql(spark, f"CREATE TABLE clustered_t (id BIGINT, k STRING) USING delta CLUSTER BY (k) {at}")
    deltamerge.unregister_table(spark, "clustered_t")
    with pytest.raises(DeltaMergeError, match="DELTA_CREATE_TABLE_WITH_DIFFERENT_CLUSTERING"):
        _sql(spark, f"CREATE TABLE clustered_t (id BIGINT, k STRING) USING delta CLUSTER BY (id) {at}")
    with pytest.raises(DeltaMergeError, match="DELTA_CREATE_TABLE_WITH_DIFFERENT_CLUSTERING"):
        _sql(spark, f"CREATE TABLE clustered_t (id BIGINT, k STRING) USING delta {at}")
    # A CTAS at the location of a table (Delta's assertPathEmpty), a new table in a directory of
    # other files, any name the catalog has: refused, nothing written.
    with pytest.raises(DeltaMergeError, match="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"):
        _sql(spark, f"CREATE TABLE clustered_t USING delta {at} AS SELECT 1L AS id, 'a' AS k")
    files = tmp_path / "files"
    files.mkdir()
    (files / "part-0.parquet").write_bytes(b"not a table")
    for statement in (
        f"CREATE TABLE files_t (id BIGINT) USING delta LOCATION '{files}'",
        f"CREATE TABLE IF NOT EXISTS files_t USING delta LOCATION '{files}' AS SELECT 1L AS id",
        f"CREATE OR REPLACE TABLE delta.`{files}` (id BIGINT) USING delta",
    ):
        with pytest.raises(DeltaMergeError, match="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"):
            _sql(spark, statement)
    assert sorted(p.name for p in files.iterdir()) == ["part-0.parquet"]
    _sql(spark, f"CREATE TABLE named_t (id BIGINT) USING delta LOCATION '{tmp_path / 'named'}'")
    try:
        with pytest.raises(DeltaMergeError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
            _sql(spark, "CREATE TABLE named_t (id BIGINT) USING delta")
        _sql(spark, "CREATE TABLE IF NOT EXISTS named_t (id BIGINT) USING delta")
    finally:
        deltamerge.unregister_table(spark, "named_t")


def test_create_table_like(spark, tmp_path):
    """Delta's CREATE TABLE LIKE: the new, empty table has the source's protocol, schema (comments,
    generation expressions), partitioning, description and properties (check constraints too), the
    statement's TBLPROPERTIES on top; column mapping gives it ids of its own. A view gives its schema
    alone (with USING delta); the target must not exist."""
    src = str(tmp_path / "src")
    _sql(
        spark,
        f"CREATE TABLE delta.`{src}` (id BIGINT NOT NULL COMMENT 'key', s STRING, "
        "g BIGINT GENERATED ALWAYS AS (id * 2)) USING delta PARTITIONED BY (s) COMMENT 'source' "
        "TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.columnMapping.mode' = 'name', "
        "'delta.enableDeletionVectors' = 'true', 'my.key' = '1')",
    )
    _sql(spark, f"ALTER TABLE delta.`{src}` ADD CONSTRAINT pos CHECK (id > 0)")
    _sql(spark, f"INSERT INTO delta.`{src}` (id, s) VALUES (1, 'x')")
    copy, named = str(tmp_path / "copy"), str(tmp_path / "named")
    _sql(spark, f"CREATE TABLE delta.`{copy}` LIKE delta.`{src}`")  # the source's format: no USING
    _sql(
        spark,
        f"CREATE TABLE like_named LIKE delta.`{src}` USING delta "
        f"TBLPROPERTIES ('delta.appendOnly' = 'false', 'other' = 'x') LOCATION '{named}'",
    )
    try:
        source = snapshot_for(src)

        def logical(snap):
            return [
                (
                    f["name"],
                    f["type"],
                    f["nullable"],
                    {k: v for k, v in f["metadata"].items() if "Mapping" not in k},
                )
                for f in snap.metadata.schema["fields"]
            ]

        for path, overrides in ((copy, {}), (named, {"delta.appendOnly": "false", "other": "x"})):
            snap = snapshot_for(path)
            assert snap.version == 0 and snap.files == ()
            assert snap.protocol == source.protocol
            assert logical(snap) == logical(source)
            assert snap.metadata.partition_columns == ("s",) and snap.metadata.description == "source"
            assert dict(snap.metadata.configuration) == {**source.metadata.configuration, **overrides}
            assert {f["metadata"]["delta.columnMapping.id"] for f in snap.metadata.schema["fields"]} == {
                1,
                2,
                3,
            }
        assert [f.name for f in RsTable(copy).schema().fields] == ["id", "s", "g"]
        with pytest.raises(DeltaMergeError, match="DELTA_VIOLATE_CONSTRAINT"):  # the constraint came along
            _sql(spark, f"INSERT INTO delta.`{copy}` (id, s) VALUES (-1, 'y')")
        with pytest.raises(DeltaMergeError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
            _sql(spark, f"CREATE TABLE delta.`{copy}` LIKE delta.`{src}`")
        _sql(spark, f"CREATE TABLE IF NOT EXISTS delta.`{copy}` LIKE delta.`{src}`")
        spark.range(2).selectExpr("id", "'v' AS t").createOrReplaceTempView("like_view")
        _sql(spark, "CREATE TABLE like_from_view LIKE like_view USING delta")
        assert [(f.name, f.dataType.simpleString()) for f in spark.table("like_from_view").schema] == [
            ("id", "bigint"),
            ("t", "string"),
        ]
        assert spark.table("like_from_view").count() == 0
        # A clustered source's clustering columns; its history (in-commit timestamps' enablement,
        # type changes) stays behind.
        clustered, like_clustered = str(tmp_path / "clustered"), str(tmp_path / "like_clustered")
        _sql(
            spark,
            f"CREATE TABLE delta.`{clustered}` (id INT, k STRING) USING delta CLUSTER BY (k) "
            "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        )
        _sql(
            spark,
            f"ALTER TABLE delta.`{clustered}` SET TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
        )
        _sql(spark, f"ALTER TABLE delta.`{clustered}` ALTER COLUMN id TYPE BIGINT")
        _sql(spark, f"CREATE TABLE delta.`{like_clustered}` LIKE delta.`{clustered}`")
        detail = DeltaTable.forPath(spark, like_clustered).detail().collect()[0]
        assert list(detail["clusteringColumns"]) == ["k"]
        snap, source = snapshot_for(like_clustered), snapshot_for(clustered)
        assert snap.protocol == source.protocol
        assert "delta.typeChanges" not in str(snap.metadata.schema) and "delta.typeChanges" in str(
            source.metadata.schema
        )
        assert snap.metadata.schema["fields"][0]["type"] == "long"
        assert "delta.inCommitTimestampEnablementVersion" in source.metadata.configuration
        assert "delta.inCommitTimestampEnablementVersion" not in snap.metadata.configuration
        assert snap.metadata.configuration["delta.enableInCommitTimestamps"] == "true"
    finally:
        deltamerge.unregister_table(spark, "like_named")
        deltamerge.unregister_table(spark, "like_from_view")


def test_char_padding_inside_structs(spark, tmp_path):
    """CHAR fields are padded inside structs too (a null struct stays null), and a struct field name
    that needs quoting (``a.b``) is quoted in the declared type Spark parses on read."""
    path = str(tmp_path / "nested")
    t = f"delta.`{path}`"
    _sql(
        spark,
        f"CREATE TABLE {t} (id INT, c CHAR(3), s STRUCT<x: CHAR(4), `a.b`: CHAR(2), "
        "u: STRUCT<y: CHAR(3), z: INT>, v: VARCHAR(3)>) USING delta",
    )
    _sql(
        spark,
        f"INSERT INTO {t} VALUES (1, 'a', named_struct('x', 'p', 'a.b', 'q', 'u', named_struct('y', 'r', "
        "'z', 1), 'v', 'w')), (2, NULL, NULL), (3, 'bb ', named_struct('x', NULL, 'a.b', 'qq', 'u', NULL, "
        "'v', NULL))",
    )
    want = [
        {"id": 1, "c": "a  ", "s": {"x": "p   ", "a.b": "q ", "u": {"y": "r  ", "z": 1}, "v": "w"}},
        {"id": 2, "c": None, "s": None},
        {"id": 3, "c": "bb ", "s": {"x": None, "a.b": "qq", "u": None, "v": None}},
    ]
    stored = sorted(RsTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert stored == want
    read = sorted(
        (r.asDict(recursive=True) for r in deltamerge.read(spark, path).collect()), key=lambda r: r["id"]
    )
    assert read == want


def test_char_varchar_inside_arrays_and_maps(spark, tmp_path):
    """Elements, keys and values of arrays and maps declared CHAR/VARCHAR are length-checked (as
    Delta's CharVarcharConstraint) and CHAR ones padded (as Spark writes them); null containers and
    null elements stay null."""
    path = str(tmp_path / "nested")
    t = f"delta.`{path}`"
    _sql(
        spark,
        f"CREATE TABLE {t} (id INT, a ARRAY<CHAR(3)>, m MAP<CHAR(2), VARCHAR(4)>, "
        "s STRUCT<l: ARRAY<STRUCT<c: CHAR(2), n: INT>>>) USING delta",
    )
    _sql(
        spark,
        f"INSERT INTO {t} VALUES (1, array('a', NULL, 'bc '), map('k', 'vv'), "
        "named_struct('l', array(named_struct('c', 'x', 'n', 1), NULL))), (2, NULL, NULL, NULL)",
    )
    want = [
        {"id": 1, "a": ["a  ", None, "bc "], "m": [("k ", "vv")], "s": {"l": [{"c": "x ", "n": 1}, None]}},
        {"id": 2, "a": None, "m": None, "s": None},
    ]
    stored = sorted(RsTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert stored == want
    version = snapshot_for(path).version
    for values in (
        "array('abcd'), NULL, NULL",  # an element longer than CHAR(3)
        "NULL, map('k', 'vvvvv'), NULL",  # a value longer than VARCHAR(4)
        "NULL, map('kkk', 'v'), NULL",  # a key longer than CHAR(2)
        "NULL, NULL, named_struct('l', array(named_struct('c', 'xyz', 'n', 1)))",
    ):
        with pytest.raises(DeltaMergeError, match="EXCEED_LIMIT_LENGTH"):
            _sql(spark, f"INSERT INTO {t} VALUES (3, {values})")
    assert snapshot_for(path).version == version


def test_names_starting_with_a_digit(spark, tmp_path):
    """Spark's unquoted names may start with a digit (``1tbl``, ``2col``): ALTER TABLE and DESCRIBE
    HISTORY must find the table (they took ``1tbl`` for ``tbl``) and columns may be named so."""
    path = str(tmp_path / "digits")
    try:
        _sql(spark, f"CREATE TABLE 1tbl (id INT, v STRING) USING delta LOCATION '{path}'")
        _sql(spark, "INSERT INTO 1tbl VALUES (1, 'a')")
        _sql(spark, "ALTER TABLE 1tbl ADD COLUMNS (2col INT)")
        _sql(spark, "ALTER TABLE 1tbl SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
        _sql(spark, "ALTER TABLE 1tbl RENAME COLUMN v TO 3v")
        _sql(
            spark,
            "MERGE INTO 1tbl t USING (SELECT 1 id, 7 c) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET 2col = s.c",
        )
        assert deltamerge.read(spark, path).columns == ["id", "3v", "2col"]
        assert _rows(spark, "SELECT * FROM 1tbl") == [(1, "a", 7)]
        history = _sql(spark, "DESCRIBE HISTORY 1tbl").collect()
        assert [r["operation"] for r in history][:3] == ["MERGE", "RENAME COLUMN", "SET TBLPROPERTIES"]
    finally:
        deltamerge.unregister_table(spark, "1tbl")


@pytest.mark.parametrize("name", ["`sales q4`", "`ünï`"])
def test_names_that_need_quotes(spark, tmp_path, name):
    """A table named with a space or non-ASCII letters (quoted, as Spark's grammar asks): CREATE
    TABLE wrote the table and then failed creating its temp view ("Invalid view name"), leaving it
    unnamed; INSERT, UPDATE, DELETE, MERGE, DESCRIBE HISTORY and DROP TABLE find it now."""
    path = str(tmp_path / "quoted")
    try:
        _sql(spark, f"CREATE TABLE {name} (id INT, v STRING) USING delta LOCATION '{path}'")
        _sql(spark, f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
        _sql(spark, f"UPDATE {name} SET v = 'u' WHERE id = 1")
        _sql(spark, f"DELETE FROM {name} WHERE id = 2")
        source = "(SELECT 3 id, 'c' v) s"
        _sql(spark, f"MERGE INTO {name} t USING {source} ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
        assert _rows(spark, f"SELECT * FROM {name}") == [(1, "u"), (3, "c")]
        assert DeltaTable.forName(spark, name).toDF().count() == 2
        history = [r["operation"] for r in _sql(spark, f"DESCRIBE HISTORY {name}").collect()]
        assert history == ["MERGE", "DELETE", "UPDATE", "WRITE", "CREATE TABLE"]
        _sql(spark, f"DROP TABLE {name}")
        assert not spark.catalog.tableExists(name)
    finally:
        deltamerge.unregister_table(spark, name)


def test_delta_path_tables_inside_queries_and_time_travel(spark, tmp_path):
    """delta.`<path>` [VERSION|TIMESTAMP AS OF x] wherever a query reads a table: a MERGE source
    (direct, in a subquery, in a CTE), INSERT ... SELECT and a plain SELECT (Spark cannot resolve
    them without Delta's jars). Time travel on the source reads that snapshot (it was ignored); on
    the target it is a syntax error, as in Spark's grammar."""
    src, tgt = str(tmp_path / "src"), str(tmp_path / "tgt")
    deltamerge.write(spark.createDataFrame([(1, "a")], "id int, v string"), src)
    deltamerge.write(spark.createDataFrame([(1, "b"), (2, "c")], "id int, v string"), src, mode="overwrite")
    first = DeltaTable.forPath(spark, src).history().where("version = 0").collect()[0]["timestamp"]

    def reset():
        deltamerge.write(
            spark.createDataFrame([(1, "x"), (5, "y")], "id int, v string"), tgt, mode="overwrite"
        )

    upsert = "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    for source, expected in [
        (f"delta.`{src}` VERSION AS OF 0 s", [(1, "a"), (5, "y")]),
        (f"delta.`{src}` TIMESTAMP AS OF '{first.isoformat(sep=' ')}' AS s", [(1, "a"), (5, "y")]),
        (f"delta.`{src}` s", [(1, "b"), (2, "c"), (5, "y")]),
        (f"(SELECT * FROM delta.`{src}` VERSION AS OF 0 WHERE id > 0) s", [(1, "a"), (5, "y")]),
        (f"delta.`{src}@v0` s", [(1, "a"), (5, "y")]),  # delta-spark's path suffix
        (f"(SELECT * FROM delta.`{src}@V0`) s", [(1, "a"), (5, "y")]),
        (f"(SELECT * FROM delta.`{src}` WHERE v <> 'delta.`/nope`') s", [(1, "b"), (2, "c"), (5, "y")]),
    ]:
        reset()
        _sql(spark, f"MERGE INTO delta.`{tgt}` t USING {source} {upsert}")
        assert sorted(tuple(r) for r in deltamerge.read(spark, tgt).collect()) == expected, source
    reset()
    _sql(
        spark,
        f"WITH c AS (SELECT * FROM delta.`{src}` VERSION AS OF 0) "
        f"MERGE INTO delta.`{tgt}` t USING c s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'cte'",
    )
    assert sorted(tuple(r) for r in deltamerge.read(spark, tgt).collect()) == [(1, "cte"), (5, "y")]
    _sql(spark, f"INSERT INTO delta.`{tgt}` SELECT id + 10, v FROM delta.`{src}` FOR SYSTEM_VERSION AS OF 0")
    got = _sql(spark, f"SELECT * FROM delta.`{src}` VERSION AS OF 0 UNION ALL SELECT * FROM delta.`{tgt}`")
    assert sorted(tuple(r) for r in got.collect()) == [(1, "a"), (1, "cte"), (5, "y"), (11, "a")]
    assert not [r for r in spark.sql("SHOW TABLES").collect() if r.tableName.startswith("__dm_delta_")]
    version = DeltaTable.forPath(spark, tgt).version()
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR"):
        _sql(spark, f"MERGE INTO delta.`{tgt}` VERSION AS OF 0 t USING delta.`{src}` s {upsert}")
    with pytest.raises(DeltaMergeError, match="DELTA_VERSION_NOT_FOUND"):
        _sql(spark, f"MERGE INTO delta.`{tgt}` t USING delta.`{src}` VERSION AS OF 7 s {upsert}")
    with pytest.raises(DeltaMergeError, match="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"):
        _sql(spark, f"SELECT * FROM delta.`{src}` TIMESTAMP AS OF '2000-01-01'")
    assert DeltaTable.forPath(spark, tgt).version() == version


def test_sql_args_and_format_fields(spark, tmp_path):
    """deltamerge.sql takes spark.sql's ``args`` (named and positional parameter markers) and
    ``kwargs`` (``{df}`` fields: a DataFrame source of a MERGE), for MERGE, UPDATE and SELECT."""
    path = str(tmp_path / "params")
    deltamerge.write(
        spark.createDataFrame([(1, "x", 1.0), (5, "y", 2.0)], "id int, v string, d double"), path
    )
    src = spark.createDataFrame([(1, "A"), (2, "B")], "id int, v string")
    views = {r.tableName for r in spark.sql("SHOW TABLES").collect()}
    result = _sql(
        spark,
        "MERGE INTO delta.`" + path + "` t USING {src} s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = concat(s.v, {suffix}) "
        "WHEN NOT MATCHED THEN INSERT (id, v, d) VALUES (s.id, s.v, 0)",
        src=src,
        suffix="'!",
    )
    assert [tuple(r) for r in result.collect()] == [(2, 1, 0, 1)]
    assert {r.tableName for r in spark.sql("SHOW TABLES").collect()} == views  # the source's view is gone
    _sql(
        spark,
        f"UPDATE delta.`{path}` SET d = d * :f, v = :v WHERE id = :id AND v <> ':id'",
        {"f": 1.5, "v": "it's", "id": 1},
    )
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [
        (1, "it's", 1.5),
        (2, "B", 0.0),
        (5, "y", 2.0),
    ]
    _sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING (SELECT ? AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        [5],
    )
    got = _sql(spark, f"SELECT id, d::int AS di, ? AS q FROM delta.`{path}` WHERE id > ?", ["p", 0])
    assert sorted(tuple(r) for r in got.collect()) == [(1, 1, "p"), (2, 0, "p")]
    # IDENTIFIER(:name): the identifier clause with a bound name.
    _sql(spark, "DELETE FROM IDENTIFIER(:t) WHERE id = :id", {"t": f"delta.`{path}`", "id": 2})
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(1, "it's", 1.5)]
    with pytest.raises(DeltaMergeError, match="UNBOUND_SQL_PARAMETER"):
        _sql(spark, f"DELETE FROM delta.`{path}` WHERE id = :missing", {"other": 1})


def test_maintenance_on_what_is_not_a_delta_table(spark, tmp_path):
    """Delta's DELTA_TABLE_ONLY_OPERATION for a path without a Delta table and for a name Spark
    knows that is not one (a parquet view); a name that names nothing stays TABLE_OR_VIEW_NOT_FOUND."""
    plain = str(tmp_path / "plain")
    spark.range(2).write.parquet(plain)
    spark.read.parquet(plain).createOrReplaceTempView("plain_view")
    try:
        for statement in ("DESCRIBE HISTORY {}", "VACUUM {}", "OPTIMIZE {}", "RESTORE {} TO VERSION AS OF 0"):
            operation = statement.split(" {}")[0]
            with pytest.raises(TableNotFoundError, match="DELTA_TABLE_ONLY_OPERATION") as err:
                _sql(spark, statement.format(f"delta.`{plain}`"))
            assert err.value.sql_state == "0AKDD"
            assert str(err.value).endswith(
                f"`{plain}` is not a Delta table. {operation} is only supported for Delta tables."
            )
            with pytest.raises(TableNotFoundError, match=r"DELTA_TABLE_ONLY_OPERATION\] `plain_view` is not"):
                _sql(spark, statement.format("plain_view"))
            with pytest.raises(TableNotFoundError, match="TABLE_OR_VIEW_NOT_FOUND"):
                _sql(spark, statement.format("no_such_view"))
        assert not os.path.exists(os.path.join(plain, "_delta_log"))
    finally:
        spark.catalog.dropTempView("plain_view")
