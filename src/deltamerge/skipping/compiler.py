"""Compiling a predicate into a per-file function over the abstract truth values (see the package doc)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp

from deltamerge.log.actions import AddFile
from deltamerge.log.protocol import has_collated_strings
from deltamerge.predicates import unparen
from deltamerge.skipping.values import (
    _OPS,
    ANY,
    F,
    N,
    T,
    _compare,
    _kind_of_type,
    _literal,
    _partition_value,
    _Range,
    _stat_val,
    _to_type,
    _Val,
)
from deltamerge.stats import FileStats, parse_stats, physical_name, uses_column_mapping

# A string max this long may be a cut prefix (delta-rs cuts at 64 bytes, delta-spark at 32 chars): values
# may then exceed it while starting with it. Shorter maxima are taken as the true maximum.
_MAYBE_TRUNCATED = 16

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
    # A string with a non-default collation compares by its collation, not byte for byte as its
    # statistics and partition values do: never used to skip by value (its null count still is).
    collated: bool = False


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
        collated = t == "string" and has_collated_strings({"type": "struct", "fields": [f]})
        if len(parts) == 1 and any(p.lower() == str(top["name"]).lower() for p in self.partitions):
            return _ColumnRef(t, physical[0], (), collated)
        return _ColumnRef(t, None, tuple(physical), collated)

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
        if any(ref is not None and ref.collated for ref in (self.resolve(a), self.resolve(b))):
            return None
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


def _name_parts(node: exp.Expr) -> list[str] | None:
    node = unparen(node)
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
