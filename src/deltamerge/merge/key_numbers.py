"""Join keys as numbers that keep their order, for dynamic file pruning (``merge/pruning.py``).

The pruning machinery works on integers: the source keys' buckets of ``[min, max]`` and each
candidate file's ``[min, max]`` from its statistics or partition value. Each key type has one map
from values to integers that never reverses the order (``a <= b`` gives ``n(a) <= n(b)``), in
Python for the statistics (``of_value``) and in Spark SQL for the source (``sql_of``): then a file
whose numbers miss every source key's number misses every key.

- Integers are themselves; dates their day number; timestamps their microseconds since the epoch
  (TIMESTAMP_NTZ: of its wall time read as UTC). Statistics keep a timestamp to the millisecond,
  cut: a max statistic bounds the values up to 999 µs above it (``statistic(..., is_max=True)``).
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

from pyspark.sql.types import DataType, DateType, DecimalType, StringType, TimestampNTZType, TimestampType

from deltamerge.stats.values import parse_timestamp_micros

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
_EPOCH = dt.date(1970, 1, 1)

_WIDTH = 7  # bytes: numbers below 2^56 leave BIGINT room for the "above" marker
ABOVE = 1 << (8 * _WIDTH)  # a string after every one with the prefix
BELOW = -1
#: A string max this long may be a cut prefix of the file's values (as ``skipping.compiler``).
MAYBE_CUT = 16
#: Statistics write timestamps to the millisecond, cut (not rounded): a true max lies within this.
TIMESTAMP_SLACK = 999


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


def statistic(raw: object, t: DataType, *, is_max: bool = False) -> int | None:
    """A min or max statistic's number: a bound of every value of the file (None when unknown)."""
    if isinstance(t, (TimestampType, TimestampNTZType)):
        if not isinstance(raw, str):
            return None
        us = parse_timestamp_micros(raw, "UTC", ignore_offset=isinstance(t, TimestampNTZType))
        return None if us is None else us + TIMESTAMP_SLACK if is_max else us
    return of_value(raw, t)


def of_value(raw: object, t: DataType) -> int | None:
    """An exact statistic's or partition value's number (None when unknown or unreadable; for
    timestamps, whose statistics are cut and whose partition values may be in a session's time zone:
    ``statistic``); strings go through ``number`` with their files' shared prefix instead."""
    if raw is None or isinstance(raw, bool) or isinstance(t, (StringType, TimestampType, TimestampNTZType)):
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
    if isinstance(t, TimestampType):
        return f"unix_micros({column})"
    if isinstance(t, TimestampNTZType):
        # The wall time's microseconds from its fields: timestampdiff and casts to TIMESTAMP go
        # through the session's time zone (a wall time in a DST gap moves an hour).
        return (
            f"unix_date(CAST({column} AS DATE)) * 86400000000 + (hour({column}) * 3600L "
            f"+ minute({column}) * 60L) * 1000000L + CAST(date_part('SECOND', {column}) * 1000000 AS BIGINT)"
        )
    return f"unix_date({column})" if isinstance(t, DateType) else f"CAST({column} AS BIGINT)"
