"""Typed values for data skipping: literals, casts, Spark ordering and the per-file column ranges.

A value is a ``_Val`` (kind, python value, is_float32); a data column seen through a file's stats is a
``_Range``. ``_compare`` gives the truth values (``T`` / ``F`` / ``N`` flags) a comparison may produce.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from deltamerge.stats import (
    DECIMAL_CONTEXT,
    FLOAT_TYPES,
    INTEGRAL_TYPES,
    decimal_scale,
    parse_date_days,
    parse_timestamp_micros,
)

T, F, N = 1, 2, 4  # the truth values a predicate may produce over a file's rows
ANY = T | F | N
_US_PER_DAY = 86_400_000_000
_TS_SLACK = 999  # stats keep ms (cut, not rounded): a true max lies within 999 µs above its rendering

# --- typed values ---------------------------------------------------------------------------------
# A value is (kind, python value, is_float32); python value None is SQL NULL. Kinds: num (int, Decimal,
# float), str, bool, date (days), ts (epoch µs), ntz (µs as if UTC), null.


@dataclass(frozen=True)
class _Val:
    kind: str
    value: Any
    f32: bool = False


_NULL = _Val("null", None)


def _f32(x: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


_KINDS = {"string": "str", "boolean": "bool", "date": "date", "timestamp": "ts", "timestamp_ntz": "ntz"}


def _kind_of_type(t: Any) -> str | None:
    if not isinstance(t, str):
        return None
    if t in INTEGRAL_TYPES or t in FLOAT_TYPES or decimal_scale(t) is not None:
        return "num"
    return _KINDS.get(t)


def _parse_int_text(text: str) -> int | None:
    t = text.strip()
    if t[:1] in "+-":
        body = t[1:]
    else:
        body = t
    return int(t) if body.isdigit() and body.isascii() else None


def _to_type(v: _Val, t: str, session_tz: str | None) -> _Val | None:
    """``v`` cast/coerced into Delta type ``t`` as Spark would for a comparison; None when unsure."""
    if not isinstance(t, str):
        return None
    if v.value is None:
        return _Val(_kind_of_type(t) or "null", None)
    x = v.value
    if t in INTEGRAL_TYPES:
        if v.kind == "num" and not isinstance(x, float):
            return _Val("num", x)
        if v.kind == "num":
            return _Val("num", x, v.f32)  # compared in floating point (see _num_pair)
        if v.kind == "str" and (i := _parse_int_text(x)) is not None:
            return _Val("num", i)
        return None
    if t in FLOAT_TYPES:
        if v.kind == "num":
            if isinstance(x, float):
                return _Val("num", x, v.f32)
            if isinstance(x, int) and t == "float":
                return _Val("num", _f32(float(x)), True)  # Spark: float vs int/long compares as float
            return _Val("num", float(x))
        if v.kind == "str" and (i := _parse_int_text(x)) is not None and abs(i) < 2**24:
            return _Val("num", float(i))
        return None
    scale = decimal_scale(t)
    if scale is not None:
        if v.kind == "num":
            return _Val("num", x, v.f32)
        if v.kind == "str" and (i := _parse_int_text(x)) is not None:
            return _Val("num", i)
        return None
    if t == "string":
        return v if v.kind == "str" else None
    if t == "boolean":
        return v if v.kind == "bool" else None
    if t == "date":
        if v.kind == "date":
            return v
        if v.kind == "str" and (d := parse_date_days(x)) is not None:
            return _Val("date", d)
        return None
    if t == "timestamp":
        if v.kind == "ts":
            return v
        if v.kind == "str" and (us := parse_timestamp_micros(x, session_tz)) is not None:
            return _Val("ts", us)
        if v.kind == "date" and session_tz is not None:
            us = parse_timestamp_micros(_days_text(x), session_tz)
            return None if us is None else _Val("ts", us)
        return None
    if t == "timestamp_ntz":
        if v.kind == "ntz":
            return v
        if v.kind == "str" and parse_timestamp_micros(x, None) is None:  # no explicit offset
            us = parse_timestamp_micros(x, ignore_offset=True)
            return None if us is None else _Val("ntz", us)
        if v.kind == "date":
            return _Val("ntz", x * _US_PER_DAY)
        return None
    return None


def _days_text(days: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()


_CAST_TYPES = {
    exp.DataType.Type.TINYINT: "byte",
    exp.DataType.Type.SMALLINT: "short",
    exp.DataType.Type.INT: "integer",
    exp.DataType.Type.BIGINT: "long",
    exp.DataType.Type.FLOAT: "float",
    exp.DataType.Type.DOUBLE: "double",
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.VARCHAR: "string",
    exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamp",
    exp.DataType.Type.TIMESTAMPLTZ: "timestamp",
    exp.DataType.Type.TIMESTAMPNTZ: "timestamp_ntz",
}


def _cast_literal(v: _Val, to: exp.DataType, session_tz: str | None) -> _Val | None:
    if to.this == exp.DataType.Type.DECIMAL:
        params = [p.this.name if isinstance(p, exp.DataTypeParam) else p.name for p in to.expressions]
        precision, scale = (int(params[0]), int(params[1]) if len(params) > 1 else 0) if params else (10, 0)
        if v.value is None:
            return _Val("num", None)
        if v.kind != "num" or isinstance(v.value, float):
            return None
        try:
            q = Decimal(1).scaleb(-scale)
            d = Decimal(v.value).quantize(q, rounding="ROUND_HALF_UP", context=DECIMAL_CONTEXT)
        except InvalidOperation:
            return None
        return _Val("num", d) if len(d.as_tuple().digits) <= precision else None
    t = _CAST_TYPES.get(to.this)
    if t is None:
        return None
    if v.value is None:
        return _Val(_kind_of_type(t) or "null", None)
    if t in INTEGRAL_TYPES:
        if v.kind == "num" and isinstance(v.value, int):
            return v
        if v.kind == "num" and isinstance(v.value, Decimal) and v.value == v.value.to_integral_value():
            return _Val("num", int(v.value))
        return _to_type(v, t, session_tz) if v.kind == "str" else None
    if t in FLOAT_TYPES:
        if v.kind != "num":
            return None
        f = float(v.value)
        return _Val("num", _f32(f), True) if t == "float" else _Val("num", f)
    if t == "string":
        return v if v.kind == "str" else None
    return _to_type(v, t, session_tz)


def _literal(node: exp.Expr, session_tz: str | None) -> _Val | None:
    """The value of a constant expression (literal, signed number, cast of one), else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return _NULL
    if isinstance(node, exp.Boolean):
        return _Val("bool", bool(node.this))
    if isinstance(node, exp.Literal):
        text = node.this
        if node.is_string:
            return _Val("str", text)
        try:
            if any(c in text for c in "eE"):
                return _Val("num", float(text))
            return _Val("num", Decimal(text) if "." in text else int(text))
        except (ValueError, InvalidOperation):
            return None
    if isinstance(node, exp.Neg):
        inner = _literal(node.this, session_tz)
        if inner is None or inner.kind != "num":
            return None
        value = inner.value
        negated = value.copy_negate() if isinstance(value, Decimal) else -value
        return inner if value is None else _Val("num", negated, inner.f32)
    if isinstance(node, (exp.Cast, exp.TryCast)) and isinstance(node.to, exp.DataType):
        inner = _literal(node.this, session_tz)
        return None if inner is None else _cast_literal(inner, node.to, session_tz)
    return None


