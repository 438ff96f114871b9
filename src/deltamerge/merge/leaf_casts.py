"""Leaf casts of MERGE values: Delta's cast error messages, which ANSI casts Spark allows, and
Spark's LEGACY (non-ANSI) cast emulated where it differs from ``try_cast``."""

from __future__ import annotations

import re

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

from deltamerge.errors import DeltaMergeError
from deltamerge.merge.evolution import sql_type
from deltamerge.merge.sql_trees import plain_cast, string_literal, template, try_cast, typed_null

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


def raise_error(message_parts: list[exp.Expression | str]) -> exp.Expression:
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


def same_shape(a: DataType, b: DataType) -> bool:
    # Cast.canCast approximated by shape: structs of equal arity, same container kinds.
    if isinstance(a, StructType) or isinstance(b, StructType):
        return (
            isinstance(a, StructType)
            and isinstance(b, StructType)
            and len(a.fields) == len(b.fields)
            and all(same_shape(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=False))
        )
    if isinstance(a, ArrayType) or isinstance(b, ArrayType):
        return (
            isinstance(a, ArrayType) and isinstance(b, ArrayType) and same_shape(a.elementType, b.elementType)
        )
    if isinstance(a, MapType) or isinstance(b, MapType):
        return (
            isinstance(a, MapType)
            and isinstance(b, MapType)
            and same_shape(a.keyType, b.keyType)
            and same_shape(a.valueType, b.valueType)
        )
    return True


def contains_integral_or_decimal(dt: DataType) -> bool:
    if isinstance(dt, (IntegralType, DecimalType)):
        return True
    if isinstance(dt, ArrayType):
        return contains_integral_or_decimal(dt.elementType)
    if isinstance(dt, MapType):
        return contains_integral_or_decimal(dt.keyType) or contains_integral_or_decimal(dt.valueType)
    if isinstance(dt, StructType):
        return any(contains_integral_or_decimal(f.dataType) for f in dt.fields)
    return False


# --- LEGACY (non-ANSI) leaf casts ----------------------------------------------------------------------

_BITS: dict[type, int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def _wrap_long(v: exp.Expression, dst: DataType) -> exp.Expression:
    """A BIGINT wrapped into a narrower integral type (two's complement truncation)."""
    bits = _BITS[type(dst)]
    if bits == 64:
        return v
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    return plain_cast(template(f"(({{v}} & {mask}) ^ {sign}) - {sign}", v=v), dst)


def legacy_leaf(v: exp.Expression, src: DataType, dst: DataType) -> exp.Expression:
    """Spark's non-ANSI cast where it differs from ``try_cast``; ``try_cast`` elsewhere."""
    if isinstance(src, DateType) and isinstance(dst, (NumericType, BooleanType)):
        return typed_null(dst)  # legacy date -> numeric is always NULL
    if not isinstance(dst, IntegralType):
        return try_cast(v, dst)
    if isinstance(src, IntegralType):
        return _wrap_long(plain_cast(v, LongType()), dst)
    if isinstance(src, (FloatType, DoubleType)):
        if isinstance(dst, LongType):
            return template(
                "CASE WHEN ISNAN({v}) THEN CAST(0 AS BIGINT) WHEN {v} >= 9.223372036854775807E18 "
                "THEN 9223372036854775807 WHEN {v} <= -9.223372036854775808E18 THEN -9223372036854775808 "
                "ELSE CAST({v} AS BIGINT) END",
                v=v,
            )
        as_int = template(
            "CASE WHEN ISNAN({v}) THEN 0 WHEN {v} >= 2147483647 THEN 2147483647 "
            "WHEN {v} <= -2147483648 THEN -2147483648 ELSE CAST({v} AS INT) END",
            v=v,
        )
        return _wrap_long(plain_cast(as_int, LongType()), dst) if not isinstance(dst, IntegerType) else as_int
    if isinstance(src, DecimalType):
        if src.precision - src.scale <= 18:
            return _wrap_long(plain_cast(v, LongType()), dst)
        truncated = template("CASE WHEN {v} < 0 THEN CEIL({v}) ELSE FLOOR({v}) END", v=v)
        as_long = template(
            "CAST(CASE WHEN PMOD({t}, 18446744073709551616) >= 9223372036854775808 "
            "THEN PMOD({t}, 18446744073709551616) - 18446744073709551616 "
            "ELSE PMOD({t}, 18446744073709551616) END AS BIGINT)",
            t=truncated,
        )
        return _wrap_long(as_long, dst)
    return try_cast(v, dst)
