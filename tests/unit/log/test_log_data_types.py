"""Delta's unsupported-data-type check on the schemas a commit sets (``log/data_types.py``)."""

from __future__ import annotations

import pytest

from deltamerge.errors import DeltaMergeError
from deltamerge.log.data_types import check_supported_types


def _schema(*fields: tuple[str, object]) -> dict:
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
    }


SUPPORTED = _schema(
    *[(t, t) for t in ("void", "boolean", "byte", "short", "integer", "long", "float", "double", "string")],
    *[(t, t) for t in ("date", "timestamp", "timestamp_ntz", "variant", "binary", "decimal(38,18)")],
    ("a", {"type": "array", "elementType": "long", "containsNull": True}),
    ("m", {"type": "map", "keyType": "string", "valueType": "decimal(5,-2)", "valueContainsNull": True}),
    ("u", {"type": "udt", "class": "x.Point", "pyClass": "x.Point", "sqlType": "binary"}),
)


def test_the_types_delta_stores_pass() -> None:
    check_supported_types(SUPPORTED)


def test_every_unsupported_column_is_named_by_its_path() -> None:
    schema = _schema(
        ("i", "interval day to second"),
        ("s", {"type": "struct", "fields": [{"name": "a.b", "type": "interval year", "nullable": True}]}),
        ("arr", {"type": "array", "elementType": "time(6)", "containsNull": True}),
        ("m", {"type": "map", "keyType": "string", "valueType": "interval", "valueContainsNull": True}),
        ("u", {"type": "udt", "class": "x.T", "sqlType": "time(3)"}),
    )
    with pytest.raises(DeltaMergeError) as info:
        check_supported_types(schema)
    assert info.value.error_class == "DELTA_UNSUPPORTED_DATA_TYPES"
    assert (
        "[i: interval day to second, s.`a.b`: interval year, arr[]: time(6), m[value]: interval, u: time(3)]"
        in str(info.value)
    )
    check_supported_types(schema, type_check=False)  # spark.databricks.delta.schema.typeCheck.enabled


def test_geospatial_types_are_refused_even_without_the_type_check() -> None:
    schema = _schema(("g", "geometry(SRID:4326)"))
    for type_check in (True, False):
        with pytest.raises(DeltaMergeError, match="GEOMETRY\\(SRID:4326\\)") as info:
            check_supported_types(schema, type_check=type_check)
        assert info.value.error_class == "UNSUPPORTED_DATATYPE"


def test_cdc_column_names_with_the_change_data_feed() -> None:
    from deltamerge.log.data_types import check_cdc_columns

    schema = _schema(("id", "integer"), ("_commit_version", "long"), ("_Change_Type", "string"))
    on, off = {"delta.enableChangeDataFeed": "true"}, {}
    check_cdc_columns(schema, off, None)  # the feed off: any names
    check_cdc_columns(_schema(("id", "integer")), on, off)
    for old in (None, off):  # a new table, or the feed being turned on
        with pytest.raises(DeltaMergeError, match=r"\[_commit_version\]") as info:
            check_cdc_columns(schema, on, old)
        assert info.value.error_class == "DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"
    with pytest.raises(DeltaMergeError) as info:
        check_cdc_columns(schema, on, on)  # a column added to a table with the feed on
    assert info.value.error_class == "RESERVED_CDC_COLUMNS_ON_WRITE"


def test_column_names_without_column_mapping() -> None:
    from deltamerge.log.data_types import check_column_names

    nested = {"type": "struct", "fields": [{"name": "x y", "type": "integer", "nullable": True}]}
    element = {"type": "array", "elementType": nested, "containsNull": True}
    schema = _schema(("ok_name", "integer"), ("s", nested), ("arr", element), ("a.b", "long"))
    with pytest.raises(DeltaMergeError) as info:
        check_column_names(schema, [])
    assert info.value.error_class == "DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES"
    assert "Invalid column names: s.x y, arr.element.x y." in str(info.value)
    check_column_names(_schema(("a.b", "long"), ("c-d", "long")), [])  # only ' ,;{}()\n\t=' count
    parted = _schema(("id", "long"), ("p q", "string"))
    with pytest.raises(DeltaMergeError) as info:
        check_column_names(parted, ["p q"])
    assert info.value.error_class == "DELTA_INVALID_PARTITION_COLUMN_NAME"
    check_column_names(parted, ["p q"], check_partitions=False)  # partitionColumnValidity.enabled


def test_not_null_nested_in_arrays_and_maps() -> None:
    from deltamerge.log.data_types import without_nested_not_null

    strict = {
        "type": "struct",
        "fields": [{"name": "x", "type": "integer", "nullable": False, "metadata": {}}],
    }
    inner = {"type": "array", "elementType": "integer", "containsNull": False}
    top = _schema(("s", strict))  # a struct's NOT NULL field is enforced: kept
    assert without_nested_not_null(top) == top
    for nest, field_type in (
        ("element", {"type": "array", "elementType": strict, "containsNull": True}),
        ("value", {"type": "map", "keyType": "string", "valueType": inner, "valueContainsNull": True}),
        ("key", {"type": "map", "keyType": strict, "valueType": "long", "valueContainsNull": True}),
    ):
        schema = _schema(("id", "long"), ("outer", {"type": "struct", "fields": [
            {"name": "c", "type": field_type, "nullable": True, "metadata": {}}]}))  # fmt: skip
        with pytest.raises(DeltaMergeError, match=f"The {nest} type of the field outer.c") as info:
            without_nested_not_null(schema)
        assert info.value.error_class == "DELTA_NESTED_NOT_NULL_CONSTRAINT"
        loose = without_nested_not_null(schema, allow=True)  # constraints.allowUnenforcedNotNull
        assert without_nested_not_null(loose) == loose and loose != schema
