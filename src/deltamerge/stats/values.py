"""Statistics value formats: truncated strings, dates and timestamps as Delta writes and reads them."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Context
from zoneinfo import ZoneInfo

#: Exact arithmetic for decimal(38, s) values (the default context keeps only 28 digits).
DECIMAL_CONTEXT = Context(prec=100)
EPOCH_DATE_ORDINAL = dt.date(1970, 1, 1).toordinal()
UTC = dt.timezone.utc
_US_PER_DAY = 86_400_000_000
_MAX_TIEBREAK = "\U0010ffff"
_ASCII_TIEBREAK = "\x7f"


def truncate_min_string(value: str, prefix_length: int = 32) -> str:
    """The min stat of a string: its first ``prefix_length`` characters (never above the value)."""
    return value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = 32) -> str | None:
    """The max stat of a string, never below ``value``: the value if short, else prefix + tie-breaker.

    The tie-breaker is U+007F when the first cut character is below it, else U+10FFFF (extending the prefix
    past U+10FFFF characters, up to twice the prefix length). None when no such bound fits.
    """
    if len(value) <= prefix_length:
        return value
    for cut in range(prefix_length, min(len(value), 2 * prefix_length)):
        nxt = value[cut]
        if nxt < _ASCII_TIEBREAK:
            return value[:cut] + _ASCII_TIEBREAK
        if nxt < _MAX_TIEBREAK:
            return value[:cut] + _MAX_TIEBREAK
    return None


def format_timestamp(micros: int, tz: dt.tzinfo | None) -> str | None:
    ms = micros // 1000
    try:
        t = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)
        if tz is not None:
            t = t.astimezone(tz)
    except (OverflowError, ValueError):
        return None
    text = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    text += f".{t.microsecond // 1000:03d}"
    if tz is None:
        return text
    offset = t.utcoffset() or dt.timedelta(0)
    if not offset:
        return text + "Z"
    secs = int(offset.total_seconds())
    sign = "+" if secs >= 0 else "-"
    secs = abs(secs)
    text += f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}"
    return text + (f":{secs % 60:02d}" if secs % 60 else "")


_TS_RE = re.compile(
    r"^\s*(-?\d{4,6})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{0,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?\s*$",
    re.IGNORECASE,
)


def _civil_days(y: int, m: int, d: int) -> int | None:
    try:
        return dt.date(y, m, d).toordinal() - EPOCH_DATE_ORDINAL
    except ValueError:
        return None


def parse_date_days(text: str) -> int | None:
    """``YYYY-MM-DD`` (optionally followed by a time, ignored) as days since 1970-01-01; None if invalid."""
    m = _TS_RE.match(text) if isinstance(text, str) else None
    return None if m is None else _civil_days(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def parse_timestamp_micros(
    text: str, default_tz: str | None = "UTC", *, ignore_offset: bool = False
) -> int | None:
    """Parse an ISO-ish timestamp (``T`` or space, any fraction, ``Z``/``±HH:MM``/none) to epoch µs.

    Without an offset the text is wall time in ``default_tz`` (None: unknown, returns None). With
    ``ignore_offset`` the wall time is taken as UTC (timestamp_ntz). Returns None when not parseable.
    """
    m = _TS_RE.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    y, mo, d, hh, mi, ss, frac, off = m.groups()
    days = _civil_days(int(y), int(mo), int(d))
    if days is None:
        return None
    hours, minutes, seconds = int(hh or 0), int(mi or 0), int(ss or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        return None
    micros = int((frac or "").ljust(6, "0")[:6] or 0)
    local = days * _US_PER_DAY + ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros
    if ignore_offset:
        return local
    if off is None:
        if default_tz is None:
            return None
        if default_tz.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
            return local
        try:
            wall = dt.datetime(int(y), int(mo), int(d), hours, minutes, seconds, micros)
            offset = wall.replace(tzinfo=ZoneInfo(default_tz)).utcoffset() or dt.timedelta(0)
        except (ValueError, KeyError, OverflowError):
            return None
        return local - (offset // dt.timedelta(microseconds=1))
    if off.upper() in ("Z", "UTC"):
        return local
    sign = -1 if off[0] == "-" else 1
    digits = off[1:].replace(":", "")
    offset_s = int(digits[0:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0)
    return local - sign * offset_s * 1_000_000
