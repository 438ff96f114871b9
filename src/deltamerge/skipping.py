"""Data skipping over AddFiles (protocol.md §3.3): partition pruning and min/max/nullCount pruning.

A predicate (a SQLGlot tree in the Spark dialect, over unqualified target column names) is evaluated per
file in an abstract domain: for each sub-expression, which of TRUE / FALSE / NULL *some row* of the file
may produce. A file is kept when TRUE is possible. Partition columns are exact values; data columns are
ranges ``[min, max]`` plus "may be null" / "may be non-null" from ``nullCount``. Anything not understood
(functions, arithmetic on columns, subqueries, unknown types) may produce anything, so it never skips.

Soundness rules: missing stats keep the file; string max may be a truncated prefix; timestamp bounds are
widened by 999 µs (stats keep ms); with ``tightBounds=false`` only ``nullCount`` 0 and ``== numRecords``
are used (which is all this evaluation uses anyway); NaN in float stats disables the bounds.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from sqlglot import exp

from deltamerge.log.actions import AddFile
from deltamerge.stats import (
    DECIMAL_CONTEXT,
    FLOAT_TYPES,
    INTEGRAL_TYPES,
    FileStats,
    decimal_scale,
    parse_date_days,
    parse_stats,
    parse_timestamp_micros,
    physical_name,
    uses_column_mapping,
)

__all__ = ["conjunction", "file_filter", "prune_files", "split_conjuncts"]

T, F, N = 1, 2, 4  # the truth values a predicate may produce over a file's rows
ANY = T | F | N
_US_PER_DAY = 86_400_000_000
_TS_SLACK = 999  # stats keep ms (cut, not rounded): a true max lies within 999 µs above its rendering
# A string max this long may be a cut prefix (delta-rs cuts at 64 bytes, delta-spark at 32 chars): values
# may then exceed it while starting with it. Shorter maxima are taken as the true maximum.
_MAYBE_TRUNCATED = 16


# --- helpers over expressions ---------------------------------------------------------------------


def split_conjuncts(expr: exp.Expr | None) -> list[exp.Expression]:
    """``a AND (b AND c)`` -> ``[a, b, c]`` (parentheses unwrapped); ``None`` -> ``[]``."""
    if expr is None:
        return []
    while isinstance(expr, exp.Paren):
        expr = expr.this
    if isinstance(expr, exp.And):
        return split_conjuncts(expr.this) + split_conjuncts(expr.expression)
    return [cast(exp.Expression, expr)]


def conjunction(exprs: Iterable[exp.Expr | None]) -> exp.Expression | None:
    """AND of the non-None ``exprs`` (operands parenthesised as needed); ``None`` when there are none."""
    items = [e for e in exprs if e is not None]
    if not items:
        return None
    return cast(exp.Expression, items[0] if len(items) == 1 else exp.and_(*items))


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


# --- compiling a predicate ------------------------------------------------------------------------


class _FileCtx:
    __slots__ = ("file", "parsed", "stats")

    def __init__(self, file: AddFile):
        self.file = file
        self.parsed = False
        self.stats: FileStats | None = None

    def file_stats(self) -> FileStats | None:
        if not self.parsed:
            self.stats = parse_stats(self.file.stats)
            self.parsed = True
        return self.stats


Operand = Callable[[_FileCtx], "_Val | _Range | None"]
Pred = Callable[[_FileCtx], int]


@dataclass(frozen=True)
class _ColumnRef:
    type: Any
    partition_key: str | None  # set for partition columns
    stats_path: tuple[str, ...]


class _Compiler:
    def __init__(
        self,
        schema: Mapping[str, Any],
        partition_columns: Sequence[str],
        case_sensitive: bool,
        session_tz: str | None,
    ):
        self.schema = schema
        self.partitions = list(partition_columns)
        self.case_sensitive = case_sensitive
        self.session_tz = session_tz
        self.column_mapping = uses_column_mapping(schema)

    def _same(self, a: str, b: str) -> bool:
        return a == b if self.case_sensitive else a.lower() == b.lower()

    def resolve(self, node: exp.Expr) -> _ColumnRef | None:
        """The schema column a reference names, or None when it names none (unknown, so never skips)."""
        parts = _name_parts(node)
        if not parts:
            return None
        fields: Any = self.schema.get("fields", ())
        physical: list[str] = []
        t: Any = None
        top: Mapping[str, Any] | None = None
        for i, part in enumerate(parts):
            hits = [f for f in fields if self._same(str(f["name"]), part)]
            if len(hits) != 1:
                return None
            f = hits[0]
            top = top or f
            physical.append(physical_name(f, self.column_mapping))
            t = f["type"]
            if i < len(parts) - 1:
                if not (isinstance(t, dict) and t.get("type") == "struct"):
                    return None
                fields = t.get("fields", ())
        assert top is not None
        if len(parts) == 1 and any(p.lower() == str(top["name"]).lower() for p in self.partitions):
            return _ColumnRef(t, physical[0], ())
        return _ColumnRef(t, None, tuple(physical))

    def operand(self, node: exp.Expr) -> Operand | _Val | None:
        """A constant value, a per-file operand, or None (unknown)."""
        while isinstance(node, exp.Paren):
            node = node.this
        lit = _literal(node, self.session_tz)
        if lit is not None:
            return lit
        if not isinstance(node, (exp.Column, exp.Dot)):
            return None
        ref = self.resolve(node)
        if ref is None:
            return None
        if ref.partition_key is not None:
            return self._partition_operand(ref) if _kind_of_type(ref.type) else None
        return self._stats_operand(ref)

    def _partition_operand(self, ref: _ColumnRef) -> Operand:
        key, t, tz = ref.partition_key, ref.type, self.session_tz
        assert key is not None

        def get(ctx: _FileCtx) -> _Val | None:
            pv = ctx.file.partition_values
            if key in pv:
                return _partition_value(pv[key], t, tz)
            hits = [k for k in pv if k.lower() == key.lower()]
            return _partition_value(pv[hits[0]], t, tz) if len(hits) == 1 else None

        return get

    def _stats_operand(self, ref: _ColumnRef) -> Operand:
        path, t, cs = ref.stats_path, ref.type, self.case_sensitive

        def get(ctx: _FileCtx) -> _Range | None:
            st = ctx.file_stats()
            if st is None:
                return None
            nulls = st.lookup("null", path, case_sensitive=cs)
            n = st.num_records
            nulls = None if isinstance(nulls, bool) or not isinstance(nulls, (int, Decimal)) else int(nulls)
            may_null = nulls is None or nulls > 0
            may_value = nulls is None or n is None or nulls < n
            lo = _stat_val(st.lookup("min", path, case_sensitive=cs), t, is_max=False)
            hi = _stat_val(st.lookup("max", path, case_sensitive=cs), t, is_max=True)
            if lo is False:  # NaN is above every number in Spark: a NaN min means only NaN (or null)
                return _Range(None, None, False, may_null, may_value)
            if hi is False:  # a NaN max: the min still bounds every value
                hi = None
            assert not isinstance(lo, bool) and not isinstance(hi, bool)
            prefix = t == "string" and isinstance(hi, _Val) and len(hi.value) >= _MAYBE_TRUNCATED
            return _Range(lo, hi, prefix, may_null, may_value)

        return get

    def compile(self, node: exp.Expr) -> Pred:
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.And):
            return _and(self.compile(node.this), self.compile(node.expression))
        if isinstance(node, exp.Or):
            return _or(self.compile(node.this), self.compile(node.expression))
        if isinstance(node, exp.Not):
            inner = self.compile(node.this)
            return lambda ctx: _not(inner(ctx))
        if isinstance(node, (exp.Boolean, exp.Null)):
            v = _literal(node, self.session_tz)
            const = N if v is None or v.value is None else (T if v.value else F)
            return lambda ctx: const
        if type(node) in _OPS or isinstance(node, exp.NullSafeEQ):
            op = "<=>" if isinstance(node, exp.NullSafeEQ) else _OPS[type(node)]
            return self.comparison(op, node.this, node.expression)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            return _and(
                self.comparison(">=", node.this, node.args["low"]),
                self.comparison("<=", node.this, node.args["high"]),
            )
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return self.is_null(node.this)
        if isinstance(node, (exp.Column, exp.Dot)):
            ref = self.resolve(node)
            if ref is not None and ref.type == "boolean":
                return self.comparison("=", node, exp.true())
        return lambda ctx: ANY

    def _sides(self, a: exp.Expr, b: exp.Expr) -> tuple[Any, Any] | None:
        """Both operands, a constant side coerced into the other side's column type."""
        x, y = self.operand(a), self.operand(b)
        if x is None or y is None:
            return None
        if isinstance(x, _Val) == isinstance(y, _Val):
            return x, y
        col_node, const = (a, y) if isinstance(y, _Val) else (b, x)
        assert isinstance(const, _Val)
        ref = self.resolve(col_node)
        coerced = None if ref is None else _to_type(const, ref.type, self.session_tz)
        if coerced is None:
            return None
        return (x, coerced) if isinstance(y, _Val) else (coerced, y)

    def comparison(self, op: str, a: exp.Expr, b: exp.Expr) -> Pred:
        sides = self._sides(a, b)
        if sides is None:
            return lambda ctx: ANY
        x, y = sides
        if not isinstance(x, _Val) and not isinstance(y, _Val):
            tx, ty = self.resolve(a), self.resolve(b)
            if (
                tx is None
                or ty is None
                or not _kind_of_type(tx.type)
                or (_kind_of_type(tx.type) != _kind_of_type(ty.type))
            ):
                return lambda ctx: ANY
        fx = _evaluator(x)
        fy = _evaluator(y)
        return lambda ctx: _compare(op, fx(ctx), fy(ctx))

    def in_list(self, node: exp.In) -> Pred:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return lambda ctx: ANY
        items = node.expressions
        if not items:
            return lambda ctx: ANY
        parts = [self.comparison("=", node.this, item) for item in items]

        def pred(ctx: _FileCtx) -> int:
            out = F  # x IN (...) = OR of equalities
            for p in parts:
                out = _or_flags(out, p(ctx))
            return out

        return pred

    def is_null(self, node: exp.Expr) -> Pred:
        operand = self.operand(node)
        if operand is None:
            return lambda ctx: T | F
        f = _evaluator(operand)

        def pred(ctx: _FileCtx) -> int:
            v = f(ctx)
            if isinstance(v, _Val):
                return T if v.value is None else F
            if isinstance(v, _Range):
                return (T if v.may_null else 0) | (F if v.may_value else 0)
            return T | F

        return pred


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _name_parts(node: exp.Expr) -> list[str] | None:
    node = _unparen(node)
    if isinstance(node, exp.Column):
        if not isinstance(node.this, exp.Identifier):
            return None
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        head = _name_parts(node.this)
        return None if head is None else [*head, node.expression.name]
    return None


