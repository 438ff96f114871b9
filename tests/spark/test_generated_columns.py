"""Generated columns (``GENERATED ALWAYS AS``): computed by appends, MERGE and UPDATE when not given,
checked when given (Delta's ``Generated Column`` constraint), readable and writable by delta-rs."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.cdf_read import read_changes
from deltamerge.errors import AnalysisError, InvariantViolationError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark


def _create(
    spark, path: str, *, dv: bool = False, cdf: bool = False, partitioned: bool = False
) -> DeltaTable:
    b = (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "BIGINT")
        .addColumn("v", "INT")
        .addColumn("g", "BIGINT", generatedAlwaysAs="id * 10 + v")
        .addColumn("ts", "TIMESTAMP")
        .addColumn("day", "DATE", generatedAlwaysAs="CAST(ts AS DATE)")
    )
    if partitioned:
        b = b.partitionedBy("day")
    if dv:
        b = b.property("delta.enableDeletionVectors", "true")
    if cdf:
        b = b.property("delta.enableChangeDataFeed", "true")
    b.execute()
    deltamerge.write(
        spark.sql(
            "SELECT CAST(id AS BIGINT) id, CAST(id AS INT) v, "
            "TIMESTAMP'2024-01-01 10:00:00' + make_interval(0, 0, 0, CAST(id AS INT)) ts FROM range(1, 4)"
        ),
        path,
        mode="append",
    )
    return DeltaTable.forPath(spark, path)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(
        (r.id, r.v, r.g, str(r.day))
        for r in deltamerge.read(spark, path).select("id", "v", "g", "day").collect()
    )


def _source(spark, rows: list[tuple[int, int]]):
    return spark.createDataFrame(rows, "id bigint, v int").selectExpr(
        "id", "v", "TIMESTAMP'2024-03-01 23:30:00' + make_interval(0, 0, 0, CAST(id AS INT)) AS ts"
    )


def test_protocol_and_append(spark, tmp_path):
    """A table with generated columns gets writer version 4; an append without them computes them."""
    path = str(tmp_path / "t")
    _create(spark, path)
    with open(os.path.join(path, "_delta_log", "00000000000000000000.json")) as f:
        first = json.loads(f.read().splitlines()[1])
    assert first["protocol"]["minWriterVersion"] == 4
    assert _rows(spark, path) == [
        (1, 1, 11, "2024-01-02"),
        (2, 2, 22, "2024-01-03"),
        (3, 3, 33, "2024-01-04"),
    ]


def test_append_with_the_right_value_passes_a_wrong_one_fails(spark, tmp_path):
    path = str(tmp_path / "t")
    t = _create(spark, path)
    deltamerge.write(
        spark.sql("SELECT 7L id, 1 v, 71L g, TIMESTAMP'2024-05-05 00:00:00' ts"), path, mode="append"
    )
    assert (7, 1, 71, "2024-05-05") in _rows(spark, path)
    before, rows = t.version(), _rows(spark, path)
    with pytest.raises(InvariantViolationError) as info:
        deltamerge.write(
            spark.sql("SELECT 8L id, 1 v, 5L g, TIMESTAMP'2024-05-05 00:00:00' ts"), path, mode="append"
        )
    msg = str(info.value)
    assert "[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES]" in msg and "CHECK constraint Generated Column" in msg
    assert " - g : 5" in msg and " - id : 8" in msg
    assert t.version() == before and _rows(spark, path) == rows


@pytest.mark.parametrize("mode", ["cow", "dv"])
def test_merge_computes_unset_generated_columns(spark, tmp_path, mode):
    """INSERT without the generated columns computes them from the inserted values; UPDATE (MATCHED
    and NOT MATCHED BY SOURCE) that does not assign them recomputes them from the row's new values."""
    path = str(tmp_path / "t")
    t = _create(spark, path, dv=mode == "dv")
    src = _source(spark, [(2, 50), (3, 60), (9, 90)])
    (
        t.alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(condition="s.id = 2", set={"v": "s.v"})
        .whenMatchedUpdate(set={"ts": "s.ts"})
        .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v + 1", "ts": "s.ts"})
        .whenNotMatchedBySourceUpdate(set={"v": "t.v + 1000"})
        .execute()
    )
    assert _rows(spark, path) == [
        (1, 1001, 1011, "2024-01-02"),  # NOT MATCHED BY SOURCE UPDATE recomputes g too
        (2, 50, 70, "2024-01-03"),  # v changed: g recomputed, day unchanged
        (3, 3, 33, "2024-03-04"),  # ts changed: day recomputed
        (9, 91, 181, "2024-03-10"),
    ]