# --- comparing ------------------------------------------------------------------------------------


def _num_pair(a: Any, b: Any, f32: bool) -> tuple[Any, Any]:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if f32:
            a, b = _f32(a), _f32(b)
    return a, b


def _cmp(a: _Val, b: _Val) -> int | None:
    """Spark ordering of two non-null values of one kind (NaN equals NaN and is above all); None if unsure."""
    x, y = a.value, b.value
    if a.kind != b.kind:
        return None
    if a.kind == "num":
        x, y = _num_pair(x, y, a.f32 or b.f32)
        xn = isinstance(x, float) and math.isnan(x)
        yn = isinstance(y, float) and math.isnan(y)
        if xn or yn:
            return 0 if xn and yn else (1 if xn else -1)
    return (x > y) - (x < y)


_OPS: dict[type, str] = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_HOLDS = {
    "=": lambda c: c == 0,
    "!=": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


@dataclass(frozen=True)
class _Range:
    """What a file's stats say about a column: bounds (None = unbounded) and nullness."""

    lo: _Val | None
    hi: _Val | None
    hi_prefix: bool  # string max may be a truncated prefix: values may exceed it while starting with it
    may_null: bool
    may_value: bool


def _exists(op: str, r: _Range, c: _Val) -> bool:
    """Whether some value in ``r``'s bounds can satisfy ``value <op> c`` (c non-null, same kind)."""
    if op == "!=":
        if r.lo is None or r.hi is None or r.hi_prefix:
            return True
        return not (_cmp(r.lo, c) == 0 and _cmp(r.hi, c) == 0)
    if op == "=":
        return _exists("<=", r, c) and _exists(">=", r, c)
    if op in ("<", "<="):
        if r.lo is None:
            return True
        k = _cmp(r.lo, c)
        return k is None or _HOLDS[op](k)
    if r.hi is None:
        return True
    k = _cmp(r.hi, c)
    if k is None or _HOLDS[op](k):
        return True
    return r.hi_prefix and isinstance(c.value, str) and c.value.startswith(r.hi.value)


def _compare(op: str, a: _Val | _Range | None, b: _Val | _Range | None) -> int:
    """Possible truth values of ``a <op> b`` (``<=>`` is ``op == "<=>"``)."""
    if isinstance(a, _Range) and isinstance(b, _Val):
        r, c = a, b
    elif isinstance(b, _Range) and isinstance(a, _Val):
        r, c, op = b, a, _FLIP.get(op, op)
    elif isinstance(a, _Val) and isinstance(b, _Val):
        if op == "<=>":
            if a.value is None or b.value is None:
                return T if a.value is None and b.value is None else F
            k = _cmp(a, b)
            return ANY & ~N if k is None else (T if k == 0 else F)
        if a.value is None or b.value is None:
            return N
        k = _cmp(a, b)
        return ANY if k is None else (T if _HOLDS[op](k) else F)
    else:
        return ANY
    if op == "<=>":
        if c.value is None:
            return (T if r.may_null else 0) | (F if r.may_value else 0)
        out = F if r.may_null else 0
        if r.may_value:
            out |= (T if _exists("=", r, c) else 0) | (F if _exists("!=", r, c) else 0)
        return out
    if c.value is None:
        return N
    if c.kind == "num" and isinstance(c.value, float) and math.isnan(c.value):
        return ANY
    out = N if r.may_null else 0
    if r.may_value:
        out |= (T if _exists(op, r, c) else 0) | (F if _exists(_NEGATE[op], r, c) else 0)
    return out


def _stat_val(raw: Any, t: Any, is_max: bool) -> _Val | bool | None:
    """A stats bound as a value of the column's kind; None if absent; False if it disables skipping (NaN)."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    try:
        if t in INTEGRAL_TYPES or decimal_scale(t) is not None:
            if isinstance(raw, bool) or not isinstance(raw, (int, Decimal, float)):
                return None
            return _Val("num", raw)
        if t in FLOAT_TYPES:
            f = float(raw)  # "NaN" / "Infinity" strings too
            if math.isnan(f):
                return False
            return _Val("num", _f32(f) if t == "float" else f)
        if t == "string":
            return _Val("str", raw) if isinstance(raw, str) else None
        if t == "boolean":
            return _Val("bool", raw) if isinstance(raw, bool) else None
        if t == "date":
            d = parse_date_days(raw)
            return None if d is None else _Val("date", d)
        if t in ("timestamp", "timestamp_ntz"):
            us = parse_timestamp_micros(raw, "UTC", ignore_offset=t == "timestamp_ntz")
            if us is None:
                return None
            return _Val("ts" if t == "timestamp" else "ntz", us + _TS_SLACK if is_max else us)
    except (ValueError, TypeError, OverflowError):
        return None
    return None


def _partition_value(text: str | None, t: Any, session_tz: str | None) -> _Val | None:
    """A ``partitionValues`` string as a typed value (``None``/``""`` are NULL); None when not parseable."""
    kind = _kind_of_type(t)
    if kind is None:
        return None
    if text is None or text == "":
        return _Val(kind, None)
    try:
        if t in FLOAT_TYPES:  # Spark's cast to string: "2021.0", "NaN", "Infinity"
            f = float(text)
            return _Val("num", _f32(f) if t == "float" else f)
        if decimal_scale(t) is not None:
            return _Val("num", Decimal(text.strip()))
    except (ValueError, InvalidOperation):
        return None
    if t == "boolean":
        b = {"true": True, "false": False}.get(text.strip().lower())
        return None if b is None else _Val("bool", b)
    return _to_type(_Val("str", text), t, session_tz)