def _evaluator(x: Any) -> Operand:
    if isinstance(x, _Val):
        return lambda ctx: x
    return x  # type: ignore[no-any-return]


def _not(a: int) -> int:
    return (T if a & F else 0) | (F if a & T else 0) | (a & N)


def _and_flags(a: int, b: int) -> int:
    out = T if a & T and b & T else 0
    if a & F or b & F:
        out |= F
    if (a & N and b & (N | T)) or (a & T and b & N):
        out |= N
    return out


def _or_flags(a: int, b: int) -> int:
    return _not(_and_flags(_not(a), _not(b)))


def _and(p: Pred, q: Pred) -> Pred:
    def pred(ctx: _FileCtx) -> int:
        a = p(ctx)
        return a if a == F else _and_flags(a, q(ctx))

    return pred


def _or(p: Pred, q: Pred) -> Pred:
    def pred(ctx: _FileCtx) -> int:
        a = p(ctx)
        return a if a == T else _or_flags(a, q(ctx))

    return pred


# --- public API -----------------------------------------------------------------------------------


def file_filter(
    predicate: exp.Expr | None,
    schema: dict,
    partition_columns: Sequence[str],
    *,
    case_sensitive: bool = False,
    session_tz: str | None = None,
) -> Callable[[AddFile], bool]:
    """A function telling whether a file MAY contain a row for which ``predicate`` is TRUE.

    ``predicate`` uses unqualified target column names (nested fields as ``a.b``). ``schema`` is the table
    schema (Spark StructType JSON). ``session_tz`` is the zone for timestamp literals and partition values
    written without an offset; when None such values are not used for skipping. ``None`` keeps every file.
    """
    if predicate is None:
        return lambda f: True
    pred = _Compiler(schema, partition_columns, case_sensitive, session_tz).compile(predicate)
    return lambda f: bool(pred(_FileCtx(f)) & T)


def prune_files(
    files: Iterable[AddFile],
    predicate: exp.Expr | None,
    schema: dict,
    partition_columns: Sequence[str],
    *,
    case_sensitive: bool = False,
    session_tz: str | None = None,
) -> list[AddFile]:
    """The files that may hold rows matching ``predicate`` (see ``file_filter``), in input order."""
    keep = file_filter(
        predicate, schema, partition_columns, case_sensitive=case_sensitive, session_tz=session_tz
    )
    return [f for f in files if keep(f)]
