"""CHAR(n) / VARCHAR(n) columns as Delta stores them: type ``string`` plus the field metadata
``__CHAR_VARCHAR_TYPE_STRING`` holding the declared type (Spark's ``CharVarcharUtils``).

``char(n)`` and ``varchar(n)`` are not Delta primitive types: a schema that carried them would be
unreadable to Delta Lake and delta-rs. :func:`to_delta` rewrites them at the one place every schema
change passes (the transaction's ``update_metadata``); :func:`length_limits` gives writers the
limits to enforce (Spark's ``EXCEED_LIMIT_LENGTH``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

#: The field metadata key Spark and Delta keep the declared CHAR/VARCHAR type in.
TYPE_STRING = "__CHAR_VARCHAR_TYPE_STRING"
_CHAR_VARCHAR = re.compile(r"\s*(char|varchar)\s*\(\s*(\d+)\s*\)\s*", re.IGNORECASE)


def _has(t: Any) -> bool:
    if isinstance(t, str):
        return _CHAR_VARCHAR.fullmatch(t) is not None
    if not isinstance(t, dict):
        return False
    kind = t.get("type")
    if kind == "array":
        return _has(t.get("elementType"))
    if kind == "map":
        return _has(t.get("keyType")) or _has(t.get("valueType"))
    if kind == "struct":
        return any(_has(f.get("type")) for f in t.get("fields", ()))
    return False


def _quote_if_needed(name: str) -> str:
    # Spark's quoteIfNeeded: a field name that is not a plain word is quoted in a catalog string.
    plain = re.fullmatch(r"[a-zA-Z0-9_]+", name) is not None and not name.isdigit()
    return name if plain else "`" + name.replace("`", "``") + "`"


def _catalog_string(t: Any) -> str:
    """A Delta JSON type as Spark's ``catalogString`` (``array<varchar(3)>``, ``struct<a:char(2)>``)."""
    if isinstance(t, str):
        m = _CHAR_VARCHAR.fullmatch(t)
        return f"{m.group(1).lower()}({m.group(2)})" if m else t
    kind = t.get("type")
    if kind == "array":
        return f"array<{_catalog_string(t['elementType'])}>"
    if kind == "map":
        return f"map<{_catalog_string(t['keyType'])},{_catalog_string(t['valueType'])}>"
    if kind == "struct":
        inner = ",".join(
            f"{_quote_if_needed(str(f['name']))}:{_catalog_string(f['type'])}" for f in t.get("fields", ())
        )
        return f"struct<{inner}>"
    return str(kind)


def _replace(t: Any) -> Any:
    if isinstance(t, str):
        return "string" if _CHAR_VARCHAR.fullmatch(t) else t
    if not isinstance(t, dict):
        return t
    kind = t.get("type")
    if kind == "array":
        return {**t, "elementType": _replace(t["elementType"])}
    if kind == "map":
        return {**t, "keyType": _replace(t["keyType"]), "valueType": _replace(t["valueType"])}
    if kind == "struct":
        return _struct(t)
    return t


def _struct(struct: Mapping[str, Any]) -> dict:
    fields = []
    for f in struct.get("fields", ()):
        f = dict(f)
        if _has(f.get("type")):
            f["metadata"] = {**(f.get("metadata") or {}), TYPE_STRING: _catalog_string(f["type"])}
            f["type"] = _replace(f["type"])
        fields.append(f)
    return {**struct, "fields": fields}


def to_delta(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with every ``char(n)`` / ``varchar(n)`` stored as ``string`` plus the declared type
    in the field's metadata: a new schema, or ``schema`` itself when it has none."""
    if not _has(dict(schema)):
        return schema
    return _struct(schema)


def length_limits(schema: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str, int]]:
    """``(path, "char" | "varchar", n)`` of every string field declared CHAR(n) / VARCHAR(n), at the
    top level and inside structs (elements of arrays and maps: :func:`nested_limits`)."""

    Limit = tuple[tuple[str, ...], str, int]

    def walk(struct: Mapping[str, Any], prefix: tuple[str, ...]) -> Iterator[Limit]:
        for f in struct.get("fields", ()):
            path = (*prefix, str(f["name"]))
            declared = (f.get("metadata") or {}).get(TYPE_STRING)
            m = _CHAR_VARCHAR.fullmatch(declared) if isinstance(declared, str) else None
            if m is not None and f.get("type") == "string":
                yield path, m.group(1).lower(), int(m.group(2))
            t = f.get("type")
            if isinstance(t, dict) and t.get("type") == "struct":
                yield from walk(t, path)

    yield from walk(schema, ())


