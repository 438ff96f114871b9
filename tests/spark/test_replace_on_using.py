"""Delta's ``replaceUsing`` / ``replaceOn`` overwrites (configure/replace_on.py): the target rows a
written row matches are deleted and every written row inserted, in one ``WRITE`` commit, through
``df.write.format("delta").mode("overwrite").option(...)`` and SQL ``INSERT INTO t REPLACE USING``
(Spark 4.2's grammar). Expected results restate delta-io/delta's DeltaInsertReplaceUsingDFWriterTests
and DeltaInsertReplaceOnDFWriterTests."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError

pytestmark = pytest.mark.spark

SPARK_4_2 = tuple(int(x) for x in pyspark.__version__.split(".")[:2]) >= (4, 2)


def _table(spark, path: str, rows, schema: str = "id INT, value STRING", **props):  # type: ignore[no-untyped-def]
    writer = spark.createDataFrame(rows, schema).coalesce(1).write.format("delta")
    for key, value in props.items():
        writer = writer.option(key, value)
    writer.save(path)


def _rows(spark, path: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted((tuple(r) for r in deltamerge.read(spark, path).collect()), key=str)


def _replace(df, path: str, **options: str) -> None:  # type: ignore[no-untyped-def]
    writer = df.write.format("delta").mode("overwrite")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(path)


def test_replace_using_replaces_matching_rows_and_keeps_null_keys(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(
        dspark,
        path,
        [(1, "target"), (None, "target_null"), (3, "target")],
        **{"delta.enableChangeDataFeed": "true"},
    )
    source = dspark.createDataFrame(
        [(1, "source"), (None, "source_null"), (4, "source")], "id INT, value STRING"
    )
    _replace(source, path, replaceUsing="id")
    # NULL = NULL is not true: the NULL-keyed target row stays.
    assert _rows(dspark, path) == [
        (1, "source"),
        (3, "target"),
        (4, "source"),
        (None, "source_null"),
        (None, "target_null"),
    ]
    last = DeltaTable.forPath(dspark, path).history(1).collect()[0]
    assert last["operation"] == "WRITE"
    assert last["operationParameters"]["replaceUsingCols"] == "(id)"
    assert last["operationParameters"]["mode"] == "Overwrite"
    metrics = last["operationMetrics"]
    assert (metrics["numDeletedRows"], metrics["numCopiedRows"], metrics["numOutputRows"]) == ("1", "2", "5")
    changes = deltamerge.read_changes(dspark, path, 1, 1).collect()
    assert sorted(((r.id, r.value, r._change_type) for r in changes), key=str) == [
        (1, "source", "insert"),
        (1, "target", "delete"),
        (4, "source", "insert"),
        (None, "source_null", "insert"),
    ]


def test_replace_using_several_columns_duplicates_and_deletion_vectors(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    rows = [(1, "a", "target"), (1, "b", "target"), (2, "a", "target")]
    _table(dspark, path, rows, "id INT, key STRING, value STRING", **{"delta.enableDeletionVectors": "true"})
    source = dspark.createDataFrame(
        [(1, "a", "s1"), (1, "a", "s2"), (3, "a", "s")], "id INT, key STRING, value STRING"
    )
    _replace(source, path, replaceUsing="id, key")
    assert _rows(dspark, path) == [
        (1, "a", "s1"),
        (1, "a", "s2"),
        (1, "b", "target"),
        (2, "a", "target"),
        (3, "a", "s"),
    ]
    metrics = DeltaTable.forPath(dspark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numDeletionVectorsAdded"] == "1" and metrics["numDeletedRows"] == "1"


def test_replace_on_conditions(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    schema = "col INT, row_origin STRING"
    _table(dspark, path, [(-1, "target"), (1, "target"), (2, "target"), (2, "target"), (3, "target")], schema)
    source = dspark.createDataFrame([(0, "source"), (2, "source")], schema).alias("s")
    _replace(source, path, replaceOn="t.col = s.col", targetAlias="t")
    assert _rows(dspark, path) == [(-1, "target"), (0, "source"), (1, "target"), (2, "source"), (3, "target")]
    assert DeltaTable.forPath(dspark, path).history(1).collect()[0]["operationParameters"][
        "replaceOnCond"
    ] == ("t.col = s.col")
    # Only the target side: every target row with col >= 1 goes.
    _replace(dspark.createDataFrame([(5, "source")], schema), path, replaceOn="t.col >= 1", targetAlias="t")
    assert _rows(dspark, path) == [(-1, "target"), (0, "source"), (5, "source")]
    # Only the source side: true for every target row while some written row has col >= 1.
    _replace(
        dspark.createDataFrame([(7, "x")], schema).alias("s"), path, replaceOn="s.col >= 1", targetAlias="t"
    )
    assert _rows(dspark, path) == [(7, "x")]
    _replace(dspark.createDataFrame([(8, "y")], schema), path, replaceOn="false")
    assert _rows(dspark, path) == [(7, "x"), (8, "y")]
    _replace(
        dspark.createDataFrame([(None, "n")], schema).alias("s"),
        path,
        replaceOn="t.col <=> s.col",
        targetAlias="t",
    )
    _replace(
        dspark.createDataFrame([(None, "m")], schema).alias("s"),
        path,
        replaceOn="t.col <=> s.col",
        targetAlias="t",
    )
    assert _rows(dspark, path) == [(7, "x"), (8, "y"), (None, "m")]


def test_replace_options_are_ignored_by_an_append_and_a_new_table(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = dspark.createDataFrame([(1, "a")], "id INT, value STRING")
    _replace(df, path, replaceUsing="id")  # no table yet: created with the rows
    df.write.format("delta").mode("append").option("replaceUsing", "id").save(path)  # as Delta: appended
    assert _rows(dspark, path) == [(1, "a"), (1, "a")]


@pytest.mark.parametrize(
    ("options", "error_class"),
    [
        ({"replaceUsing": "id", "replaceOn": "true"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        (
            {"replaceUsing": "id", "replaceWhere": "id = 1"},
            "DELTA_OVERWRITE_BY_FILTER_INCOMPATIBLE_REPLACE_ON_OR_USING",
        ),
        (
            {"replaceUsing": "id", "partitionOverwriteMode": "dynamic"},
            "DELTA_DYNAMIC_PARTITION_OVERWRITE_INCOMPATIBLE_REPLACE_ON_OR_USING",
        ),
        ({"replaceOn": "true", "overwriteSchema": "true"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        ({"replaceOn": "true", "dataChange": "false"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        ({"replaceOn": "id = 1"}, "DELTA_INSERT_REPLACE_ON_AMBIGUOUS_COLUMNS_IN_CONDITION"),
        (
            {"replaceOn": "t.id = s.nope", "targetAlias": "t"},
            "DELTA_INSERT_REPLACE_ON_UNRESOLVED_COLUMNS_IN_CONDITION",
        ),
        ({"replaceUsing": "nope"}, "UNRESOLVED_INSERT_REPLACE_USING_COLUMN"),
        # No targetAlias: `t` names neither side (it must not be taken for the written rows, which
        # would make the condition true for every target row).
        ({"replaceOn": "t.id = s.id"}, "DELTA_INSERT_REPLACE_ON_UNRESOLVED_COLUMNS_IN_CONDITION"),
        (
            {"replaceOn": "t.id = x.id", "targetAlias": "t"},
            "DELTA_INSERT_REPLACE_ON_UNRESOLVED_COLUMNS_IN_CONDITION",
        ),
    ],
)
def test_replace_option_errors_leave_the_table_as_it_was(
    dspark, tmp_path: Path, options, error_class
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    _table(dspark, path, [(1, "a")])
    with pytest.raises(DeltaMergeError) as err:
        _replace(dspark.createDataFrame([(1, "b")], "id INT, value STRING").alias("s"), path, **options)
    assert err.value.error_class == error_class
    assert DeltaTable.forPath(dspark, path).version() == 0


@pytest.mark.skipif(not SPARK_4_2, reason="INSERT ... REPLACE USING is Spark 4.2 grammar")
def test_sql_insert_replace_using(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = f"delta.`{path}`"
    dspark.sql(f"CREATE TABLE {t} (id INT, key STRING, value STRING) USING delta PARTITIONED BY (key)")
    dspark.sql(f"INSERT INTO {t} VALUES (1, 'a', 't'), (1, 'b', 't'), (2, 'a', 't')")
    dspark.sql(f"INSERT INTO {t} REPLACE USING (id, key) SELECT 1 AS id, 'a' AS key, 's' AS value")
    dspark.sql(f"INSERT INTO {t} BY NAME REPLACE USING (id) SELECT 'n' AS value, 'c' AS key, 2 AS id")
    assert _rows(dspark, path) == [(1, "a", "s"), (1, "b", "t"), (2, "c", "n")]
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR"):  # Spark's grammar: no column list
        dspark.sql(f"INSERT INTO {t} (value, id, key) REPLACE USING (id) SELECT 'l', 2, 'c'")
    with pytest.raises(DeltaMergeError, match="INSERT_REPLACE_USING_DISALLOW_MISALIGNED_COLUMNS"):
        dspark.sql(f"INSERT INTO {t} REPLACE USING (id) SELECT 'a' AS key, 1 AS id, 'v' AS value")
    with pytest.raises(DeltaMergeError, match="INSERT_REPLACE_USING_DISALLOW_MISALIGNED_COLUMNS"):
        dspark.sql(f"INSERT INTO {t} REPLACE USING (id) VALUES (1, 'a', 'v')")  # VALUES' columns: col1, ...
    assert DeltaTable.forPath(dspark, path).version() == 3


def test_replace_using_through_save_as_table_and_insert_into(dspark, tmp_path: Path) -> None:
    name = "replace_using_named"
    df = dspark.createDataFrame([(1, "t"), (2, "t")], "id INT, value STRING")
    try:
        df.write.format("delta").option("path", str(tmp_path / "n")).saveAsTable(name)
        source = dspark.createDataFrame([(1, "s"), (3, "s")], "id INT, value STRING")
        source.write.format("delta").mode("overwrite").option("replaceUsing", "id").saveAsTable(name)
        one = dspark.createDataFrame([(2, "i")], "id INT, value STRING")
        one.write.mode("overwrite").option("replaceUsing", "id").insertInto(name)
        assert sorted(tuple(r) for r in dspark.table(name).collect()) == [(1, "s"), (2, "i"), (3, "s")]
    finally:
        deltamerge.unregister_table(dspark, name)


def test_writer_v2_create_refuses_replace_options(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "v2")
    _table(dspark, path, [(1, "a")])
    writer = dspark.createDataFrame([(2, "b")], "id INT, value STRING").writeTo(f"delta.`{path}`")
    with pytest.raises(DeltaMergeError) as err:
        writer.option("replaceUsing", "id").createOrReplace()
    assert err.value.error_class == "DELTA_DFV2_CREATE_REPLACE_INCOMPATIBLE_REPLACE_ON_OR_USING"
    assert DeltaTable.forPath(dspark, path).version() == 0


def test_a_constraint_violation_names_the_replace(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    dspark.sql(f"CREATE TABLE delta.`{path}` (id INT NOT NULL, value STRING) USING delta")
    dspark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    with pytest.raises(DeltaMergeError) as err:
        _replace(dspark.createDataFrame([(None, "b")], "id INT, value STRING"), path, replaceUsing="value")
    assert err.value.error_class == "DELTA_REPLACE_ON_OR_USING_TABLE_CONSTRAINT_VIOLATION"
    assert "NOT NULL constraint violated" in str(err.value)
    assert _rows(dspark, path) == [(1, "a")]
