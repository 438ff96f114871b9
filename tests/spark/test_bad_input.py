"""Bad input gets a clear error and leaves the table exactly as it was.

"Exactly as it was": the same ``_delta_log`` files with the same bytes (so the same version), the
same data files on disk, and -- when the table is readable -- the same rows.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import (
    DeltaMergeError,
    InvalidArgumentError,
    LogCorruptedError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

DDL = "id long, v string, p string"


def _df(spark, ids, part: str = "a"):  # type: ignore[no-untyped-def]
    return spark.createDataFrame([(i, f"v{i}", part) for i in ids], DDL).coalesce(1)


def _files(path: str) -> dict[str, str]:
    """Every file below ``path`` (log included) with a hash of its bytes."""
    out = {}
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            full = os.path.join(dirpath, n)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = hashlib.sha1(fh.read()).hexdigest()
    return out


def _rows(spark, path: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    DeltaLog.clear_cache()
    return sorted(tuple(r) for r in deltamerge.read(spark, path).collect())


def _commit_file(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


def _write_commit(path: str, version: int, actions: list[dict]) -> None:
    with open(_commit_file(path, version), "w", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(a) + "\n" for a in actions))
    DeltaLog.clear_cache()


def _metadata(path: str) -> dict:
    with open(_commit_file(path, 0), encoding="utf-8") as fh:
        return next(json.loads(line)["metaData"] for line in fh if '"metaData"' in line)


@pytest.fixture
def table(spark, table_path: str) -> str:
    """A partitioned two-version table: ids 1, 2 in p=a; 3 in p=b."""
    deltamerge.write(_df(spark, [1, 2]), table_path, partition_by="p")
    deltamerge.write(_df(spark, [3], "b"), table_path, mode="append")
    return table_path


@pytest.fixture
def unchanged(spark, table):  # type: ignore[no-untyped-def]
    """Assert (after the test body) that the table's files and rows did not change."""
    files, rows = _files(table), _rows(spark, table)
    yield table
    assert _files(table) == files
    assert _rows(spark, table) == rows
    assert DeltaTable.forPath(spark, table).version() == 1


# --- schema mismatches -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_extra_column_without_merge_schema(spark, unchanged: str, mode: str) -> None:
    df = spark.createDataFrame([(9, "v", "a", 1.0)], DDL + ", extra double")
    with pytest.raises(
        SchemaMismatchError, match=r"\[DELTA_METADATA_MISMATCH\].*extra.*merge_schema"
    ) as info:
        deltamerge.write(df, unchanged, mode=mode)
    assert info.value.getErrorClass() == "DELTA_METADATA_MISMATCH"
    assert ("overwrite_schema=True" in str(info.value)) == (mode == "overwrite")  # Delta's OVERWRITE_REQUIRED


