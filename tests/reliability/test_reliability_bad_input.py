"""Bad input: every kind gets a clear error (its class, what is wrong, what to do) and leaves the
table unchanged: the same files with the same bytes under the table root (log included, so the
same version; no staged or discarded file left behind) and, when readable, the same rows.

Kinds: damaged logs (corrupt, truncated, ill-typed, gapped commits; missing data files and
checkpoint parts; unknown actions, features and protocol versions), data that does not fit
(wrong types, extra columns, NULLs in NOT NULL columns, CHECK constraints and column invariants on
append, overwrite and MERGE), bad MERGE statements (invalid clauses, unresolvable names, oversized
or malformed SQL, ambiguous matches, bad builder arguments), and odd but valid input that must
simply work (special characters in paths and partition values, empty sources and targets,
500-column schemas).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import unquote

import pytest
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql.types import LongType, StringType, StructField, StructType

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import (
    AnalysisError,
    AppendOnlyTableError,
    DeltaMergeError,
    InvalidArgumentError,
    InvariantViolationError,
    LogCorruptedError,
    MultipleSourceRowMatchingTargetRowError,
    ParseError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from deltamerge.log import filenames
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.types import schema_string, to_spark_schema
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark

DDL = "id long, v string, p string"
ROWS = [(1, "a1", "a"), (2, "a2", "a"), (3, "b3", "b")]


# --- helpers -------------------------------------------------------------------------------------------


def _files(root: str) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            full = os.path.join(dirpath, n)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root)] = hashlib.sha1(fh.read()).hexdigest()
    return out


def _rows(spark, root: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    DeltaLog.clear_cache()
    return sorted(tuple(r) for r in deltamerge.read(spark, root).collect())


def _raw_rows(root: str) -> tuple[int, list[tuple]]:
    """(version, rows) straight from the snapshot's Parquet files, partition values from the log."""
    import pyarrow.parquet as pq

    snap = DeltaLog(root).snapshot()
    rows = []
    for f in snap.files:
        for r in pq.read_table(os.path.join(root, unquote(f.path))).to_pylist():
            rows.append(tuple(sorted({**r, **f.partition_values}.items(), key=lambda kv: kv[0])))
    return snap.version, sorted(rows, key=repr)


