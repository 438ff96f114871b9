"""Per-file statistics (protocol.md §2.9, §6.1): Delta's ``stats`` JSON from Parquet footers, and back.

Writing follows delta-spark: min/max for numeric, decimal, date, timestamp and string leaves only; null counts
for every leaf; the first ``delta.dataSkippingNumIndexedCols`` leaves (or exactly
``delta.dataSkippingStatsColumns``); partition columns excluded; strings truncated to a prefix with a max
that is never below the true max; timestamps in ms precision in the session time zone.

Parquet writers (arrow, parquet-mr) leave NaN out of float statistics, so a footer cannot show whether a
float column holds NaN. Spark orders NaN above every number, so a footer max could be below a NaN row:
float/double ``maxValues`` are written only when the caller says the data has no NaN (``nan_free=True``).
The footer min is still a true lower bound and is written.

Pure Python (pyarrow only): no pyspark here.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq

from deltamerge.config import TableProperties

__all__ = [
    "MINMAX_TYPES",
    "FileStats",
    "StatsLeaf",
    "parse_date_days",
    "parse_stats",
    "parse_timestamp_micros",
    "physical_name",
    "stats_columns",
    "stats_from_parquet_metadata",
    "truncate_max_string",
    "truncate_min_string",
]

INTEGRAL_TYPES = frozenset({"byte", "short", "integer", "long"})
FLOAT_TYPES = frozenset({"float", "double"})
#: Delta types that get min/max statistics (``decimal(p,s)`` is matched by prefix).
MINMAX_TYPES = INTEGRAL_TYPES | FLOAT_TYPES | {"date", "timestamp", "timestamp_ntz", "string"}

#: Exact arithmetic for decimal(38, s) values (the default context keeps only 28 digits).
DECIMAL_CONTEXT = Context(prec=100)
_EPOCH_DATE_ORDINAL = dt.date(1970, 1, 1).toordinal()
_UTC = dt.timezone.utc
_US_PER_DAY = 86_400_000_000
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_MAX_TIEBREAK = "\U0010ffff"
_ASCII_TIEBREAK = "\x7f"


# --- schema helpers -------------------------------------------------------------------------------


def decimal_scale(type_name: Any) -> int | None:
    """The scale of a ``decimal(p,s)`` type name (``decimal`` alone is ``decimal(10,0)``), else None."""
    if not isinstance(type_name, str):
        return None
    if type_name == "decimal":
        return 0
    m = _DECIMAL_RE.match(type_name)
    return int(m.group(2)) if m else None


def physical_name(field_json: Mapping[str, Any], column_mapping: bool) -> str:
    """The name a field has in data files and stats: its physical name under column mapping."""
    if column_mapping:
        name = (field_json.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if name:
            return str(name)
    return str(field_json["name"])


def uses_column_mapping(schema: Mapping[str, Any], configuration: Mapping[str, str] | None = None) -> bool:
    """Whether physical names apply: the mode property when given, else any field carrying one."""
    if configuration is not None and "delta.columnMapping.mode" in configuration:
        return configuration["delta.columnMapping.mode"].strip().lower() not in ("", "none")

    def walk(struct: Mapping[str, Any]) -> bool:
        for f in struct.get("fields", ()):
            if (f.get("metadata") or {}).get("delta.columnMapping.physicalName"):
                return True
            if isinstance(f["type"], dict) and f["type"].get("type") == "struct" and walk(f["type"]):
                return True
        return False

    return configuration is None and walk(schema)


@dataclass(frozen=True)
class StatsLeaf:
    """One leaf column of the table schema: struct fields are recursed, arrays and maps are leaves."""

    logical_path: tuple[str, ...]
    physical_path: tuple[str, ...]
    type: Any  # a primitive type name, or the dict of an array/map type
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)


def _leaves(
    struct: Mapping[str, Any], column_mapping: bool, lpath: tuple[str, ...], ppath: tuple[str, ...]
) -> Iterator[StatsLeaf]:
    for f in struct.get("fields", ()):
        lp = (*lpath, str(f["name"]))
        pp = (*ppath, physical_name(f, column_mapping))
        t = f["type"]
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from _leaves(t, column_mapping, lp, pp)
        else:
            yield StatsLeaf(lp, pp, t, f.get("metadata") or {})


def _split_column_list(text: str) -> list[list[str]]:
    """Parse ``a, b.c, `d.e`.f`` (dataSkippingStatsColumns) into name parts."""
    columns: list[list[str]] = []
    parts: list[str] = []
    cur: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "`" and text[i + 1 : i + 2] == "`":
                cur.append("`")
                i += 1
            elif ch == "`":
                quoted = False
            else:
                cur.append(ch)
        elif ch == "`":
            quoted = True
        elif ch in ".,":
            parts.append("".join(cur).strip())
            cur = []
            if ch == ",":
                columns.append(parts)
                parts = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur).strip())
    columns.append(parts)
    return [c for c in columns if any(c)]


def stats_columns(
    schema: Mapping[str, Any], partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> list[StatsLeaf]:
    """The leaf columns statistics are collected for, in schema order (partition columns excluded)."""
    column_mapping = uses_column_mapping(schema, configuration)
    parts = {p.lower() for p in partition_columns}
    data_schema = {"fields": [f for f in schema.get("fields", ()) if str(f["name"]).lower() not in parts]}
    leaves = list(_leaves(data_schema, column_mapping, (), ()))
    listed = TableProperties.STATS_COLUMNS.get(configuration).strip()
    if listed:
        wanted = [tuple(p.lower() for p in c) for c in _split_column_list(listed)]
        return [
            leaf
            for leaf in leaves
            if any(tuple(n.lower() for n in leaf.logical_path[: len(w)]) == w for w in wanted)
        ]
    n = TableProperties.NUM_INDEXED_COLS.get(configuration)
    return leaves if n < 0 else leaves[:n]


# --- value formats --------------------------------------------------------------------------------


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


def _format_timestamp(micros: int, tz: dt.tzinfo | None) -> str | None:
    ms = micros // 1000
    try:
        t = dt.datetime(1970, 1, 1, tzinfo=_UTC) + dt.timedelta(milliseconds=ms)
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
        return dt.date(y, m, d).toordinal() - _EPOCH_DATE_ORDINAL
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


# --- footer statistics ----------------------------------------------------------------------------


def _arrow_leaf_paths(t: pa.DataType, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            f = t.field(i)
            yield from _arrow_leaf_paths(f.type, (*path, f.name))
    elif pa.types.is_map(t):
        yield from _arrow_leaf_paths(t.key_type, (*path, "key"))
        yield from _arrow_leaf_paths(t.item_type, (*path, "value"))
    elif isinstance(t, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)) or (
        hasattr(pa, "ListViewType") and isinstance(t, (pa.ListViewType, pa.LargeListViewType))
    ):
        yield from _arrow_leaf_paths(t.value_type, (*path, "element"))
    elif pa.types.is_dictionary(t):
        yield path
    elif isinstance(t, pa.ExtensionType):
        yield from _arrow_leaf_paths(t.storage_type, path)
    else:
        yield path


def _parquet_leaf_paths(md: pq.FileMetaData) -> list[tuple[str, ...]]:
    """Each Parquet column's path as name parts (robust to dots inside names)."""
    try:
        arrow_schema = md.schema.to_arrow_schema()
        paths = [p for f in arrow_schema for p in _arrow_leaf_paths(f.type, (f.name,))]
    except (pa.ArrowException, NotImplementedError):
        paths = []
    if len(paths) != md.num_columns:
        paths = [tuple(md.schema.column(i).path.split(".")) for i in range(md.num_columns)]
    return paths


