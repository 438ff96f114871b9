"""CHAR/VARCHAR columns in a Delta schema: stored as string with the declared type in metadata."""

from __future__ import annotations

from deltamerge.log import char_varchar

KEY = char_varchar.TYPE_STRING


def _f(name: str, t: object, md: dict | None = None) -> dict:
    return {"name": name, "type": t, "nullable": True, "metadata": md or {}}


def test_char_and_varchar_become_strings_with_the_declared_type() -> None:
    schema = {
        "type": "struct",
        "fields": [
            _f("id", "integer"),
            _f("v", "varchar(3)", {"comment": "x"}),
            _f("a", {"type": "array", "elementType": "char(2)", "containsNull": True}),
            _f("s", {"type": "struct", "fields": [_f("c", "CHAR(4)"), _f("n", "long")]}),
        ],
    }
    out = char_varchar.to_delta(schema)
    id_, v, a, s = out["fields"]
    assert id_ == _f("id", "integer")
    assert v == _f("v", "string", {"comment": "x", KEY: "varchar(3)"})
    assert a["type"]["elementType"] == "string" and a["metadata"] == {KEY: "array<char(2)>"}
    assert s["metadata"] == {KEY: "struct<c:char(4),n:long>"}
    assert s["type"]["fields"][0] == _f("c", "string", {KEY: "char(4)"})
    assert schema["fields"][1]["type"] == "varchar(3)"  # the input is not changed
    assert char_varchar.to_delta(out) == out
    assert list(char_varchar.length_limits(out)) == [(("v",), "varchar", 3), (("s", "c"), "char", 4)]


def test_a_schema_without_them_is_unchanged() -> None:
    schema = {"type": "struct", "fields": [_f("id", "integer"), _f("s", "string")]}
    assert char_varchar.to_delta(schema) == schema
    assert list(char_varchar.length_limits(schema)) == []
