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
    return next(_references(text), None) is not None


def sql_with_delta_tables(spark: SparkSession, text: str) -> DataFrame:
    """``spark.sql(text)`` with each ``delta.`<path>` [VERSION|TIMESTAMP AS OF x]`` read by deltamerge.

    The snapshots go in as ``spark.sql``'s DataFrame arguments (``{name}`` fields): on a classic
    session PySpark registers temporary views for the analysis and drops them, on Spark Connect
    they travel inside the plan, which is analysed later."""
    from deltamerge.io import read

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
        out.append(escape_braces(text[pos : m.start()]) + "{" + name + "}")
        pos = m.end()
    if not frames:
        return spark.sql(text)
    out.append(escape_braces(text[pos:]))
    return spark.sql("".join(out), **frames)


def escape_braces(text: str) -> str:
    """``text`` as literal text of a ``str.format`` template (``spark.sql``'s ``{name}`` fields)."""
    return text.replace("{", "{{").replace("}", "}}")
