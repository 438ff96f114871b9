"""MERGE schema evolution and store-assignment casts end to end (Delta's MergeIntoSchemaEvolutionSuite).

Each test writes a target table, merges through the builder (or SQL), and checks rows, schema and
the commit; error cases check that the table is unchanged (version, schema, rows). The delta-rs
tests compare top-level evolution with ``merge(..., merge_schema=True)`` and check that delta-rs
reads every evolved table deltamerge wrote.
"""

from __future__ import annotations

import json
import math
import os
import shutil

import pyarrow as pa
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog
from deltamerge.merge import analysis, command

pytestmark = pytest.mark.spark


@pytest.fixture
def conf(spark_conf):
    """``conf(spark__sql__x="v")``: keyword form of ``spark_conf`` (``__`` stands for ``.``)."""
    return lambda **values: spark_conf({k.replace("__", "."): v for k, v in values.items()})


def norm(value):
    if hasattr(value, "asDict"):
        return norm(value.asDict(recursive=True))
    if isinstance(value, dict):
        return tuple(sorted((k, norm(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(norm(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def rows(df) -> list:
    return sorted((norm(list(r)) for r in df.collect()), key=repr)


def make(spark, path, data, ddl, configuration=None):
    df = spark.createDataFrame(data, ddl)
    deltamerge.write(df, path, configuration=configuration)
    return DeltaTable.forPath(spark, path)


def expected(spark, data, ddl) -> list:
    return rows(spark.createDataFrame(data, ddl))


def state(spark, path):
    dt = DeltaTable.forPath(spark, path)
    return dt.version(), dt.toDF().schema.simpleString(), rows(dt.toDF())


def merge(spark, path, source, *, evolve=True, update=None, insert=None, cond="t.key = s.key"):
    m = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), cond)
    if update == "*":
        m = m.whenMatchedUpdateAll()
    elif update:
        m = m.whenMatchedUpdate(set=update)
    if insert == "*":
        m = m.whenNotMatchedInsertAll()
    elif insert:
        m = m.whenNotMatchedInsert(values=insert)
    if evolve:
        m = m.withSchemaEvolution()
    return m.execute()


def committed_schema(path) -> dict:
    return json.loads(DeltaLog.for_table(path).update().metadata.schema_string)


# --- nested evolution -----------------------------------------------------------------------------------


def test_struct_in_struct_update_star_and_insert_star(spark, tmp_path):
    path = str(tmp_path / "t")
    ddl_t = "key int, x struct<a:int, y:struct<p:int, q:int>>"
    make(spark, path, [(1, (1, (10, 100))), (2, (2, (20, 200)))], ddl_t)
    ddl_s = "key int, x struct<y:struct<r:string, p:int>, a:int, b:string>"
    src = spark.createDataFrame([(1, ((("r1"), 11), 5, "b1")), (3, (("r3", 33), 7, "b3"))], ddl_s)
    merge(spark, path, src, update="*", insert="*")
    out = DeltaTable.forPath(spark, path).toDF()
    want = "key int, x struct<a:int, y:struct<p:int, q:int, r:string>, b:string>"
    assert out.schema.simpleString() == spark.createDataFrame([], want).schema.simpleString()
    # UPDATE * keeps the target-only nested field q; INSERT * leaves it NULL.
    assert rows(out) == expected(
        spark,
        [(1, (5, (11, 100, "r1"), "b1")), (2, (2, (20, 200, None), None)), (3, (7, (33, None, "r3"), "b3"))],
        want,
    )


def test_array_of_struct_and_map_of_struct_evolution(spark, tmp_path):
    path = str(tmp_path / "t")
    ddl_t = "key int, arr array<struct<a:int, b:int>>, m map<string, struct<v:int>>"
    make(spark, path, [(1, [(1, 2)], {"k": (1,)}), (2, [(3, 4)], {"k": (2,)})], ddl_t)
    ddl_s = "key int, arr array<struct<c:string, b:int, a:int>>, m map<string, struct<w:string, v:int>>"
    src = spark.createDataFrame([(1, [("c1", 20, 10)], {"k": ("w1", 5)}), (3, [("c3", 40, 30)], None)], ddl_s)
    merge(spark, path, src, update="*", insert="*")
    out = DeltaTable.forPath(spark, path).toDF()
    want = "key int, arr array<struct<a:int, b:int, c:string>>, m map<string, struct<v:int, w:string>>"
    assert out.schema.simpleString() == spark.createDataFrame([], want).schema.simpleString()
    assert rows(out) == expected(
        spark,
        [
            (1, [(10, 20, "c1")], {"k": (5, "w1")}),
            (2, [(3, 4, None)], {"k": (2, None)}),
            (3, [(30, 40, "c3")], None),
        ],
        want,
    )


def test_fewer_nested_fields_need_evolution(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(1, (1, 2, 3))], "key int, x struct<a:int, b:int, c:int>")
    src = spark.createDataFrame([(2, (20, 40))], "key int, x struct<a:int, c:int>")
    before = state(spark, path)
    with pytest.raises(Exception, match="All nested columns must match"):
        merge(spark, path, src, evolve=False, insert="*")
    assert state(spark, path) == before
    merge(spark, path, src, insert="*")
    assert rows(DeltaTable.forPath(spark, path).toDF()) == expected(
        spark, [(1, (1, 2, 3)), (2, (20, None, 40))], "key int, x struct<a:int, b:int, c:int>"
    )


def test_null_source_structs_stay_null(spark, tmp_path, conf):
    path = str(tmp_path / "t")
    ddl = "key int, x struct<a:int, b:int>"
    make(spark, path, [(1, (1, 2)), (2, (3, 4)), (3, None)], ddl)
    src = spark.createDataFrame([(1, None), (3, None), (4, None)], "key int, x struct<a:int>")
    merge(spark, path, src, update="*", insert="*")
    # UPDATE * with evolution: a NULL source struct keeps the target-only field b of row 1 (the
    # struct is NULL only when the target struct is NULL too); INSERT: NULL stays NULL.
    assert rows(DeltaTable.forPath(spark, path).toDF()) == expected(
        spark, [(1, (None, 2)), (2, (3, 4)), (3, None), (4, None)], ddl
    )
    path2 = str(tmp_path / "t2")
    make(spark, path2, [(1, (1, 2))], ddl)
    merge(spark, path2, src, update={"x": "s.x"})
    assert rows(DeltaTable.forPath(spark, path2).toDF()) == expected(spark, [(1, None)], ddl)
    path3 = str(tmp_path / "t3")
    make(spark, path3, [(1, (1, 2))], ddl)
    conf(spark__databricks__delta__merge__preserveNullSourceStructs="false")
    merge(spark, path3, src, update={"x": "s.x"})
    assert rows(DeltaTable.forPath(spark, path3).toDF()) == expected(spark, [(1, (None, None))], ddl)


# --- names --------------------------------------------------------------------------------------------


def test_case_sensitivity(spark, tmp_path, conf):
    path = str(tmp_path / "t")
    make(spark, path, [(0, 0), (1, 10)], "key int, value int")
    src = spark.createDataFrame([(1, 1, "e1"), (2, 2, "e2")], "key int, value int, EXTRA string")
    conf(spark__sql__caseSensitive="true")
    merge(spark, path, src, insert={"key": "s.key", "EXTRA": "s.EXTRA"})
    out = DeltaTable.forPath(spark, path).toDF()
    assert out.columns == ["key", "value", "EXTRA"]
    assert rows(out) == expected(
        spark, [(0, 0, None), (1, 10, None), (2, None, "e2")], "key int, value int, EXTRA string"
    )
    conf(spark__sql__caseSensitive="false")
    src2 = spark.createDataFrame([(3, 3, "x")], "KEY int, VALUE int, extra string")
    merge(spark, path, src2, evolve=False, insert="*", cond="t.key = s.KEY")
    assert (3, 3, "x") in [tuple(r) for r in DeltaTable.forPath(spark, path).toDF().collect()]


# --- store assignment policies -----------------------------------------------------------------------


def test_policies_string_into_int(spark, tmp_path, conf):
    src = spark.createDataFrame([(1, "1"), (2, "2"), (5, "notANumber")], "key int, value string")
    for policy, want in (("LEGACY", [(0, 0), (1, 10), (2, 2), (5, None)]), ("ANSI", None), ("STRICT", None)):
        path = str(tmp_path / policy)
        make(spark, path, [(0, 0), (1, 10)], "key int, value int")
        conf(spark__sql__storeAssignmentPolicy=policy)
        before = state(spark, path)
        if want is not None:
            merge(spark, path, src, insert="*")
            assert rows(DeltaTable.forPath(spark, path).toDF()) == expected(spark, want, "key int, value int")
            continue
        error = "CAST_INVALID_INPUT" if policy == "ANSI" else 'Cannot up cast s.value from "STRING" to "INT"'
        with pytest.raises(Exception, match=error):
            merge(spark, path, src, insert="*")
        assert state(spark, path) == before


def test_legacy_double_and_long_into_int(spark, tmp_path, conf):
    conf(spark__sql__storeAssignmentPolicy="LEGACY")
    path = str(tmp_path / "t")
    make(spark, path, [(0, 0, 0)], "key int, value int, small tinyint")
    src = spark.createDataFrame(
        [(1, float("inf"), 300), (2, float("nan"), -129), (3, 2.7, 5)], "key int, value double, small bigint"
    )
    merge(spark, path, src, evolve=False, insert="*")
    assert rows(DeltaTable.forPath(spark, path).toDF()) == expected(
        spark, [(0, 0, 0), (1, 2147483647, 44), (2, 0, 127), (3, 2, 5)], "key int, value int, small tinyint"
    )


def test_ansi_overflow_is_delta_error_and_leaves_table_unchanged(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(1, 1)], "key int, value int")
    src = spark.createDataFrame([(1, 2**40, "x"), (2, 2, "y")], "key int, value bigint, extra string")
    before = state(spark, path)
    with pytest.raises(Exception) as info:
        merge(spark, path, src, update="*", insert="*")
    assert "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE" in str(info.value)
    assert 'Failed to write a value of "BIGINT" type into the "INT" type column `value`' in str(info.value)
    assert state(spark, path) == before
    assert committed_schema(path)["fields"][-1]["name"] == "value"
    ok = spark.createDataFrame([(1, 5, "x")], "key int, value bigint, extra string")
    merge(spark, path, ok, evolve=False, update="*")
    assert rows(DeltaTable.forPath(spark, path).toDF()) == [(1, 5)]


def test_implicit_casts_without_evolution(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(1, 1.5, "a")], "key int, d double, s string")
    src = spark.createDataFrame([(1, 7, 3.25), (2, 8, 4.5)], "key int, d int, s double")
    merge(spark, path, src, evolve=False, update="*", insert="*")
    assert rows(DeltaTable.forPath(spark, path).toDF()) == [(1, 7.0, "3.25"), (2, 8.0, "4.5")]


def test_failed_evolution_leaves_table_unchanged(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(0, 0), (1, 10)], "key int, value int")
    src = spark.createDataFrame([(1, bytearray(b"\x01"), "e")], "key int, value binary, extra string")
    before = state(spark, path)
    files = sorted(os.listdir(path))
    with pytest.raises(Exception, match="Failed to merge incompatible data types IntegerType and BinaryType"):
        merge(spark, path, src, update="*", insert="*")
    assert state(spark, path) == before
    assert sorted(os.listdir(path)) == files


