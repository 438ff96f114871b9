"""Per-file statistics from Parquet footers (protocol.md §2.9, §6.1) and their parsing."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamerge.errors import DeltaMergeError
from deltamerge.stats import (
    FileStats,
    parse_stats,
    parse_timestamp_micros,
    stats_columns,
    stats_from_parquet_metadata,
    truncate_max_string,
    truncate_min_string,
)
from deltamerge.stats.schema import check_stats_columns

UTC = dt.timezone.utc


def _f(name: str, t: Any, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "type": t, "nullable": True, "metadata": metadata or {}}


def _schema(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def _stats(
    tmp_path: Path,
    table: pa.Table,
    schema: dict[str, Any],
    partition_columns: tuple[str, ...] = (),
    configuration: dict[str, str] | None = None,
    *,
    write_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    path = str(tmp_path / f"f{len(os.listdir(tmp_path))}.parquet")
    pq.write_table(table, path, **(write_kwargs or {}))
    text = stats_from_parquet_metadata(
        pq.read_metadata(path), schema, list(partition_columns), configuration or {}, **kwargs
    )
    return json.loads(text, parse_float=Decimal)  # type: ignore[no-any-return]


# --- all types ------------------------------------------------------------------------------------

ALL_SCHEMA = _schema(
    _f("b", "byte"),
    _f("sh", "short"),
    _f("i", "integer"),
    _f("l", "long"),
    _f("fl", "float"),
    _f("db", "double"),
    _f("dec", "decimal(5,2)"),
    _f("big", "decimal(38,18)"),
    _f("dt", "date"),
    _f("ts", "timestamp"),
    _f("ntz", "timestamp_ntz"),
    _f("s", "string"),
    _f("bo", "boolean"),
    _f("bin", "binary"),
    _f("arr", {"type": "array", "elementType": "integer", "containsNull": True}),
    _f("m", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
    _f(
        "st",
        {
            "type": "struct",
            "fields": [_f("x", "integer"), _f("y", {"type": "struct", "fields": [_f("z", "string")]})],
        },
    ),
)


def _all_table() -> pa.Table:
    return pa.table(
        {
            "b": pa.array([1, -3, None], pa.int8()),
            "sh": pa.array([300, None, -300], pa.int16()),
            "i": pa.array([7, 8, 9], pa.int32()),
            "l": pa.array([2**40, None, -(2**40)], pa.int64()),
            "fl": pa.array([0.5, 1.25, None], pa.float32()),
            "db": pa.array([-0.0, 2.5, None], pa.float64()),
            "dec": pa.array([Decimal("1.10"), Decimal("-2.50"), None], pa.decimal128(5, 2)),
            "big": pa.array(
                [Decimal("12345678901234567890.123456789012345678"), None, None], pa.decimal128(38, 18)
            ),
            "dt": pa.array([dt.date(2024, 2, 29), None, dt.date(1900, 1, 1)]),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 0, 0, 0, 999999),
                    None,
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array([dt.datetime(2021, 11, 18, 2, 30, 0, 123456), None, None], pa.timestamp("us")),
            "s": pa.array(["b", None, "a"]),
            "bo": pa.array([True, None, False]),
            "bin": pa.array([b"a", None, b"z"]),
            "arr": pa.array([[1], [2, 3], []], pa.list_(pa.int32())),
            "m": pa.array([[("a", 1)], [("b", 2)], [("c", 3)]], pa.map_(pa.string(), pa.int64())),
            "st": pa.array([{"x": 1, "y": {"z": "q"}}, None, {"x": None, "y": {"z": "r"}}]),
        }
    )


def test_all_types_exact_json(tmp_path: Path) -> None:
    path = str(tmp_path / "all.parquet")
    pq.write_table(_all_table(), path)
    text = stats_from_parquet_metadata(pq.read_metadata(path), ALL_SCHEMA, [], {}, tight_bounds=True)
    assert text == (
        '{"numRecords":3,'
        '"minValues":{"b":-3,"sh":-300,"i":7,"l":-1099511627776,"fl":0.5,"db":-0.0,"dec":-2.50,'
        '"big":12345678901234567890.123456789012345678,"dt":"1900-01-01","ts":"1969-12-31T23:59:59.999Z",'
        '"ntz":"2021-11-18T02:30:00.123","s":"a","st":{"x":1,"y":{"z":"q"}}},'
        '"maxValues":{"b":1,"sh":300,"i":9,"l":1099511627776,"dec":1.10,'
        '"big":12345678901234567890.123456789012345678,"dt":"2024-02-29","ts":"2024-01-01T00:00:00.999Z",'
        '"ntz":"2021-11-18T02:30:00.123","s":"b","st":{"x":1,"y":{"z":"r"}}},'
        '"nullCount":{"b":1,"sh":1,"i":0,"l":1,"fl":1,"db":1,"dec":1,"big":2,"dt":1,"ts":1,"ntz":2,"s":1,'
        '"bo":1,"bin":1,"m":0,"st":{"x":2,"y":{"z":1}}},'
        '"tightBounds":true}'
    )


def test_float_max_only_when_nan_free(tmp_path: Path) -> None:
    s = _stats(tmp_path, _all_table(), ALL_SCHEMA, nan_free=True)
    assert s["maxValues"]["fl"] == Decimal("1.25")
    assert s["maxValues"]["db"] == Decimal("2.5")
    assert "tightBounds" not in s


def test_float_nan_and_infinity(tmp_path: Path) -> None:
    schema = _schema(_f("a", "double"), _f("b", "double"), _f("c", "float"), _f("d", "double"))
    table = pa.table(
        {
            "a": pa.array([1.0, math.nan, 3.0]),  # footers ignore NaN: min is still a lower bound
            "b": pa.array([math.nan, math.nan, None]),
            "c": pa.array([1.0, math.inf, None], pa.float32()),
            "d": pa.array([-math.inf, 0.0, 1.0]),
        }
    )
    s = _stats(tmp_path, table, schema, nan_free=True)
    assert s["minValues"] == {"a": Decimal("1.0")}
    assert s["maxValues"] == {"a": Decimal("3.0")}
    assert s["nullCount"] == {"a": 0, "b": 1, "c": 1, "d": 0}


def test_decimals_stored_as_integers_keep_scale(tmp_path: Path) -> None:
    schema = _schema(_f("d4", "decimal(9,3)"), _f("d8", "decimal(18,0)"))
    table = pa.table(
        {
            "d4": pa.array([Decimal("1.500"), Decimal("-0.001")], pa.decimal128(9, 3)),
            "d8": pa.array([Decimal("123456789012345678"), Decimal("0")], pa.decimal128(18, 0)),
        }
    )
    path = str(tmp_path / "d.parquet")
    pq.write_table(table, path, store_decimal_as_integer=True)
    md = pq.read_metadata(path)
    assert md.row_group(0).column(0).physical_type == "INT32"
    text = stats_from_parquet_metadata(md, schema, [], {})
    assert '"minValues":{"d4":-0.001,"d8":0}' in text
    assert '"maxValues":{"d4":1.500,"d8":123456789012345678}' in text


# --- timestamps -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "expected_min", "expected_max"),
    [
        ("UTC", "2024-01-15T12:00:00.000Z", "2024-07-01T12:00:00.123Z"),
        ("America/Los_Angeles", "2024-01-15T04:00:00.000-08:00", "2024-07-01T05:00:00.123-07:00"),
        ("Asia/Kolkata", "2024-01-15T17:30:00.000+05:30", "2024-07-01T17:30:00.123+05:30"),
        ("Europe/London", "2024-01-15T12:00:00.000Z", "2024-07-01T13:00:00.123+01:00"),
    ],
)
def test_timestamp_rendering_in_session_zone(
    tmp_path: Path, tz: str, expected_min: str, expected_max: str
) -> None:
    schema = _schema(_f("ts", "timestamp"))
    values = [dt.datetime(2024, 1, 15, 12, tzinfo=UTC), dt.datetime(2024, 7, 1, 12, 0, 0, 123999, tzinfo=UTC)]
    s = _stats(
        tmp_path, pa.table({"ts": pa.array(values, pa.timestamp("us", tz="UTC"))}), schema, session_tz=tz
    )
    assert s["minValues"]["ts"] == expected_min
    assert s["maxValues"]["ts"] == expected_max
    # the rendering parses back to the ms-truncated instant
    assert parse_timestamp_micros(s["maxValues"]["ts"]) == int(values[1].timestamp() * 1000) * 1000


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_timestamp_units(tmp_path: Path, unit: str) -> None:
    schema = _schema(_f("ts", "timestamp"), _f("ntz", "timestamp_ntz"))
    v = dt.datetime(2000, 1, 2, 3, 4, 5, 678000)
    table = pa.table(
        {
            "ts": pa.array([v.replace(tzinfo=UTC)], pa.timestamp(unit, tz="UTC")),
            "ntz": pa.array([v], pa.timestamp(unit)),
        }
    )
    s = _stats(tmp_path, table, schema, write_kwargs={"coerce_timestamps": None, "version": "2.6"})
    assert s["minValues"] == {"ts": "2000-01-02T03:04:05.678Z", "ntz": "2000-01-02T03:04:05.678"}


def test_int96_timestamps_have_no_bounds(tmp_path: Path) -> None:
    schema = _schema(_f("ts", "timestamp"), _f("i", "integer"))
    table = pa.table(
        {
            "ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            "i": pa.array([1], pa.int32()),
        }
    )
    s = _stats(tmp_path, table, schema, write_kwargs={"use_deprecated_int96_timestamps": True})
    assert "ts" not in s["minValues"] and "ts" not in s["maxValues"]
    assert s["minValues"] == {"i": 1}


# --- strings --------------------------------------------------------------------------------------


def test_string_truncation_rules() -> None:
    assert truncate_min_string("a" * 40) == "a" * 32
    assert truncate_max_string("short") == "short"
    assert truncate_max_string("a" * 32) == "a" * 32
    assert truncate_max_string("a" * 33) == "a" * 32 + "\x7f"
    assert truncate_max_string("a" * 32 + "é") == "a" * 32 + "\U0010ffff"
    assert truncate_max_string("a" * 32 + "\U0010ffff" * 3 + "b") == "a" * 32 + "\U0010ffff" * 3 + "\x7f"
    assert truncate_max_string("a" * 32 + "\U0010ffff" * 40) is None
    assert truncate_max_string("abcdef", 3) == "abc\x7f"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.integers(1, 40))
def test_truncated_bounds_bracket_the_value(value: str, prefix: int) -> None:
    lo = truncate_min_string(value, prefix)
    hi = truncate_max_string(value, prefix)
    assert lo <= value
    assert value.startswith(lo)
    if hi is not None:
        assert hi >= value
        assert len(hi) <= 2 * prefix + 1 or hi == value
        # code point order is UTF-8 byte order, the order Spark and Parquet use
        assert hi.encode("utf-8", "surrogatepass") >= value.encode("utf-8", "surrogatepass")


def test_strings_in_file(tmp_path: Path) -> None:
    schema = _schema(_f("s", "string"))
    values = ["b" * 40, "a" * 50 + "z", "😀" * 35, None]
    s = _stats(tmp_path, pa.table({"s": pa.array(values)}), schema)
    assert s["minValues"]["s"] == "a" * 32
    assert s["maxValues"]["s"] == "😀" * 32 + "\U0010ffff"
    s = _stats(
        tmp_path,
        pa.table({"s": pa.array(values)}),
        schema,
        configuration={"delta.dataSkippingStringPrefixLength": "4"},
    )
    assert s["minValues"]["s"] == "aaaa"
    assert s["maxValues"]["s"] == "😀😀😀😀\U0010ffff"


def test_string_max_json_is_valid_utf8(tmp_path: Path) -> None:
    schema = _schema(_f("s", "string"))
    path = str(tmp_path / "u.parquet")
    pq.write_table(pa.table({"s": ["é" * 40]}), path)
    text = stats_from_parquet_metadata(pq.read_metadata(path), schema, [], {})
    text.encode("utf-8")  # no lone surrogates
    assert json.loads(text)["maxValues"]["s"] == "é" * 32 + "\U0010ffff"


# --- column selection -----------------------------------------------------------------------------


def _wide(n: int) -> tuple[dict[str, Any], pa.Table]:
    names = [f"c{i}" for i in range(n)]
    return _schema(*(_f(c, "integer") for c in names)), pa.table(
        {c: pa.array([i], pa.int32()) for i, c in enumerate(names)}
    )


def test_first_32_columns_by_default(tmp_path: Path) -> None:
    schema, table = _wide(40)
    s = _stats(tmp_path, table, schema)
    assert list(s["minValues"]) == [f"c{i}" for i in range(32)]
    assert list(s["nullCount"]) == [f"c{i}" for i in range(32)]
    s = _stats(tmp_path, table, schema, configuration={"delta.dataSkippingNumIndexedCols": "-1"})
    assert len(s["minValues"]) == 40
    s = _stats(tmp_path, table, schema, configuration={"delta.dataSkippingNumIndexedCols": "3"})
    assert list(s["maxValues"]) == ["c0", "c1", "c2"]
    s = _stats(tmp_path, table, schema, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    assert s == {"numRecords": 1}


def test_partition_columns_excluded_and_not_counted() -> None:
    schema = _schema(
        _f("p", "string"),
        _f("a", "integer"),
        _f("st", {"type": "struct", "fields": [_f("x", "long"), _f("y", "long")]}),
        _f("b", "integer"),
    )
    cols = stats_columns(schema, ["P"], {"delta.dataSkippingNumIndexedCols": "3"})
    assert [c.logical_path for c in cols] == [("a",), ("st", "x"), ("st", "y")]


def test_stats_columns_property() -> None:
    schema = _schema(
        _f("a", "integer"),
        _f("st", {"type": "struct", "fields": [_f("x", "long"), _f("y.z", "long")]}),
        _f("b.c", "integer"),
        _f("d", "integer"),
    )
    cols = stats_columns(schema, [], {"delta.dataSkippingStatsColumns": "d, ST.`y.z`, `b.c`"})
    assert [c.logical_path for c in cols] == [("st", "y.z"), ("b.c",), ("d",)]
    cols = stats_columns(
        schema, [], {"delta.dataSkippingStatsColumns": "st", "delta.dataSkippingNumIndexedCols": "1"}
    )
    assert [c.logical_path for c in cols] == [("st", "x"), ("st", "y.z")]


@pytest.mark.parametrize(
    "listed, error",
    [
        ("d, ST.`y.z`, `b.c`, st.flag", None),  # a struct's non-skipping leaves pass
        ("st", None),
        ("a, A", None),  # Delta compares the names as written
        ("p", "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN"),
        ("nope", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
        ("st.nope", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
        ("a.x", "DELTA_COLUMN_PATH_NOT_NESTED"),
        ("flag", "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE"),
        ("arr", "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE"),
        ("d, st, st.x", "DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS"),
    ],
)
def test_stats_columns_are_checked_against_the_schema(listed: str, error: str | None) -> None:
    schema = _schema(
        _f("a", "integer"),
        _f("st", {"type": "struct", "fields": [_f("x", "long"), _f("y.z", "long"), _f("flag", "boolean")]}),
        _f("b.c", "decimal(10,2)"),
        _f("d", "timestamp_ntz"),
        _f("flag", "boolean"),
        _f("arr", {"type": "array", "elementType": "integer", "containsNull": True}),
        _f("p", "string"),
    )
    conf = {"delta.dataSkippingStatsColumns": listed}
    if error is None:
        check_stats_columns(schema, ["p"], conf)
    else:
        with pytest.raises(DeltaMergeError, match=error):
            check_stats_columns(schema, ["p"], conf)


def test_stats_columns_in_file_with_dotted_names(tmp_path: Path) -> None:
    schema = _schema(_f("a.b", "integer"), _f("a", {"type": "struct", "fields": [_f("b", "integer")]}))
    table = pa.table(
        {"a.b": pa.array([1], pa.int32()), "a": pa.array([{"b": 2}], pa.struct([("b", pa.int32())]))}
    )
    s = _stats(tmp_path, table, schema)
    assert s["minValues"] == {"a.b": 1, "a": {"b": 2}}


def test_nested_structs_and_case_insensitive_names(tmp_path: Path) -> None:
    schema = _schema(
        _f(
            "Outer",
            {
                "type": "struct",
                "fields": [_f("Inner", {"type": "struct", "fields": [_f("v", "long")]}), _f("w", "string")],
            },
        )
    )
    arrow_type = pa.struct([("inner", pa.struct([("v", pa.int64())])), ("w", pa.string())])
    table = pa.table({"outer": pa.array([{"inner": {"v": 5}, "w": None}, None], arrow_type)})
    s = _stats(tmp_path, table, schema)
    assert s == {
        "numRecords": 2,
        "minValues": {"Outer": {"Inner": {"v": 5}}},
        "maxValues": {"Outer": {"Inner": {"v": 5}}},
        "nullCount": {"Outer": {"Inner": {"v": 1}, "w": 2}},
    }


def test_arrays_and_maps_null_count_only_when_conclusive(tmp_path: Path) -> None:
    schema = _schema(
        _f("a", {"type": "array", "elementType": "integer", "containsNull": True}),
        _f("b", {"type": "array", "elementType": "integer", "containsNull": True}),
        _f(
            "c",
            {
                "type": "array",
                "elementType": {"type": "struct", "fields": [_f("x", "integer")]},
                "containsNull": True,
            },
        ),
        _f("m", {"type": "map", "keyType": "string", "valueType": "string", "valueContainsNull": True}),
    )
    table = pa.table(
        {
            "a": pa.array([[1], [2]], pa.list_(pa.int32())),
            "b": pa.array([[1], None], pa.list_(pa.int32())),
            "c": pa.array([[{"x": 1}], [{"x": 2}]], pa.list_(pa.struct([("x", pa.int32())]))),
            "m": pa.array([[("k", None)], [("k", "v")]], pa.map_(pa.string(), pa.string())),
        }
    )
    s = _stats(tmp_path, table, schema)
    assert s == {"numRecords": 2, "nullCount": {"a": 0, "c": 0}}


def test_column_mapping_physical_names(tmp_path: Path) -> None:
    schema = _schema(
        _f("id", "long", {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-a1"}),
        _f("p", "string", {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-b2"}),
    )
    table = pa.table({"col-a1": pa.array([3, 4], pa.int64())})
    s = _stats(tmp_path, table, schema, ("p",), {"delta.columnMapping.mode": "name"})
    assert s["minValues"] == {"col-a1": 3}
    s = _stats(tmp_path, table, schema, ("p",), {"delta.columnMapping.mode": "none"})
    assert "minValues" not in s  # no column named "id" in the file


# --- row groups -----------------------------------------------------------------------------------


def test_row_groups_combined(tmp_path: Path) -> None:
    schema = _schema(_f("x", "integer"), _f("s", "string"))
    table = pa.table(
        {"x": pa.array([5, None, 1, 9, None], pa.int32()), "s": pa.array([None, None, "m", "a", "z"])}
    )
    s = _stats(tmp_path, table, schema, write_kwargs={"row_group_size": 2})
    assert s == {
        "numRecords": 5,
        "minValues": {"x": 1, "s": "a"},
        "maxValues": {"x": 9, "s": "z"},
        "nullCount": {"x": 2, "s": 2},
    }


def test_column_without_statistics_is_omitted(tmp_path: Path) -> None:
    schema = _schema(_f("x", "integer"), _f("y", "integer"))
    table = pa.table({"x": pa.array([1, 2], pa.int32()), "y": pa.array([3, None], pa.int32())})
    s = _stats(tmp_path, table, schema, write_kwargs={"write_statistics": ["x"]})
    assert s == {"numRecords": 2, "minValues": {"x": 1}, "maxValues": {"x": 2}, "nullCount": {"x": 0}}


def test_empty_file(tmp_path: Path) -> None:
    schema = _schema(_f("x", "integer"))
    s = _stats(tmp_path, pa.table({"x": pa.array([], pa.int32())}), schema)
    assert s["numRecords"] == 0


def test_type_mismatch_omits_bounds(tmp_path: Path) -> None:
    schema = _schema(_f("x", "date"), _f("y", "string"))
    s = _stats(
        tmp_path, pa.table({"x": pa.array([1], pa.int32()), "y": pa.array([b"\xff"], pa.binary())}), schema
    )
    assert s == {"numRecords": 1, "nullCount": {"x": 0, "y": 0}}


# --- parsing --------------------------------------------------------------------------------------


def test_parse_stats_delta_spark() -> None:
    text = (
        '{"numRecords":10,"minValues":{"value":0,"d":1.10,"st":{"a":"x"}},"maxValues":{"value":9},'
        '"nullCount":{"value":0,"st":{"a":2}},"tightBounds":false}'
    )
    fs = parse_stats(text)
    assert fs == FileStats(
        num_records=10,
        min_values={"value": 0, "d": Decimal("1.10"), "st": {"a": "x"}},
        max_values={"value": 9},
        null_count={"value": 0, "st": {"a": 2}},
        tight_bounds=False,
    )
    assert fs.lookup("min", ["st", "a"]) == "x"
    assert fs.lookup("min", ["ST", "A"]) is None
    assert fs.lookup("min", ["ST", "A"], case_sensitive=False) == "x"
    assert fs.lookup("min", ["st"]) is None  # a struct is not a value
    assert fs.lookup("null", ["st", "a", "b"]) is None
    assert fs.lookup("max", ["nope"]) is None


def test_parse_stats_tolerant() -> None:
    assert parse_stats(None) is None
    assert parse_stats("") is None
    assert parse_stats("{broken") is None
    assert parse_stats("[1]") is None
    fs = parse_stats(
        '{"numRecords":"3","minValues":null,"maxValues":{"a":null},"nullCount":{"a":null},"tightBounds":"true"}'
    )
    assert fs is not None
    assert fs.num_records == 3
    assert fs.min_values == {}
    assert fs.lookup("max", ["a"]) is None
    assert fs.tight_bounds is True
    fs = parse_stats('{"numRecords":2}')
    assert fs == FileStats(2, {}, {}, {}, None)
    fs = parse_stats('{"minValues":{"ts":"2024-05-06 07:08:09.000"}}')
    assert fs is not None and fs.num_records is None


@pytest.mark.parametrize(
    ("text", "tz", "expected"),
    [
        ("2024-01-01T00:00:00.999Z", "UTC", 1704067200999000),
        ("2024-01-01T00:00:00.999+00:00", None, 1704067200999000),
        ("2023-12-31T16:00:00.999-08:00", None, 1704067200999000),
        ("2024-01-01 00:00:00.999", "UTC", 1704067200999000),
        ("2024-01-01 00:00:00.999999", "UTC", 1704067200999999),
        ("2024-01-01T00:00:00.999Z", None, 1704067200999000),
        ("2024-01-01 00:00:00", None, None),
        ("2023-12-31 16:00:00", "America/Los_Angeles", 1704067200000000),
        ("2024-01-01", "UTC", 1704067200000000),
        ("1969-12-31T23:59:59.999Z", "UTC", -1000),
        ("not a timestamp", "UTC", None),
        ("2024-02-30T00:00:00Z", "UTC", None),
        ("2000-01-01T12:00:00.000000Z", "UTC", 946728000000000),
    ],
)
def test_parse_timestamp_micros(text: str, tz: str | None, expected: int | None) -> None:
    assert parse_timestamp_micros(text, tz) == expected


# --- interop with delta-rs ------------------------------------------------------------------------


def test_matches_delta_rs_stats(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    table = pa.table(
        {
            "i": pa.array([3, None, -7], pa.int32()),
            "l": pa.array([10, 20, 30], pa.int64()),
            "s": pa.array(["x", "abc", None]),
            "d": pa.array([dt.date(2020, 1, 1), dt.date(2021, 6, 30), None]),
            "dec": pa.array([Decimal("1.10"), Decimal("2.00"), Decimal("-3.33")], pa.decimal128(6, 2)),
        }
    )
    root = str(tmp_path / "t")
    deltalake.write_deltalake(root, table)
    dtable = deltalake.DeltaTable(root)
    schema = json.loads(dtable.schema().to_json())
    log = Path(root, "_delta_log", "00000000000000000000.json").read_text().splitlines()
    adds = [json.loads(line)["add"] for line in log if '"add"' in line]
    assert len(adds) == 1
    theirs = json.loads(adds[0]["stats"], parse_float=Decimal)
    md = pq.read_metadata(os.path.join(root, adds[0]["path"]))
    ours = json.loads(stats_from_parquet_metadata(md, schema, [], {}), parse_float=Decimal)
    assert ours["numRecords"] == theirs["numRecords"]
    assert ours["nullCount"] == theirs["nullCount"]
    for key in ("minValues", "maxValues"):
        assert ours[key] == theirs[key]


def test_variant_columns_get_a_null_count_only(tmp_path: Path) -> None:
    """An unshredded variant is a Parquet group of required ``value`` / ``metadata`` binaries
    (as Spark writes it): the group's nulls are its leaves' nulls; no bounds (protocol: Variant)."""
    variant = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])
    cell = {"value": b"\x0c\x01", "metadata": b"\x01\x00\x00"}
    table = pa.table(
        {
            "id": pa.array([1, 2, 3]),
            "v": pa.array([cell, None, cell], variant),
            "s": pa.array([{"w": cell}, {"w": None}, {"w": None}], pa.struct([pa.field("w", variant)])),
        }
    )
    nested = {"type": "struct", "fields": [_f("w", "variant")]}
    schema = _schema(_f("id", "long"), _f("v", "variant"), _f("s", nested))
    stats = _stats(tmp_path, table, schema)
    assert stats["nullCount"] == {"id": 0, "v": 1, "s": {"w": 2}}
    assert stats["minValues"] == {"id": 1} and stats["maxValues"] == {"id": 3}


def test_parse_stats_cache_holds_thousands_of_files_and_is_bounded_by_text_length(monkeypatch) -> None:
    from deltamerge.stats import reading

    calls: list[str] = []
    real = reading._parse_stats
    monkeypatch.setattr(reading, "_parse_stats", lambda s: calls.append(s) or real(s))
    monkeypatch.setattr(reading, "_CACHE", reading.OrderedDict())
    monkeypatch.setattr(reading, "_cached_chars", 0)
    texts = [
        f'{{"numRecords":{i},"minValues":{{"id":{i}}},"maxValues":{{"id":{i + 9}}}}}' for i in range(8000)
    ]
    for _ in range(3):  # data skipping, file pruning, expected matches: each in file order
        parsed = [reading.parse_stats(t) for t in texts]
    assert len(calls) == 8000  # the second and third passes hit (an LRU of 4,096 entries never did)
    assert parsed[7].num_records == 7 and parsed[7].max_values == {"id": 16}
    assert reading.parse_stats(texts[7]) is parsed[7]  # shared, not reparsed
    # Past the budget the least recently used texts go first.
    monkeypatch.setattr(reading, "_CACHE_CHARS", len(texts[0]) * 10)
    new = '{"numRecords":1}'
    reading.parse_stats(new)
    assert len(reading._CACHE) <= 10 and new in reading._CACHE and texts[0] not in reading._CACHE
    assert texts[-1] in reading._CACHE  # the most recently used survive
    assert reading._cached_chars == sum(len(t) for t in reading._CACHE)


def test_column_extremes_fold_row_groups(tmp_path: Path) -> None:
    from deltamerge.stats.footer import column_extremes

    path = str(tmp_path / "f.parquet")
    ids = pa.array([5, None, 9, None, None, -3], pa.int64())
    table = pa.table({"id": ids, "s": pa.array([{"x": 1}] * 6)})
    pq.write_table(table, path, row_group_size=2)  # groups: (5, NULL) (9, NULL) (NULL, -3)
    md = pq.read_metadata(path)
    assert column_extremes(md, ("id",), "long") == (-3, 9)
    assert column_extremes(md, ("s", "x"), "long") == (1, 1)
    assert column_extremes(md, ("missing",), "long") == (None, None)
    nulls = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"id": pa.array([None, None], pa.int64())}), nulls)
    assert column_extremes(pq.read_metadata(nulls), ("id",), "long") == (None, None)
    bare = str(tmp_path / "b.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), bare, write_statistics=False)
    assert column_extremes(pq.read_metadata(bare), ("id",), "long") is None