def _column_indexes(
    leaf: StatsLeaf, parquet_paths: Sequence[tuple[str, ...]], exact_length: bool
) -> list[int]:
    target = leaf.physical_path
    n = len(target)

    def match(fold: bool) -> list[int]:
        want = tuple(p.lower() for p in target) if fold else target
        out = []
        for i, p in enumerate(parquet_paths):
            if (len(p) == n) if exact_length else (len(p) > n):
                head = tuple(x.lower() for x in p[:n]) if fold else p[:n]
                if head == want:
                    out.append(i)
        return out

    return match(False) or match(True)


def _typed_stat(s: Any, which: str, logical: Mapping[str, Any], delta_type: Any) -> Any:
    """A footer min/max as the Python value of the Delta type (int days, epoch µs, Decimal...), or None."""
    kind = logical.get("Type")
    if delta_type in ("date", "timestamp", "timestamp_ntz"):
        raw = getattr(s, which + "_raw")
        value = None
    else:
        raw = None
        value = getattr(s, which)
    if delta_type in INTEGRAL_TYPES:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if delta_type in FLOAT_TYPES:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return None
    scale = decimal_scale(delta_type)
    if scale is not None:
        if isinstance(value, Decimal):
            d = value
        elif isinstance(value, int) and kind == "Decimal":
            d = Decimal(value).scaleb(-int(logical.get("scale", 0)), context=DECIMAL_CONTEXT)
        elif isinstance(value, int) and not isinstance(value, bool):
            d = Decimal(value)
        else:
            return None
        q = d.quantize(Decimal(1).scaleb(-scale), context=DECIMAL_CONTEXT) if d.is_finite() else None
        return q if q is not None and q == d else None
    if delta_type == "date":
        return raw if kind == "Date" and isinstance(raw, int) else None
    if delta_type in ("timestamp", "timestamp_ntz"):
        if kind != "Timestamp" or not isinstance(raw, int):
            return None
        unit = logical.get("timeUnit")
        if unit == "milliseconds":
            return raw * 1000
        if unit == "microseconds":
            return raw
        if unit == "nanoseconds":
            return raw // 1000
        return None
    if delta_type == "string":
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return value if isinstance(value, str) else None
    return None


