"""MERGE analysis, schema evolution and cast construction without Spark.

The source is a stand-in with a ``schema``; settings are passed explicitly, so value types come
from the schemas (plain references and literals) and nothing is sent to Spark.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)

from deltamerge.errors import AnalysisError
from deltamerge.merge.analysis import AnalysisSettings, analyze
from deltamerge.merge.casting import CastSettings
from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
from deltamerge.merge.evolution import (
    Widening,
    add_type_change_metadata,
    can_up_cast,
    catalog_string,
    filter_schema,
    implicit_cast_type,
    merge_schemas,
    scala_string,
    sql_type,
)
from deltamerge.merge.leaf_casts import translate_runtime_error
from deltamerge.predicates import parse_expression, to_sql


def st(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields])  # type: ignore[arg-type]


I, S, L = IntegerType(), StringType(), LongType()  # noqa: E741


def spec(
    source: StructType, *clauses: MergeClause, evolve: bool = False, on: str = "t.key = s.key"
) -> MergeSpec:
    return MergeSpec(
        source=SimpleNamespace(schema=source),  # type: ignore[arg-type]
        condition=parse_expression(on),
        clauses=tuple(clauses),
        target_alias="t",
        source_alias="s",
        schema_evolution=evolve,
    )


def update(*pairs: tuple[str, str], condition: str | None = None, star: bool = False) -> MergeClause:
    assigns = None if star else tuple(Assignment(tuple(k.split(".")), parse_expression(v)) for k, v in pairs)
    cond = parse_expression(condition) if condition else None
    return MergeClause(ClauseKind.MATCHED, ActionType.UPDATE, cond, assigns)


def insert(*pairs: tuple[str, str], star: bool = False) -> MergeClause:
    assigns = None if star else tuple(Assignment(tuple(k.split(".")), parse_expression(v)) for k, v in pairs)
    return MergeClause(ClauseKind.NOT_MATCHED, ActionType.INSERT, None, assigns)


def run(
    target,
    source,
    *clauses,
    evolve=False,
    case_sensitive=False,
    policy="ANSI",
    on="t.key = s.key",
    **settings,
):
    cast = CastSettings(policy=policy, case_sensitive=case_sensitive)
    s = AnalysisSettings(cast=cast, **settings)
    merge = spec(source, *clauses, evolve=evolve, on=on)
    return analyze(merge, target, case_sensitive=case_sensitive, evolve=evolve, settings=s)


# --- type predicates and rendering -------------------------------------------------------------------


def test_type_renderings_match_spark_and_delta():
    nested = st(("a", I), ("b c", ArrayType(DecimalType(10, 2))))
    assert scala_string(I) == "IntegerType"
    assert scala_string(DecimalType(10, 2)) == "DecimalType(10,2)"
    assert scala_string(MapType(S, I)) == "MapType(StringType,IntegerType,true)"
    assert sql_type(nested) == "STRUCT<a: INT, `b c`: ARRAY<DECIMAL(10,2)>>"
    assert catalog_string(nested) == "struct<a:int,`b c`:array<decimal(10,2)>>"


@pytest.mark.parametrize(
    "src,dst,ok",
    [
        (I, L, True),
        (L, I, False),
        (S, I, False),
        (I, S, True),
        (ShortType(), DecimalType(5, 0), True),
        (I, DecimalType(9, 0), False),
        (DecimalType(5, 2), DecimalType(7, 3), True),
        (DecimalType(5, 2), DoubleType(), False),
        (FloatType(), DoubleType(), True),
        (DateType(), TimestampNTZType(), True),
        (NullType(), st(("a", I)), True),
        (st(("a", I)), st(("a", L)), True),
        (ArrayType(I), ArrayType(L), True),
        (BinaryType(), I, False),
    ],
)
def test_can_up_cast(src, dst, ok):
    assert can_up_cast(src, dst) is ok


def test_implicit_casts_of_type_coercion():
    assert implicit_cast_type(S, I) == I
    assert implicit_cast_type(L, I) == I
    assert implicit_cast_type(I, S) == S
    assert implicit_cast_type(S, BooleanType()) is None
    assert implicit_cast_type(BinaryType(), I) is None
    assert implicit_cast_type(DateType(), TimestampNTZType()) == TimestampNTZType()


# --- filterSchema and mergeSchemas ------------------------------------------------------------------


def test_filter_schema_keeps_assigned_paths_only():
    source = st(("key", I), ("x", st(("a", I), ("b", I))), ("unused", S))
    out = filter_schema(source, [("key",), ("X", "b")], case_sensitive=False)
    assert out == st(("key", I), ("x", st(("b", I))))
    assert filter_schema(source, [("X", "b")], case_sensitive=True) == st()


def test_merge_appends_new_columns_and_nested_fields_at_the_end():
    target = st(("key", I), ("x", st(("a", I), ("c", I))), ("arr", ArrayType(st(("p", I)))))
    data = st(
        ("extra", S),
        ("X", st(("b", I), ("a", L), ("c", I))),
        ("arr", ArrayType(st(("q", S), ("p", I)))),
        ("m", MapType(S, st(("v", I)))),
    )
    merged = merge_schemas(target, data)
    assert [f.name for f in merged.fields] == ["key", "x", "arr", "extra", "m"]
    assert merged["x"].dataType == st(("a", I), ("c", I), ("b", I))  # long -> int: target type stays
    assert merged["arr"].dataType == ArrayType(st(("p", I), ("q", S)))
    assert all(f.nullable for f in merged.fields)


def test_merge_incompatible_types_reports_field_and_types():
    with pytest.raises(AnalysisError) as info:
        merge_schemas(st(("key", I), ("value", I)), st(("value", BinaryType())))
    assert info.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    assert "Failed to merge incompatible data types IntegerType and BinaryType" in str(info.value)
    assert info.value.__cause__.error_class == "DELTA_MERGE_INCOMPATIBLE_DATATYPE"
    with pytest.raises(AnalysisError, match="BooleanType and StringType"):
        merge_schemas(st(("v", BooleanType())), st(("v", S)))
    with pytest.raises(AnalysisError, match="DELTA_DUPLICATE_COLUMNS_FOUND"):
        merge_schemas(st(("v", I)), st(("v", I), ("V", I)))


def test_type_widening_modes():
    target, data = (
        st(("a", ShortType()), ("b", I), ("c", FloatType())),
        st(("a", I), ("b", DoubleType()), ("c", DoubleType())),
    )
    always = merge_schemas(target, data, widening=Widening("always"))
    assert [f.dataType for f in always.fields] == [I, DoubleType(), DoubleType()]
    family = merge_schemas(target, data, widening=Widening("same_family_type"))
    assert [f.dataType for f in family.fields] == [I, I, DoubleType()]
    never = merge_schemas(target, data, widening=Widening("never"))
    assert never == target
    assert merge_schemas(target, data) == target  # no widening without the table feature
    iceberg = merge_schemas(
        st(("d", DecimalType(5, 2))), st(("d", DecimalType(8, 3))), widening=Widening("always", True)
    )
    assert iceberg["d"].dataType == DecimalType(5, 2)


def test_type_change_metadata_format():
    old = st(("e", ShortType()), ("m", MapType(FloatType(), I)), ("s", st(("x", ByteType()))))
    new = st(("e", I), ("m", MapType(DoubleType(), I)), ("s", st(("x", I))), ("n", S))
    out = add_type_change_metadata(new, old)
    assert out["e"].metadata["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"}]
    assert out["m"].metadata["delta.typeChanges"] == [
        {"fromType": "float", "toType": "double", "fieldPath": "key"}
    ]
    assert out["s"].dataType["x"].metadata["delta.typeChanges"] == [{"fromType": "byte", "toType": "integer"}]
    again = add_type_change_metadata(StructType([StructField("e", L, True, out["e"].metadata)]), out)
    assert [c["toType"] for c in again["e"].metadata["delta.typeChanges"]] == ["integer", "long"]
    assert json.loads(json.dumps(again.jsonValue()))["fields"][0]["metadata"]["delta.typeChanges"][1] == {
        "fromType": "integer",
        "toType": "long",
    }


# --- resolution and star expansion ---------------------------------------------------------------------

TARGET = st(("key", I), ("value", I))
SOURCE = st(("key", I), ("value", I), ("extra", S))


def test_star_without_evolution_ignores_extra_source_columns():
    rm = run(TARGET, SOURCE, update(star=True), insert(star=True))
    assert rm.final_schema == TARGET
    assert [to_sql(o) for o in rm.clauses[0].outputs] == ["__s0", "__s1"]


def test_star_without_evolution_needs_every_target_column():
    with pytest.raises(
        AnalysisError, match=re.escape("Cannot resolve extra in UPDATE clause given columns s.key, s.value")
    ):
        run(st(("key", I), ("value", I), ("extra", I)), st(("key", I), ("value", I)), update(star=True))


def test_update_star_with_evolution_adds_columns_and_keeps_target_only_ones():
    rm = run(st(("key", I), ("value", I), ("tonly", I)), SOURCE, update(star=True), evolve=True)
    assert [f.name for f in rm.final_schema.fields] == ["key", "value", "tonly", "extra"]
    outs = rm.clauses[0].outputs
    assert outs[2] is None  # target-only column keeps its value
    assert to_sql(outs[3]) == "__s2"


def test_only_assigned_source_columns_are_added():
    source = st(("key", I), ("value", I), ("extra", S), ("unused", S))
    rm = run(TARGET, source, update(("extra", "s.extra")), insert(("key", "s.key")), evolve=True)
    assert [f.name for f in rm.final_schema.fields] == ["key", "value", "extra"]
    assert [to_sql(o) for o in rm.clauses[1].outputs] == ["__s0", "CAST(NULL AS INT)", "CAST(NULL AS STRING)"]


def test_new_column_needs_evolution_and_not_matched_by_source_cannot_add_it():
    with pytest.raises(
        AnalysisError, match=re.escape("Cannot resolve extra in UPDATE clause given columns t.key, t.value")
    ):
        run(TARGET, SOURCE, update(("extra", "s.extra")))
    nmbs = MergeClause(
        ClauseKind.NOT_MATCHED_BY_SOURCE,
        ActionType.UPDATE,
        None,
        (Assignment(("extra",), parse_expression("1")),),
    )
    with pytest.raises(AnalysisError, match="Cannot resolve extra in UPDATE clause"):
        run(TARGET, SOURCE, insert(star=True), nmbs, evolve=True)


def test_assignment_key_qualified_with_source_alias_resolves_on_the_source():
    rm = run(TARGET, SOURCE, update(("s.value", "s.value")), evolve=True)
    assert rm.final_schema == TARGET
    assert to_sql(rm.clauses[0].outputs[1]) == "__s1"


def test_case_insensitive_insert_allows_case_variant_duplicates_first_wins():
    source = st(("key", I), ("VALUE", I))
    rm = run(TARGET, source, insert(("key", "s.key"), ("value", "s.value"), ("VALUE", "s.VALUE")))
    assert [to_sql(o) for o in rm.clauses[0].outputs] == ["__s0", "__s1"]
    with pytest.raises(AnalysisError, match="Duplicate column names in INSERT clause"):
        run(TARGET, source, insert(("key", "s.key"), ("key", "s.key")))


def test_case_sensitive_new_column():
    source = st(("key", I), ("value", I), ("EXTRA", S))
    rm = run(TARGET, source, insert(("key", "s.key"), ("EXTRA", "s.EXTRA")), evolve=True, case_sensitive=True)
    assert [f.name for f in rm.final_schema.fields] == ["key", "value", "EXTRA"]
    with pytest.raises(AnalysisError, match=re.escape("Cannot resolve s.value in INSERT clause")):
        run(
            TARGET,
            st(("key", I), ("VALUE", I)),
            insert(("key", "s.key"), ("value", "s.value")),
            case_sensitive=True,
        )


def test_conflicting_set_columns_and_nested_insert():
    target = st(("key", S), ("value", st(("a", L))))
    with pytest.raises(AnalysisError, match=r"conflict from these SET columns: \[`value.a`, `value`\]"):
        run(target, target, update(("value.a", "2"), ("value", "s.value")))
    with pytest.raises(AnalysisError, match="DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION"):
        run(target, target, insert(("value.a", "s.value.a")))
    with pytest.raises(AnalysisError, match="No such struct field `b` in `a`"):
        run(target, target, update(("value.b", "1")))


def test_nested_update_of_map_is_refused():
    target = st(("key", S), ("m", MapType(S, I)))
    with pytest.raises(AnalysisError, match="Updating nested fields is only supported for StructType"):
        run(target, target, update(("m.a", "1")))


def test_new_nested_field_by_nested_set_with_evolution():
    target = st(("key", I), ("x", st(("a", I))))
    source = st(("key", I), ("x", st(("a", I), ("b", I))))
    rm = run(target, source, update(("x.b", "s.x.b")), evolve=True)
    assert rm.final_schema["x"].dataType == st(("a", I), ("b", I))
    assert to_sql(rm.clauses[0].outputs[1]) == "NAMED_STRUCT('a', __t1.`a`, 'b', __s1.`b`)"


def test_empty_target_needs_evolution_and_void_columns_can_be_refused():
    with pytest.raises(AnalysisError, match="DELTA_MERGE_INTO_EMPTY_SCHEMA_TARGET"):
        run(st(), SOURCE, insert(star=True), on="s.key > 0")
    assert run(st(), SOURCE, insert(star=True), evolve=True, on="s.key > 0").final_schema == SOURCE
    void = st(("key", I), ("value", I), ("extra", NullType()))
    with pytest.raises(AnalysisError, match="Cannot add column `extra` with type VOID"):
        run(TARGET, void, update(star=True), insert(star=True), evolve=True, drop_null_columns=True)


# --- casts -------------------------------------------------------------------------------------------


def test_struct_cast_by_name_with_null_preservation():
    target = st(("key", I), ("x", st(("a", I), ("b", I), ("c", I))))
    source = st(("key", I), ("x", st(("c", I), ("a", I))))
    with pytest.raises(AnalysisError) as info:
        run(target, source, insert(star=True))
    assert (
        "Cannot cast struct<c:int,a:int> to struct<a:int,b:int,c:int>. All nested columns must match."
        in str(info.value)
    )
    rm = run(target, source, insert(star=True), evolve=True)
    sql = to_sql(rm.clauses[0].outputs[1])
    assert sql == (
        "IF((__s1) IS NULL, CAST(NULL AS STRUCT<`a`: INT, `b`: INT, `c`: INT>), "
        "NAMED_STRUCT('a', __s1.`a`, 'b', CAST(NULL AS INT), 'c', __s1.`c`))"
    )


def test_update_star_with_evolution_preserves_target_only_nested_fields():
    target = st(("key", I), ("x", st(("a", I), ("b", I), ("c", I))))
    source = st(("key", I), ("x", st(("a", I), ("c", I))))
    rm = run(target, source, update(star=True), evolve=True)
    sql = to_sql(rm.clauses[0].outputs[1])
    assert "(__s1) IS NULL AND (__t1) IS NULL" in sql
    assert "'b', __t1.`b`" in sql


def test_store_assignment_policies():
    source = st(("key", I), ("value", S))
    with pytest.raises(AnalysisError, match=re.escape('Cannot up cast s.value from "STRING" to "INT"')):
        run(TARGET, source, update(star=True), policy="STRICT")
    ansi = to_sql(run(TARGET, source, update(star=True)).clauses[0].outputs[1])
    assert "TRY_CAST(__s1 AS INT)" in ansi and "CAST_INVALID_INPUT" in ansi
    longs = st(("key", I), ("value", L))
    overflow = to_sql(run(TARGET, longs, update(star=True)).clauses[0].outputs[1])
    assert "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE" in overflow and "column `value`" in overflow
    legacy = to_sql(run(TARGET, longs, update(star=True), policy="LEGACY").clauses[0].outputs[1])
    assert "4294967295" in legacy and "RAISE_ERROR" not in legacy
    upcast = to_sql(
        run(st(("key", I), ("value", L)), TARGET, update(star=True), policy="STRICT").clauses[0].outputs[1]
    )
    assert upcast == "CAST(__s1 AS BIGINT)"
    with pytest.raises(AnalysisError, match='cannot cast "BINARY" to "INT"'):
        run(TARGET, st(("key", I), ("value", BinaryType())), update(star=True))


def test_translate_runtime_error():
    raised = Exception(
        "Job aborted ... [USER_RAISED_EXCEPTION] [DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] Failed to write a "
        'value of "BIGINT" type into the "INT" type column `v` due to an overflow. SQLSTATE: P0001'
    )
    err = translate_runtime_error(raised)
    assert err is not None and err.error_class == "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"
    assert err.message.endswith("due to an overflow.")
    assert translate_runtime_error(Exception("something else")) is None


def test_struct_field_paths_as_spark_reads_them() -> None:
    from deltamerge.merge.struct_fields import _field_path

    assert _field_path("a") == ["a"]
    assert _field_path("a.b") == ["a", "b"]
    assert _field_path("a.`b.c`.d") == ["a", "b.c", "d"]
    assert _field_path("`x``y`") == ["x`y"]