def test_merge_with_explicit_values(spark, tmp_path):
    """A generated column set explicitly keeps the value when it is the computed one; a different
    value fails the MERGE with Delta's constraint error and leaves the table as it was."""
    path = str(tmp_path / "t")
    t = _create(spark, path)
    src = _source(spark, [(2, 50), (9, 90)])
    (
        t.alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"v": "s.v", "g": "t.id * 10 + s.v"})
        .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "ts": "s.ts", "g": "s.id * 10 + s.v"})
        .execute()
    )
    assert (2, 50, 70, "2024-01-03") in _rows(spark, path) and (9, 90, 180, "2024-03-10") in _rows(
        spark, path
    )
    before, rows = t.version(), _rows(spark, path)
    for on, build in (
        ("t.id = s.id", lambda b: b.whenMatchedUpdate(set={"g": "1"})),
        ("t.id = s.id + 100", lambda b: b.whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "g": "0"})),
    ):
        with pytest.raises(InvariantViolationError) as info:
            build(t.alias("t").merge(src.alias("s"), on)).execute()
        assert "CHECK constraint Generated Column" in str(info.value)
        assert t.version() == before and _rows(spark, path) == rows


def test_merge_star_clauses(spark, tmp_path):
    """``*`` without schema evolution needs every target column in the source, generated ones too
    (as in Delta); with schema evolution the missing generated columns are computed."""
    path = str(tmp_path / "t")
    t = _create(spark, path)
    src = _source(spark, [(2, 50), (9, 90)])
    with pytest.raises(AnalysisError) as info:
        t.alias("t").merge(src.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    assert info.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    (
        t.alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .withSchemaEvolution()
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert _rows(spark, path) == [
        (1, 1, 11, "2024-01-02"),
        (2, 50, 70, "2024-03-03"),
        (3, 3, 33, "2024-01-04"),
        (9, 90, 180, "2024-03-10"),
    ]


def test_case_variant_insert_columns_are_duplicates(spark, tmp_path):
    path = str(tmp_path / "t")
    t = _create(spark, path)
    src = _source(spark, [(9, 90)])
    with pytest.raises(AnalysisError) as info:
        (
            t.alias("t")
            .merge(src.alias("s"), "t.id = s.id")
            .whenNotMatchedInsert(values={"id": "s.id", "ID": "s.id", "v": "s.v", "ts": "s.ts"})
            .execute()
        )
    assert info.value.error_class == "DELTA_DUPLICATE_COLUMNS_ON_INSERT"


def test_sql_merge_update_and_partitioned_target(spark, tmp_path):
    """SQL MERGE and UPDATE on a table partitioned by a generated column: a changed input moves the
    row to the partition its new value computes."""
    path = str(tmp_path / "t")
    t = _create(spark, path, partitioned=True)
    _source(spark, [(3, 60), (9, 90)]).createOrReplaceTempView("gen_src")
    try:
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` t USING gen_src s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET ts = s.ts "
            "WHEN NOT MATCHED THEN INSERT (id, v, ts) VALUES (s.id, s.v, s.ts)",
        )
    finally:
        spark.catalog.dropTempView("gen_src")
    t.update("id = 1", {"v": "v + 4"})
    assert _rows(spark, path) == [
        (1, 5, 15, "2024-01-02"),
        (2, 2, 22, "2024-01-03"),
        (3, 3, 33, "2024-03-04"),
        (9, 90, 180, "2024-03-10"),
    ]
    days = {f.partition_values["day"] for f in snapshot_for(path).files}
    assert days == {"2024-01-02", "2024-01-03", "2024-03-04", "2024-03-10"}


def test_merge_change_data_feed_has_computed_values(spark, tmp_path):
    path = str(tmp_path / "t")
    t = _create(spark, path, cdf=True)
    src = _source(spark, [(2, 50)])
    t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"}).execute()
    changes = read_changes(spark, path, t.version())
    got = sorted((r._change_type, r.g) for r in changes.collect())
    assert got == [("update_postimage", 70), ("update_preimage", 22)]


def test_delta_rs_interop(spark, tmp_path):
    """delta-rs reads the values deltamerge computed, and deltamerge merges into a table delta-rs
    created with a generated column."""
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    _create(spark, path)
    src = _source(spark, [(2, 50), (9, 90)])
    DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(
        set={"v": "s.v"}
    ).whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "ts": "s.ts"}).execute()
    theirs = sorted(
        (r["id"], r["v"], r["g"]) for r in deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    )
    assert theirs == [(1, 1, 11), (2, 50, 70), (3, 3, 33), (9, 90, 180)]

    other = str(tmp_path / "rs")
    schema = deltalake.Schema(
        [
            deltalake.Field("id", "long"),
            deltalake.Field("v", "integer"),
            deltalake.Field("g", "long", metadata={"delta.generationExpression": "id * 10 + v"}),
        ]
    )
    deltalake.DeltaTable.create(other, schema)
    deltalake.write_deltalake(
        other,
        pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([1, 2], pa.int32())}),
        mode="append",
    )
    rs = DeltaTable.forPath(spark, other)
    rs.alias("t").merge(
        spark.createDataFrame([(2, 7), (5, 5)], "id bigint, v int").alias("s"), "t.id = s.id"
    ).whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"}).execute()
    assert sorted(tuple(r) for r in rs.toDF().collect()) == [(1, 1, 11), (2, 7, 27), (5, 5, 55)]
    assert sorted((r["id"], r["g"]) for r in deltalake.DeltaTable(other).to_pyarrow_table().to_pylist()) == [
        (1, 11),
        (2, 27),
        (5, 55),
    ]


@pytest.mark.parametrize(
    ("column_type", "expression", "error_class"),
    [
        ("BIGINT", "nope + 1", "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"),
        ("BIGINT", "g + 1", "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"),  # another generated column
        ("DOUBLE", "a + rand()", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN"),
        ("BIGINT", "max(a)", "DELTA_AGGREGATE_IN_GENERATED_COLUMN"),
        ("INT", "a * 2", "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH"),
    ],
)
def test_invalid_generation_expressions_are_refused(spark, tmp_path, column_type, expression, error_class):
    path = str(tmp_path / "t")
    with pytest.raises(AnalysisError) as info:
        (
            DeltaTable.create(spark)
            .location(path)
            .addColumn("a", "BIGINT")
            .addColumn("g", "BIGINT", generatedAlwaysAs="a + 1")
            .addColumn("h", column_type, generatedAlwaysAs=expression)
            .execute()
        )
    assert info.value.error_class == error_class
    assert not DeltaTable.isDeltaTable(spark, path)


def test_sql_create_table_with_generated_column(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, "
        "upper_name STRING GENERATED ALWAYS AS (upper(name))) USING delta",
    )
    deltamerge.write(spark.createDataFrame([(1, "ann")], "id bigint, name string"), path, mode="append")
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING (SELECT 1L AS id, 'bob' AS name UNION ALL SELECT 2L, 'cy') s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name "
        "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)",
    )
    got = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert got == [(1, "bob", "BOB"), (2, "cy", "CY")]


@pytest.mark.parametrize("kind", ["generated", "check", "unrelated"])
def test_type_widening_of_a_referenced_column_is_refused(spark, tmp_path, kind):
    """Delta's checkDependentExpressions: MERGE schema evolution may widen a column's type only
    when no CHECK constraint or generated column refers to it."""
    path = str(tmp_path / "t")
    b = (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "INT")
        .addColumn("a", "TINYINT")
        .addColumn("b", "TINYINT")
        .property("delta.enableTypeWidening", "true")
    )
    if kind == "generated":
        b = b.addColumn("g", "INT", generatedAlwaysAs="hash(a)")
    elif kind == "check":
        b = b.property("delta.constraints.ck", "hash(a) <> 0")
    t = b.execute()
    deltamerge.write(
        spark.sql("SELECT 1 id, CAST(2 AS TINYINT) a, CAST(3 AS TINYINT) b"), path, mode="append"
    )
    before = t.version()
    wide = "a" if kind != "unrelated" else "b"
    src = spark.sql(
        f"SELECT 1 id, {'200' if wide == 'a' else 'CAST(2 AS TINYINT)'} a, "
        f"{'300' if wide == 'b' else 'CAST(3 AS TINYINT)'} b"
    )
    merge = t.alias("t").merge(src.alias("s"), "t.id = s.id").withSchemaEvolution().whenMatchedUpdateAll()
    if kind == "unrelated":
        merge.execute()
        assert dict(deltamerge.read(spark, path).dtypes)["b"] == "int"
        return
    with pytest.raises(AnalysisError) as info:
        merge.execute()
    expected = (
        "DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH"
        if kind == "generated"
        else "DELTA_CONSTRAINT_DATA_TYPE_MISMATCH"
    )
    assert info.value.error_class == expected
    assert "Column a has data type TINYINT and cannot be altered to data type INT" in str(info.value)
    assert t.version() == before


def test_a_read_shows_no_writer_metadata_and_its_copy_is_a_plain_table(spark, tmp_path):
    """As Delta's read schema (DeltaTableUtils.removeInternalWriterMetadata): no generation
    expression, identity settings or type-widening history. Writing such a read to a new path makes
    a table without generated or identity columns (they were made before: a copy with the source's
    generation expressions) and without the column defaults, which only a CREATE TABLE asking for
    the allowColumnDefaults feature keeps (the copy failed with
    WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED)."""
    source, copy = str(tmp_path / "s"), str(tmp_path / "c")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{source}` (id BIGINT GENERATED ALWAYS AS IDENTITY, v INT, "
        "g INT GENERATED ALWAYS AS (v * 2), c STRING DEFAULT 'x' COMMENT 'note') USING delta "
        "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
    )
    deltamerge.sql(spark, f"INSERT INTO delta.`{source}` (v) VALUES (1), (2)")
    df = deltamerge.read(spark, source)
    assert [dict(f.metadata) for f in df.schema.fields[:3]] == [{}, {}, {}]
    assert DeltaTable.forPath(spark, source).toDF().schema == df.schema
    deltamerge.write(df, copy)
    snap = snapshot_for(copy)
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 2)
    fields = json.loads(snap.metadata.schema_string)["fields"]
    assert [f["metadata"] for f in fields] == [{}, {}, {}, {"comment": "note"}]
    rows = sorted(tuple(r) for r in deltamerge.read(spark, copy).collect())
    assert rows == [(1, 1, 2, "x"), (2, 2, 4, "x")]