@contextlib.contextmanager
def unchanged(spark, root: str, *, readable: bool = True) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The body may fail however it likes; the table's files must be byte-identical afterwards (so
    the same version and the same rows, which are compared too when the table is readable)."""
    DeltaLog.clear_cache()
    files = _files(root)
    state = _raw_rows(root) if readable else None
    yield
    DeltaLog.clear_cache()
    after = _files(root)
    assert sorted(set(after) - set(files)) == [], "files were left behind"
    assert sorted(set(files) - set(after)) == [], "files disappeared"
    assert after == files, "file contents changed"
    if readable:
        assert _raw_rows(root) == state


def _commit_path(root: str, version: int) -> str:
    return os.path.join(root, "_delta_log", filenames.commit_name(version))


def _write_commit(root: str, version: int, lines: list[dict]) -> None:
    with open(_commit_path(root, version), "w", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in lines))
    DeltaLog.clear_cache()


def _alter(
    root: str, *, schema: StructType | None = None, configuration: dict[str, str] | None = None
) -> None:
    """Change the schema (e.g. nullability, field metadata) or the properties in a new commit."""
    txn = OptimisticTransaction(DeltaLog(root))
    meta = txn.metadata
    assert meta is not None
    txn.update_metadata(
        replace(
            meta,
            schema_string=schema_string(schema) if schema is not None else meta.schema_string,
            configuration={**meta.configuration, **(configuration or {})},
        )
    )
    txn.commit([], Operation("SET TBLPROPERTIES", {}))
    DeltaLog.clear_cache()


def _not_null(root: str, *names: str) -> None:
    schema = to_spark_schema(DeltaLog(root).snapshot().metadata.schema_string)
    fields = [StructField(f.name, f.dataType, f.name not in names, f.metadata) for f in schema.fields]
    _alter(root, schema=StructType(fields))


def _df(spark, rows, ddl: str = DDL):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(rows, ddl).coalesce(1)


def _merge(spark, root: str, source, condition: str = "t.id = s.id"):  # type: ignore[no-untyped-def]
    return DeltaTable.forPath(spark, root).alias("t").merge(source.alias("s"), condition)


def _error_text(e: BaseException) -> str:
    return str(e)


@pytest.fixture(scope="module", autouse=True)
def _quiet_spark(spark):  # type: ignore[no-untyped-def]
    """Expected failures make Spark log every failed task with its stack; keep the output readable."""
    spark.sparkContext.setLogLevel("OFF")
    yield
    spark.sparkContext.setLogLevel("ERROR")


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    root = str(tmp_path_factory.mktemp("bad_input") / "template")
    deltamerge.write(_df(spark, ROWS[:2]), root, partition_by="p")
    deltamerge.write(_df(spark, ROWS[2:]), root, mode="append")
    return root


@pytest.fixture
def table(template: str, tmp_path) -> str:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "t")
    shutil.copytree(template, root)
    DeltaLog.clear_cache()
    return root


# --- damaged logs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"{not json\n",
        b'{"add": {"path": "x.parquet", "partitionValues": {}, "si',
        b"\xff\xfe\x00binary",
        b"[1, 2]\n",
    ],
    ids=["corrupt-json", "truncated-json", "binary", "not-an-object"],
)
def test_damaged_latest_commit(spark, table: str, content: bytes) -> None:
    with open(_commit_path(table, 1), "wb") as fh:
        fh.write(content)
    DeltaLog.clear_cache()
    with unchanged(spark, table, readable=False):
        with pytest.raises(LogCorruptedError) as err:
            deltamerge.read(spark, table)
        text = _error_text(err.value)
        assert "DELTA_LOG_CORRUPTED" in text and filenames.commit_name(1) in text
        assert "Restore it" in text and "remove it" in text
        with pytest.raises(LogCorruptedError):  # writers refuse too, before writing anything
            deltamerge.write(_df(spark, [(9, "x", "a")]), table, mode="append")
        with pytest.raises(LogCorruptedError):
            _merge(spark, table, _df(spark, [(9, "x", "a")])).whenNotMatchedInsertAll().execute()


@pytest.mark.parametrize(
    "add",
    [
        {
            "path": "p=a/x.parquet",
            "partitionValues": {"p": "a"},
            "size": "big",
            "modificationTime": 1,
            "dataChange": True,
        },
        {"partitionValues": {"p": "a"}, "size": 1, "modificationTime": 1, "dataChange": True},
        {
            "path": "p=a/x.parquet",
            "partitionValues": {"p": "a"},
            "size": 1,
            "modificationTime": 1,
            "deletionVector": {"storageType": "u"},
        },
    ],
    ids=["wrong-type", "missing-path", "incomplete-deletion-vector"],
)
def test_ill_typed_action(spark, table: str, add: dict) -> None:
    _write_commit(table, 2, [{"commitInfo": {"operation": "WRITE"}}, {"add": add}])
    with unchanged(spark, table, readable=False):
        with pytest.raises(LogCorruptedError) as err:
            deltamerge.read(spark, table)
        assert filenames.commit_name(2) in str(err.value) and "cannot be read" in str(err.value)


def test_gap_in_commits(spark, table: str) -> None:
    deltamerge.write(_df(spark, [(4, "a4", "a")]), table, mode="append")
    os.remove(_commit_path(table, 1))
    DeltaLog.clear_cache()
    with unchanged(spark, table, readable=False):
        with pytest.raises(LogCorruptedError) as err:
            deltamerge.read(spark, table)
        text = str(err.value)
        assert "gap" in text and "version(s) 1" in text and "Restore the missing" in text


def test_missing_data_file(spark, table: str) -> None:
    snap = DeltaLog(table).snapshot()
    victim = next(f for f in snap.files if f.partition_values["p"] == "b")
    os.remove(os.path.join(table, victim.path))
    name = os.path.basename(victim.path)
    with unchanged(spark, table, readable=False):
        with pytest.raises(PySparkException) as err:
            deltamerge.read(spark, table).collect()
        assert name in str(err.value) and "does not exist" in str(err.value)
        with pytest.raises(PySparkException) as err:
            _merge(spark, table, _df(spark, [(3, "new", "b")])).whenMatchedUpdateAll().execute()
        assert name in str(err.value)


def test_missing_checkpoint_part(spark, table: str) -> None:
    """A multi-part checkpoint with a part missing is not used; the JSON commits are."""
    from deltamerge.log.checkpoint import checkpoint_rows, encode_checkpoint

    snap = DeltaLog(table).snapshot()
    rows = checkpoint_rows(snap.protocol, snap.metadata, [], [], snap.files, [])
    names = filenames.multipart_checkpoint_names(1, 2)
    half = len(rows) // 2
    for name, part in zip(names, (rows[:half], rows[half:]), strict=True):
        with open(os.path.join(table, "_delta_log", name), "wb") as fh:
            fh.write(encode_checkpoint(part))
    os.remove(os.path.join(table, "_delta_log", names[1]))
    with unchanged(spark, table):
        assert DeltaLog(table).snapshot().version == 1
    # Without the commits, the error names what is missing and what to do.
    os.remove(_commit_path(table, 0))
    DeltaLog.clear_cache()
    with unchanged(spark, table, readable=False):
        with pytest.raises(LogCorruptedError) as err:
            deltamerge.read(spark, table)
        assert "version 0 is missing" in str(err.value) and "Restore the missing" in str(err.value)


def test_unknown_action_is_ignored(spark, table: str) -> None:
    before = _rows(spark, table)
    _write_commit(table, 2, [{"commitInfo": {"operation": "FUTURE"}}, {"futureAction": {"x": 1}}])
    assert _rows(spark, table) == before
    assert deltamerge.write(_df(spark, [(4, "a4", "a")]), table, mode="append") == 3
    assert _rows(spark, table) == sorted([*before, (4, "a4", "a")])


def _set_protocol(root: str, protocol: dict) -> None:
    _write_commit(root, 2, [{"commitInfo": {"operation": "UPGRADE PROTOCOL"}}, {"protocol": protocol}])


def test_unknown_reader_feature_is_refused(spark, table: str) -> None:
    _set_protocol(
        table,
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["timeTravelMachine"],
            "writerFeatures": ["timeTravelMachine"],
        },
    )
    with unchanged(spark, table, readable=False):
        for attempt in (
            lambda: deltamerge.read(spark, table),
            lambda: deltamerge.write(_df(spark, [(4, "a4", "a")]), table, mode="append"),
            lambda: _merge(spark, table, _df(spark, [(4, "a4", "a")])).whenNotMatchedInsertAll().execute(),
        ):
            with pytest.raises(UnsupportedFeatureError) as err:
                attempt()
            assert "timeTravelMachine" in str(err.value)


def test_unknown_writer_feature_refuses_writes_only(spark, table: str) -> None:
    _set_protocol(table, {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["quantumLocks"]})
    with unchanged(spark, table):
        for attempt in (
            lambda: deltamerge.write(_df(spark, [(4, "a4", "a")]), table, mode="append"),
            lambda: _merge(spark, table, _df(spark, [(1, "x", "a")])).whenMatchedUpdateAll().execute(),
        ):
            with pytest.raises(UnsupportedFeatureError) as err:
                attempt()
            assert "quantumLocks" in str(err.value)


def test_future_protocol_version_is_refused(spark, table: str) -> None:
    _set_protocol(table, {"minReaderVersion": 9, "minWriterVersion": 9})
    with unchanged(spark, table, readable=False):
        with pytest.raises(UnsupportedFeatureError) as err:
            deltamerge.read(spark, table)
        assert "9" in str(err.value)


def test_invalid_isolation_level_property(spark, table: str) -> None:
    # deltamerge refuses to commit such a property; another writer may not.
    meta = _metadata_action(table)
    meta["configuration"] = {**meta.get("configuration", {}), "delta.isolationLevel": "Chaotic"}
    _write_commit(table, 2, [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, {"metaData": meta}])
    with unchanged(spark, table):
        for attempt in (
            lambda: deltamerge.write(_df(spark, [(4, "a4", "a")]), table, mode="append"),
            lambda: _merge(spark, table, _df(spark, [(1, "x", "a")])).whenMatchedUpdateAll().execute(),
        ):
            with pytest.raises(InvalidArgumentError) as err:
                attempt()
            text = str(err.value)
            assert "Chaotic" in text and "'Serializable'" in text and "'WriteSerializable'" in text


def _metadata_action(root: str) -> dict:
    with open(_commit_path(root, 0), encoding="utf-8") as fh:
        return next(json.loads(line)["metaData"] for line in fh if '"metaData"' in line)


# --- data that does not fit ----------------------------------------------------------------------------


def test_wrong_type_on_append(spark, table: str) -> None:
    with unchanged(spark, table):
        with pytest.raises(SchemaMismatchError) as err:
            deltamerge.write(
                _df(spark, [("x", "v", "a")], "id string, v string, p string"), table, mode="append"
            )
        assert err.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
        assert "'id'" in str(err.value) and "Cast the column" in str(err.value)


def test_extra_column_on_append(spark, table: str) -> None:
    with unchanged(spark, table):
        with pytest.raises(SchemaMismatchError) as err:
            deltamerge.write(_df(spark, [(4, "v", "a", 1)], DDL + ", extra int"), table, mode="append")
        assert "extra" in str(err.value) and "merge_schema=True" in str(err.value)


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_null_into_not_null_column_on_write(spark, table: str, mode: str) -> None:
    _not_null(table, "v")
    with unchanged(spark, table):
        with pytest.raises(InvariantViolationError) as err:
            deltamerge.write(_df(spark, [(4, "ok", "a"), (5, None, "a")]), table, mode=mode)
        assert err.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
        assert "NOT NULL constraint violated for column: v." in str(err.value)


def test_missing_not_null_column_on_append(spark, table: str) -> None:
    _not_null(table, "v")
    with (
        unchanged(spark, table),
        pytest.raises(InvariantViolationError, match="NOT NULL constraint violated for column: v"),
    ):
        deltamerge.write(_df(spark, [(4, "a")], "id long, p string"), table, mode="append")


def test_null_into_not_null_column_by_merge_insert(spark, table: str) -> None:
    _not_null(table, "v")
    source = _df(spark, [(7, None, "a")])
    with unchanged(spark, table):
        with pytest.raises(InvariantViolationError) as err:
            _merge(spark, table, source).whenNotMatchedInsert(values={"id": "s.id", "p": "s.p"}).execute()
        assert err.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" and "column: v." in str(
            err.value
        )


def test_null_into_not_null_column_by_merge_update(spark, table: str) -> None:
    _not_null(table, "v")
    with (
        unchanged(spark, table),
        pytest.raises(InvariantViolationError, match="NOT NULL constraint violated for column: v"),
    ):
        _merge(spark, table, _df(spark, [(1, "x", "a")])).whenMatchedUpdate(set={"v": "NULL"}).execute()


def _nested_not_null_table(spark, root: str) -> str:  # type: ignore[no-untyped-def]
    ddl = "id long, s struct<a: long, b: string>"
    deltamerge.write(spark.createDataFrame([(1, (1, "x")), (2, None)], ddl), root)
    inner = StructType([StructField("a", LongType(), False), StructField("b", StringType())])
    _alter(root, schema=StructType([StructField("id", LongType()), StructField("s", inner)]))
    return ddl


def test_null_into_not_null_nested_field_by_merge(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "nested")
    ddl = _nested_not_null_table(spark, root)
    source = spark.createDataFrame([(1, (None, "y")), (3, None)], ddl)
    with unchanged(spark, root), pytest.raises(InvariantViolationError) as err:
        _merge(spark, root, source).whenMatchedUpdate(set={"s.a": "s.s.a"}).execute()
    assert "NOT NULL constraint violated for column: s.a." in str(err.value)
    # A null struct is fine: the field is only required inside a non-null struct.
    _merge(spark, root, source).whenNotMatchedInsertAll().execute()
    assert sorted(tuple(r) for r in deltamerge.read(spark, root).where("id = 3").collect()) == [(3, None)]


def test_null_into_not_null_nested_field_by_append(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "nested")
    ddl = _nested_not_null_table(spark, root)
    deltamerge.write(spark.createDataFrame([(4, None)], ddl), root, mode="append")
    with unchanged(spark, root), pytest.raises(InvariantViolationError, match=r"column: s\.a\."):
        deltamerge.write(spark.createDataFrame([(3, (None, "y"))], ddl), root, mode="append")


@pytest.fixture
def checked(table: str) -> str:
    _alter(
        table,
        configuration={
            "delta.constraints.id_positive": "id > 0",
            "delta.constraints.v_prefix": "v LIKE '_%'",
        },
    )
    return table


def _assert_check(err: pytest.ExceptionInfo, name: str, expr: str, *values: str) -> None:
    text = str(err.value)
    assert err.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert isinstance(err.value, DeltaMergeError)
    assert f"CHECK constraint {name} ({expr}) violated by row with values:" in text, text
    for v in values:
        assert v in text, text
    assert "Fix the data" in text


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_check_constraint_on_write(spark, checked: str, mode: str) -> None:
    with unchanged(spark, checked):
        with pytest.raises(InvariantViolationError) as err:
            deltamerge.write(_df(spark, [(4, "ok", "a"), (-5, "neg", "b")]), checked, mode=mode)
        _assert_check(err, "id_positive", "id > 0", " - id : -5")
    # A valid write still goes through the same check.
    deltamerge.write(_df(spark, [(4, "ok", "a")]), checked, mode=mode)


def test_check_constraint_null_is_a_violation(spark, checked: str) -> None:
    with unchanged(spark, checked):
        with pytest.raises(InvariantViolationError) as err:
            deltamerge.write(_df(spark, [(None, "x", "a")]), checked, mode="append")
        _assert_check(err, "id_positive", "id > 0", " - id : null")


@pytest.mark.parametrize(
    "mode",
    [{}, {"delta.enableDeletionVectors": "true"}, {"delta.enableChangeDataFeed": "true"}],
    ids=["copy-on-write", "deletion-vectors", "change-data-feed"],
)
def test_check_constraint_by_merge_update(spark, checked: str, mode: dict) -> None:
    if mode:
        _alter(checked, configuration=mode)
    with unchanged(spark, checked):
        with pytest.raises(InvariantViolationError) as err:
            _merge(spark, checked, _df(spark, [(1, "x", "a")])).whenMatchedUpdate(set={"v": "''"}).execute()
        _assert_check(err, "v_prefix", "v LIKE '_%'", " - v : ")


def test_check_constraint_by_merge_insert_sql(spark, checked: str) -> None:
    _df(spark, [(-9, "neg", "c")]).createOrReplaceTempView("bad_input_src")
    with unchanged(spark, checked):
        with pytest.raises(InvariantViolationError) as err:
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{checked}` t USING bad_input_src s ON t.id = s.id "
                "WHEN NOT MATCHED THEN INSERT *",
            )
        _assert_check(err, "id_positive", "id > 0", " - id : -9")


def test_check_constraint_referencing_unknown_column(spark, table: str) -> None:
    _alter(table, configuration={"delta.constraints.broken": "no_such_column > 0"})
    with unchanged(spark, table):
        with pytest.raises(AnalysisError) as err:
            deltamerge.write(_df(spark, [(4, "x", "a")]), table, mode="append")
        text = str(err.value)
        assert err.value.error_class == "DELTA_INVALID_CHECK_CONSTRAINT_REFERENCES"
        assert "broken" in text and "no_such_column" in text and "DROP CONSTRAINT" in text


def _with_invariant(root: str, column: str, expression: str) -> None:
    schema = to_spark_schema(DeltaLog(root).snapshot().metadata.schema_string)
    rule = json.dumps({"expression": {"expression": expression}})
    fields = [
        StructField(
            f.name,
            f.dataType,
            f.nullable,
            {**f.metadata, "delta.invariants": rule} if f.name == column else f.metadata,
        )
        for f in schema.fields
    ]
    _alter(root, schema=StructType(fields))


@pytest.mark.parametrize("value", [0, None], ids=["false", "null"])
def test_column_invariant_on_append(spark, table: str, value) -> None:  # type: ignore[no-untyped-def]
    _with_invariant(table, "id", "id < 100 AND id > 0")
    with unchanged(spark, table):
        with pytest.raises(InvariantViolationError) as err:
            deltamerge.write(_df(spark, [(value, "x", "a")]), table, mode="append")
        _assert_check(
            err,
            "EXPRESSION(id < 100 AND id > 0)",
            "id < 100 AND id > 0",
            f" - id : {'null' if value is None else 0}",
        )


def test_column_invariant_by_merge(spark, table: str) -> None:
    _with_invariant(table, "id", "id < 100")
    with unchanged(spark, table):
        with pytest.raises(InvariantViolationError) as err:
            _merge(spark, table, _df(spark, [(500, "x", "a")])).whenNotMatchedInsertAll().execute()
        _assert_check(err, "EXPRESSION(id < 100)", "id < 100", " - id : 500")


def test_append_only_table_refuses_merge_delete(spark, table: str) -> None:
    _alter(table, configuration={"delta.appendOnly": "true"})
    with unchanged(spark, table):
        with pytest.raises(AppendOnlyTableError) as err:
            _merge(spark, table, _df(spark, [(1, "x", "a")])).whenMatchedDelete().execute()
        assert "delta.appendOnly" in str(err.value) and "'false'" in str(err.value)


# --- bad MERGE statements ------------------------------------------------------------------------------


@pytest.fixture
def sql_source(spark) -> str:  # type: ignore[no-untyped-def]
    _df(spark, [(1, "new", "a"), (9, "nine", "c")]).createOrReplaceTempView("bad_input_source")
    return "bad_input_source"


@pytest.mark.parametrize(
    ("clauses", "error_class", "words"),
    [
        ("WHEN NOT MATCHED THEN DELETE", "PARSE_SYNTAX_ERROR", "can only INSERT"),
        ("WHEN MATCHED THEN INSERT *", "PARSE_SYNTAX_ERROR", "INSERT is only allowed"),
        (
            "WHEN MATCHED THEN DELETE WHEN MATCHED AND s.id > 1 THEN UPDATE SET *",
            "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
            "only the last MATCHED clause can omit the condition",
        ),
        ("WHEN NOT MATCHED THEN INSERT * WHEN MATCHED THEN DELETE", "PARSE_SYNTAX_ERROR", "must come first"),
        ("WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *", "PARSE_SYNTAX_ERROR", "not allowed"),
        (
            "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id)",
            "DELTA_INSERT_COLUMN_ARITY_MISMATCH",
            "one value per column",
        ),
    ],
    ids=[
        "delete-not-matched",
        "insert-matched",
        "non-last-unconditional",
        "clause-order",
        "update-star-by-source",
        "insert-arity",
    ],
)
def test_invalid_clause(
    spark, table: str, sql_source: str, clauses: str, error_class: str, words: str
) -> None:
    with unchanged(spark, table):
        with pytest.raises(DeltaMergeError) as err:
            deltamerge.sql(
                spark, f"MERGE INTO delta.`{table}` t USING {sql_source} s ON t.id = s.id {clauses}"
            )
        assert err.value.error_class == error_class and words in str(err.value)


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("ON t.nope = s.id WHEN MATCHED THEN DELETE", ["t.nope", "given columns"]),
        ("ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.nope", ["s.nope", "given columns"]),
        ("ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.nope = s.v", ["nope"]),
        ("ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, nope) VALUES (s.id, s.v)", ["nope"]),
    ],
    ids=["on", "set-value", "set-target", "insert-column"],
)
def test_unresolvable_names(spark, table: str, sql_source: str, statement: str, words: list[str]) -> None:
    with unchanged(spark, table):
        with pytest.raises((DeltaMergeError, AnalysisException)) as err:
            deltamerge.sql(spark, f"MERGE INTO delta.`{table}` t USING {sql_source} s {statement}")
        for w in words:
            assert w in str(err.value), str(err.value)


_TYPED_SOURCE = "(SELECT id, v, array(id) AS arr, named_struct('a', id) AS st FROM bad_input_source)"


@pytest.mark.parametrize(
    ("statement", "error_class", "words"),
    [
        (
            "ON t.id = s.arr WHEN MATCHED THEN DELETE",
            "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
            ["(t.id = s.arr)"],
        ),
        (
            "ON t.id = s.id WHEN MATCHED AND t.id + s.st > 0 THEN DELETE",
            "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
            ["(t.id + s.st)"],
        ),
        (
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.arr + t.id",
            "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
            ["(s.arr + t.id)"],
        ),
        (
            "ON t.id = s.id WHEN NOT MATCHED BY SOURCE AND t.v < array(1) THEN DELETE",
            "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
            ["(t.v < array(1))"],
        ),
    ],
    ids=["on", "matched-condition", "set-value", "by-source-condition"],
)
def test_type_errors_name_the_users_columns(
    spark, table: str, sql_source: str, statement: str, error_class: str, words: list[str]
) -> None:
    """Spark refuses the expression; its message shows the statement's names, not the internal
    positional ones the merge's queries use, and the error is still a Spark analysis error."""
    with unchanged(spark, table), pytest.raises(AnalysisException) as err:
        deltamerge.sql(spark, f"MERGE INTO delta.`{table}` t USING {_TYPED_SOURCE} s {statement}")
    assert isinstance(err.value, DeltaMergeError)
    assert err.value.getCondition() == error_class and err.value.getSqlState() == "42K09"
    message = str(err.value)
    assert message.startswith(f"[{error_class}] ") and "__t" not in message and "__s" not in message
    for w in words:
        assert w in message, message


