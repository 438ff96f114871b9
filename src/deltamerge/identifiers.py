"""Identifiers as statement text writes them: backtick-quoted names, dotted table names, and the
lookup of a table name among the names registered with deltamerge."""

from __future__ import annotations

import re

from deltamerge import catalog

__all__ = ["IDENT", "QUALIFIED", "lookup_table", "name_parts", "unquote"]

IDENT = r"\d*[A-Za-z_]\w*|`(?:[^`]|``)+`"
"""One name: a plain identifier or a backtick-quoted one (a doubled backtick is a literal one)."""

QUALIFIED = rf"(?:{IDENT})(?:\s*\.\s*(?:{IDENT}))*"
"""A dotted name such as ``db.`my table```."""


def unquote(text: str) -> str:
    """The value of a quoted string (``'…'``/``"…"``, backslash escapes) or of a backtick-quoted
    identifier; other text is returned stripped."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    if len(text) >= 2 and text[0] == text[-1] == "`":
        return text[1:-1].replace("``", "`")
    return text


def name_parts(text: str) -> list[str]:
    """The unquoted parts of a dotted name (``a.`b.c``` -> ``["a", "b.c"]``)."""
    return [unquote(p) for p in re.findall(IDENT, text)]


def lookup_table(parts: list[str]) -> tuple[str, str] | None:
    """(path, name) of a registered table named by ``parts``; a leading ``spark_catalog`` and
    ``default`` are dropped as Spark's session catalog does. None when the name is not registered."""
    parts = [p for p in parts if p]
    while len(parts) > 1 and parts[0].lower() in ("spark_catalog", "default"):
        parts = parts[1:]
    name = ".".join(parts)
    path = catalog.path_for_name(name)
    return None if path is None else (path, name)