@dataclass
class _Agg:
    min: Any = None
    max: Any = None
    minmax_ok: bool = True
    null_count: int | None = 0


def _aggregate_column(md: pq.FileMetaData, col: int, delta_type: Any, want_minmax: bool) -> _Agg:
    agg = _Agg()
    for rg in range(md.num_row_groups):
        rg_md = md.row_group(rg)
        if rg_md.num_rows == 0:
            continue
        chunk = rg_md.column(col)
        s = chunk.statistics
        if s is None:
            agg.minmax_ok = False
            agg.null_count = None
            continue
        if s.has_null_count and agg.null_count is not None:
            agg.null_count += s.null_count
        else:
            agg.null_count = None
        if not want_minmax or not agg.minmax_ok:
            continue
        if not s.has_min_max:
            if not (s.has_null_count and s.num_values == 0):
                agg.minmax_ok = False
            continue
        try:
            logical = json.loads(s.logical_type.to_json()) if s.logical_type is not None else {}
            lo = _typed_stat(s, "min", logical, delta_type)
            hi = _typed_stat(s, "max", logical, delta_type)
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            lo = hi = None
        if lo is None or hi is None:
            agg.minmax_ok = False
            continue
        agg.min = lo if agg.min is None else min(agg.min, lo)
        agg.max = hi if agg.max is None else max(agg.max, hi)
    return agg


