"""``spark.sql``'s two ways of putting values into statement text, for ``deltamerge.sql``.

* ``args``: parameter markers, named (``:name`` with a dict) or positional (``?`` with a list),
  bound to SQL literals as Spark binds them (markers in string literals, comments and backticks are
  text, not markers).
* ``kwargs``: Python's ``str.format`` fields; a DataFrame becomes a temporary view's name, a string a
  SQL string literal, a Column its SQL text, anything else ``str(value)`` (PySpark's formatter).

deltamerge parses MERGE and the Delta statements itself, so the values are put into the text before
parsing; a statement deltamerge hands to Spark gets the same text.
"""

from __future__ import annotations

import re
import string
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from deltamerge.errors import AnalysisError
from deltamerge.identifiers import unquote
from deltamerge.spark.columns import column_to_sql, sql_literal

__all__ = ["TextFormatter", "bind_parameters", "inline_identifiers", "normalize_time_travel", "sql_matches"]

# What is text, not SQL: string literals, backtick identifiers, comments.
_OPAQUE = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/", re.DOTALL)
# ``:name`` not after a word, ``:`` or closing bracket (``a::int`` casts, ``raw:field`` paths).
_NAMED = re.compile(r"(?<![\w:)\]])\:([A-Za-z_]\w*)")
_POSITIONAL = re.compile(r"\?")
_IDENTIFIER = re.compile(r"\bIDENTIFIER\s*\(\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\s*\)", re.IGNORECASE)


def _literal(value: Any) -> str:
    if isinstance(value, Column):
        return column_to_sql(value)
    return sql_literal(value)


def bind_parameters(text: str, args: Mapping[str, Any] | Sequence[Any]) -> str:
    """``text`` with its parameter markers replaced by literals of ``args`` (Spark's
    ``UNBOUND_SQL_PARAMETER`` for a marker without a value)."""
    named = isinstance(args, Mapping)
    marker = _NAMED if named else _POSITIONAL
    values = list(args) if not named else []
    out: list[str] = []
    pos = 0
    used = 0

    def bind(segment: str) -> str:
        nonlocal used

        def one(m: re.Match[str]) -> str:
            nonlocal used
            if named:
                name = m.group(1)
                if name not in args:  # type: ignore[operator]
                    raise _unbound(name)
                return _literal(args[name])  # type: ignore[index]
            if used >= len(values):
                raise _unbound(f"_{used}")
            used += 1
            return _literal(values[used - 1])

        return marker.sub(one, segment)

    for m in _OPAQUE.finditer(text):
        out.append(bind(text[pos : m.start()]) + m.group(0))
        pos = m.end()
    out.append(bind(text[pos:]))
    return "".join(out)


def inline_identifiers(text: str) -> str:
    """``IDENTIFIER('db.tbl')`` (Spark's identifier clause, e.g. after binding ``IDENTIFIER(:t)``)
    replaced by the name it holds, so deltamerge's statement parsing sees the table."""
    if "identifier" not in text.lower():
        return text
    return _sub_in_sql(_IDENTIFIER, text, lambda m: unquote(m.group(1)))


_SYSTEM_TRAVEL = re.compile(r"\b(?:FOR\s+)?SYSTEM_(VERSION|TIME)(\s+AS\s+OF\b)", re.IGNORECASE)


def normalize_time_travel(text: str) -> str:
    """Spark's synonyms ``[FOR] SYSTEM_VERSION AS OF`` / ``[FOR] SYSTEM_TIME AS OF`` written as
    ``VERSION AS OF`` / ``TIMESTAMP AS OF``, which the statement parser (SQLGlot) reads."""
    if "system_" not in text.lower():
        return text
    return _sub_in_sql(
        _SYSTEM_TRAVEL,
        text,
        lambda m: ("VERSION" if m.group(1).upper() == "VERSION" else "TIMESTAMP") + m.group(2),
    )


def sql_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in ``text`` that start outside string literals, backtick
    identifiers and comments, i.e. in the SQL itself."""
    opaque = [(m.start(), m.end()) for m in _OPAQUE.finditer(text)]
    for m in pattern.finditer(text):
        if not any(a <= m.start() < b for a, b in opaque):
            yield m


def _sub_in_sql(pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str]) -> str:
    # ``pattern.sub`` for the matches of ``sql_matches``.
    out: list[str] = []
    pos = 0
    for m in sql_matches(pattern, text):
        out.append(text[pos : m.start()] + replace(m))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _unbound(name: str) -> AnalysisError:
    return AnalysisError(
        f"Found the unbound parameter: {name}. Please, fix `args` and provide a mapping of the "
        "parameter to either a SQL literal or collection constructor functions such as `map()`, "
        "`array()`, `struct()`.",
        error_class="UNBOUND_SQL_PARAMETER",
        sql_state="42P02",
    )


class TextFormatter(string.Formatter):
    """PySpark's ``spark.sql(text, **kwargs)`` formatting; ``drop_views()`` after the statement."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._views: list[tuple[DataFrame, str]] = []

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        obj, first = super().get_field(field_name, args, kwargs)
        return self._convert(obj), first

    def _convert(self, value: Any) -> Any:
        if isinstance(value, DataFrame):
            for df, name in self._views:
                if df is value:
                    return name
            name = f"_dm_fmt_{uuid.uuid4().hex}"
            value.createOrReplaceTempView(name)
            self._views.append((value, name))
            return name
        if isinstance(value, str):
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(value, Column):
            return column_to_sql(value)
        return value

    def drop_views(self) -> None:
        for _, name in self._views:
            self._spark.catalog.dropTempView(name)
        self._views = []
