"""deltamerge.write / deltamerge.read / DeltaTable basics: modes, partitioning, properties, time travel,
history, detail, vacuum, names."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def _df(spark, ids, part: str = "a"):  # type: ignore[no-untyped-def]
    """A one-partition DataFrame (so one file per table partition)."""
    return spark.createDataFrame([(i, f"v{i}", part) for i in ids], "id long, v string, p string").coalesce(1)


def _ids(spark, path: str, **kw) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(r.id for r in deltamerge.read(spark, path, **kw).select("id").collect())


def _commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _data_files(path: str) -> set[str]:
    out = set()
    for dirpath, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        out.update(os.path.relpath(os.path.join(dirpath, n), path) for n in names)
    return out


def _set_mtime(path: str, version: int, when: dt.datetime) -> None:
    ts = when.timestamp()
    os.utime(os.path.join(path, "_delta_log", f"{version:020d}.json"), (ts, ts))


# --- modes ------------------------------------------------------------------------------------------


def test_modes(spark, table_path: str) -> None:
    assert deltamerge.write(_df(spark, [1, 2]), table_path) == 0
    with pytest.raises(TableAlreadyExistsError, match=r"\[DELTA_PATH_EXISTS\].*already exist"):
        deltamerge.write(_df(spark, [3]), table_path)
    with pytest.raises(TableAlreadyExistsError):
        deltamerge.write(_df(spark, [3]), table_path, mode="errorifexists")
    assert deltamerge.write(_df(spark, [3]), table_path, mode="ignore") is None
    assert DeltaTable.forPath(spark, table_path).version() == 0
    assert deltamerge.write(_df(spark, [3]), table_path, mode="append") == 1
    assert _ids(spark, table_path) == [1, 2, 3]
    assert deltamerge.write(_df(spark, [7, 8]), table_path, mode="overwrite") == 2
    assert _ids(spark, table_path) == [7, 8]
    assert deltamerge.write(_df(spark, [9]), table_path, mode="Append") == 3  # case-insensitive
    assert _ids(spark, table_path) == [7, 8, 9]
    # Overwrite removes every earlier file, with full remove actions.
    removes = [a["remove"] for a in _commit(table_path, 2) if "remove" in a]
    adds_before = {a["add"]["path"] for v in (0, 1) for a in _commit(table_path, v) if "add" in a}
    assert {r["path"] for r in removes} == adds_before
    assert all(r["dataChange"] and r["extendedFileMetadata"] and "size" in r for r in removes)


def test_a_table_deleted_and_written_again_at_its_path_is_the_new_table(spark, table_path: str) -> None:
    """A notebook that removes a table's directory and creates it again: the new table's commits
    have the old one's names, and every read, write and MERGE must see the new files."""
    import shutil

    deltamerge.write(_df(spark, [1, 2]), table_path)
    assert _ids(spark, table_path) == [1, 2]
    shutil.rmtree(table_path)
    assert deltamerge.write(_df(spark, [5, 6]), table_path) == 0
    assert _ids(spark, table_path) == [5, 6]
    table = DeltaTable.forPath(spark, table_path)
    result = (
        table.alias("t")
        .merge(_df(spark, [6, 7]).alias("s"), "t.id = s.id")
        .whenMatchedDelete()
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert tuple(result.first()) == (2, 0, 1, 1)
    assert _ids(spark, table_path) == [5, 7]
    assert [r.version for r in table.history().collect()] == [1, 0]


def test_ignore_and_append_create_missing_table(spark, tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert deltamerge.write(_df(spark, [1]), a, mode="ignore") == 0
    assert deltamerge.write(_df(spark, [2]), b, mode="append") == 0
    assert _ids(spark, a) == [1] and _ids(spark, b) == [2]


def test_overwrite_keeps_table_id_and_properties(spark, table_path: str) -> None:
    deltamerge.write(
        _df(spark, [1]), table_path, configuration={"delta.logRetentionDuration": "interval 60 days"}
    )
    meta0 = next(a["metaData"] for a in _commit(table_path, 0) if "metaData" in a)
    deltamerge.write(_df(spark, [2]), table_path, mode="overwrite")
    assert not any("metaData" in a for a in _commit(table_path, 1))  # same schema: no metadata change
    deltamerge.write(
        spark.createDataFrame([(5, 1.5)], "id long, w double"),
        table_path,
        mode="overwrite",
        overwrite_schema=True,
    )
    meta2 = next(a["metaData"] for a in _commit(table_path, 2) if "metaData" in a)
    assert meta2["id"] == meta0["id"]
    assert meta2["configuration"] == {"delta.logRetentionDuration": "interval 60 days"}
    assert [r.asDict() for r in deltamerge.read(spark, table_path).collect()] == [{"id": 5, "w": 1.5}]


def test_append_by_name_with_missing_columns_and_widening(spark, table_path: str) -> None:
    deltamerge.write(spark.createDataFrame([(1, "a", 1.0)], "id long, v string, x double"), table_path)
    # Columns matched by name (any order, any case); missing ones become null; int -> long is safe.
    deltamerge.write(spark.createDataFrame([("b", 2)], "V string, id int"), table_path, mode="append")
    got = sorted((r.id, r.v, r.x) for r in deltamerge.read(spark, table_path).collect())
    assert got == [(1, "a", 1.0), (2, "b", None)]
    assert (
        DeltaTable.forPath(spark, table_path).toDF().schema.simpleString()
        == "struct<id:bigint,v:string,x:double>"
    )


def test_merge_schema_adds_column(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [1]), table_path)
    extra = spark.createDataFrame([(2, "v2", "a", True)], "id long, v string, p string, flag boolean")
    deltamerge.write(extra, table_path, mode="append", merge_schema=True)
    rows = sorted(deltamerge.read(spark, table_path).collect(), key=lambda r: r.id)
    assert [r.flag for r in rows] == [None, True]


# --- partitioning and properties ---------------------------------------------------------------------


def test_partition_by(spark, table_path: str) -> None:
    df = spark.createDataFrame([(1, "x", 10), (2, "y", 20), (3, "y", None)], "id long, p string, q int")
    deltamerge.write(df, table_path, partition_by=["p", "q"])
    meta = next(a["metaData"] for a in _commit(table_path, 0) if "metaData" in a)
    assert meta["partitionColumns"] == ["p", "q"]
    adds = [a["add"] for a in _commit(table_path, 0) if "add" in a]
    assert sorted(((a["partitionValues"]["p"], a["partitionValues"]["q"]) for a in adds), key=repr) == [
        ("x", "10"),
        ("y", "20"),
        ("y", None),
    ]
    for a in adds:
        assert a["path"].startswith(f"p={a['partitionValues']['p']}/q=")
        stats = json.loads(a["stats"])
        assert set(stats["minValues"]) == {"id"}  # partition columns are not in stats
    detail = DeltaTable.forPath(spark, table_path).detail().collect()[0]
    assert detail.partitionColumns == ["p", "q"]
    # Appends keep the table's partitioning (partition_by may be omitted or repeated, any case).
    deltamerge.write(
        spark.createDataFrame([(4, "z", 1)], "id long, p string, q int"), table_path, mode="append"
    )
    deltamerge.write(
        spark.createDataFrame([(5, "z", 1)], "id long, p string, q int"),
        table_path,
        "append",
        partition_by=["P", "Q"],
    )
    got = sorted(((r.id, r.p, r.q) for r in deltamerge.read(spark, table_path).collect()), key=repr)
    assert got == [(1, "x", 10), (2, "y", 20), (3, "y", None), (4, "z", 1), (5, "z", 1)]
    assert deltamerge.read(spark, table_path).columns == ["id", "p", "q"]
    with pytest.raises(SchemaMismatchError, match=r"DELTA_METADATA_MISMATCH.*do not match"):
        deltamerge.write(_df(spark, [6]), table_path, mode="append", partition_by="id")


def test_partition_values_from_directories_equal_the_log(
    spark, table_path: str, monkeypatch, spark_conf
) -> None:
    """Spark parses partition values from the directory names when they give the log's values
    (strings that look like numbers, dates or null stay strings); the rows equal those of the
    lookup join (the column name `_p=x` is escaped in the directory names too: Delta allows it with
    partitionColumnValidity off, and other engines write it). A directory that disagrees with the
    log is not trusted: the log's value wins."""
    from deltamerge.spark import scan

    spark_conf({"spark.databricks.delta.partitionColumnValidity.enabled": "false"})
    strings = ["007", "1.50", "2024-01-01", "true", "null", "a b", "50%", "us/east", "k=v", "", None]
    data = [(i, s, i % 3 - 1 if i % 4 else None, dt.date(2024, 1, 1 + i % 2)) for i, s in enumerate(strings)]
    df = spark.createDataFrame(data, "id long, `_p=x` string, q int, d date")
    deltamerge.write(df, table_path, partition_by=["_p=x", "q", "d"])
    expected = sorted(((i, s or None, q, d) for i, s, q, d in data), key=repr)
    layouts: list[object] = []
    real = scan._hive_layout
    monkeypatch.setattr(scan, "_hive_layout", lambda *a: layouts.append(real(*a)) or layouts[-1])
    fast = sorted((tuple(r) for r in deltamerge.read(spark, table_path).collect()), key=repr)
    assert layouts and all(layout is not None for layout in layouts)
    monkeypatch.setattr(scan, "_hive_layout", lambda *a: None)
    joined = sorted((tuple(r) for r in deltamerge.read(spark, table_path).collect()), key=repr)
    assert fast == joined == expected
    # A commit whose partition value disagrees with its file's directory: the log wins.
    monkeypatch.setattr(scan, "_hive_layout", real)
    adds = [a["add"] for a in _commit(table_path, 0) if "add" in a]
    one = next(a for a in adds if a["partitionValues"]["_p=x"] == "007")
    moved = {**one, "partitionValues": {**one["partitionValues"], "q": "42"}}
    removed = {"path": one["path"], "deletionTimestamp": 1, "dataChange": True}
    with open(os.path.join(table_path, "_delta_log", f"{1:020d}.json"), "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"remove": removed}) + "\n" + json.dumps({"add": moved}) + "\n")
    DeltaLog.clear_cache()
    got = {r.id: r.q for r in deltamerge.read(spark, table_path).collect()}
    assert got[0] == 42 and len(got) == len(data)


def test_configuration_becomes_table_properties(spark, table_path: str) -> None:
    conf = {
        "delta.enableChangeDataFeed": "true",
        "delta.checkpointInterval": 3,
        "delta.appendOnly": False,
        "my.own.key": "x y",
    }
    deltamerge.write(_df(spark, [1]), table_path, configuration=conf)  # type: ignore[arg-type]
    meta = next(a["metaData"] for a in _commit(table_path, 0) if "metaData" in a)
    want = {
        "delta.enableChangeDataFeed": "true",
        "delta.checkpointInterval": "3",
        "delta.appendOnly": "false",
        "my.own.key": "x y",
    }
    assert meta["configuration"] == want
    protocol = next(a["protocol"] for a in _commit(table_path, 0) if "protocol" in a)
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (1, 4)  # CDF is writer version 4
    detail = DeltaTable.forPath(spark, table_path).detail().collect()[0]
    assert detail.properties == want
    assert (detail.minReaderVersion, detail.minWriterVersion) == (1, 4)
    # The table's own checkpoint interval is honoured.
    for i in range(3):
        deltamerge.write(_df(spark, [10 + i]), table_path, mode="append")
    assert os.path.exists(os.path.join(table_path, "_delta_log", f"{3:020d}.checkpoint.parquet"))
    # Properties given on append are ignored, as delta-spark does for DataFrame writes.
    deltamerge.write(_df(spark, [20]), table_path, mode="append", configuration={"other": "1"})
    assert DeltaTable.forPath(spark, table_path).detail().collect()[0].properties == want


def test_append_only_table(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [1]), table_path, configuration={"delta.appendOnly": "true"})
    deltamerge.write(_df(spark, [2]), table_path, mode="append")
    with pytest.raises(deltamerge.DeltaMergeError, match=r"\[DELTA_CANNOT_MODIFY_APPEND_ONLY\]"):
        deltamerge.write(_df(spark, [3]), table_path, mode="overwrite")
    assert _ids(spark, table_path) == [1, 2]
    assert _data_files(table_path) == {
        a["add"]["path"] for v in (0, 1) for a in _commit(table_path, v) if "add" in a
    }


# --- time travel -------------------------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [0]), table_path)
    deltamerge.write(_df(spark, [1]), table_path, mode="append")
    deltamerge.write(_df(spark, [2]), table_path, mode="overwrite")
    base = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    for v in range(3):
        _set_mtime(table_path, v, base + dt.timedelta(minutes=v))
    DeltaLog.clear_cache()

    assert _ids(spark, table_path, version=0) == [0]
    assert _ids(spark, table_path, version=1) == [0, 1]
    assert _ids(spark, table_path, version=2) == [2]
    assert _ids(spark, table_path, timestamp="2024-03-01 12:00:00") == [0]
    assert _ids(spark, table_path, timestamp="2024-03-01T12:01:30") == [0, 1]
    assert _ids(spark, table_path, timestamp="2024-03-01 12:02:00.000") == [2]
    assert _ids(spark, table_path, timestamp="2024-03-01T13:01:30+01:00") == [0, 1]
    assert _ids(spark, table_path, timestamp=int((base + dt.timedelta(minutes=1)).timestamp() * 1000)) == [
        0,
        1,
    ]
    assert _ids(spark, table_path, timestamp=base + dt.timedelta(seconds=30)) == [0]
    with pytest.raises(VersionNotFoundError, match="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"):
        deltamerge.read(spark, table_path, timestamp="2024-03-01 11:59:59")
    with pytest.raises(VersionNotFoundError, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):
        deltamerge.read(spark, table_path, timestamp="2024-03-01 12:03:00")
    with pytest.raises(
        VersionNotFoundError, match=r"\[DELTA_VERSION_NOT_FOUND\].*latest version of the table is 2"
    ):
        deltamerge.read(spark, table_path, version=3)
    with pytest.raises(InvalidArgumentError, match="either version or timestamp"):
        deltamerge.read(spark, table_path, version=1, timestamp="2024-03-01 12:00:00")
    with pytest.raises(InvalidArgumentError, match="DELTA_TIMESTAMP_INVALID"):
        deltamerge.read(spark, table_path, timestamp="yesterday")


def test_time_travel_timestamp_uses_session_time_zone(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [0]), table_path)
    deltamerge.write(_df(spark, [1]), table_path, mode="append")
    base = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    _set_mtime(table_path, 0, base)
    _set_mtime(table_path, 1, base + dt.timedelta(hours=1))
    DeltaLog.clear_cache()
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        # 04:30 in Los Angeles is 12:30 UTC: between the two commits.
        assert _ids(spark, table_path, timestamp="2024-03-01 04:30:00") == [0]
        assert _ids(spark, table_path, timestamp="2024-03-01 13:00:00Z") == [0, 1]
        assert _ids(spark, table_path, timestamp="2024-03-01 05:00:00") == [0, 1]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