def _put(target: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for p in path[:-1]:
        target = target.setdefault(p, {})
    target[path[-1]] = value


class _Json:
    """A JSON fragment written verbatim (numbers with scale, Spark-formatted values)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _dump(obj: Any) -> str:
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_dump(str(k))}:{_dump(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, _Json):
        return obj.text
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _render(value: Any, delta_type: Any, tz: dt.tzinfo, prefix_length: int, is_max: bool) -> _Json | None:
    if delta_type in INTEGRAL_TYPES:
        return _Json(str(int(value)))
    if delta_type in FLOAT_TYPES:
        return _Json(repr(float(value)))
    scale = decimal_scale(delta_type)
    if scale is not None:
        return _Json(format(value, "f"))
    if delta_type == "date":
        try:
            return _Json(json.dumps(dt.date.fromordinal(value + _EPOCH_DATE_ORDINAL).isoformat()))
        except (ValueError, OverflowError):
            return None
    if delta_type in ("timestamp", "timestamp_ntz"):
        text = _format_timestamp(value, tz if delta_type == "timestamp" else None)
        return None if text is None else _Json(json.dumps(text))
    if delta_type == "string":
        s = truncate_max_string(value, prefix_length) if is_max else truncate_min_string(value, prefix_length)
        return None if s is None else _Json(json.dumps(s, ensure_ascii=False))
    return None


def _has_minmax(delta_type: Any) -> bool:
    return isinstance(delta_type, str) and (
        delta_type in MINMAX_TYPES or decimal_scale(delta_type) is not None
    )


def stats_from_parquet_metadata(
    md: pq.FileMetaData,
    schema: dict,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    *,
    tight_bounds: bool | None = None,
    session_tz: str = "UTC",
    nan_free: bool = False,
) -> str:
    """Delta's ``stats`` JSON for one data file, from its Parquet footer's row-group statistics.

    ``schema`` is the table schema (Spark StructType JSON). ``tightBounds`` is written only when
    ``tight_bounds`` is not None. ``session_tz`` is the zone timestamp stats are rendered in.
    ``nan_free=True`` asserts float/double columns hold no NaN, which allows writing their max.
    """
    tz: dt.tzinfo = _UTC if session_tz.upper() in ("UTC", "Z", "GMT") else ZoneInfo(session_tz)
    prefix_length = TableProperties.STRING_PREFIX_LENGTH.get(configuration)
    parquet_paths = _parquet_leaf_paths(md)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for leaf in stats_columns(schema, partition_columns, configuration):
        nested = not isinstance(leaf.type, str)
        cols = _column_indexes(leaf, parquet_paths, exact_length=not nested)
        if not cols or (not nested and len(cols) != 1):
            continue
        want_minmax = _has_minmax(leaf.type)
        aggs = [_aggregate_column(md, c, leaf.type, want_minmax) for c in cols]
        if nested:
            # Leaf-level null counts also count empty collections and null elements: only 0 is conclusive.
            if all(a.null_count == 0 for a in aggs):
                _put(nulls, leaf.physical_path, _Json("0"))
            continue
        agg = aggs[0]
        if agg.null_count is not None:
            _put(nulls, leaf.physical_path, _Json(str(agg.null_count)))
        if not want_minmax or not agg.minmax_ok or agg.min is None:
            continue
        lo = _render(agg.min, leaf.type, tz, prefix_length, is_max=False)
        hi = None
        if not (leaf.type in FLOAT_TYPES and not nan_free):
            hi = _render(agg.max, leaf.type, tz, prefix_length, is_max=True)
        if lo is not None:
            _put(mins, leaf.physical_path, lo)
        if hi is not None:
            _put(maxs, leaf.physical_path, hi)
    num_records = sum(md.row_group(i).num_rows for i in range(md.num_row_groups))
    out: dict[str, Any] = {"numRecords": _Json(str(num_records))}
    if mins:
        out["minValues"] = mins
    if maxs:
        out["maxValues"] = maxs
    if nulls:
        out["nullCount"] = nulls
    if tight_bounds is not None:
        out["tightBounds"] = bool(tight_bounds)
    return _dump(out)


# --- reading --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStats:
    """Parsed ``add.stats``. Values stay as JSON gave them (decimal-looking numbers as ``Decimal``).

    ``None`` values (delta-rs writes ``null`` for unknown bounds) mean "unknown", like absent keys.
    """

    num_records: int | None
    min_values: dict[str, Any]
    max_values: dict[str, Any]
    null_count: dict[str, Any]
    tight_bounds: bool | None = None

    def lookup(self, kind: str, path: Sequence[str], *, case_sensitive: bool = True) -> Any:
        """The stat at ``path`` in ``min_values``/``max_values``/``null_count`` (``kind`` min/max/null)."""
        node: Any = {"min": self.min_values, "max": self.max_values, "null": self.null_count}[kind]
        for part in path:
            if not isinstance(node, dict):
                return None
            if part in node:
                node = node[part]
            elif case_sensitive:
                return None
            else:
                hits = [k for k in node if k.lower() == part.lower()]
                if len(hits) != 1:
                    return None
                node = node[hits[0]]
        return None if isinstance(node, dict) else node


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        d = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return int(d) if d.is_finite() and d == d.to_integral_value() else None


def parse_stats(stats_json: str | None) -> FileStats | None:
    """Parse a ``stats`` JSON string; None when absent or unreadable. Tolerates delta-rs variants."""
    if not stats_json:
        return None
    try:
        obj = json.loads(stats_json, parse_float=Decimal)
    except (ValueError, TypeError):
        return None
    if not isinstance(obj, dict):
        return None

    def section(key: str) -> dict[str, Any]:
        v = obj.get(key)
        return v if isinstance(v, dict) else {}

    tb = obj.get("tightBounds")
    if isinstance(tb, str):
        tb = {"true": True, "false": False}.get(tb.strip().lower())
    return FileStats(
        num_records=None if obj.get("numRecords") is None else _as_int(obj["numRecords"]),
        min_values=section("minValues"),
        max_values=section("maxValues"),
        null_count=section("nullCount"),
        tight_bounds=tb if isinstance(tb, bool) else None,
    )
