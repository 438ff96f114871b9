"""Partition values and file paths (protocol.md §6.3 and §6.4).

Three different encodings meet here and must not be confused:

1. ``add.partitionValues`` holds each value as a *Delta string* (:func:`serialize_partition_value`,
   :func:`parse_partition_value`); ``None`` (and, on read, ``""``) is null.
2. The directory name on disk Hive-escapes that string the way Spark's ``escapePathName`` does
   (:func:`escape_path_name`, :func:`partition_dir`); null becomes ``__HIVE_DEFAULT_PARTITION__``.
3. ``add.path`` is the URI-encoded form of the real relative path (:func:`encode_add_path`), so
   escaped partition values end up double-encoded (``p=us%252Feast/...``). Readers decode once.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import struct
import urllib.parse
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from deltamerge.errors import AnalysisError, InvalidArgumentError

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark ExternalCatalogUtils.charToEscape (non-Windows): control chars 0x01-0x1F, DEL and these.
_ESCAPED_CHARS = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))

# Characters left raw in add.path, besides alphanumerics and "_.-~" (java.net.URI leaves them too).
ADD_PATH_SAFE = "/@&=+$,;!~*'()"

_INT_TYPES = frozenset({"byte", "short", "integer", "int", "long"})
_FLOAT_TYPES = frozenset({"float", "double"})
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_TS_RE = re.compile(
    r"^\s*([+-]?\d{4,})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{2}(?::?\d{2})?)?\s*$",
    re.IGNORECASE,
)
_UTC = dt.timezone.utc


# --- layer 1: Delta partition value strings ------------------------------------------------------


def _java_double_string(digits_repr: str) -> str:
    """Java ``Double.toString`` layout for a finite value given its shortest round-trip repr."""
    d = Decimal(digits_repr)
    if d == 0:
        return "-0.0" if digits_repr.startswith("-") else "0.0"
    if Decimal("1e-3") <= abs(d) < Decimal("1e7"):
        text = format(d, "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = d.normalize().as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits))
    sci_exp = exponent + len(ds) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{sci_exp}"


def _float32_repr(x: float) -> str:
    """Shortest decimal that round-trips through float32 (what Java's ``Float.toString`` prints)."""
    target = struct.pack("<f", x)
    for precision in range(1, 10):
        text = f"{x:.{precision}g}"
        if struct.pack("<f", float(text)) == target:
            return text
    return repr(x)


def _format_float(x: float, type_name: str) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return _java_double_string(_float32_repr(x) if type_name == "float" else repr(float(x)))


def _format_time(t: dt.datetime, trim: bool) -> str:
    base = f"{t.year:04d}-{t.month:02d}-{t.day:02d}"
    clock = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if not trim:
        return f"{base}T{clock}.{t.microsecond:06d}Z"
    frac = f"{t.microsecond:06d}".rstrip("0")
    return f"{base} {clock}" + (f".{frac}" if frac else "")


def _infer_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, dt.datetime):
        return "timestamp" if value.tzinfo is not None else "timestamp_ntz"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    return "string"