# --- history and detail ----------------------------------------------------------------------------


def test_history(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [1, 2]), table_path, partition_by="p")
    deltamerge.write(_df(spark, [3], part="b"), table_path, mode="append")
    deltamerge.write(_df(spark, [4]), table_path, mode="overwrite")
    when = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)
    _set_mtime(table_path, 0, when)
    DeltaLog.clear_cache()
    history = DeltaTable.forPath(spark, table_path).history()
    assert history.columns == [
        "version",
        "timestamp",
        "userId",
        "userName",
        "operation",
        "operationParameters",
        "clusterId",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "operationMetrics",
        "userMetadata",
        "engineInfo",
    ]
    rows = history.collect()
    assert [r.version for r in rows] == [2, 1, 0]
    assert [r.operation for r in rows] == ["WRITE"] * 3
    assert [r.operationParameters["mode"] for r in rows] == ["Overwrite", "Append", "ErrorIfExists"]
    assert rows[2].operationParameters["partitionBy"] == '["p"]'
    assert [r.readVersion for r in rows] == [1, 0, None]
    assert [r.isBlindAppend for r in rows] == [False, True, False]
    assert rows[1].isolationLevel == "WriteSerializable"
    assert rows[0].engineInfo.startswith("deltamerge/")
    m0, m1, m2 = (r.operationMetrics for r in rows[::-1])
    assert m0["numOutputRows"] == "2" and m0["numFiles"] == "1"
    assert m1["numOutputRows"] == "1" and m1["numFiles"] == "1"
    assert m2["numOutputRows"] == "1" and int(m2["numOutputBytes"]) > 0
    # The timestamp column is the commit instant, whatever the Python process's zone.
    ms = history.where("version = 0").selectExpr("unix_millis(timestamp)").first()[0]
    assert ms == int(when.timestamp() * 1000)
    assert [r.version for r in DeltaTable.forPath(spark, table_path).history(1).collect()] == [2]


