"""Partition value strings, Hive directory escaping and add.path encoding (protocol.md §6.3, §6.4)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamerge.errors import AnalysisError, InvalidArgumentError
from deltamerge.log import paths
from deltamerge.log.paths import (
    HIVE_DEFAULT_PARTITION,
    absolute_file_path,
    decode_add_path,
    encode_add_path,
    escape_path_name,
    parse_partition_dir,
    parse_partition_value,
    partition_dir,
    serialize_partition_value,
    unescape_path_name,
)

UTC = dt.timezone.utc

# --- layer 1: Hive directory escaping (Spark escapePathName) -----------------------------------


@pytest.mark.parametrize("ch", [*list("\"#%'*/:=?\\{[]^"), "\x01", "\x1f", "\x7f"])
def test_escaped_characters(ch: str) -> None:
    assert escape_path_name(f"a{ch}b") == f"a%{ord(ch):02X}b"


@pytest.mark.parametrize("ch", [*list(" }<>|`@+;,~!$&()"), "Ä", "日", "\xa0"])
def test_unescaped_characters(ch: str) -> None:
    assert escape_path_name(f"a{ch}b") == f"a{ch}b"


@pytest.mark.parametrize(
    ("column", "value", "directory", "add_path_prefix"),
    [
        # protocol.md §6.3 probe table (delta-spark keeps non-ASCII raw in add.path; we
        # percent-encode it as delta-rs does, which is equally valid).
        ("p", "us/east", "p=us%2Feast", "p=us%252Feast"),
        ("p", "a b", "p=a b", "p=a%20b"),
        ("p", "50%", "p=50%25", "p=50%2525"),
        ("p", "日本:x", "p=日本%3Ax", "p=%E6%97%A5%E6%9C%AC%253Ax"),
        (
            "tsNtzPartition",
            "2013-07-05 17:01:00.123456",
            "tsNtzPartition=2013-07-05 17%3A01%3A00.123456",
            "tsNtzPartition=2013-07-05%2017%253A01%253A00.123456",
        ),
        ("x", "A/A", "x=A%2FA", "x=A%252FA"),
        ("x", "B B", "x=B B", "x=B%20B"),
        ("k", None, "k=__HIVE_DEFAULT_PARTITION__", "k=__HIVE_DEFAULT_PARTITION__"),
        ("k", "", "k=__HIVE_DEFAULT_PARTITION__", "k=__HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_partition_layers(column: str, value: str | None, directory: str, add_path_prefix: str) -> None:
    assert partition_dir([column], {column: value}) == directory
    assert encode_add_path(directory + "/part-0.parquet") == add_path_prefix + "/part-0.parquet"
    assert decode_add_path(add_path_prefix) == directory
    parsed = parse_partition_dir(directory)
    assert parsed == {column: value or None}


def test_partition_dir_multiple_columns_and_typed_values() -> None:
    assert (
        partition_dir(["a", "b", "c"], {"a": 1, "b": "x=y", "c": None})
        == f"a=1/b=x%3Dy/c={HIVE_DEFAULT_PARTITION}"
    )
    assert partition_dir(["d"], {"d": dt.date(2024, 2, 29)}) == "d=2024-02-29"
    assert partition_dir([], {}) == ""


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        ("a b/c", "a%20b/c"),
        ("%", "%25"),
        ("}<>|`", "%7D%3C%3E%7C%60"),
        ("@+;,~!$&()=", "@+;,~!$&()="),
        ("x:y", "x%3Ay"),
        ("\u00a0", "%C2%A0"),
    ],
)
def test_add_path_encoding(raw: str, encoded: str) -> None:
    assert encode_add_path(raw) == encoded
    assert decode_add_path(encoded) == raw


def test_decode_reference_delta_spark_paths() -> None:
    # delta 0.8 special-partition sample: readers decode exactly once.
    assert (
        decode_add_path("x=A%252FA/part-00007.c000.snappy.parquet")
        == "x=A%2FA/part-00007.c000.snappy.parquet"
    )
    assert unescape_path_name("A%2FA") == "A/A"
    # Old Spark also escaped spaces in directory names; the log still decodes to the value.
    assert parse_partition_dir(decode_add_path("x=B%2520B")) == {"x": "B B"}


def test_absolute_file_path() -> None:
    assert absolute_file_path("/t", "p=a%20b/f.parquet") == "/t/p=a b/f.parquet"
    assert absolute_file_path("/t", "file:/data/x%20y.parquet") == "/data/x y.parquet"
    assert absolute_file_path("/t", "s3://b/k%20.parquet") == "s3://b/k .parquet"


@given(st.text())
def test_escape_round_trip(text: str) -> None:
    assert unescape_path_name(escape_path_name(text)) == text


@given(st.text(st.characters(exclude_categories=["Cs"])))
def test_add_path_round_trip(text: str) -> None:
    assert decode_add_path(encode_add_path(text)) == text


# --- layer 2: partition value strings ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "type_name", "expected"),
    [
        (None, "string", None),
        ("", "string", None),
        ("x y", "string", "x y"),
        (1, "integer", "1"),
        (-5, "long", "-5"),
        (2021.0, "double", "2021.0"),
        (0.1, "double", "0.1"),
        (1e7, "double", "1.0E7"),
        (1.5e-5, "double", "1.5E-5"),
        (3, "double", "3.0"),
        (0.1, "float", "0.1"),
        (float("nan"), "double", "NaN"),
        (float("-inf"), "double", "-Infinity"),
        (True, "boolean", "true"),
        (False, None, "false"),
        (Decimal("1.5"), "decimal(5,2)", "1.50"),
        (Decimal("1E-7"), "decimal(10,8)", "0.00000010"),
        (Decimal("123.450"), None, "123.450"),
        (dt.date(2024, 2, 29), "date", "2024-02-29"),
        (dt.datetime(2000, 1, 1, 12, 0, tzinfo=UTC), "timestamp", "2000-01-01T12:00:00.000000Z"),
        (
            dt.datetime(2000, 1, 1, 14, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            None,
            "2000-01-01T12:00:00.000005Z",
        ),
        (dt.datetime(2000, 1, 1, 12, 0), "timestamp", "2000-01-01T12:00:00.000000Z"),
        (dt.datetime(2013, 7, 5, 17, 1, 0, 123456), "timestamp_ntz", "2013-07-05 17:01:00.123456"),
        (dt.datetime(2013, 7, 5, 17, 1, 0, 100000), None, "2013-07-05 17:01:00.1"),
        (dt.datetime(2013, 7, 5, 17, 1), "timestamp_ntz", "2013-07-05 17:01:00"),
        (b"ab", "binary", "ab"),
    ],
)
def test_serialize(value: object, type_name: str | None, expected: str | None) -> None:
    assert serialize_partition_value(value, type_name) == expected


def test_serialize_rejects_complex_types() -> None:
    with pytest.raises(InvalidArgumentError):
        serialize_partition_value([1], "array")


@pytest.mark.parametrize(
    ("text", "type_name", "expected"),
    [
        (None, "long", None),
        ("", "long", None),
        ("", "string", None),
        ("42", "long", 42),
        ("2021.0", "double", 2021.0),
        ("1.0E7", "double", 1e7),
        ("Infinity", "double", float("inf")),
        ("TRUE", "boolean", True),
        ("1.50", "decimal(5,2)", Decimal("1.50")),
        ("2024-02-29", "date", dt.date(2024, 2, 29)),
        ("2000-01-01T12:00:00.000000Z", "timestamp", dt.datetime(2000, 1, 1, 12, tzinfo=UTC)),
        ("2024-02-29 23:59:59.999999", "timestamp", dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)),
        ("2024-01-01T04:00:00.123-08:00", "timestamp", dt.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2024-01-01 04:00:00+0530", "timestamp", dt.datetime(2023, 12, 31, 22, 30, tzinfo=UTC)),
        ("2024-01-01", "timestamp", dt.datetime(2024, 1, 1, tzinfo=UTC)),
        (
            "2021-11-18 02:30:00.123456789",
            "timestamp",
            dt.datetime(2021, 11, 18, 2, 30, 0, 123456, tzinfo=UTC),
        ),
        ("2013-07-05 17:01:00.123456", "timestamp_ntz", dt.datetime(2013, 7, 5, 17, 1, 0, 123456)),
        ("2013-07-05T17:01:00", "timestamp_ntz", dt.datetime(2013, 7, 5, 17, 1)),
        ("ab", "binary", b"ab"),
    ],
)
def test_parse(text: str | None, type_name: str, expected: object) -> None:
    assert parse_partition_value(text, type_name) == expected


@pytest.mark.parametrize(("text", "type_name"), [("x", "long"), ("maybe", "boolean"), ("2024-13-01", "date")])
def test_parse_invalid(text: str, type_name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="not a valid"):
        parse_partition_value(text, type_name)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trip(v: int) -> None:
    assert parse_partition_value(serialize_partition_value(v, "long"), "long") == v


@given(st.floats(allow_nan=False))
def test_double_round_trip(v: float) -> None:
    assert parse_partition_value(serialize_partition_value(v, "double"), "double") == v


@given(st.datetimes(timezones=st.just(UTC)))
def test_timestamp_round_trip(v: dt.datetime) -> None:
    assert parse_partition_value(serialize_partition_value(v, "timestamp"), "timestamp") == v


@given(st.datetimes())
def test_timestamp_ntz_round_trip(v: dt.datetime) -> None:
    assert parse_partition_value(serialize_partition_value(v, "timestamp_ntz"), "timestamp_ntz") == v


@given(st.text(min_size=1))
def test_string_round_trip(v: str) -> None:
    assert parse_partition_value(serialize_partition_value(v, "string"), "string") == v


@pytest.mark.parametrize(
    ("column_type", "ok"),
    [
        ("string", True),
        ("timestamp_ntz", True),
        ("decimal(10,2)", True),
        ("variant", False),
        ({"type": "struct", "fields": []}, False),
        ({"type": "array", "elementType": "long", "containsNull": True}, False),
    ],
)
def test_partition_column_types(column_type: object, ok: bool) -> None:
    schema = {"type": "struct", "fields": [{"name": "p", "type": column_type}, {"name": "x", "type": "long"}]}
    if ok:
        paths.check_partition_column_types(schema, ["p"])
    else:
        with pytest.raises(AnalysisError, match="DELTA_INVALID_PARTITION_COLUMN_TYPE"):
            paths.check_partition_column_types(schema, ["p"])
    paths.check_partition_column_types(schema, [])
