"""Store-assignment casts of MERGE values (Delta's ``UpdateExpressionsSupport.castIfNeeded``).

Everything here builds SQLGlot expression trees over the internal column names; nothing runs.

* Structs are cast **by field name**: a ``named_struct`` of the target's fields, each taken from
  the source field of the same name (case-insensitively) and cast recursively. A source field the
  target lacks is an error; a target field the source lacks is allowed only with schema evolution
  (NULL, or the target's current value for ``UPDATE *`` with evolution). A NULL source struct stays
  NULL (``merge.preserveNullSourceStructs``). Arrays of structs are cast element-wise with
  ``transform``, maps with ``transform_keys`` / ``transform_values``.
* Leaf casts follow ``spark.sql.storeAssignmentPolicy`` whatever ``spark.sql.ansi.enabled`` says:
  ANSI casts raise on overflow (``DELTA_CAST_OVERFLOW_IN_TABLE_WRITE``, naming the column) and on
  malformed input, through a ``raise_error`` guard around ``try_cast``; LEGACY is Spark's non-ANSI
  cast (integral overflow wraps, floating values saturate, bad input gives NULL), emulated where
  it differs from ``try_cast``; STRICT allows only up-casts and fails at analysis otherwise.
  ``updateAndMergeCastingFollowsAnsiEnabledFlag`` reverts to a plain ``CAST``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import sqlglot
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    IntegralType,
    LongType,
    MapType,
    NullType,
    NumericType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from sqlglot import exp

from deltamerge.config import SessionConf
from deltamerge.errors import AnalysisError, DeltaMergeError
from deltamerge.merge.evolution import can_up_cast, catalog_string, contains_struct, ddl, same_type, sql_type
from deltamerge.predicates import DIALECT, is_deterministic
from deltamerge.spark.types import string_pieces


@dataclass(frozen=True)
class CastSettings:
    """The session settings that shape MERGE casts (read once per merge)."""

    policy: str = "ANSI"  # spark.sql.storeAssignmentPolicy: ANSI / LEGACY / STRICT
    follow_ansi_flag: bool = False  # updateAndMergeCastingFollowsAnsiEnabledFlag
    by_name: bool = True  # resolveMergeUpdateStructsByName.enabled
    preserve_null_structs: bool = True  # merge.preserveNullSourceStructs
    preserve_null_update_star: bool = True  # merge.preserveNullSourceStructs.updateStar (and the above)
    case_sensitive: bool = False  # spark.sql.caseSensitive

    @classmethod
    def from_conf(cls, get: Callable[[str], str | None], *, case_sensitive: bool) -> CastSettings:
        """Read the settings through a ``key -> value | None`` getter."""
        preserve = bool(SessionConf.PRESERVE_NULL_SOURCE_STRUCTS.get(get))
        update_star = SessionConf.PRESERVE_NULL_SOURCE_STRUCTS_UPDATE_STAR.get(get)
        return cls(
            policy=(get("spark.sql.storeAssignmentPolicy") or "ANSI").strip().upper(),
            follow_ansi_flag=bool(SessionConf.CASTING_FOLLOWS_ANSI.get(get)),
            by_name=bool(SessionConf.STRUCTS_BY_NAME.get(get)),
            preserve_null_structs=preserve,
            preserve_null_update_star=preserve and update_star is not False,
            case_sensitive=case_sensitive,
        )


# --- small tree builders ----------------------------------------------------------------------------


_VOID_IN_DDL = re.compile(r"(^|[:<,])void(?=$|[>,])")


def spark_type(dt: DataType) -> exp.DataType:
    """A PySpark type as a SQLGlot type node."""
    # A copy: the node is attached to the caller's tree. Parsing each time cost ~0.25 ms a column.
    return _parsed_type(ddl(dt)).copy()


@functools.lru_cache(maxsize=1024)
def _parsed_type(text: str) -> exp.DataType:
    # SQLGlot has no VOID type (it drops a VOID struct field): parse it as NULL, render it as VOID.
    has_void = "void" in text
    if has_void:
        text = _VOID_IN_DDL.sub(r"\1null", text)
    if " collate " in text:
        # DataType.build stops before a COLLATE; a CAST's target type keeps it (nested ones too).
        built = sqlglot.parse_one(f"CAST(NULL AS {text})", dialect=DIALECT).args["to"]
    else:
        built = exp.DataType.build(text, dialect=DIALECT)
    if not has_void:
        return cast(exp.DataType, built)
    void = exp.DataType.build("VOID", udt=True)
    out = built.transform(
        lambda n: void.copy() if isinstance(n, exp.DataType) and n.this == exp.DataType.Type.NULL else n
    )
    return cast(exp.DataType, out)


def typed_null(dt: DataType) -> exp.Expression:
    """``CAST(NULL AS dt)`` (plain NULL for VOID)."""
    if isinstance(dt, NullType):
        return exp.Null()
    return exp.Cast(this=exp.Null(), to=spark_type(dt))


def field(node: exp.Expression, name: str) -> exp.Expression:
    """``node.`name```."""
    return exp.Dot(this=node.copy(), expression=exp.to_identifier(name, quoted=True))


def string_literal(value: str) -> exp.Expression:
    """``value`` as a SQL string that reads the same under ``spark.sql.parser.escapedStringLiterals``
    (see ``spark.types.sql_string``)."""
    parts: list[exp.Expression] = [
        exp.Anonymous(this="chr", expressions=[exp.Literal.number(p)])
        if isinstance(p, int)
        else exp.Literal.string(p)
        for p in string_pieces(value)
    ]
    if len(parts) == 1:
        return parts[0]
    return exp.Anonymous(this="concat", expressions=parts) if parts else exp.Literal.string("")


def named_struct(pairs: list[tuple[str, exp.Expression]]) -> exp.Expression:
    """``named_struct('a', x, ...)``."""
    args: list[exp.Expression] = []
    for name, value in pairs:
        args += [string_literal(name), value]
    return exp.Anonymous(this="named_struct", expressions=args)


def _is_null(node: exp.Expression) -> exp.Expression:
    return exp.Is(this=exp.Paren(this=node.copy()), expression=exp.Null())


def _if(cond: exp.Expression, then: exp.Expression, other: exp.Expression) -> exp.Expression:
    return exp.If(this=cond, true=then, false=other)


def _plain_cast(node: exp.Expression, dt: DataType) -> exp.Expression:
    return exp.Cast(this=node.copy(), to=spark_type(dt))


def _try_cast(node: exp.Expression, dt: DataType) -> exp.Expression:
    return exp.TryCast(this=node.copy(), to=spark_type(dt), safe=True)


def _template(sql: str, **values: exp.Expression) -> exp.Expression:
    """Parse ``sql`` with ``{name}`` placeholders and put the given trees in their place."""
    text = sql
    for name in values:
        text = text.replace("{" + name + "}", f"__dm_ph_{name}")
    tree = sqlglot.parse_one(text, read=DIALECT)
    for col in list(tree.find_all(exp.Column)):
        if col.name.startswith("__dm_ph_"):
            col.replace(exp.Paren(this=values[col.name[len("__dm_ph_") :]].copy()))
    return tree  # type: ignore[return-value]


class _Lambdas:
    """Fresh lambda variable names (Spark wants them unique across nesting)."""

    def __init__(self) -> None:
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        return f"__dm_l{self.n}"


# --- error messages -----------------------------------------------------------------------------------

_ERROR_RE = re.compile(
    r"\[(DELTA_CAST_OVERFLOW_IN_TABLE_WRITE|CAST_INVALID_INPUT|CAST_OVERFLOW)\] (.*?)(?: SQLSTATE: P0001|$)",
    re.S,
)
_SQL_STATES = {
    "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE": "22003",
    "CAST_INVALID_INPUT": "22018",
    "CAST_OVERFLOW": "22003",
}


def overflow_message(src: DataType, dst: DataType, column: str) -> str:
    """Delta's ``DELTA_CAST_OVERFLOW_IN_TABLE_WRITE`` text."""
    return (
        f'Failed to write a value of "{sql_type(src)}" type into the "{sql_type(dst)}" type column '
        f"`{column}` due to an overflow.\nUse `try_cast` on the input value to tolerate overflow and return "
        'NULL instead.\nIf necessary, set spark.sql.storeAssignmentPolicy to "LEGACY" to bypass this error '
        "or set spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag to true to revert to the "
        "old behaviour and follow spark.sql.ansi.enabled in UPDATE and MERGE."
    )