def test_detail(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [1, 2]), table_path, partition_by=["p"], configuration={"k": "v"})
    deltamerge.write(_df(spark, [3], part="b"), table_path, mode="append")
    detail = DeltaTable.forPath(spark, table_path).detail()
    assert detail.columns == [
        "format",
        "id",
        "name",
        "description",
        "location",
        "createdAt",
        "lastModified",
        "partitionColumns",
        "clusteringColumns",
        "numFiles",
        "sizeInBytes",
        "properties",
        "minReaderVersion",
        "minWriterVersion",
        "tableFeatures",
    ]
    d = detail.collect()[0]
    snap = DeltaLog.for_table(table_path).update()
    assert d.format == "delta"
    assert d.id == snap.metadata.id
    assert d.location == "file:" + os.path.abspath(table_path)
    assert d.partitionColumns == ["p"] and d.clusteringColumns == []
    assert d.numFiles == 2 == len(snap.files)
    assert d.sizeInBytes == sum(f.size for f in snap.files) > 0
    assert d.properties == {"k": "v"}
    assert (d.minReaderVersion, d.minWriterVersion) == (1, 2)
    assert d.createdAt <= d.lastModified


# --- vacuum --------------------------------------------------------------------------------------------


def test_vacuum(spark, table_path: str) -> None:
    deltamerge.write(_df(spark, [1, 2]), table_path, partition_by="p")
    deltamerge.write(_df(spark, [3], part="b"), table_path, mode="append")
    deltamerge.write(_df(spark, [4, 5], part="c"), table_path, mode="overwrite")
    table = DeltaTable.forPath(spark, table_path)
    live = {a["add"]["path"] for a in _commit(table_path, 2) if "add" in a}
    removed = {a["remove"]["path"] for a in _commit(table_path, 2) if "remove" in a}
    assert len(removed) == 2 and _data_files(table_path) == live | removed
    # An untracked file and an abandoned staging directory, both old.
    stray = os.path.join(table_path, "p=c", "stray.parquet")
    staging = os.path.join(table_path, ".dm-staging-abandoned")
    os.makedirs(staging)
    for f in (stray, os.path.join(staging, "part-0.parquet")):
        with open(f, "wb") as fh:
            fh.write(b"x")
    for f in _data_files(table_path) | {".dm-staging-abandoned"}:
        os.utime(os.path.join(table_path, f), (1_000_000_000, 1_000_000_000))

    # Default retention (7 days): the tombstones are fresh, so the removed files stay.
    deleted = [r.path for r in table.vacuum().collect()]
    assert not any(p.endswith(tuple(removed)) for p in deleted)
    assert removed <= _data_files(table_path)

    with pytest.raises(
        InvalidArgumentError, match=r"\[DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT\].*retentionDurationCheck"
    ):
        table.vacuum(0)
    assert removed <= _data_files(table_path)

    spark.conf.set(RETENTION_CHECK, "false")
    try:
        # DRY RUN lists what would go and deletes nothing.
        listed = deltamerge.sql(spark, f"VACUUM delta.`{table_path}` RETAIN 0 HOURS DRY RUN").collect()
        assert removed <= _data_files(table_path)
        deleted = table.vacuum(0).collect()
    finally:
        spark.conf.unset(RETENTION_CHECK)
    assert sorted(listed) == sorted(deleted) and {os.path.join(table_path, p) for p in removed} <= {
        r.path for r in listed
    }
    assert _data_files(table_path) == live
    assert not os.path.exists(staging)
    assert DeltaLog.for_table(table_path).latest_version() == 2  # vacuum commits nothing
    assert _ids(spark, table_path) == [4, 5]
    assert DeltaTable.forPath(spark, table_path).toDF().count() == 2


