"""Parameter markers bound into statement text (``deltamerge.sql(spark, text, args)``)."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from deltamerge.errors import AnalysisError
from deltamerge.sql_params import bind_parameters, inline_identifiers, normalize_time_travel


def test_named_markers_become_literals_outside_strings_comments_and_identifiers() -> None:
    text = "SELECT :a, ':a', `:a`, x::int, raw:a, m[:a] -- :a\n/* :a */ FROM t WHERE b = :b"
    assert bind_parameters(text, {"a": "it's", "b": 2}) == (
        "SELECT concat('it', chr(39), 's'), ':a', `:a`, x::int, raw:a, m[concat('it', chr(39), 's')] -- :a\n"
        "/* :a */ FROM t WHERE b = 2"
    )


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (None, "NULL"),
        (True, "TRUE"),
        (7, "7"),
        (1.5, "1.5D"),
        (float("inf"), "CAST('inf' AS DOUBLE)"),
        (decimal.Decimal("1.50"), "1.50BD"),
        (dt.date(2024, 2, 29), "DATE'2024-02-29'"),
        (b"\x01\xff", "X'01ff'"),
    ],
)
def test_values_bind_as_typed_literals(value: object, sql: str) -> None:
    assert bind_parameters("SELECT ?", [value]) == f"SELECT {sql}"


def test_positional_markers_in_order_and_unbound_markers() -> None:
    assert bind_parameters("SELECT ? + ?, '?'", [1, 2]) == "SELECT 1 + 2, '?'"
    with pytest.raises(AnalysisError, match=r"\[UNBOUND_SQL_PARAMETER\].*: missing"):
        bind_parameters("SELECT :missing", {"other": 1})
    with pytest.raises(AnalysisError, match="UNBOUND_SQL_PARAMETER"):
        bind_parameters("SELECT ?, ?", [1])


def test_identifier_clauses_become_names() -> None:
    text = (
        "MERGE INTO IDENTIFIER('delta.`/p q`') t USING identifier( \"src\" ) s "
        "ON 'IDENTIFIER(\\'x\\')' -- IDENTIFIER('y')"
    )
    assert (
        inline_identifiers(text)
        == "MERGE INTO delta.`/p q` t USING src s ON 'IDENTIFIER(\\'x\\')' -- IDENTIFIER('y')"
    )


def test_system_time_travel_synonyms() -> None:
    text = "FROM a FOR SYSTEM_VERSION AS OF 1 JOIN b system_time as of '2024' WHERE c = 'SYSTEM_TIME AS OF'"
    expected = "FROM a VERSION AS OF 1 JOIN b TIMESTAMP as of '2024' WHERE c = 'SYSTEM_TIME AS OF'"
    assert normalize_time_travel(text + " -- SYSTEM_TIME AS OF") == expected + " -- SYSTEM_TIME AS OF"


def test_delta_path_references_found_only_in_the_sql() -> None:
    from deltamerge.sql_tables import _references, has_delta_tables

    assert not has_delta_tables("SELECT 'delta.`/p`' AS s -- delta.`/q`\n/* delta.`/r` */")
    assert not has_delta_tables("SELECT `delta.`/p`` FROM t")
    # A quote inside a backtick path opens no string: both references are found.
    text = "SELECT * FROM delta.`/a'b` x JOIN delta.`/c'd` VERSION AS OF 3 y ON x.k = y.k"
    assert [(m.group("path"), m.group("value")) for m, _ in _references(text)] == [
        ("`/a'b`", None),
        ("`/c'd`", "3"),
    ]