#: A declared type as a tree: ("char" | "varchar", n), ("array", element), ("map", key, value),
#: ("struct", ((name, type), ...)) or ("other", text).
DeclaredType = tuple[Any, ...]


def parse_declared(text: str) -> DeclaredType:
    """Parse a catalog string such as ``map<string,array<char(2)>>`` (Spark's ``catalogString``:
    field names quoted with backticks when needed)."""
    pos = 0

    def skip() -> None:
        nonlocal pos
        while pos < len(text) and text[pos].isspace():
            pos += 1

    def expect(ch: str) -> None:
        nonlocal pos
        skip()
        if not text.startswith(ch, pos):
            raise ValueError(f"expected {ch!r} at {pos} in {text!r}")
        pos += 1

    def name() -> str:
        nonlocal pos
        skip()
        if text.startswith("`", pos):
            out, pos = [], pos + 1
            while pos < len(text):
                if text.startswith("``", pos):
                    out.append("`")
                    pos += 2
                elif text[pos] == "`":
                    pos += 1
                    return "".join(out)
                else:
                    out.append(text[pos])
                    pos += 1
            raise ValueError(f"unclosed backtick in {text!r}")
        start = pos
        while pos < len(text) and text[pos] not in ":,<>()" and not text[pos].isspace():
            pos += 1
        return text[start:pos]

    def parse() -> DeclaredType:
        nonlocal pos
        word = name().lower()
        skip()
        if word == "array":
            expect("<")
            element = parse()
            expect(">")
            return ("array", element)
        if word == "map":
            expect("<")
            key = parse()
            expect(",")
            value = parse()
            expect(">")
            return ("map", key, value)
        if word == "struct":
            expect("<")
            fields: list[tuple[str, DeclaredType]] = []
            skip()
            while not text.startswith(">", pos):
                field = name()
                expect(":")
                fields.append((field, parse()))
                skip()
                if text.startswith(",", pos):
                    pos += 1
                    skip()
            expect(">")
            return ("struct", tuple(fields))
        if text.startswith("(", pos):
            end = text.index(")", pos)
            args, pos = text[pos + 1 : end], end + 1
            if word in ("char", "varchar"):
                return (word, int(args.strip()))
            return ("other", f"{word}({args})")
        return ("other", word)

    tree = parse()
    skip()
    if pos != len(text):
        raise ValueError(f"unexpected text at {pos} in {text!r}")
    return tree


def has_char_varchar(t: DeclaredType, kinds: tuple[str, ...] = ("char", "varchar")) -> bool:
    """Whether a declared type holds a CHAR/VARCHAR (of ``kinds``) anywhere."""
    kind = t[0]
    if kind in ("char", "varchar"):
        return kind in kinds
    if kind == "array":
        return has_char_varchar(t[1], kinds)
    if kind == "map":
        return has_char_varchar(t[1], kinds) or has_char_varchar(t[2], kinds)
    if kind == "struct":
        return any(has_char_varchar(ft, kinds) for _, ft in t[1])
    return False


def nested_limits(schema: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], DeclaredType]]:
    """``(path, declared type)`` of every array or map field (top level or inside structs) whose
    elements, keys or values are declared CHAR/VARCHAR, the cases :func:`length_limits` leaves out."""

    def walk(
        struct: Mapping[str, Any], prefix: tuple[str, ...]
    ) -> Iterator[tuple[tuple[str, ...], DeclaredType]]:
        for f in struct.get("fields", ()):
            path = (*prefix, str(f["name"]))
            t = f.get("type")
            declared = (f.get("metadata") or {}).get(TYPE_STRING)
            kind = t.get("type") if isinstance(t, dict) else None
            if kind in ("array", "map") and isinstance(declared, str):
                try:
                    tree = parse_declared(declared)
                except ValueError:
                    continue  # not a type string Spark wrote: nothing to enforce
                if has_char_varchar(tree):
                    yield path, tree
            elif kind == "struct":
                yield from walk(t, path)

    yield from walk(schema, ())
