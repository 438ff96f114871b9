"""When Spark may parse partition values from Hive-style directory names (``scan._hive_layout``):
only when, for every file, that gives exactly the log's ``partitionValues``."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from pyspark.sql.types import (
    ByteType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from deltamerge.log.actions import AddFile
from deltamerge.log.paths import partition_dir
from deltamerge.spark.scan import _hive_layout

ROOT = "/data/t"


def schema(**types) -> StructType:  # type: ignore[no-untyped-def]
    return StructType([StructField("id", LongType()), *[StructField(k, t) for k, t in types.items()]])


def add(rel_dir: str, **values: str | None) -> AddFile:
    path = quote(f"{rel_dir}/part-0.parquet" if rel_dir else "part-0.parquet")
    return AddFile(path=path, partition_values=values, size=1, modification_time=0)


def test_delta_layout_is_parsed_by_spark() -> None:
    s = schema(s=StringType(), n=IntegerType(), d=DateType())
    values: list[dict[str, str | None]] = [
        {"s": "a b", "n": "-3", "d": "2024-02-29"},
        {"s": "50%", "n": "7", "d": None},
        {"s": "us/east", "n": None, "d": "2024-01-01"},
        {"s": "k=v:x#", "n": "0", "d": "2024-01-01"},
        {"s": "007", "n": "1", "d": "2024-01-01"},  # a string that looks like a number stays a string
        {"s": "日本", "n": "1", "d": "2024-01-01"},
        {"s": None, "n": "1", "d": "2024-01-01"},
        {"s": "", "n": "1", "d": "2024-01-01"},  # "" is null, written to the default partition
    ]
    files = [add(partition_dir(["s", "n", "d"], v), **v) for v in values]
    fields = _hive_layout(ROOT, s, ["s", "n", "d"], files)
    assert fields == [
        StructField("s", StringType()),
        StructField("n", IntegerType()),
        StructField("d", DateType()),
    ]


@pytest.mark.parametrize(
    ("rel_dir", "values", "types"),
    [
        ("ab/cd", {"n": "1"}, {"n": IntegerType()}),  # column mapping's random prefixes
        ("", {"n": "1"}, {"n": IntegerType()}),  # no directory at all
        ("n=2", {"n": "1"}, {"n": IntegerType()}),  # the directory disagrees with the log
        ("N=1", {"n": "1"}, {"n": IntegerType()}),  # named unlike the schema
        ("n=1/x=2", {"n": "1"}, {"n": IntegerType()}),  # deeper than the partition columns
        ("n=__HIVE_DEFAULT_PARTITION__", {"n": "1"}, {"n": IntegerType()}),
        ("n=1", {"n": None}, {"n": IntegerType()}),  # null in the log, a value on disk
        ("n=1.0", {"n": "1.0"}, {"n": IntegerType()}),  # Spark's parseInt would fail
        ("n=300", {"n": "300"}, {"n": ByteType()}),  # Spark narrows without a range check
        ("d=2024-02-30", {"d": "2024-02-30"}, {"d": DateType()}),
        ("t=2024-01-01 00%3A00%3A00", {"t": "2024-01-01 00:00:00"}, {"t": TimestampType()}),
        # delta-rs percent-encodes UTF-8 bytes; Spark unescapes each %XX to one character.
        ("s=%C3%A9", {"s": "é"}, {"s": StringType()}),
        ("s=__HIVE_DEFAULT_PARTITION__", {"s": "__HIVE_DEFAULT_PARTITION__"}, {"s": StringType()}),
    ],
)
def test_other_layouts_keep_the_lookup_join(rel_dir: str, values: dict, types: dict) -> None:
    assert _hive_layout(ROOT, schema(**types), list(values), [add(rel_dir, **values)]) is None


def test_one_file_off_the_layout_keeps_the_join() -> None:
    s = schema(n=IntegerType())
    good = [add(f"n={i}", n=str(i)) for i in range(3)]
    assert _hive_layout(ROOT, s, ["n"], good) == [StructField("n", IntegerType())]
    assert _hive_layout(ROOT, s, ["n"], [*good, add("n=9", n="8")]) is None


def test_files_outside_the_root_or_a_glob_root_keep_the_join() -> None:
    s = schema(n=IntegerType())
    outside = AddFile(
        path="file:///elsewhere/n=1/part-0.parquet", partition_values={"n": "1"}, size=1, modification_time=0
    )
    assert _hive_layout(ROOT, s, ["n"], [outside]) is None
    assert _hive_layout("/data/t[1]", s, ["n"], [add("n=1", n="1")]) is None
    assert _hive_layout(ROOT, s, ["n"], [add("n=1", n="1")]) == [StructField("n", IntegerType())]


def test_spark_uri_quoting_fast_path_agrees_with_the_per_character_rule() -> None:
    """``spark_file_uri`` skips its per-character loop for plain paths; every character (ASCII and
    a sample beyond) is kept or percent-encoded as java.net.URI does, alone and inside a path."""
    import unicodedata

    from deltamerge.spark.scan import _URI_KEEP, _java_uriquote_name

    def keep(ch: str) -> bool:
        return ch in _URI_KEEP or (ord(ch) > 127 and unicodedata.category(ch) not in ("Zs", "Zl", "Zp", "Cc"))

    def rule(path: str) -> str:
        return "".join(ch if keep(ch) else "".join(f"%{b:02X}" for b in ch.encode()) for ch in path)

    chars = [chr(c) for c in [*range(256), 0x2028, 0x3000, 0x00A0, 0x1F600, 0x4E2D]]
    for ch in chars:
        for path in (ch, f"/t/a{ch}b/part-0.parquet"):
            assert _java_uriquote_name(path) == rule(path), repr(path)
