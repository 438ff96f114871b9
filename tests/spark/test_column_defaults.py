"""Column DEFAULT values (table feature ``allowColumnDefaults``): where an INSERT (SQL or MERGE)
leaves a column out, or gives the keyword ``DEFAULT``, the column's default stands in (NULL without
one), as Delta resolves them (``DeltaMergeInto``: "Columns not listed get their column DEFAULT (if
defined) else NULL"). The feature must be enabled explicitly, as in Delta."""

from __future__ import annotations

from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark

FEATURE = "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')"


def _table(spark, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id INT, b INT DEFAULT 42, s STRING DEFAULT concat('a', 'b'), "
        f"d DATE DEFAULT DATE'2024-02-29', n INT) USING DELTA {FEATURE}",
    )
    return path


def _run(spark, path: str, *statements: str) -> None:  # type: ignore[no-untyped-def]
    """Run each statement with ``{t}`` standing for the table."""
    for text in statements:
        deltamerge.sql(spark, text.format(t=f"delta.`{path}`"))


def _rows(spark, path: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    df = deltamerge.read(spark, path).selectExpr("id", "b", "s", "CAST(d AS STRING)", "n")
    return sorted(tuple(r) for r in df.collect())


def test_defaults_need_the_table_feature(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(DeltaMergeError, match="WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"):
        deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` (id INT, b INT DEFAULT 1) USING DELTA")
    assert not (tmp_path / "t" / "_delta_log").exists()
    deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` (id INT, b INT) USING DELTA")
    with pytest.raises(DeltaMergeError, match="WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"):
        deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ALTER COLUMN b SET DEFAULT 1")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` SET {FEATURE}")
    deltamerge.sql(spark, f"ALTER TABLE delta.`{path}` ALTER COLUMN b SET DEFAULT 1")
    snap = DeltaLog.for_table(path).update()
    assert "allowColumnDefaults" in (snap.protocol.writer_features or ())
    assert snap.metadata.schema["fields"][1]["metadata"] == {"CURRENT_DEFAULT": "1"}


def test_merge_insert_and_update_take_defaults(spark, tmp_path: Path) -> None:
    path = _table(spark, tmp_path)
    deltamerge.sql(spark, f"INSERT INTO delta.`{path}` VALUES (1, 1, 'one', DATE'2020-01-01', 1)")
    spark.sql(
        "SELECT 1 AS id, 10 AS n UNION ALL SELECT 2, 20 UNION ALL SELECT 3, 30"
    ).createOrReplaceTempView("defaults_source")
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING defaults_source s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET b = DEFAULT, n = s.n "
        "WHEN NOT MATCHED AND s.id = 2 THEN INSERT (id, n) VALUES (s.id, s.n) "
        "WHEN NOT MATCHED THEN INSERT (id, b, s, d, n) VALUES (s.id, DEFAULT, DEFAULT, NULL, DEFAULT)",
    )
    assert _rows(spark, path) == [
        (1, 42, "one", "2020-01-01", 10),
        (2, 42, "ab", "2024-02-29", 20),
        (3, 42, "ab", None, None),
    ]


def test_merge_builder_takes_defaults(spark, tmp_path: Path) -> None:
    path = _table(spark, tmp_path)
    deltamerge.sql(spark, f"INSERT INTO delta.`{path}` (id, b) VALUES (1, 1)")
    source = spark.sql("SELECT 1 AS id, 'x' AS s UNION ALL SELECT 2, 'y'")
    table = DeltaTable.forPath(spark, path)
    table.alias("t").merge(source.alias("src"), "t.id = src.id").whenMatchedUpdate(
        set={"b": "DEFAULT", "s": "src.s"}
    ).whenNotMatchedInsert(values={"id": "src.id", "s": "src.s"}).execute()
    assert _rows(spark, path) == [(1, 42, "x", "2024-02-29", None), (2, 42, "y", "2024-02-29", None)]


def test_sql_insert_and_update_take_defaults(spark, tmp_path: Path) -> None:
    path = _table(spark, tmp_path)
    _run(
        spark,
        path,
        "INSERT INTO {t} (id) VALUES (1)",
        "INSERT INTO {t} VALUES (2, DEFAULT, 'given', DEFAULT, 2)",
        "INSERT INTO {t} (n, id) SELECT 3, 3",
        "UPDATE {t} SET s = DEFAULT WHERE id = 2",
    )
    assert _rows(spark, path) == [
        (1, 42, "ab", "2024-02-29", None),
        (2, 42, "ab", "2024-02-29", 2),
        (3, 42, "ab", "2024-02-29", 3),
    ]
    # A DataFrame append leaves a missing column NULL, as in delta-spark.
    deltamerge.write(spark.sql("SELECT 4 AS id"), path, mode="append")
    assert _rows(spark, path)[-1] == (4, None, None, None, None)


def test_set_and_drop_default(spark, tmp_path: Path) -> None:
    path = _table(spark, tmp_path)
    _run(
        spark,
        path,
        "ALTER TABLE {t} ALTER COLUMN b SET DEFAULT 100 + 1",
        "ALTER TABLE {t} ALTER COLUMN s DROP DEFAULT",
        "INSERT INTO {t} (id) VALUES (1)",
    )
    assert _rows(spark, path) == [(1, 101, None, "2024-02-29", None)]
    fields = {f["name"]: f["metadata"] for f in DeltaLog.for_table(path).update().metadata.schema["fields"]}
    assert fields["b"] == {"CURRENT_DEFAULT": "100 + 1", "EXISTS_DEFAULT": "42"}
    assert fields["s"] == {"EXISTS_DEFAULT": "CONCAT('a', 'b')"}


@pytest.mark.parametrize(
    ("column", "error_class"),
    [
        ("b INT DEFAULT id + 1", "INVALID_DEFAULT_VALUE.NOT_CONSTANT"),
        ("b DOUBLE DEFAULT rand()", "INVALID_DEFAULT_VALUE.NOT_CONSTANT"),
        ("b INT DEFAULT 'abc'", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ],
)
def test_invalid_defaults(spark, tmp_path: Path, column: str, error_class: str) -> None:
    with pytest.raises(DeltaMergeError, match=error_class):
        deltamerge.sql(
            spark, f"CREATE TABLE delta.`{tmp_path / 'bad'}` (id INT, {column}) USING DELTA {FEATURE}"
        )
    assert not (tmp_path / "bad" / "_delta_log").exists()
