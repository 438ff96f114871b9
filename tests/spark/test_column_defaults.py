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


@pytest.mark.sampled
@pytest.mark.parametrize(
    ("column", "error_class"),
    [
        ("b INT DEFAULT id + 1", "INVALID_DEFAULT_VALUE.UNRESOLVED_EXPRESSION"),
        ("b INT DEFAULT badvalue", "INVALID_DEFAULT_VALUE.UNRESOLVED_EXPRESSION"),
        ("b DOUBLE DEFAULT rand()", "INVALID_DEFAULT_VALUE.NOT_CONSTANT"),
        ("b INT DEFAULT (SELECT 42 AS alias)", "INVALID_DEFAULT_VALUE.SUBQUERY_EXPRESSION"),
        ("b BIGINT DEFAULT false", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
        ("b INT DEFAULT 'abc'", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
        ("b TINYINT DEFAULT 1000", "INVALID_DEFAULT_VALUE.DATA_TYPE"),
    ],
)
def test_invalid_defaults(spark, tmp_path: Path, column: str, error_class: str) -> None:
    with pytest.raises(DeltaMergeError, match=error_class):
        deltamerge.sql(
            spark, f"CREATE TABLE delta.`{tmp_path / 'bad'}` (id INT, {column}) USING DELTA {FEATURE}"
        )
    assert not (tmp_path / "bad" / "_delta_log").exists()


def test_delta_positive_cases(spark, tmp_path: Path) -> None:
    """Delta's ``DeltaInsertIntoTableSuite`` "Column DEFAULT value support with Delta Lake, positive
    tests" (catalog names become paths): defaults through VALUES, SET/DROP DEFAULT, a default on a
    partition column, every supported type."""
    t1, t4, t2 = (str(tmp_path / n) for n in ("t1", "t4", "t2"))
    _run(
        spark,
        t1,
        "CREATE TABLE {t} (a INT DEFAULT 42, b BOOLEAN DEFAULT true, c STRING DEFAULT 'abc') USING delta "
        f"PARTITIONED BY (a) {FEATURE}",
        "INSERT INTO {t} VALUES (1, false, DEFAULT)",
        "INSERT INTO {t} VALUES (1, DEFAULT, DEFAULT)",
        "ALTER TABLE {t} ALTER COLUMN c SET DEFAULT 'def'",
        "INSERT INTO {t} VALUES (DEFAULT, DEFAULT, DEFAULT)",
        "ALTER TABLE {t} ALTER COLUMN c DROP DEFAULT",
        "INSERT INTO {t} VALUES (DEFAULT, DEFAULT, DEFAULT)",
    )
    _run(
        spark, t4, f"CREATE TABLE {{t}} (a INT, b BOOLEAN, c STRING) USING delta PARTITIONED BY (a) {FEATURE}"
    )
    _run(spark, t4, f"INSERT INTO {{t}} (a, b, c) SELECT a, b, c FROM delta.`{t1}`")
    _run(spark, t1, f"INSERT OVERWRITE TABLE {{t}} SELECT * FROM delta.`{t4}`")
    rows = deltamerge.read(spark, t1).select("a", "b", "c").collect()
    got = sorted((tuple(r) for r in rows), key=lambda r: (r[0], r[1], r[2] or ""))
    assert got == [(1, False, "abc"), (1, True, "abc"), (42, True, None), (42, True, "def")]
    _run(
        spark,
        t2,
        "CREATE TABLE {t} (s BOOLEAN DEFAULT true, t BYTE DEFAULT CAST(NULL AS BYTE), "
        "u SHORT DEFAULT CAST(42 AS SHORT), v FLOAT DEFAULT 0, w DOUBLE DEFAULT 0, "
        "x DATE DEFAULT DATE'0001', y TIMESTAMP DEFAULT TIMESTAMP'2000-01-01', "
        "z DECIMAL(5, 2) DEFAULT 123.45, a1 BIGINT DEFAULT 43, a2 SMALLINT DEFAULT CAST(5 AS SMALLINT), "
        f"a3 TINYINT DEFAULT CAST(6 AS TINYINT)) USING delta {FEATURE}",
        "INSERT INTO {t} VALUES (DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, "
        "DEFAULT, DEFAULT, DEFAULT)",
    )
    (row,) = (
        deltamerge.read(spark, t2)
        .selectExpr("*", "CAST(x AS STRING) AS xs", "CAST(z AS STRING) AS zs")
        .collect()
    )
    assert (row.s, row.t, row.u, row.v, row.w, row.xs, row.zs, row.a1, row.a2, row.a3) == (
        True,
        None,
        42,
        0.0,
        0.0,
        "0001-01-01",
        "123.45",
        43,
        5,
        6,
    )
    t3 = str(tmp_path / "t3")
    _run(
        spark,
        t3,
        "CREATE TABLE {t} (i BOOLEAN, s BIGINT, q INT DEFAULT 42) USING delta PARTITIONED BY (i) " + FEATURE,
        "ALTER TABLE {t} ALTER COLUMN i SET DEFAULT true",
        "INSERT INTO {t} (i, s, q) VALUES (DEFAULT, DEFAULT, DEFAULT)",
    )
    assert [tuple(r) for r in deltamerge.read(spark, t3).select("i", "s", "q").collect()] == [
        (True, None, 42)
    ]


def test_delta_insert_select_with_defaults(spark, tmp_path: Path) -> None:
    """Delta's "Exercise column defaults with dataframe writes", SQL half: DEFAULT in an INSERT's
    select list, and columns left out of the column list."""
    t1, t2 = str(tmp_path / "t1"), str(tmp_path / "t2")
    create = f"CREATE TABLE {{t}} (j INT, s BIGINT DEFAULT 42, x BIGINT DEFAULT 43) USING delta {FEATURE}"
    _run(
        spark,
        t1,
        create,
        "INSERT INTO {t} (j) VALUES (1)",
        "INSERT INTO {t} (j, s) VALUES (2, DEFAULT)",
        "INSERT INTO {t} (j, s, x) VALUES (3, DEFAULT, DEFAULT)",
        "INSERT INTO {t} (j, s) VALUES (4, 44)",
        "INSERT INTO {t} (j, s, x) VALUES (5, 44, 45)",
    )
    src = f"delta.`{t1}`"
    _run(
        spark,
        t2,
        create,
        f"INSERT INTO {{t}} (j) SELECT j FROM {src} WHERE j = 1",
        f"INSERT INTO {{t}} (j, s) SELECT j, DEFAULT FROM {src} WHERE j = 2",
        f"INSERT INTO {{t}} (j, s, x) SELECT j, DEFAULT, DEFAULT FROM {src} WHERE j = 3",
        f"INSERT INTO {{t}} (j, s) SELECT j, s FROM {src} WHERE j = 4",
        f"INSERT INTO {{t}} (j, s, x) SELECT j, s, 45L FROM {src} WHERE j = 5",
    )
    expected = [(1, 42, 43), (2, 42, 43), (3, 42, 43), (4, 44, 43), (5, 44, 45)]
    for path in (t1, t2):
        assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == expected


def test_delta_negative_cases(spark, tmp_path: Path) -> None:
    """Delta's negative tests beyond the invalid expressions: ADD COLUMNS with a DEFAULT is refused;
    a NULL default on a NOT NULL column and a default breaking a CHECK constraint are accepted, and
    the inserts that use them fail."""
    path = str(tmp_path / "t")
    create = (
        f"CREATE TABLE {{t}} (i BOOLEAN, s BIGINT, q INT DEFAULT 42) USING delta PARTITIONED BY (i) {FEATURE}"
    )
    _run(spark, path, create)
    with pytest.raises(
        DeltaMergeError, match="WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED"
    ):
        _run(spark, path, "ALTER TABLE {t} ADD COLUMN z INT DEFAULT 42")
    _run(spark, path, "ALTER TABLE {t} ADD CONSTRAINT smallq CHECK (q < 10)")
    with pytest.raises(DeltaMergeError, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"):
        _run(spark, path, "INSERT INTO {t} VALUES (DEFAULT, DEFAULT, DEFAULT)")
    strict = str(tmp_path / "n")
    _run(
        spark,
        strict,
        "CREATE TABLE {t} (i BOOLEAN, s BIGINT, q INT DEFAULT NULL NOT NULL) USING delta "
        "PARTITIONED BY (i) " + FEATURE,
    )
    with pytest.raises(DeltaMergeError, match="DELTA_NOT_NULL_CONSTRAINT_VIOLATED"):
        _run(spark, strict, "INSERT INTO {t} VALUES (DEFAULT, DEFAULT, DEFAULT)")