def test_void_columns_allowed_unless_dropped(spark, tmp_path, conf):
    path = str(tmp_path / "t")
    make(spark, path, [(1, 1)], "key int, value int")
    src = spark.sql("SELECT 1 AS key, 100 AS value, NULL AS extra UNION ALL SELECT 2, 200, NULL")
    conf(spark__databricks__delta__createDataFrame__dropNullColumns="true")
    before = state(spark, path)
    with pytest.raises(Exception, match="Cannot add column `extra` with type VOID"):
        merge(spark, path, src, update="*", insert="*")
    assert state(spark, path) == before
    conf(spark__databricks__delta__createDataFrame__dropNullColumns="false")
    merge(spark, path, src, update="*", insert="*")
    out = DeltaTable.forPath(spark, path).toDF()
    assert out.schema.simpleString() == "struct<key:int,value:int,extra:void>"
    assert rows(out) == [(1, 100, None), (2, 200, None)]


# --- type widening ------------------------------------------------------------------------------------


@pytest.fixture
def with_table_configuration(monkeypatch):
    """Pass the table configuration to analysis (until ``prepare`` passes it itself)."""

    def wrapped(spec, schema, **kw):
        root = wrapped.root
        configuration = dict(DeltaLog.for_table(root).update().metadata.configuration)
        kw.setdefault("table_configuration", configuration)
        return analysis.analyze(spec, schema, **kw)

    monkeypatch.setattr(command, "analyze", wrapped)
    return wrapped