def test_vacuum_keeps_files_of_live_versions_with_escaped_paths(spark, table_path: str) -> None:
    df = spark.createDataFrame([(1, "a b%c"), (2, "日本/x")], "id long, p string")
    deltamerge.write(df, table_path, partition_by="p")
    deltamerge.write(spark.createDataFrame([(3, "a b%c")], "id long, p string"), table_path, mode="append")
    for f in _data_files(table_path):
        os.utime(os.path.join(table_path, f), (1_000_000_000, 1_000_000_000))
    before = _data_files(table_path)
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        deleted = DeltaTable.forPath(spark, table_path).vacuum(0).collect()
    finally:
        spark.conf.unset(RETENTION_CHECK)
    assert deleted == []
    assert _data_files(table_path) == before
    assert _ids(spark, table_path) == [1, 2, 3]


# --- names ---------------------------------------------------------------------------------------------


def test_is_delta_table_and_for_path(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert not DeltaTable.isDeltaTable(spark, path)
    with pytest.raises(TableNotFoundError, match=r"\[DELTA_MISSING_DELTA_TABLE\]") as info:
        DeltaTable.forPath(spark, path)
    assert info.value.getErrorClass() == "DELTA_MISSING_DELTA_TABLE"
    os.makedirs(os.path.join(path, "_delta_log"))
    assert not DeltaTable.isDeltaTable(spark, path)
    with pytest.raises(TableNotFoundError):
        DeltaTable.forPath(spark, path)
    deltamerge.write(_df(spark, [1]), path)
    assert DeltaTable.isDeltaTable(spark, path)
    assert DeltaTable.isDeltaTable(spark, "file:" + path)
    table = DeltaTable.forPath(spark, path)
    assert table.path == os.path.abspath(path)
    assert [r.id for r in table.toDF().collect()] == [1]
    assert DeltaTable.forName(spark, f"delta.`{path}`").version() == 0


def test_register_table_and_spark_sql(spark, table_path: str) -> None:
    name = "dm_write_read_names"
    deltamerge.write(_df(spark, [1]), table_path)
    deltamerge.register_table(spark, name, table_path)
    try:
        assert [r.id for r in spark.sql(f"SELECT id FROM {name}").collect()] == [1]
        deltamerge.write(_df(spark, [2]), table_path, mode="append")
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == [1, 2]
        deltamerge.write(_df(spark, [3]), table_path, mode="overwrite")
        assert [r.id for r in spark.sql(f"SELECT id FROM {name} ORDER BY id").collect()] == [3]
        assert DeltaTable.forName(spark, name).version() == 2
        assert DeltaTable.forName(spark, name.upper()).path == os.path.abspath(table_path)
    finally:
        deltamerge.unregister_table(spark, name)
    with pytest.raises(TableNotFoundError, match="DELTA_MISSING_DELTA_TABLE"):
        DeltaTable.forName(spark, name)


def test_register_table_by_file_uri(spark, table_path: str) -> None:
    """A name registered with a ``file:`` URI names the same table as its plain path: commits through
    either refresh the name's view."""
    name = "dm_write_read_uri"
    deltamerge.write(_df(spark, [1]), table_path)
    deltamerge.register_table(spark, name, "file://" + os.path.abspath(table_path))
    try:
        assert DeltaTable.forName(spark, name).path == os.path.abspath(table_path)
        deltamerge.write(_df(spark, [2]), table_path, mode="append")
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == [1, 2]
    finally:
        deltamerge.unregister_table(spark, name)


@pytest.mark.parametrize("form", ["file:", "file://", "relative"])
def test_sql_dml_on_a_file_uri_or_relative_path(spark, tmp_path: Path, monkeypatch, form: str) -> None:
    """``delta.`file:/...``` and a relative path (after the Python process changed its directory, as a
    notebook does; the JVM keeps its own) name the table for SQL MERGE, UPDATE, DELETE and EXPLAIN as
    the absolute path does. They reached the merge unresolved: a ``file:`` root matched none of the
    files Spark's scan reported (KeyError), a relative one was read from the JVM's directory."""
    monkeypatch.chdir(tmp_path)
    name = {"file:": f"file:{tmp_path}/t", "file://": f"file://{tmp_path}/t", "relative": "t"}[form]
    deltamerge.write(_df(spark, [1, 2, 3]), str(tmp_path / "t"))
    source = spark.createDataFrame([(2, "s2", "a"), (4, "s4", "a")], "id long, v string, p string")
    source.createOrReplaceTempView("dm_paths_src")
    target = f"delta.`{name}`"
    merge = (
        f"MERGE INTO {target} t USING dm_paths_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert "MERGE" in str(deltamerge.sql(spark, "EXPLAIN " + merge).collect()[0][0]).upper()
    assert deltamerge.sql(spark, merge).collect()[0][0] == 2
    assert deltamerge.sql(spark, f"UPDATE {target} SET v = 'u' WHERE id = 1").collect()[0][0] == 1
    assert deltamerge.sql(spark, f"DELETE FROM {target} WHERE v = 's4'").collect()[0][0] == 1
    rows = sorted((r.id, r.v) for r in deltamerge.read(spark, str(tmp_path / "t")).collect())
    assert rows == [(1, "u"), (2, "s2"), (3, "v3")]
    assert [r.operation for r in DeltaTable.forPath(spark, name).history().collect()] == [
        "DELETE",
        "UPDATE",
        "MERGE",
        "WRITE",
    ]