def test_type_errors_in_update_and_builder_without_aliases(spark, table: str, sql_source: str) -> None:
    from deltamerge import DeltaTable

    with unchanged(spark, table):
        with pytest.raises(AnalysisException, match=r"\(id \+ array\(1\)\)"):
            deltamerge.sql(spark, f"UPDATE delta.`{table}` SET v = id + array(1)")
        source = spark.table(sql_source).selectExpr("id AS `odd id`", "v")
        with pytest.raises(AnalysisException, match=r"\(`odd id` \+ array\(1\)\)") as err:
            DeltaTable.forPath(spark, table).merge(
                source, "id = `odd id` + array(1)"
            ).whenMatchedDelete().execute()
    assert "__s" not in str(err.value) and "__t" not in str(err.value)


def test_unknown_source_table(spark, table: str) -> None:
    with unchanged(spark, table):
        with pytest.raises(AnalysisException) as err:
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{table}` t USING no_such_view s ON t.id = s.id WHEN MATCHED THEN DELETE",
            )
        assert "no_such_view" in str(err.value) and "TABLE_OR_VIEW_NOT_FOUND" in str(err.value)


def test_unknown_target_name(spark, table: str, sql_source: str) -> None:
    with unchanged(spark, table):
        with pytest.raises(TableNotFoundError) as err:
            deltamerge.sql(
                spark, f"MERGE INTO nowhere t USING {sql_source} s ON t.id = s.id WHEN MATCHED THEN DELETE"
            )
        assert err.value.error_class == "TABLE_OR_VIEW_NOT_FOUND" and "register_table" in str(err.value)


def test_target_path_is_not_a_table(spark, tmp_path, sql_source: str) -> None:  # type: ignore[no-untyped-def]
    empty = str(tmp_path / "empty")
    os.makedirs(empty)
    with pytest.raises(TableNotFoundError) as err:
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{empty}` t USING {sql_source} s ON t.id = s.id WHEN MATCHED THEN DELETE",
        )
    assert "not a Delta table" in str(err.value) and "Create" in str(err.value)
    assert os.listdir(empty) == []


