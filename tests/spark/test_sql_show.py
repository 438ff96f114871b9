"""``SHOW TBLPROPERTIES``, ``SHOW PARTITIONS`` and ``TRUNCATE TABLE`` through ``deltamerge.sql``,
as Delta answers them (DeltaTableV2.properties, ShowDeltaPartitionsCommand,
TruncateDeltaTableCommand). Spark alone sees deltamerge's tables as views: it showed no
properties and refused SHOW PARTITIONS and TRUNCATE."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

import deltamerge
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog
from deltamerge.sql_dialect import DIALECT, DeltamergeSpark40

pytestmark = pytest.mark.spark


def _sql(spark, text):  # type: ignore[no-untyped-def]
    return deltamerge.sql(spark, text)


def _rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [tuple(r) for r in df.collect()]


def test_show_tblproperties(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id INT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.appendOnly' = 'false', 'owner.team' = 'data')",
    )
    assert _rows(_sql(spark, f"SHOW TBLPROPERTIES delta.`{path}`")) == [
        ("delta.appendOnly", "false"),
        ("delta.minReaderVersion", "1"),
        ("delta.minWriterVersion", "2"),
        ("owner.team", "data"),
    ]
    assert _rows(_sql(spark, f"SHOW TBLPROPERTIES delta.`{path}` ('owner.team')")) == [("owner.team", "data")]
    missing = _rows(_sql(spark, f"SHOW TBLPROPERTIES delta.`{path}` (nope)"))
    assert missing == [("nope", f"Table delta.`{path}` does not have property: nope")]
    # Table features are listed as Delta lists them; a registered name works too.
    features = str(tmp_path / "f")
    _sql(
        spark,
        f"CREATE TABLE feats (id INT, s STRING) USING delta CLUSTER BY (id) LOCATION '{features}' "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )
    try:
        props = dict(_rows(_sql(spark, "SHOW TBLPROPERTIES feats")))
    finally:
        deltamerge.unregister_table(spark, "feats")
    assert props["delta.enableDeletionVectors"] == "true"
    assert (props["delta.minReaderVersion"], props["delta.minWriterVersion"]) == ("3", "7")
    assert props["delta.feature.deletionVectors"] == "supported"
    assert props["delta.feature.clustering"] == "supported"
    assert json.loads(props["clusteringColumns"]) == [["id"]]
    # Any other table is Spark's.
    spark.sql("CREATE TABLE plain_parquet (id INT) USING parquet TBLPROPERTIES ('k' = 'v')")
    try:
        assert ("k", "v") in _rows(_sql(spark, "SHOW TBLPROPERTIES plain_parquet"))
    finally:
        spark.sql("DROP TABLE plain_parquet")


def test_show_partitions(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id INT, d DATE, r STRING) USING delta PARTITIONED BY (d, r) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    )
    _sql(
        spark,
        f"INSERT INTO delta.`{path}` VALUES (1, DATE'2024-01-01', 'eu'), (2, DATE'2024-01-01', 'us'), "
        "(3, DATE'2024-01-02', NULL), (4, DATE'2024-01-02', 'eu')",
    )
    shown = _sql(spark, f"SHOW PARTITIONS delta.`{path}`")
    assert shown.columns == ["d", "r"]
    assert shown.schema["d"].dataType.simpleString() == "date"
    day1, day2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    assert _rows(shown) == [(day1, "eu"), (day1, "us"), (day2, None), (day2, "eu")]
    assert _rows(_sql(spark, f"SHOW PARTITIONS delta.`{path}` PARTITION (r = 'eu')")) == [
        (day1, "eu"),
        (day2, "eu"),
    ]
    assert _rows(_sql(spark, f"SHOW PARTITIONS delta.`{path}` PARTITION (d = '2024-01-02', r = 'eu')")) == [
        (day2, "eu")
    ]
    # A partition whose rows are all deleted is gone, as from a read of the table.
    _sql(spark, f"DELETE FROM delta.`{path}` WHERE id = 2")
    assert (day1, "us") not in _rows(_sql(spark, f"SHOW PARTITIONS delta.`{path}`"))
    with pytest.raises(DeltaMergeError, match=r"\[id\] are specified") as info:
        _sql(spark, f"SHOW PARTITIONS delta.`{path}` PARTITION (id = 1)")
    assert info.value.error_class == "DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_COLUMN"
    flat = str(tmp_path / "flat")
    deltamerge.write(spark.range(2), flat)
    with pytest.raises(DeltaMergeError, match="not partitioned") as info:
        _sql(spark, f"SHOW PARTITIONS delta.`{flat}`")
    assert info.value.error_class == "DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_TABLE"


def test_truncate_table(spark, tmp_path: Path) -> None:
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(6).selectExpr("id", "CAST(id % 2 AS STRING) AS p"),
        path,
        partition_by=["p"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    files = len(DeltaLog.for_table(path).update().files)
    with pytest.raises(DeltaMergeError) as info:
        _sql(spark, f"TRUNCATE TABLE delta.`{path}` PARTITION (p = '0')")
    assert info.value.error_class == "DELTA_TRUNCATE_TABLE_PARTITION_NOT_SUPPORTED"
    _sql(spark, f"TRUNCATE TABLE delta.`{path}`")
    assert deltamerge.read(spark, path).count() == 0
    assert RsTable(path).to_pyarrow_table().num_rows == 0
    last = deltamerge.DeltaTable.forPath(spark, path).history(1).first()
    assert last is not None and last.operation == "TRUNCATE"
    assert last.operationParameters == {}
    assert last.operationMetrics["numRemovedFiles"] == str(files)
    from deltamerge.cdf_read import read_changes

    changes = sorted((r.id, r._change_type) for r in read_changes(spark, path, 1, None).collect())
    assert changes == [(i, "delete") for i in range(6)]
    # Nothing to remove: no commit.
    _sql(spark, f"TRUNCATE TABLE delta.`{path}`")
    assert DeltaLog.for_table(path).update().version == 1
    # An append-only table keeps its rows.
    kept = str(tmp_path / "kept")
    deltamerge.write(spark.range(3), kept, configuration={"delta.appendOnly": "true"})
    with pytest.raises(DeltaMergeError, match="appendOnly"):
        _sql(spark, f"TRUNCATE TABLE delta.`{kept}`")
    assert deltamerge.read(spark, kept).count() == 3
    assert sorted(os.listdir(os.path.join(kept, "_delta_log")))[-1].startswith("00000000000000000000")


def test_describe_shows_partitioning_clustering_and_details(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id INT COMMENT 'key', v STRING, d DATE) USING delta "
        "PARTITIONED BY (d) COMMENT 'events' TBLPROPERTIES ('a' = 'b')",
    )
    columns = [("id", "int", "key"), ("v", "string", None), ("d", "date", None)]
    partitions = [
        ("# Partition Information", "", ""),
        ("# col_name", "data_type", "comment"),
        ("d", "date", None),
    ]
    assert _rows(_sql(spark, f"DESCRIBE delta.`{path}`")) == columns + partitions
    assert _rows(_sql(spark, f"DESC TABLE EXTENDED delta.`{path}`")) == columns + partitions + [
        ("", "", ""),
        ("# Detailed Table Information", "", ""),
        ("Name", f"delta.`{path}`", ""),
        ("Type", "MANAGED", ""),
        ("Comment", "events", ""),
        ("Location", f"file:{path}", ""),
        ("Provider", "delta", ""),
        ("Table Properties", "[a=b,delta.minReaderVersion=1,delta.minWriterVersion=2]", ""),
    ]
    clustered = str(tmp_path / "c")
    _sql(spark, f"CREATE TABLE delta.`{clustered}` (id INT, s STRING) USING delta CLUSTER BY (s)")
    assert _rows(_sql(spark, f"DESCRIBE delta.`{clustered}`"))[2:] == [
        ("# Clustering Information", "", ""),
        ("# col_name", "data_type", "comment"),
        ("s", "string", None),
    ]


def test_spark_sql_sends_them_to_deltamerge_for_registered_names(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(4).selectExpr("id", "CAST(id % 2 AS STRING) AS p"), path, partition_by=["p"])
    deltamerge.register_table(spark, "shown", path)
    deltamerge.configure(spark)
    try:
        assert ("delta.minWriterVersion", "2") in _rows(spark.sql("SHOW TBLPROPERTIES shown"))
        assert _rows(spark.sql("SHOW PARTITIONS shown")) == [("0",), ("1",)]
        assert ("# Partition Information", "", "") in _rows(spark.sql("DESCRIBE TABLE EXTENDED shown"))
        spark.sql("TRUNCATE TABLE shown")
        assert deltamerge.read(spark, path).count() == 0
    finally:
        deltamerge.unconfigure()
        deltamerge.unregister_table(spark, "shown")


def test_alter_table_rename_to_and_set_location(spark, spark_conf, tmp_path: Path) -> None:
    first, second, other = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")
    deltamerge.write(spark.range(2), first)
    deltamerge.write(spark.range(3), second)
    deltamerge.write(spark.range(1).selectExpr("CAST(id AS INT) AS id"), other)
    deltamerge.register_table(spark, "named_a", first)
    deltamerge.register_table(spark, "taken", second)
    try:
        with pytest.raises(DeltaMergeError) as info:
            _sql(spark, "ALTER TABLE named_a RENAME TO taken")
        assert info.value.error_class == "TABLE_OR_VIEW_ALREADY_EXISTS"
        _sql(spark, "ALTER TABLE named_a RENAME TO named_b")
        assert _sql(spark, "SELECT count(*) FROM named_b").first()[0] == 2
        with pytest.raises(Exception, match="named_a"):
            _sql(spark, "SELECT * FROM named_a").collect()
        _sql(spark, f"ALTER TABLE named_b SET LOCATION '{second}'")
        assert _sql(spark, "SELECT count(*) FROM named_b").first()[0] == 3
        with pytest.raises(DeltaMergeError) as info:
            _sql(spark, f"ALTER TABLE named_b SET LOCATION '{other}'")  # id INT, not BIGINT
        assert info.value.error_class == "DELTA_SET_LOCATION_SCHEMA_MISMATCH"
        spark_conf({"spark.databricks.delta.alterLocation.bypassSchemaCheck": "true"})
        _sql(spark, f"ALTER TABLE named_b SET LOCATION '{other}'")
        assert _sql(spark, "SELECT count(*) FROM named_b").first()[0] == 1
        with pytest.raises(DeltaMergeError) as info:
            _sql(spark, f"ALTER TABLE named_b SET LOCATION '{tmp_path / 'nothing'}'")
        assert info.value.error_class == "DELTA_MISSING_DELTA_TABLE"
        with pytest.raises(DeltaMergeError) as info:
            _sql(spark, f"ALTER TABLE delta.`{first}` SET LOCATION '{second}'")
        assert info.value.error_class == "DELTA_CANNOT_SET_LOCATION_ON_PATH_IDENTIFIER"
    finally:
        for name in ("named_a", "named_b", "taken"):
            deltamerge.unregister_table(spark, name)


def test_show_create_table_round_trips(spark, tmp_path: Path) -> None:
    path, copy = str(tmp_path / "t"), str(tmp_path / "copy")
    _sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id INT NOT NULL COMMENT 'the key', code VARCHAR(3), "
        "s STRUCT<a: INT, b: ARRAY<DECIMAL(10,2)>>, m MAP<STRING, BIGINT>, d DATE) USING delta "
        "PARTITIONED BY (d) COMMENT 'it''s mine' TBLPROPERTIES ('x' = 'y')",
    )
    text = _sql(spark, f"SHOW CREATE TABLE delta.`{path}`").first()[0]
    # Spark 4.0 reads 'it''s mine' as two adjacent literals: its mine.
    comment = "'its mine'" if DIALECT is DeltamergeSpark40 else "'it\\'s mine'"
    assert text == (
        f"CREATE TABLE delta.`{path}` (\n"
        "  id INT NOT NULL COMMENT 'the key',\n"
        "  code VARCHAR(3),\n"
        "  s STRUCT<a: INT, b: ARRAY<DECIMAL(10,2)>>,\n"
        "  m MAP<STRING, BIGINT>,\n"
        "  d DATE)\n"
        "USING delta\n"
        "PARTITIONED BY (d)\n"
        f"COMMENT {comment}\n"
        f"LOCATION 'file:{path}'\n"
        "TBLPROPERTIES (\n"
        "  'delta.minReaderVersion' = '1',\n"
        "  'delta.minWriterVersion' = '2',\n"
        "  'x' = 'y')\n"
    )
    # The statement makes the same table elsewhere.
    _sql(spark, text.replace(path, copy))
    again = _sql(spark, f"SHOW CREATE TABLE delta.`{copy}`").first()[0]
    assert again == text.replace(path, copy)
