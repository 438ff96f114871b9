"""``delta.`<path>``` table references inside queries deltamerge hands to Spark.

Without Delta's jars Spark cannot read ``delta.`/path```; a MERGE source such as
``(SELECT * FROM delta.`/staging` VERSION AS OF 3 WHERE op <> 'D')``, an ``INSERT ... SELECT``
or a plain ``SELECT`` would fail. Each reference (with its ``VERSION``/``TIMESTAMP AS OF``) is read with
``deltamerge.read`` and handed to ``spark.sql`` as a DataFrame argument.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from deltamerge.errors import ParseError
from deltamerge.identifiers import unquote
from deltamerge.log.paths import split_time_travel
from deltamerge.spark.types import quote_name
from deltamerge.sql_params import sql_matches

__all__ = ["escape_braces", "has_delta_tables", "sql_with_delta_tables"]

# ``delta.`<path>```, a registered name with the session catalog's qualifiers (``default.t``,
# ``spark_catalog.default.t``: its temp view has one part, so Spark would not find it; not the
# head of a column reference ``default.t.id``), or a registered name that travels in time (its
# temp view cannot).
_REFERENCE = re.compile(
    r"(?<![\w.`])(?:delta\s*\.\s*(?P<path>`(?:[^`]|``)+`)"
    r"|(?:spark_catalog\s*\.\s*)?default\s*\.\s*(?P<name>`(?:[^`]|``)+`|\w+\b)(?!\s*\.)"
    r"|(?P<plain>`(?:[^`]|``)+`|\w+\b)(?=\s+(?:FOR\s+)?(?:VERSION|TIMESTAMP|SYSTEM_VERSION|SYSTEM_TIME)\s+AS\s+OF\b))"
    r"(?:\s+(?:FOR\s+)?(?P<kind>VERSION|TIMESTAMP|SYSTEM_VERSION|SYSTEM_TIME)\s+AS\s+OF\s+"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[-+]?\d+\b)?)?",
    re.IGNORECASE,
)


# ``default.t.`` / ``spark_catalog.default.t.`` heading a column reference (``default.t.id``):
# Spark resolves it against a catalog table's columns, never against a temp view's.
_COLUMN_HEAD = re.compile(
    r"(?<![\w.`])(?:spark_catalog\s*\.\s*)?default\s*\.\s*(?P<name>`(?:[^`]|``)+`|\w+\b)(?=\s*\.\s*[\w`*])",
    re.IGNORECASE,
)
# A relation's position (a replaced reference there gets its name back as an alias) and the
# keywords that may follow a relation without being its alias.
_RELATION_BEFORE = re.compile(r"(?:\bFROM|\bJOIN|,)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\s*(?P<word>`|[A-Za-z_]\w*)?")
# fmt: off
_NOT_ALIASES = frozenset((
    "anti", "cluster", "cross", "distribute", "except", "for", "full", "group", "having", "inner",
    "intersect", "join", "lateral", "left", "limit", "minus", "natural", "offset", "on", "order",
    "pivot", "qualify", "right", "select", "semi", "set", "sort", "tablesample", "union", "unpivot",
    "using", "values", "when", "where", "window", "with",
))
# fmt: on


def _registered_heads(text: str) -> Iterator[tuple[re.Match[str], str]]:
    from deltamerge import catalog

    for m in sql_matches(_COLUMN_HEAD, text):
        if catalog.path_for_name(m.group("name")) is not None:
            yield m, unquote(m.group("name"))


def _without_catalog_heads(text: str) -> str:
    """``text`` with each registered name's ``default.t.`` column head written as ``t.`` (the
    alias its relation gets here)."""
    out: list[str] = []
    pos = 0
    for m, name in _registered_heads(text):
        out.append(text[pos : m.start()] + quote_name(name))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _alias(text: str, m: re.Match[str]) -> str:
    """`` AS <name>`` for a registered name read as a DataFrame in a relation's position without an
    alias of its own: its columns stay qualified by the table's name (``SELECT t.id FROM
    default.t``), as Spark qualifies a catalog table's."""
    name = m.group("name") or m.group("plain")
    if name is None or not _RELATION_BEFORE.search(text[: m.start()]):
        return ""
    word = _AFTER.match(text, m.end())
    follower = (word.group("word") or "") if word else ""
    if follower == "`" or (follower and follower.lower() not in _NOT_ALIASES):
        return ""  # an alias (``AS`` included) follows
    if follower.lower() in ("tablesample", "with"):
        return ""  # Spark's grammar puts the alias after the sample or options clause
    return " AS " + quote_name(unquote(name))


def _references(text: str) -> Iterator[tuple[re.Match[str], str]]:
    # A reference starts with ``delta`` or ``spark_catalog`` / ``default``, in the SQL; a name
    # counts when it is registered.
    from deltamerge import catalog

    for m in sql_matches(_REFERENCE, text):
        if m.group("path") is not None:
            yield m, unquote(m.group("path"))
        elif (path := catalog.path_for_name(m.group("name") or m.group("plain"))) is not None:
            yield m, path


def has_delta_tables(text: str) -> bool:
    """Whether ``text`` names a table as ``delta.`<path>``` or a registered name as
    ``default.<name>``."""
    return next(_references(text), None) is not None or next(_registered_heads(text), None) is not None


def sql_with_delta_tables(spark: SparkSession, text: str) -> DataFrame:
    """``spark.sql(text)`` with each ``delta.`<path>` [VERSION|TIMESTAMP AS OF x]`` read by deltamerge.

    The snapshots go in as ``spark.sql``'s DataFrame arguments (``{name}`` fields): on a classic
    session PySpark registers temporary views for the analysis and drops them, on Spark Connect
    they travel inside the plan, which is analysed later."""
    from deltamerge.io import read

    text = _without_catalog_heads(text)
    frames: dict[str, Any] = {}
    out: list[str] = []
    pos = 0
    for m, path in _references(text):
        kind = (m.group("kind") or "").upper()
        value = m.group("value")
        if kind and value is None:
            raise ParseError(
                f"{kind} AS OF on {m.group(0).split()[0]} needs a literal (a version number or a "
                "timestamp string) for deltamerge to read that snapshot."
            )
        version = timestamp = None
        if kind in ("VERSION", "SYSTEM_VERSION"):
            if not re.fullmatch(r"[-+]?\d+", value or ""):
                raise ParseError(f"VERSION AS OF expects a version number, got {value}.")
            version = int(value or "0")
        elif kind:
            timestamp = unquote(value or "")
        if not kind and m.group("path") is not None:  # delta.`/path@v3` (or @yyyyMMddHHmmssSSS)
            path, version, timestamp = split_time_travel(path)
        name = f"dm_delta_{len(frames)}"
        frames[name] = read(spark, path, version=version, timestamp=timestamp)
        out.append(escape_braces(text[pos : m.start()]) + "{" + name + "}" + _alias(text, m))
        pos = m.end()
    if not frames:
        return spark.sql(text)  # only column heads were rewritten
    out.append(escape_braces(text[pos:]))
    return spark.sql("".join(out), **frames)


def escape_braces(text: str) -> str:
    """``text`` as literal text of a ``str.format`` template (``spark.sql``'s ``{name}`` fields)."""
    return text.replace("{", "{{").replace("}", "}}")