def serialize_partition_value(value: Any, type_name: str | None = None) -> str | None:
    """A Python value as the Delta string stored in ``add.partitionValues`` (``None`` is null).

    ``type_name`` is the Delta type (``long``, ``decimal(10,2)``, ``timestamp`` ...); when omitted
    it is inferred from the Python type (an aware ``datetime`` is a ``timestamp``, a naive one a
    ``timestamp_ntz``). Strings pass through unchanged (they are assumed already serialized), but
    ``""`` is null, as delta-spark writes it. Timestamps are written in UTC as
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (naive values are taken as UTC); ``timestamp_ntz`` as
    ``YYYY-MM-DD HH:MM:SS[.ffffff]``.

    >>> serialize_partition_value(2021.0, "double"), serialize_partition_value(True)
    ('2021.0', 'true')
    >>> serialize_partition_value(Decimal("1.5"), "decimal(5,2)")
    '1.50'
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    t = (type_name or _infer_type(value)).strip().lower()
    if t == "boolean":
        return "true" if value else "false"
    if t in _INT_TYPES:
        return str(int(value))
    if t in _FLOAT_TYPES:
        return _format_float(float(value), t)
    if t.startswith("decimal"):
        d = value if isinstance(value, Decimal) else Decimal(str(value))
        if m := _DECIMAL_RE.match(t):
            d = d.quantize(Decimal(1).scaleb(-int(m.group(2))))
        return format(d, "f")
    if t == "date":
        day = value.date() if isinstance(value, dt.datetime) else value
        return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"
    if t == "timestamp":
        ts = value if isinstance(value, dt.datetime) else dt.datetime(value.year, value.month, value.day)
        if ts.tzinfo is not None:
            ts = ts.astimezone(_UTC)
        return _format_time(ts, trim=False)
    if t == "timestamp_ntz":
        ts = value if isinstance(value, dt.datetime) else dt.datetime(value.year, value.month, value.day)
        return _format_time(ts.replace(tzinfo=None), trim=True)
    if t == "binary":
        return bytes(value).decode("utf-8", errors="replace") or None
    if t == "string":
        return str(value) or None
    raise InvalidArgumentError(
        f"Cannot use a column of type {type_name!r} as a partition column. "
        "Partition columns must have an atomic type (string, number, boolean, date, timestamp, binary)."
    )


def _parse_time(text: str, aware: bool) -> dt.datetime:
    m = _TS_RE.match(text)
    if not m:
        raise ValueError(text)
    year, month, day, hour, minute, second, frac, zone = m.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    value = dt.datetime(
        int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micros
    )
    if not aware:
        return value
    if zone is None or zone.upper() in ("Z", "UTC"):
        return value.replace(tzinfo=_UTC)
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    return value.replace(tzinfo=dt.timezone(sign * offset)).astimezone(_UTC)


def parse_partition_value(value: str | None, type_name: str) -> Any:
    """A Delta partition value string back to a typed Python value (``None``/``""`` are null).

    Timestamps come back as UTC-aware ``datetime`` and accept every form engines write
    (``...T...Z``, ``YYYY-MM-DD HH:MM:SS[.ffffff]`` meaning UTC, explicit offsets);
    ``timestamp_ntz`` comes back naive.

    >>> parse_partition_value("2024-02-29 23:59:59.5", "timestamp")
    datetime.datetime(2024, 2, 29, 23, 59, 59, 500000, tzinfo=datetime.timezone.utc)
    """
    if value is None or value == "":
        return None
    t = type_name.strip().lower()
    try:
        if t == "string":
            return value
        if t in _INT_TYPES:
            return int(value.strip())
        if t in _FLOAT_TYPES:
            return float(value.strip())
        if t == "boolean":
            low = value.strip().lower()
            if low not in ("true", "false"):
                raise ValueError(value)
            return low == "true"
        if t.startswith("decimal"):
            return Decimal(value.strip())
        if t == "date":
            return _parse_time(value, aware=False).date()
        if t == "timestamp":
            return _parse_time(value, aware=True)
        if t == "timestamp_ntz":
            return _parse_time(value, aware=False)
        if t == "binary":
            return value.encode("utf-8")
    except (ValueError, InvalidOperation, OverflowError):
        raise InvalidArgumentError(
            f"Partition value {value!r} is not a valid {type_name}. "
            "Check the table's partitionValues in the log, or rewrite the affected partition."
        ) from None
    raise InvalidArgumentError(f"Unsupported partition column type {type_name!r}.")


def check_partition_column_types(schema: Mapping[str, Any], partition_columns: Sequence[str]) -> None:
    """Delta's ``PartitionUtils.validatePartitionColumn``: a partition column has an atomic,
    orderable type (no struct, array or map, no variant)."""
    types = {f.get("name"): f.get("type") for f in schema.get("fields", [])}
    for name in partition_columns:
        t = types.get(name)
        if not isinstance(t, str) or t == "variant":
            shown = t if isinstance(t, str) else (t or {}).get("type", t)
            raise AnalysisError(
                f"Using column {name} of type {shown} as a partition column is not supported. "
                "Partition by a column of an atomic type (number, string, date, timestamp, boolean, binary).",
                error_class="DELTA_INVALID_PARTITION_COLUMN_TYPE",
            )


# --- layer 2: Hive-style directory names ---------------------------------------------------------


def escape_path_name(text: str) -> str:
    """Spark's ``ExternalCatalogUtils.escapePathName`` (non-Windows).

    >>> escape_path_name("us/east"), escape_path_name("a b"), escape_path_name("50%")
    ('us%2Feast', 'a b', '50%25')
    """
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED_CHARS else c for c in text)


def unescape_path_name(text: str) -> str:
    """Inverse of :func:`escape_path_name` (``%XX`` with two hex digits; anything else kept)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and i + 2 < len(text) and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in s)


