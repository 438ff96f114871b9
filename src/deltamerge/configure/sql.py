"""``spark.sql`` for Delta statements after ``deltamerge.configure(spark)``.

delta-spark users run ``spark.sql("MERGE INTO ...")``; without Delta's JVM extension Spark cannot.
The wrapper sends the statements deltamerge implements (MERGE, UPDATE, DELETE, INSERT and ALTER
TABLE on registered names, CREATE ... USING delta, DESCRIBE HISTORY, VACUUM, RESTORE, OPTIMIZE, ...;
DESCRIBE, SHOW TBLPROPERTIES / PARTITIONS / CREATE TABLE and TRUNCATE TABLE of registered names;
any text naming ``delta.`/path```, ``table_changes`` or a registered name as ``default.<name>``)
to ``deltamerge.sql``, which hands what is not a Delta statement back to Spark; everything else
goes straight to PySpark's own method.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["delta_statement", "wrap_sql"]

_LEADING = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*(?P<word>[A-Za-z]+)", re.DOTALL)
# Statements Spark cannot run without Delta's extension: deltamerge runs them (or reports the error).
_DELTA_WORDS = frozenset(
    {"MERGE", "UPDATE", "DELETE", "VACUUM", "RESTORE", "OPTIMIZE", "REORG", "GENERATE", "CONVERT"}
)
_CREATE_DELTA = re.compile(r"\bUSING\s+delta\b|\bSHALLOW\s+CLONE\b", re.IGNORECASE)
_DESCRIBE_DELTA = re.compile(r"DESC(?:RIBE)?\s+(?:HISTORY|DETAIL)\b", re.IGNORECASE)
_EXPLAIN_DML = re.compile(r"EXPLAIN\s+(?:\w+\s+)?(?:MERGE|UPDATE|DELETE)\b", re.IGNORECASE)
_CTE_DML = re.compile(r"\b(?:MERGE\s+INTO|INSERT\s+(?:INTO|OVERWRITE)|UPDATE|DELETE\s+FROM)\b", re.IGNORECASE)
_DELTA_NAMES = re.compile(r"\bdelta\s*\.\s*`|\btable_changes(?:_by_path)?\s*\(", re.IGNORECASE)
# The table an INSERT or ALTER TABLE writes: deltamerge's when it is a registered name.
_TARGET = re.compile(
    r"(?:INSERT\s+(?:INTO|OVERWRITE)(?:\s+TABLE)?|ALTER\s+TABLE|TRUNCATE\s+TABLE|SHOW\s+(?:TBLPROPERTIES|PARTITIONS|CREATE\s+TABLE)"
    r"|DESC(?:RIBE)?(?:\s+TABLE)?(?:\s+(?:EXTENDED|FORMATTED))?)\s+(?P<name>(?:`(?:[^`]|``)+`|[\w.])+)",
    re.IGNORECASE,
)

_STATE = threading.local()


def _registered_target(text: str) -> bool:
    from deltamerge import catalog

    m = _TARGET.search(text)
    if m is None:
        return False
    last = re.split(r"\.(?=(?:[^`]*`[^`]*`)*[^`]*$)", m.group("name"))[-1]
    name = last[1:-1].replace("``", "`") if last.startswith("`") else last
    return catalog.path_for_name(name) is not None


def _catalog_names(text: str) -> bool:
    # ``default.people`` / ``people VERSION AS OF 3`` of a registered name (its temp view has one
    # part and no history); only asked when some name is registered.
    from deltamerge import catalog
    from deltamerge.sql_tables import has_delta_tables

    return catalog.has_names() and has_delta_tables(text)


def delta_statement(text: str, default_source: Callable[[], str | None] = lambda: None) -> bool:
    """Whether ``text`` is a statement deltamerge runs (``default_source()``:
    ``spark.sql.sources.default``, asked only for a CREATE TABLE without USING)."""
    if _DELTA_NAMES.search(text) or _catalog_names(text):
        return True
    m = _LEADING.match(text)
    if m is None:
        return False
    word = m.group("word").upper()
    rest = text[m.start("word") :]
    if word in _DELTA_WORDS:
        return True
    if word in ("INSERT", "ALTER", "TRUNCATE", "SHOW"):
        return _registered_target(rest)
    if word == "WITH":
        return _CTE_DML.search(rest) is not None
    if word == "EXPLAIN":
        return _EXPLAIN_DML.match(rest) is not None
    if word in ("CREATE", "REPLACE"):
        if _CREATE_DELTA.search(text):
            return True
        table = re.match(r"(?:CREATE\s+(?:OR\s+REPLACE\s+)?|REPLACE\s+)TABLE\b", rest, re.IGNORECASE)
        return table is not None and str(default_source() or "").lower() == "delta"
    return word in ("DESC", "DESCRIBE") and (
        _DESCRIBE_DELTA.match(rest) is not None or _registered_target(rest)
    )


@contextmanager
def _inside() -> Iterator[None]:
    # deltamerge.sql calls spark.sql for what it does not run itself: those calls go to Spark.
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


def wrap_sql(original: Callable[..., Any]) -> Callable[..., Any]:
    """``SparkSession.sql`` that runs Delta statements through ``deltamerge.sql``."""

    @functools.wraps(original)
    def sql(self: Any, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:
        if getattr(_STATE, "depth", 0) or not isinstance(sqlQuery, str):
            return original(self, sqlQuery, args, **kwargs)
        if not delta_statement(sqlQuery, lambda: self.conf.get("spark.sql.sources.default", None)):
            return original(self, sqlQuery, args, **kwargs)
        import deltamerge

        with _inside():
            return deltamerge.sql(self, sqlQuery, args, **kwargs)

    return sql