@pytest.mark.parametrize(
    "ddl",
    [
        "id string, v string, p string",
        "id double, v string, p string",
        "id struct<a:int>, v string, p string",
    ],
    ids=["string", "double", "struct"],
)
@pytest.mark.parametrize("merge_schema", [False, True])
def test_incompatible_type(spark, unchanged: str, ddl: str, merge_schema: bool) -> None:
    df = spark.createDataFrame([], ddl)
    with pytest.raises(SchemaMismatchError, match=r"\[DELTA_FAILED_TO_MERGE_FIELDS\].*'id'.*bigint"):
        deltamerge.write(df, unchanged, mode="append", merge_schema=merge_schema)


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.createDataFrame([(1, 2, "a")], "id long, x long, p string").toDF("id", "id", "p"),
        lambda s: s.createDataFrame([(1, 2, "a")], "id long, ID long, p string"),
        lambda s: s.sql("SELECT 1L AS id, named_struct('a', 1, 'A', 2) AS st, 'a' AS p"),
        lambda s: s.sql("SELECT 1L AS id, array(named_struct('x', 1, 'x', 2)) AS arr, 'a' AS p"),
    ],
    ids=["same", "case", "nested", "in-array"],
)
def test_duplicate_column_names(spark, unchanged: str, tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    df = make(spark)
    with pytest.raises(SchemaMismatchError, match=r"\[DELTA_DUPLICATE_COLUMNS_FOUND\].*duplicate"):
        deltamerge.write(df, unchanged, mode="append")
    new = str(tmp_path / "new")
    with pytest.raises(SchemaMismatchError, match="DELTA_DUPLICATE_COLUMNS_FOUND"):
        deltamerge.write(df, new)
    assert not os.path.exists(new)


# --- arguments ---------------------------------------------------------------------------------------------


def test_unknown_mode(spark, unchanged: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\[DELTA_ILLEGAL_ARGUMENT\] Unknown save mode 'upsert'"):
        deltamerge.write(_df(spark, [9]), unchanged, mode="upsert")
    with pytest.raises(ValueError, match="Unknown save mode"):  # also a ValueError
        deltamerge.write(_df(spark, [9]), str(tmp_path / "new"), mode="merge")
    assert not os.path.exists(tmp_path / "new")


def test_partition_column_not_in_schema(spark, unchanged: str, tmp_path: Path) -> None:
    new = str(tmp_path / "new")
    with pytest.raises(
        InvalidArgumentError, match=r"\[DELTA_ILLEGAL_ARGUMENT\].*'nope'.*not found in schema"
    ):
        deltamerge.write(_df(spark, [1]), new, partition_by=["p", "nope"])
    assert not os.path.exists(new)
    # On an existing table, a different partitioning is refused.
    mismatch = r"\[DELTA_METADATA_MISMATCH\].*Partition columns do not match.*Given: \[{}\] Table: \[p\]"
    with pytest.raises(SchemaMismatchError, match=mismatch.format("v")):
        deltamerge.write(_df(spark, [9]), unchanged, mode="append", partition_by="v")
    with pytest.raises(SchemaMismatchError, match=mismatch.format("nope") + ".*overwrite_schema=True"):
        deltamerge.write(_df(spark, [9]), unchanged, mode="overwrite", partition_by=["nope"])


def test_all_columns_as_partition_columns(spark, tmp_path: Path) -> None:
    new = str(tmp_path / "new")
    with pytest.raises(InvalidArgumentError, match=r"DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION"):
        deltamerge.write(
            spark.createDataFrame([(1, "a")], "id long, p string"), new, partition_by=["p", "id"]
        )
    assert not os.path.exists(new)


# --- not a table ------------------------------------------------------------------------------------------


def test_path_that_is_not_a_table(spark, tmp_path: Path) -> None:
    empty_log = tmp_path / "empty_log"
    (empty_log / "_delta_log").mkdir(parents=True)
    plain = tmp_path / "plain"
    spark.range(2).write.parquet(str(plain))  # a parquet directory, not a Delta table
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for path in (tmp_path / "missing", empty_log, plain, a_file):
        before = _files(str(path)) if path.is_dir() else None
        with pytest.raises(TableNotFoundError, match=r"\[DELTA_MISSING_DELTA_TABLE\].*not a Delta table"):
            deltamerge.read(spark, str(path))
        with pytest.raises(TableNotFoundError, match=r"\[DELTA_MISSING_DELTA_TABLE\]") as info:
            DeltaTable.forPath(spark, str(path))
        assert info.value.getErrorClass() == "DELTA_MISSING_DELTA_TABLE"
        assert not DeltaTable.isDeltaTable(spark, str(path))
        if before is not None:
            assert _files(str(path)) == before
    assert not (tmp_path / "missing").exists()


def test_bad_time_travel(spark, unchanged: str) -> None:
    with pytest.raises(VersionNotFoundError, match=r"\[DELTA_VERSION_NOT_FOUND\].*-1"):
        deltamerge.read(spark, unchanged, version=-1)
    with pytest.raises(VersionNotFoundError, match="latest version of the table is 1"):
        deltamerge.read(spark, unchanged, version=5)


# --- a damaged log ---------------------------------------------------------------------------------------


def _truncated(path: str) -> bytes:
    with open(_commit_file(path, 1), "rb") as fh:
        good = fh.read()
    return good[: len(good) * 2 // 3]  # cut in the middle of an action


@pytest.mark.parametrize(
    "content",
    [
        _truncated,
        lambda _: b'{"commitInfo":{"timestamp":1}}\n{"add":{"path":"p=a/x.parquet","partitionV',
        lambda _: b"\x00\xff\xfe not json at all",
        lambda _: b'{"commitInfo":{"timestamp":1}}\n{"add":{"path":"p=a/x.parquet"}}}\n',
    ],
    ids=["truncated", "cut-mid-string", "binary", "extra-brace"],
)
def test_corrupt_last_commit(spark, table: str, content) -> None:  # type: ignore[no-untyped-def]
    rows = _rows(spark, table)
    with open(_commit_file(table, 2), "wb") as fh:
        fh.write(content(table))
    DeltaLog.clear_cache()
    files = _files(table)
    for attempt in (
        lambda: deltamerge.read(spark, table),
        lambda: DeltaTable.forPath(spark, table).toDF(),
        lambda: deltamerge.write(_df(spark, [9]), table, mode="append"),
        lambda: deltamerge.write(_df(spark, [9]), table, mode="overwrite"),
    ):
        with pytest.raises(
            LogCorruptedError, match=r"\[DELTA_LOG_CORRUPTED\].*00000000000000000002\.json"
        ) as info:
            attempt()
        assert info.value.getErrorClass() == "DELTA_LOG_CORRUPTED"
    assert _files(table) == files  # no new commit, no new data file
    # Removing the damaged commit gives back the table as it was.
    os.remove(_commit_file(table, 2))
    assert _rows(spark, table) == rows
    assert deltamerge.read(spark, table, version=1).count() == 3


def test_missing_commit_in_the_middle(spark, table: str) -> None:
    deltamerge.write(_df(spark, [4]), table, mode="append")
    os.rename(_commit_file(table, 1), _commit_file(table, 1) + ".bak")
    DeltaLog.clear_cache()
    files = _files(table)
    with pytest.raises(LogCorruptedError, match="DELTA_LOG_CORRUPTED"):
        deltamerge.read(spark, table)
    with pytest.raises(LogCorruptedError, match="DELTA_LOG_CORRUPTED"):
        deltamerge.write(_df(spark, [9]), table, mode="append")
    assert _files(table) == files


# --- unsupported table features ------------------------------------------------------------------------


def _column_mapping_commit(path: str, protocol: dict) -> list[dict]:
    # As another engine upgrades a table to column mapping: the existing names become the physical
    # names (the files already hold them).
    meta = _metadata(path)
    schema = json.loads(meta["schemaString"])
    for i, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    meta["schemaString"] = json.dumps(schema)
    meta["configuration"] = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": str(i)}
    return [
        {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES", "operationParameters": {}}},
        {"protocol": protocol},
        {"metaData": meta},
    ]


@pytest.mark.parametrize(
    "protocol",
    [
        {"minReaderVersion": 2, "minWriterVersion": 5},
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["columnMapping"],
            "writerFeatures": ["appendOnly", "invariants", "columnMapping"],
        },
    ],
    ids=["legacy-2-5", "features-3-7"],
)
def test_column_mapping_name_mode_is_read_and_written(spark, table: str, protocol: dict) -> None:
    _write_commit(table, 2, _column_mapping_commit(table, protocol))
    count = deltamerge.read(spark, table).count()
    assert DeltaTable.forPath(spark, table).toDF().count() == count
    source = _df(spark, [9])
    deltamerge.write(source, table, mode="append")
    DeltaTable.forPath(spark, table).alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).whenNotMatchedInsertAll().execute()
    assert deltamerge.read(spark, table).count() == count + 1
    assert deltamerge.read(spark, table, version=1).count() == 3


def _refused_writes(spark, path: str):  # type: ignore[no-untyped-def]
    source = _df(spark, [9])
    return {
        "append": lambda: deltamerge.write(source, path, mode="append"),
        "overwrite": lambda: deltamerge.write(source, path, mode="overwrite"),
        "error": lambda: deltamerge.write(source, path),
        "merge": lambda: (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenNotMatchedInsertAll()
            .execute()
        ),
    }


def test_unknown_writer_feature_refuses_writes_only(spark, table: str) -> None:
    rows = _rows(spark, table)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "futureThing"]}
    _write_commit(
        table, 2, [{"commitInfo": {"timestamp": 1, "operation": "UPGRADE"}}, {"protocol": protocol}]
    )
    files = _files(table)
    assert _rows(spark, table) == rows  # readers do not care about writer features
    for name, write in _refused_writes(spark, table).items():
        if name == "error":
            continue
        with pytest.raises(
            UnsupportedFeatureError, match=r"\[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE\].*'futureThing'"
        ):
            write()
    assert deltamerge.write(_df(spark, [9]), table, mode="ignore") is None
    assert _files(table) == files
    assert _rows(spark, table) == rows