@pytest.mark.parametrize("mode", ["always", "same_family_type", "never"])
def test_type_widening_modes(spark, tmp_path, conf, with_table_configuration, mode):
    path = str(tmp_path / "t")
    with_table_configuration.root = path
    ddl = "key int, s smallint, f float, i int"
    make(spark, path, [(0, 1, 1.5, 7)], ddl, configuration={"delta.enableTypeWidening": "true"})
    conf(spark__databricks__delta__typeWidening__allowAutomaticWidening=mode)
    src = spark.createDataFrame([(1, 40000, 2.5, 3.5)], "key int, s int, f double, i double")
    if mode == "never":
        with pytest.raises(Exception, match="DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"):
            merge(spark, path, src, insert="*")
        return
    merge(spark, path, src, insert="*")
    out = DeltaTable.forPath(spark, path).toDF()
    i_type = "double" if mode == "always" else "int"
    assert out.schema.simpleString() == f"struct<key:int,s:int,f:double,i:{i_type}>"
    widened = mode == "always"
    want = [(0, 1, 1.5, 7.0 if widened else 7), (1, 40000, 2.5, 3.5 if widened else 3)]
    assert rows(out) == expected(spark, want, out.schema)
    fields = {f["name"]: f for f in committed_schema(path)["fields"]}
    assert fields["s"]["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"}]
    assert fields["f"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double"}]
    assert ("delta.typeChanges" in fields["i"]["metadata"]) == (mode == "always")


def test_without_type_widening_wider_values_are_cast_down(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(0,)], "a smallint")
    src = spark.createDataFrame([(20,), (40000,)], "a int")
    with pytest.raises(Exception, match='type into the "SMALLINT" type column `a`'):
        merge(spark, path, src, insert="*", cond="t.a = s.a")
    merge(spark, path, src.where("a < 100"), insert="*", cond="t.a = s.a")
    out = DeltaTable.forPath(spark, path).toDF()
    assert out.schema.simpleString() == "struct<a:smallint>"
    assert rows(out) == [(0,), (20,)]


