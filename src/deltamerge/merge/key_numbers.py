"""Join keys as numbers that keep their order, for dynamic file pruning (``merge/pruning.py``).

The pruning machinery works on integers: the source keys' buckets of ``[min, max]`` and each
candidate file's ``[min, max]`` from its statistics or partition value. Each key type has one map
from values to integers that never reverses the order (``a <= b`` gives ``n(a) <= n(b)``), in
Python for the statistics (``of_value``) and in Spark SQL for the source (``sql_of``): then a file
whose numbers miss every source key's number misses every key.

- Integers are themselves; dates their day number.
- Decimals (exact statistics) their floor, saturated to BIGINT: the integers of a CDC feed's NUMBER
  keys exactly, fractional keys coarsely.
- Strings (Spark's default collation: byte-wise order of the UTF-8 text) a window of their bytes:
  skip the prefix every candidate's statistics share (``'CUST-000'`` of ``'CUST-0001234'``), read
  the next ``_WIDTH`` bytes big-endian, padded with zeros. A string that does not start with the
  shared prefix falls below or above every file. Statistics bound a string column loosely: a min
  may be cut short (still below every value), and a max of at least ``MAYBE_CUT`` characters may be
  a cut prefix of the values (Delta appends a tie-breaker; other writers may not), so a file's max
  maps to the largest number a string starting with it can have (the window padded with 0xFF).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from pyspark.sql.types import DataType, DateType, DecimalType, StringType

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
_EPOCH = dt.date(1970, 1, 1)

_WIDTH = 7  # bytes: numbers below 2^56 leave BIGINT room for the "above" marker
ABOVE = 1 << (8 * _WIDTH)  # a string after every one with the prefix
BELOW = -1
#: A string max this long may be a cut prefix of the file's values (as ``skipping.compiler``).
MAYBE_CUT = 16


def shared_prefix(texts: Sequence[str]) -> bytes:
    """The longest byte prefix of the UTF-8 texts (empty without texts)."""
    if not texts:
        return b""
    encoded = [t.encode("utf-8") for t in texts]
    lo, hi = min(encoded), max(encoded)  # the common prefix of the extremes is everyone's
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def number(text: str, prefix: bytes, *, ceiling: bool = False) -> int:
    """``text``'s number after ``prefix``; with ``ceiling``, the largest number of a string that
    starts with ``text`` (for a max that may be cut)."""
    data = text.encode("utf-8")
    if not data.startswith(prefix):
        return BELOW if data < prefix else ABOVE
    window = data[len(prefix) : len(prefix) + _WIDTH]
    pad = b"\xff" if ceiling else b"\x00"
    return int.from_bytes(window + pad * (_WIDTH - len(window)), "big")


def number_sql(column: str, prefix: bytes) -> str:
    """Spark SQL of ``number(column, prefix)`` (NULL for NULL): on the upper-case hex text of the
    UTF-8 bytes, whose order is the bytes' order."""
    h = f"hex(encode({column}, 'UTF-8'))"
    p = prefix.hex().upper()
    start = len(p) + 1
    digits = 2 * _WIDTH
    return (
        f"CASE WHEN {column} IS NULL THEN NULL "
        f"WHEN startswith({h}, '{p}') "
        f"THEN CAST(conv(rpad(substr({h}, {start}, {digits}), {digits}, '0'), 16, 10) AS BIGINT) "
        f"WHEN {h} < '{p}' THEN {BELOW} ELSE {ABOVE} END"
    )


def of_value(raw: object, t: DataType) -> int | None:
    """A statistic's or partition value's number (None when unknown or unreadable); strings go
    through ``number`` with their files' shared prefix instead."""
    if raw is None or isinstance(raw, bool) or isinstance(t, StringType):
        return None
    if isinstance(t, DateType):
        if not isinstance(raw, str):
            return None
        try:
            return (dt.date.fromisoformat(raw[:10]) - _EPOCH).days
        except ValueError:
            return None
    if isinstance(t, DecimalType):
        try:
            d = Decimal(str(raw).strip())
        except InvalidOperation:
            return None
        return max(LONG_MIN, min(LONG_MAX, math.floor(d))) if d.is_finite() else None
    try:
        return int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def sql_of(column: str, t: DataType) -> str:
    """Spark SQL of ``of_value`` over a source column (NULL for NULL)."""
    if isinstance(t, DecimalType):
        return (
            f"CASE WHEN {column} IS NULL THEN NULL WHEN {column} >= {LONG_MAX} THEN {LONG_MAX} "
            f"WHEN {column} <= {LONG_MIN} THEN {LONG_MIN} ELSE CAST(floor({column}) AS BIGINT) END"
        )
    return f"unix_date({column})" if isinstance(t, DateType) else f"CAST({column} AS BIGINT)"
