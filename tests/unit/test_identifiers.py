"""Identifier parsing shared by the SQL statements, CONVERT TO DELTA and ALTER TABLE."""

from __future__ import annotations

import os
import re

import pytest

from deltamerge import catalog
from deltamerge.identifiers import QUALIFIED, lookup_table, name_parts, unquote
from deltamerge.log.paths import table_root


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("`a``b`", "a`b"),
        ("'it\\'s'", "it's"),
        ('"x"', "x"),
        ("  plain ", "plain"),
        ("`/tmp/p q`", "/tmp/p q"),
    ],
)
def test_unquote(text: str, value: str) -> None:
    assert unquote(text) == value


def test_name_parts_keep_dots_inside_backticks() -> None:
    assert name_parts("parquet.`/data/a.b/c`") == ["parquet", "/data/a.b/c"]
    assert name_parts("db . `t``x`") == ["db", "t`x"]
    assert re.fullmatch(QUALIFIED, "a.`b c`.d")
    assert re.fullmatch(QUALIFIED, "a..b") is None


def test_name_parts_starting_with_a_digit() -> None:
    # Spark's unquoted identifiers may start with digits (not be all digits): `db.1tbl` is a name.
    assert name_parts("db.1tbl") == ["db", "1tbl"]
    assert name_parts("2024_sales.t_1") == ["2024_sales", "t_1"]
    assert re.fullmatch(QUALIFIED, "db.1tbl")
    assert re.fullmatch(QUALIFIED, "db.12") is None


def test_lookup_table_drops_the_session_catalog_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(catalog._NAMES, "target", "/tables/target")
    assert lookup_table(["spark_catalog", "default", "Target"]) == ("/tables/target", "Target")
    assert lookup_table(["default", "target"]) == ("/tables/target", "target")
    assert lookup_table(["other", "target"]) is None


def test_table_root_accepts_file_uris() -> None:
    assert table_root("file:///tmp/t") == "/tmp/t"
    assert table_root("file:/tmp/t/") == "/tmp/t"
    assert table_root("rel/t") == os.path.join(os.getcwd(), "rel", "t")