# --- delta-rs -----------------------------------------------------------------------------------------

deltalake = pytest.importorskip("deltalake")


def _deltars_rows(path: str, columns: list[str]) -> list:
    table = deltalake.DeltaTable(path).to_pyarrow_table()
    return sorted((tuple(norm(r[c]) for c in columns) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("clauses", ["insert", "update", "both"])
def test_top_level_evolution_matches_deltars(spark, tmp_path, clauses):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    target = [(0, 0), (1, 10), (3, 30)]
    make(spark, ours, target, "key long, value long")
    deltalake.write_deltalake(theirs, pa.table({"key": [0, 1, 3], "value": [0, 10, 30]}))
    source = {"key": [1, 2], "value": [1, 2], "extra": ["e1", "e2"]}
    src = spark.createDataFrame(
        list(zip(*source.values(), strict=True)), "key long, value long, extra string"
    )
    update = "*" if clauses in ("update", "both") else None
    insert = "*" if clauses in ("insert", "both") else None
    merge(spark, ours, src, update=update, insert=insert)
    m = deltalake.DeltaTable(theirs).merge(
        pa.table(source), "t.key = s.key", source_alias="s", target_alias="t", merge_schema=True
    )
    if update:
        m = m.when_matched_update_all()
    if insert:
        m = m.when_not_matched_insert_all()
    m.execute()
    columns = ["key", "value", "extra"]
    assert _deltars_rows(ours, columns) == _deltars_rows(theirs, columns)
    assert rows(DeltaTable.forPath(spark, ours).toDF()) == _deltars_rows(theirs, columns)
    ours_schema = deltalake.DeltaTable(ours).schema().to_arrow()
    theirs_schema = deltalake.DeltaTable(theirs).schema().to_arrow()
    assert [(f.name, str(f.type)) for f in ours_schema] == [(f.name, str(f.type)) for f in theirs_schema]


def test_deltars_reads_nested_evolution(spark, tmp_path):
    path = str(tmp_path / "t")
    make(spark, path, [(1, (1, 2)), (2, (3, 4))], "key long, x struct<a:long, b:long>")
    src = spark.createDataFrame([(1, (10, "c1")), (5, (50, "c5"))], "key long, x struct<a:long, c:string>")
    merge(spark, path, src, update="*", insert="*")
    got = deltalake.DeltaTable(path).to_pyarrow_table().sort_by("key").to_pylist()
    assert got == [
        {"key": 1, "x": {"a": 10, "b": 2, "c": "c1"}},
        {"key": 2, "x": {"a": 3, "b": 4, "c": None}},
        {"key": 5, "x": {"a": 50, "b": None, "c": "c5"}},
    ]


def test_deltars_reads_widened_table(spark, tmp_path, with_table_configuration):
    path = str(tmp_path / "t")
    with_table_configuration.root = path
    make(spark, path, [(0, 1)], "key int, s smallint", configuration={"delta.enableTypeWidening": "true"})
    merge(spark, path, spark.createDataFrame([(1, 70000)], "key int, s int"), insert="*")
    try:
        table = deltalake.DeltaTable(path).to_pyarrow_table()
    except Exception as e:  # delta-rs without the typeWidening reader feature refuses the table
        assert "typeWidening" in str(e)
        return
    assert sorted(table.to_pylist(), key=lambda r: r["key"]) == [{"key": 0, "s": 1}, {"key": 1, "s": 70000}]
    shutil.rmtree(path)