def test_oversized_sql(spark, table: str, sql_source: str) -> None:
    padding = " OR ".join(["s.id = 1"] * 120_000)
    with unchanged(spark, table):
        with pytest.raises(ParseError) as err:
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{table}` t USING {sql_source} s ON t.id = s.id AND ({padding}) "
                "WHEN MATCHED THEN DELETE",
            )
        assert "longer than" in str(err.value) and "characters" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "MERGE INTO delta.`{t}` t USING {s} s ON",
        "MERGE INTO delta.`{t}` t USING {s} s ON t.id = s.id WHEN MATCHED THEN",
        "MERGE INTO delta.`{t}` t USING {s} s ON t.id = s.id",
        "MERGE INTO delta.`{t}` t USING {s} s ON (t.id = s.id WHEN MATCHED THEN DELETE",
        "MERGE delta.`{t}` USING",
    ],
    ids=["no-condition", "no-action", "no-clause", "unbalanced", "garbage"],
)
def test_malformed_sql(spark, table: str, sql_source: str, text: str) -> None:
    with unchanged(spark, table):
        with pytest.raises((DeltaMergeError, PySparkException)) as err:
            deltamerge.sql(spark, text.format(t=table, s=sql_source))
        e = err.value
        cls = e.error_class if isinstance(e, DeltaMergeError) else (e.getCondition() or "")
        assert "PARSE" in cls or cls == "DELTA_MERGE_MISSING_WHEN", cls


def test_multiple_source_rows_match(spark, table: str) -> None:
    source = _df(spark, [(1, "x", "a"), (1, "y", "a")])
    with unchanged(spark, table):
        with pytest.raises(MultipleSourceRowMatchingTargetRowError) as err:
            _merge(spark, table, source).whenMatchedUpdateAll().execute()
        assert (
            "multiple source rows matched" in str(err.value).lower()
            or "more than one" in str(err.value).lower()
        )


def test_non_deterministic_condition(spark, table: str) -> None:
    with unchanged(spark, table):
        with pytest.raises(AnalysisError) as err:
            _merge(
                spark, table, _df(spark, [(1, "x", "a")]), "t.id = s.id AND rand() > 0.5"
            ).whenMatchedDelete().execute()
        assert err.value.error_class == "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"
        assert "Move the non-deterministic expression" in str(err.value)


@pytest.mark.parametrize(
    ("call", "exc", "words"),
    [
        (lambda t, s: t.merge(None, "t.id = s.id"), ValueError, "'source' in merge cannot be None"),
        (lambda t, s: t.merge(s, None), ValueError, "'condition' in merge cannot be None"),
        (lambda t, s: t.merge([1], "t.id = s.id"), TypeError, "must be DataFrame"),
        (lambda t, s: t.merge(s, 42), TypeError, "'condition' in merge must be"),
        (lambda t, s: t.merge(s, "t.id = s.id").whenMatchedUpdate(set={1: "x"}), TypeError, "Keys of dict"),
        (lambda t, s: t.merge(s, "t.id = s.id").whenMatchedUpdate(set={"v": 3}), TypeError, "Values of dict"),
        (
            lambda t, s: t.merge(s, "t.id = s.id").whenNotMatchedInsert(values=None),
            ValueError,
            "cannot be None",
        ),
        (lambda t, s: t.merge(s, "t.id = s.id").whenMatchedDelete(condition=[1]), TypeError, "'condition'"),
    ],
    ids=[
        "none-source",
        "none-condition",
        "list-source",
        "int-condition",
        "int-key",
        "int-value",
        "none-values",
        "list-clause-condition",
    ],
)
def test_builder_argument_errors(spark, table: str, call, exc, words: str) -> None:  # type: ignore[no-untyped-def]
    target = DeltaTable.forPath(spark, table).alias("t")
    source = _df(spark, [(1, "x", "a")]).alias("s")
    with unchanged(spark, table), pytest.raises(exc, match=words.replace("(", r"\(")):
        call(target, source)


# --- odd but valid input -------------------------------------------------------------------------------


def test_special_characters_in_paths_and_partition_values(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "we ird %20 #x =y ünï {a}[b]")
    values = ["us/east", "50%", "a b", "日本:x", "x=y", "#h", "q'uote", ""]
    rows = [(i, f"v{i}", p) for i, p in enumerate(values)]
    deltamerge.write(_df(spark, rows), root, partition_by="p")
    source = _df(spark, [(0, "updated", "us/east"), (99, "new", "50%")])
    _merge(
        spark, root, source, "t.p = s.p AND t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    expected = sorted(
        [
            (0, "updated", "us/east"),
            *[(i, f"v{i}", p or None) for i, p in enumerate(values) if i],
            (99, "new", "50%"),
        ],
        key=lambda r: r[0],
    )
    got = sorted((tuple(r) for r in deltamerge.read(spark, root).collect()), key=lambda r: r[0])
    assert got == expected
    import deltalake

    # delta-rs cannot open a path that contains "%20" (it URL-decodes it); check a copy elsewhere.
    copy = str(tmp_path / "copy for delta-rs #x =y ünï")
    shutil.copytree(root, copy)
    rs = deltalake.DeltaTable(copy).to_pyarrow_table().to_pydict()
    assert sorted(zip(rs["id"], rs["v"], rs["p"], strict=True), key=lambda r: r[0]) == expected


def test_empty_source(spark, table: str) -> None:
    before = _rows(spark, table)
    empty = spark.createDataFrame([], DDL)
    result = _merge(spark, table, empty).whenMatchedDelete().whenNotMatchedInsertAll().execute().collect()[0]
    assert tuple(result) == (0, 0, 0, 0)
    assert _rows(spark, table) == before


def test_empty_target(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "empty_target")
    deltamerge.write(spark.createDataFrame([], DDL), root, partition_by="p")
    assert _rows(spark, root) == []
    source = _df(spark, ROWS)
    result = (
        _merge(spark, root, source).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0]
    )
    assert result["num_inserted_rows"] == 3
    assert _rows(spark, root) == sorted(ROWS)


def test_500_column_schema(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "wide")
    n = 500
    ddl = ", ".join(["id long"] + [f"c{i} long" for i in range(1, n)])
    rows = [tuple([k] + [k * i for i in range(1, n)]) for k in range(20)]
    deltamerge.write(spark.createDataFrame(rows, ddl).coalesce(1), root)
    source = spark.createDataFrame([tuple([k] + [-k] * (n - 1)) for k in range(15, 25)], ddl)
    result = (
        _merge(spark, root, source).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0]
    )
    assert (result["num_updated_rows"], result["num_inserted_rows"]) == (5, 5)
    df = deltamerge.read(spark, root)
    assert len(df.columns) == n
    got = {r["id"]: r for r in df.collect()}
    assert len(got) == 25
    assert got[3]["c499"] == 3 * 499 and got[16]["c499"] == -16 and got[24]["c1"] == -24
