"""``delta.`<path>``` table references inside queries deltamerge hands to Spark.

Without Delta's jars Spark cannot read ``delta.`/path```; a MERGE source such as
``(SELECT * FROM delta.`/staging` VERSION AS OF 3 WHERE op <> 'D')``, an ``INSERT ... SELECT``
or a plain ``SELECT`` would fail. Each reference (with its ``VERSION``/``TIMESTAMP AS OF``) becomes
a temporary view of ``deltamerge.read`` for as long as Spark analyses the statement.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from deltamerge.errors import ParseError
from deltamerge.identifiers import unquote

__all__ = ["delta_table_views", "has_delta_tables"]

_REFERENCE = re.compile(
    r"(?<![\w.`])delta\s*\.\s*(?P<path>`(?:[^`]|``)+`)"
    r"(?:\s+(?:FOR\s+)?(?P<kind>VERSION|TIMESTAMP|SYSTEM_VERSION|SYSTEM_TIME)\s+AS\s+OF\s+"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[-+]?\d+\b)?)?",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)


def _references(text: str) -> Iterator[re.Match[str]]:
    # Matches outside string literals and comments.
    skipped = [(m.start(), m.end()) for m in _QUOTED.finditer(text)]
    for m in _REFERENCE.finditer(text):
        if not any(a <= m.start() < b for a, b in skipped):
            yield m


def has_delta_tables(text: str) -> bool:
    """Whether ``text`` names a table as ``delta.`<path>```."""
    return next(_references(text), None) is not None


@contextmanager
def delta_table_views(spark: SparkSession, text: str) -> Iterator[str]:
    """``text`` with each ``delta.`<path>` [VERSION|TIMESTAMP AS OF x]`` replaced by a temporary
    view of that snapshot; the views are dropped on exit (run ``spark.sql`` inside: it analyses
    the statement at once, so the DataFrame it returns no longer needs them)."""
    from deltamerge.io import read

    views: list[str] = []
    out: list[str] = []
    pos = 0
    try:
        for m in _references(text):
            kind = (m.group("kind") or "").upper()
            value = m.group("value")
            if kind and value is None:
                raise ParseError(
                    f"{kind} AS OF on delta.{m.group('path')} needs a literal (a version number or a "
                    "timestamp string) for deltamerge to read that snapshot."
                )
            version = timestamp = None
            if kind in ("VERSION", "SYSTEM_VERSION"):
                if not re.fullmatch(r"[-+]?\d+", value or ""):
                    raise ParseError(f"VERSION AS OF expects a version number, got {value}.")
                version = int(value or "0")
            elif kind:
                timestamp = unquote(value or "")
            view = f"__dm_delta_{uuid.uuid4().hex}"
            read(
                spark, unquote(m.group("path")), version=version, timestamp=timestamp
            ).createOrReplaceTempView(view)
            views.append(view)
            out.append(text[pos : m.start()] + view)
            pos = m.end()
        out.append(text[pos:])
        yield "".join(out)
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