def test_unknown_reader_feature_refuses_reads_and_writes(spark, table: str) -> None:
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["futureThing"],
        "writerFeatures": ["futureThing"],
    }
    _write_commit(
        table, 2, [{"commitInfo": {"timestamp": 1, "operation": "UPGRADE"}}, {"protocol": protocol}]
    )
    files = _files(table)
    with pytest.raises(
        UnsupportedFeatureError, match=r"\[DELTA_UNSUPPORTED_FEATURES_FOR_READ\].*'futureThing'"
    ):
        deltamerge.read(spark, table)
    for write in _refused_writes(spark, table).values():
        with pytest.raises(DeltaMergeError, match=r"futureThing|already exist"):
            write()
    assert _files(table) == files


@pytest.mark.parametrize(
    ("protocol", "readable"),
    [
        ({"minReaderVersion": 1, "minWriterVersion": 8}, True),
        ({"minReaderVersion": 4, "minWriterVersion": 8}, False),
    ],
    ids=["writer-8", "reader-4"],
)
def test_future_protocol_versions(spark, table: str, protocol: dict, readable: bool) -> None:
    rows = _rows(spark, table)
    _write_commit(
        table, 2, [{"commitInfo": {"timestamp": 1, "operation": "UPGRADE"}}, {"protocol": protocol}]
    )
    files = _files(table)
    if readable:
        assert _rows(spark, table) == rows
    else:
        with pytest.raises(
            UnsupportedFeatureError, match=r"DELTA_INVALID_PROTOCOL_VERSION.*reader version 4"
        ):
            deltamerge.read(spark, table)
    with pytest.raises(UnsupportedFeatureError, match="version"):
        deltamerge.write(_df(spark, [9]), table, mode="append")
    assert _files(table) == files


def test_spark_analysis_errors_pass_through(spark, unchanged: str) -> None:
    # A DataFrame that fails while it is written (not before) leaves nothing behind either.
    bad = spark.range(1).selectExpr(
        "id", "CAST(raise_error('boom from the source') AS STRING) AS v", "'a' AS p"
    )
    with pytest.raises(Exception, match="boom from the source"):
        deltamerge.write(bad, unchanged, mode="append")
    with pytest.raises(AnalysisException):
        deltamerge.write(
            spark.range(1).selectExpr("id", "no_such_col AS v", "'a' AS p"), unchanged, mode="append"
        )