def partition_dir(partition_columns: Sequence[str], values: Mapping[str, Any]) -> str:
    """The relative directory for a file's partition values, e.g. ``"a=1/b=x"``.

    ``values`` maps column name to its Delta string (as in ``add.partitionValues``) or to a Python
    value, which is serialized first. Missing, ``None`` and ``""`` become
    ``__HIVE_DEFAULT_PARTITION__``.
    """
    parts = []
    for col in partition_columns:
        raw = values.get(col)
        text = raw if isinstance(raw, str) or raw is None else serialize_partition_value(raw)
        segment = escape_path_name(text) if text else HIVE_DEFAULT_PARTITION
        parts.append(f"{escape_path_name(col)}={segment}")
    return "/".join(parts)


def parse_partition_dir(rel_dir: str) -> dict[str, str | None]:
    """Partition values (Delta strings) from a Hive-style relative directory (best effort)."""
    out: dict[str, str | None] = {}
    for segment in rel_dir.strip("/").split("/"):
        if "=" not in segment:
            continue
        key, value = segment.split("=", 1)
        out[unescape_path_name(key)] = None if value == HIVE_DEFAULT_PARTITION else unescape_path_name(value)
    return out


# --- layer 3: add.path URIs ------------------------------------------------------------------------


def encode_add_path(relative_path: str) -> str:
    """The ``add.path`` string for a real relative path (RFC 2396 quoting; ``:`` is escaped).

    >>> encode_add_path("p=us%2Feast/part-0.parquet")
    'p=us%252Feast/part-0.parquet'
    """
    return urllib.parse.quote(relative_path, safe=ADD_PATH_SAFE)


def decode_add_path(path: str) -> str:
    """The real (relative or absolute) path of an ``add.path``: URL-decoded exactly once."""
    return urllib.parse.unquote(path)


def table_root(path: str) -> str:
    """The absolute local root of a table given as a path or a ``file:`` URI (deltamerge's one rule
    for naming a table directory)."""
    if path.startswith("file:"):
        path = path[len("file:") :]
        while path.startswith("//"):
            path = path[1:]
    return os.path.abspath(path)


def is_absolute_path(path: str) -> bool:
    """Whether an ``add.path`` is absolute (a URI scheme like ``s3://``/``file:/``, or a leading ``/``)."""
    return path.startswith("/") or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", path) is not None


def absolute_file_path(table_root: str, path: str) -> str:
    """Local file-system path of an ``add.path`` under ``table_root`` (decoding the URI once)."""
    if path.startswith("file:"):
        parsed = urllib.parse.urlparse(path)
        return urllib.parse.unquote(parsed.path)
    if is_absolute_path(path):
        return decode_add_path(path)
    return table_root.rstrip("/") + "/" + decode_add_path(path)


_AT_VERSION = re.compile(r"^(?P<path>.+)@[vV](?P<version>\d+)$")
_AT_TIMESTAMP = re.compile(r"^(?P<path>.+)@(?P<ts>\d{17})$")


def split_time_travel(path: str) -> tuple[str, int | None, str | None]:
    """(path, version, timestamp) of delta-spark's ``path@v123`` / ``path@yyyyMMddHHmmssSSS``
    suffixes; the path itself and ``None`` twice when it has neither."""
    m = _AT_VERSION.match(path)
    if m:
        return m.group("path"), int(m.group("version")), None
    m = _AT_TIMESTAMP.match(path)
    if m:
        t = m.group("ts")
        return m.group("path"), None, f"{t[0:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}.{t[14:17]}"
    return path, None, None