def translate_runtime_error(error: BaseException) -> DeltaMergeError | None:
    """The deltamerge error behind a Spark job failure raised by a cast guard, or None.

    Cast guards raise ``[USER_RAISED_EXCEPTION] [<CLASS>] <message>`` inside the write job; this
    recovers ``<CLASS>`` and ``<message>`` so callers can re-raise Delta's error.
    """
    found = _ERROR_RE.search(str(error))
    if found is None:
        return None
    cls, message = found.group(1), found.group(2).strip()
    return DeltaMergeError(message, error_class=cls, sql_state=_SQL_STATES[cls])


def _raise(message_parts: list[exp.Expression | str]) -> exp.Expression:
    parts = [string_literal(p) if isinstance(p, str) else p for p in message_parts]
    msg = parts[0] if len(parts) == 1 else exp.Anonymous(this="concat", expressions=parts)
    return exp.Anonymous(this="raise_error", expressions=[msg])


# --- legality of ANSI casts (Spark's Cast.canAnsiCast, the pairs MERGE can meet) ----------------------


def can_ansi_cast(src: DataType, dst: DataType) -> bool:
    """Whether an ANSI (or TRY) cast from ``src`` to ``dst`` passes Spark's analysis."""
    if src == dst or isinstance(src, NullType) or isinstance(dst, StringType):
        return True
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return can_ansi_cast(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return can_ansi_cast(src.keyType, dst.keyType) and can_ansi_cast(src.valueType, dst.valueType)
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return len(src.fields) == len(dst.fields) and all(
            can_ansi_cast(a.dataType, b.dataType) for a, b in zip(src.fields, dst.fields, strict=False)
        )
    if not (isinstance(src, AtomicType) and isinstance(dst, AtomicType)):
        return False
    if isinstance(src, BinaryType) or isinstance(dst, BinaryType):
        return isinstance(src, StringType) and isinstance(dst, BinaryType)
    temporal = (DateType, TimestampType, TimestampNTZType)
    if isinstance(src, BooleanType):
        return not isinstance(dst, temporal)
    if isinstance(dst, BooleanType):
        return not isinstance(src, temporal)
    if isinstance(src, DateType):
        return isinstance(dst, temporal)
    if isinstance(dst, DateType):
        return isinstance(src, (StringType, *temporal))
    return True


# --- the caster -----------------------------------------------------------------------------------------


def _has_extra_fields(src: StructType, dst: StructType) -> bool:
    """``hasExtraStructFieldsToPreserveValue``: target-only struct fields at any struct depth."""
    if len(dst.fields) > len(src.fields):
        return True
    by_name = {f.name.lower(): f for f in src.fields}
    for f in dst.fields:
        s = by_name.get(f.name.lower())
        if s is None:
            return True
        if (
            isinstance(s.dataType, StructType)
            and isinstance(f.dataType, StructType)
            and _has_extra_fields(s.dataType, f.dataType)
        ):
            return True
    return False


_ARRAY_FUNCS = {"array_union", "arrayintersect", "arrayexcept", "arrayremove", "arraydistinct"}


def _array_func(node: exp.Expression) -> str | None:
    name = node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__.lower()
    return name if name in _ARRAY_FUNCS else None


class Caster:
    """Builds cast trees for one MERGE (one set of settings, one evolution flag)."""

    def __init__(
        self, settings: CastSettings, *, allow_missing: bool, display: Callable[[exp.Expression], str]
    ):
        self.s = settings
        self.allow_missing = allow_missing  # schema evolution: target struct fields may be missing
        self.display = display  # internal-name tree -> the user's SQL (error messages)
        self.lambdas = _Lambdas()

    # castIfNeeded ------------------------------------------------------------------------------------

    def cast_if_needed(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        column: str,
        original: tuple[exp.Expression, DataType] | None = None,
    ) -> exp.Expression:
        """``node`` (of type ``src``) as a value of ``dst``; ``original`` = the target's current value
        (``UPDATE *`` with evolution keeps target-only struct fields)."""
        if isinstance(node, exp.Null):
            return typed_null(dst)
        if (
            isinstance(src, ArrayType)
            and isinstance(dst, ArrayType)
            and isinstance(src.elementType, StructType)
            and isinstance(dst.elementType, StructType)
            and not (
                same_type(src.elementType, dst.elementType, case_sensitive=self.s.case_sensitive)
                and src.containsNull == dst.containsNull
            )
        ):
            return self._array_of_structs(node, src, dst, column)
        if isinstance(src, MapType) and isinstance(dst, MapType) and self._map_needs_rebuild(src, dst):
            out = node.copy()
            if src.keyType != dst.keyType:
                out = self._transform(
                    "transform_keys",
                    out,
                    lambda k, v: self.cast_if_needed(k, src.keyType, dst.keyType, column),
                )
            if src.valueType != dst.valueType:
                out = self._transform(
                    "transform_values",
                    out,
                    lambda k, v: self.cast_if_needed(v, src.valueType, dst.valueType, column),
                )
            return out
        if (
            isinstance(src, StructType)
            and isinstance(dst, StructType)
            and self.s.by_name
            and not same_type(src, dst, case_sensitive=False)
        ):
            return self._struct_by_name(node, src, dst, column, original)
        if not same_type(src, dst, case_sensitive=True):
            return self.policy_cast(node, src, dst, column)
        return node

    def _map_needs_rebuild(self, src: MapType, dst: MapType) -> bool:
        shape_ok = _same_shape(src, dst)
        nested = (
            self.s.by_name
            and contains_struct(src)
            and contains_struct(dst)
            and not same_type(src, dst, case_sensitive=False)
        )
        return not shape_ok or nested

    def _transform(
        self, fn: str, node: exp.Expression, body: Callable[..., exp.Expression]
    ) -> exp.Expression:
        names = [self.lambdas.fresh(), self.lambdas.fresh()]
        lam = exp.Lambda(
            this=body(*[exp.column(n) for n in names]), expressions=[exp.to_identifier(n) for n in names]
        )
        return exp.Anonymous(this=fn, expressions=[node, lam])

    def _array_of_structs(
        self, node: exp.Expression, src: ArrayType, dst: ArrayType, column: str
    ) -> exp.Expression:
        func = _array_func(node)
        args = list(node.iter_expressions())
        if func is not None and args:
            out = node.copy()
            new_args = list(out.iter_expressions())
            for i, arg in enumerate(new_args):
                if func == "arrayremove" and i == 1:
                    arg.replace(self.cast_if_needed(args[i], src.elementType, dst.elementType, column))
                else:
                    arg.replace(self.cast_if_needed(args[i], src, dst, column))
            return out
        elem = self.lambdas.fresh()
        body = self.cast_if_needed(exp.column(elem), src.elementType, dst.elementType, column)
        lam = exp.Lambda(this=body, expressions=[exp.to_identifier(elem)])
        return exp.Anonymous(this="transform", expressions=[node.copy(), lam])

    def _struct_by_name(
        self,
        node: exp.Expression,
        src: StructType,
        dst: StructType,
        column: str,
        original: tuple[exp.Expression, DataType] | None,
    ) -> exp.Expression:
        dst_names = {f.name.lower() for f in dst.fields}
        if any(f.name.lower() not in dst_names for f in src.fields) or (
            len(src.fields) != len(dst.fields) and not self.allow_missing
        ):
            raise AnalysisError(
                f"Cannot cast {catalog_string(src)} to {catalog_string(dst)}. All nested columns must match.",
                error_class="DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION",
                sql_state="42846",
            )
        originals: dict[str, tuple[exp.Expression, DataType]] = {}
        if original is not None and self.s.preserve_null_update_star and isinstance(original[1], StructType):
            by_name = {f.name.lower(): f for f in original[1].fields}
            for f in dst.fields:
                o = by_name.get(f.name.lower())
                if o is not None:
                    originals[f.name] = (field(original[0], o.name), o.dataType)
        src_by_name = {f.name.lower(): f for f in src.fields}
        pairs: list[tuple[str, exp.Expression]] = []
        for f in dst.fields:
            target_child = originals.get(f.name)
            s = src_by_name.get(f.name.lower())
            if s is not None:
                value, vtype = field(node, s.name), s.dataType
            elif target_child is not None:
                value, vtype = target_child
            else:
                value, vtype = exp.Null(), NullType()
            pairs.append((f.name, self.cast_if_needed(value, vtype, f.dataType, f.name, target_child)))
        rebuilt = named_struct(pairs)
        if not self.s.preserve_null_structs:
            return rebuilt
        cond = _is_null(node)
        if original is not None and originals and _has_extra_fields(src, dst):
            cond = exp.And(this=cond, expression=_is_null(original[0]))
        return _if(cond, typed_null(dst), rebuilt)

    # store-assignment casts ---------------------------------------------------------------------------

    def policy_cast(self, node: exp.Expression, src: DataType, dst: DataType, column: str) -> exp.Expression:
        """One cast under ``spark.sql.storeAssignmentPolicy`` (no by-name struct handling)."""
        if isinstance(src, NullType) or self.s.follow_ansi_flag:
            return _plain_cast(node, dst)
        if can_up_cast(src, dst):
            return _plain_cast(node, dst)
        if self.s.policy == "STRICT":
            shown = self.display(node)
            raise AnalysisError(
                f'Cannot up cast {shown} from "{sql_type(src)}" to "{sql_type(dst)}".\n'
                "The type path of the target object is:\n\n"
                "You can either add an explicit cast to the input data or choose a higher precision type "
                "of the field in the target object",
                error_class="CANNOT_UP_CAST_DATATYPE",
                sql_state="42846",
            )
        if self.s.policy == "LEGACY":
            return self._leafwise(node, src, dst, lambda v, s, d: _legacy_leaf(v, s, d))
        if not can_ansi_cast(src, dst):
            raise AnalysisError(
                f'Cannot resolve "CAST({self.display(node)} AS {sql_type(dst)})" due to data type mismatch: '
                f'cannot cast "{sql_type(src)}" to "{sql_type(dst)}".',
                error_class="DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION",
                sql_state="42K09",
            )
        return self._leafwise(node, src, dst, lambda v, s, d: self._ansi_leaf(v, s, d, src, dst, column))

    def _leafwise(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        leaf: Callable[[exp.Expression, DataType, DataType], exp.Expression],
    ) -> exp.Expression:
        """Apply ``leaf`` to every atomic position of a (positional) complex cast."""
        if same_type(src, dst, case_sensitive=True) or can_up_cast(src, dst) or isinstance(src, NullType):
            return _plain_cast(node, dst) if not same_type(src, dst, case_sensitive=True) else node
        if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
            elem = self.lambdas.fresh()
            body = self._leafwise(exp.column(elem), src.elementType, dst.elementType, leaf)
            lam = exp.Lambda(this=body, expressions=[exp.to_identifier(elem)])
            return exp.Anonymous(this="transform", expressions=[node.copy(), lam])
        if isinstance(src, MapType) and isinstance(dst, MapType):
            out = node.copy()
            if not same_type(src.keyType, dst.keyType, case_sensitive=True):
                out = self._transform(
                    "transform_keys", out, lambda k, v: self._leafwise(k, src.keyType, dst.keyType, leaf)
                )
            if not same_type(src.valueType, dst.valueType, case_sensitive=True):
                out = self._transform(
                    "transform_values",
                    out,
                    lambda k, v: self._leafwise(v, src.valueType, dst.valueType, leaf),
                )
            return out
        if isinstance(src, StructType) and isinstance(dst, StructType) and len(src.fields) == len(dst.fields):
            pairs = [
                (d.name, self._leafwise(field(node, s.name), s.dataType, d.dataType, leaf))
                for s, d in zip(src.fields, dst.fields, strict=False)
            ]
            return _if(_is_null(node), typed_null(dst), named_struct(pairs))
        return leaf(node, src, dst)

    def _ansi_leaf(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        top_src: DataType,
        top_dst: DataType,
        column: str,
    ) -> exp.Expression:
        def message(v: exp.Expression) -> list[exp.Expression | str]:
            if isinstance(src, StringType):
                return [
                    "[CAST_INVALID_INPUT] The value '",
                    v.copy(),
                    f'\' of the type "STRING" cannot be cast to "{sql_type(dst)}" because it is '
                    "malformed. Correct the value as per the syntax, or change its target type. "
                    "Use `try_cast` to tolerate malformed input and return NULL instead.",
                ]
            if _contains_integral_or_decimal(top_dst):
                return ["[DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] " + overflow_message(top_src, top_dst, column)]
            return [
                "[CAST_OVERFLOW] The value ",
                _plain_cast(v, StringType()),
                f' of the type "{sql_type(src)}" cannot be cast to "{sql_type(dst)}" due to an overflow. Use '
                "`try_cast` to tolerate overflow and return NULL instead.",
            ]

        def guard(v: exp.Expression) -> exp.Expression:
            failed = exp.And(this=exp.Not(this=_is_null(v)), expression=_is_null(_try_cast(v, dst)))
            return exp.Case(ifs=[exp.If(this=failed, true=_raise(message(v)))], default=_try_cast(v, dst))

        if is_deterministic(node):
            return guard(node)
        # Evaluate a non-deterministic value once: bind it as a lambda variable.
        var = self.lambdas.fresh()
        lam = exp.Lambda(this=guard(exp.column(var)), expressions=[exp.to_identifier(var)])
        bound = exp.Anonymous(this="transform", expressions=[exp.Array(expressions=[node.copy()]), lam])
        return exp.Anonymous(this="element_at", expressions=[bound, exp.Literal.number(1)])


def _same_shape(a: DataType, b: DataType) -> bool:
    # Cast.canCast approximated by shape: structs of equal arity, same container kinds.
    if isinstance(a, StructType) or isinstance(b, StructType):
        return (
            isinstance(a, StructType)
            and isinstance(b, StructType)
            and len(a.fields) == len(b.fields)
            and all(_same_shape(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=False))
        )
    if isinstance(a, ArrayType) or isinstance(b, ArrayType):
        return (
            isinstance(a, ArrayType)
            and isinstance(b, ArrayType)
            and _same_shape(a.elementType, b.elementType)
        )
    if isinstance(a, MapType) or isinstance(b, MapType):
        return (
            isinstance(a, MapType)
            and isinstance(b, MapType)
            and _same_shape(a.keyType, b.keyType)
            and _same_shape(a.valueType, b.valueType)
        )
    return True


def _contains_integral_or_decimal(dt: DataType) -> bool:
    if isinstance(dt, (IntegralType, DecimalType)):
        return True
    if isinstance(dt, ArrayType):
        return _contains_integral_or_decimal(dt.elementType)
    if isinstance(dt, MapType):
        return _contains_integral_or_decimal(dt.keyType) or _contains_integral_or_decimal(dt.valueType)
    if isinstance(dt, StructType):
        return any(_contains_integral_or_decimal(f.dataType) for f in dt.fields)
    return False


# --- LEGACY (non-ANSI) leaf casts ----------------------------------------------------------------------

_BITS: dict[type, int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def _wrap_long(v: exp.Expression, dst: DataType) -> exp.Expression:
    """A BIGINT wrapped into a narrower integral type (two's complement truncation)."""
    bits = _BITS[type(dst)]
    if bits == 64:
        return v
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    return _plain_cast(_template(f"(({{v}} & {mask}) ^ {sign}) - {sign}", v=v), dst)


def _legacy_leaf(v: exp.Expression, src: DataType, dst: DataType) -> exp.Expression:
    """Spark's non-ANSI cast where it differs from ``try_cast``; ``try_cast`` elsewhere."""
    if isinstance(src, DateType) and isinstance(dst, (NumericType, BooleanType)):
        return typed_null(dst)  # legacy date -> numeric is always NULL
    if not isinstance(dst, IntegralType):
        return _try_cast(v, dst)
    if isinstance(src, IntegralType):
        return _wrap_long(_plain_cast(v, LongType()), dst)
    if isinstance(src, (FloatType, DoubleType)):
        if isinstance(dst, LongType):
            return _template(
                "CASE WHEN ISNAN({v}) THEN CAST(0 AS BIGINT) WHEN {v} >= 9.223372036854775807E18 "
                "THEN 9223372036854775807 WHEN {v} <= -9.223372036854775808E18 THEN -9223372036854775808 "
                "ELSE CAST({v} AS BIGINT) END",
                v=v,
            )
        as_int = _template(
            "CASE WHEN ISNAN({v}) THEN 0 WHEN {v} >= 2147483647 THEN 2147483647 "
            "WHEN {v} <= -2147483648 THEN -2147483648 ELSE CAST({v} AS INT) END",
            v=v,
        )
        return (
            _wrap_long(_plain_cast(as_int, LongType()), dst) if not isinstance(dst, IntegerType) else as_int
        )
    if isinstance(src, DecimalType):
        if src.precision - src.scale <= 18:
            return _wrap_long(_plain_cast(v, LongType()), dst)
        truncated = _template("CASE WHEN {v} < 0 THEN CEIL({v}) ELSE FLOOR({v}) END", v=v)
        as_long = _template(
            "CAST(CASE WHEN PMOD({t}, 18446744073709551616) >= 9223372036854775808 "
            "THEN PMOD({t}, 18446744073709551616) - 18446744073709551616 "
            "ELSE PMOD({t}, 18446744073709551616) END AS BIGINT)",
            t=truncated,
        )
        return _wrap_long(as_long, dst)
    return _try_cast(v, dst)
