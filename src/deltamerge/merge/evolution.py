"""Schema evolution for MERGE: Delta's ``filterSchema`` + ``SchemaMergingUtils.mergeSchemas``.

Pure Python over PySpark types. The post-evolution target schema is the target schema merged with
the part of the source schema that some MATCHED / NOT MATCHED action assigns (``filter_schema``).
Merging follows Delta with ``allowImplicitConversions = true``: a source type that Spark can
implicitly cast to the target type keeps the target type, new top-level columns and new nested
fields are appended at the end of their struct, and field names match case-insensitively.
Existing columns change type only through type widening (table feature ``typeWidening``).

The type predicates of Spark that Delta relies on are here too: ``can_up_cast`` (Spark's
``UpCastRule``), the implicit casts of ``TypeCoercion.implicitCast`` and the type renderings
used in Delta's and Spark's error messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BinaryType,
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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from deltamerge.errors import AnalysisError
from deltamerge.spark.types import as_nullable, is_collated, quote_if_needed

TYPE_CHANGES_KEY = "delta.typeChanges"

# --- rendering types as Spark and Delta print them ------------------------------------------------


def scala_string(dt: DataType) -> str:
    """Scala's ``DataType.toString`` (``IntegerType``, ``DecimalType(10,2)``, ``MapType(...)``)."""
    if isinstance(dt, DecimalType):
        return f"DecimalType({dt.precision},{dt.scale})"
    if isinstance(dt, ArrayType):
        return f"ArrayType({scala_string(dt.elementType)},{str(dt.containsNull).lower()})"
    if isinstance(dt, MapType):
        kv = f"{scala_string(dt.keyType)},{scala_string(dt.valueType)}"
        return f"MapType({kv},{str(dt.valueContainsNull).lower()})"
    if isinstance(dt, StructType):
        inner = ",".join(
            f"StructField({f.name},{scala_string(f.dataType)},{str(f.nullable).lower()})" for f in dt.fields
        )
        return f"StructType({inner})"
    if is_collated(dt):
        return f"StringType({dt.collation})"
    return type(dt).__name__


def sql_type(dt: DataType) -> str:
    """Spark's ``DataType.sql`` (``INT``, ``STRUCT<a: INT>``): ``toSQLType`` without its quotes."""
    if isinstance(dt, ArrayType):
        return f"ARRAY<{sql_type(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"MAP<{sql_type(dt.keyType)}, {sql_type(dt.valueType)}>"
    if isinstance(dt, StructType):
        return (
            "STRUCT<"
            + ", ".join(f"{quote_if_needed(f.name)}: {sql_type(f.dataType)}" for f in dt.fields)
            + ">"
        )
    return dt.simpleString().upper()


def catalog_string(dt: DataType) -> str:
    """``DataType.catalogString`` of Spark (``struct<a:int,b:string>``)."""
    if isinstance(dt, ArrayType):
        return f"array<{catalog_string(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"map<{catalog_string(dt.keyType)},{catalog_string(dt.valueType)}>"
    if isinstance(dt, StructType):
        return (
            "struct<"
            + ",".join(f"{quote_if_needed(f.name)}:{catalog_string(f.dataType)}" for f in dt.fields)
            + ">"
        )
    return dt.simpleString()


def ddl(dt: DataType) -> str:
    """A Spark DDL type string with every struct field name back-quoted (safe for any name)."""
    if isinstance(dt, ArrayType):
        return f"array<{ddl(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"map<{ddl(dt.keyType)},{ddl(dt.valueType)}>"
    if isinstance(dt, StructType):
        return (
            "struct<"
            + ",".join("`" + f.name.replace("`", "``") + "`:" + ddl(f.dataType) for f in dt.fields)
            + ">"
        )
    return dt.simpleString()


# --- type predicates ------------------------------------------------------------------------------

_NUMERIC_PRECEDENCE = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType)
_INTEGRAL_SIZE = {ByteType: 1, ShortType: 2, IntegerType: 4, LongType: 8}
_DATETIME = (DateType, TimestampType, TimestampNTZType)


def same_type(a: DataType, b: DataType, *, case_sensitive: bool = False) -> bool:
    """Equal ignoring nullability (and field-name case unless ``case_sensitive``)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        if len(a.fields) != len(b.fields):
            return False
        return all(
            (fa.name == fb.name if case_sensitive else fa.name.lower() == fb.name.lower())
            and same_type(fa.dataType, fb.dataType, case_sensitive=case_sensitive)
            for fa, fb in zip(a.fields, b.fields, strict=False)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return same_type(a.elementType, b.elementType, case_sensitive=case_sensitive)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return same_type(a.keyType, b.keyType, case_sensitive=case_sensitive) and same_type(
            a.valueType, b.valueType, case_sensitive=case_sensitive
        )
    return a == b


def _precedence(dt: DataType) -> int:
    for i, t in enumerate(_NUMERIC_PRECEDENCE):
        if type(dt) is t:
            return i
    return -1


def decimal_for(dt: DataType) -> DecimalType | None:
    """``DecimalType.forType``: the decimal that holds every value of an integral type."""
    return {
        ByteType: DecimalType(3, 0),
        ShortType: DecimalType(5, 0),
        IntegerType: DecimalType(10, 0),
        LongType: DecimalType(20, 0),
    }.get(type(dt))  # type: ignore[arg-type]


def is_wider_than(d: DecimalType, other: DataType) -> bool:
    """``DecimalType.isWiderThan``."""
    if isinstance(other, IntegralType):
        other = decimal_for(other)  # type: ignore[assignment]
    if not isinstance(other, DecimalType):
        return False
    return (d.precision - d.scale) >= (other.precision - other.scale) and d.scale >= other.scale


def is_tighter_than(d: DecimalType, other: DataType) -> bool:
    """``DecimalType.isTighterThan``."""
    if isinstance(other, IntegralType):
        other = decimal_for(other)  # type: ignore[assignment]
    if not isinstance(other, DecimalType):
        return False
    return (d.precision - d.scale) <= (other.precision - other.scale) and d.scale <= other.scale


def can_up_cast(src: DataType, dst: DataType) -> bool:
    """Spark's ``UpCastRule.canUpCast``: a cast that can neither fail nor lose information."""
    if src == dst or isinstance(src, NullType):
        return True
    if isinstance(src, NumericType) and isinstance(dst, DecimalType) and is_wider_than(dst, src):
        return True
    if isinstance(src, DecimalType) and isinstance(dst, NumericType) and is_tighter_than(src, dst):
        return True
    ps, pd = _precedence(src), _precedence(dst)
    if ps >= 0 and ps < pd:
        return True
    pair = (type(src), type(dst))
    if pair in {
        (DateType, TimestampType),
        (DateType, TimestampNTZType),
        (TimestampNTZType, TimestampType),
        (TimestampType, TimestampNTZType),
        (TimestampType, LongType),
        (LongType, TimestampType),
    }:
        return True
    if isinstance(src, AtomicType) and isinstance(dst, StringType):
        return True
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return (not src.containsNull or dst.containsNull) and can_up_cast(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return (
            (not src.valueContainsNull or dst.valueContainsNull)
            and can_up_cast(src.keyType, dst.keyType)
            and can_up_cast(src.valueType, dst.valueType)
        )
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return len(src.fields) == len(dst.fields) and all(
            (not a.nullable or b.nullable) and can_up_cast(a.dataType, b.dataType)
            for a, b in zip(src.fields, dst.fields, strict=False)
        )
    return False


def implicit_cast_type(src: DataType, dst: DataType) -> DataType | None:
    """Spark's ``TypeCoercion.implicitCast`` for concrete types: the type ``src`` becomes, or None."""
    if same_type(src, dst, case_sensitive=True):
        return src
    if isinstance(src, NullType):
        return dst
    if isinstance(src, NumericType) and isinstance(dst, NumericType):
        return dst
    if isinstance(src, _DATETIME) and isinstance(dst, _DATETIME):
        return dst
    if isinstance(src, StringType) and isinstance(dst, (NumericType, *_DATETIME, BinaryType)):
        return dst
    if isinstance(src, AtomicType) and not isinstance(src, StringType) and isinstance(dst, StringType):
        return dst
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        if src.containsNull and not dst.containsNull:
            return None
        et = implicit_cast_type(src.elementType, dst.elementType)
        return None if et is None else ArrayType(et, dst.containsNull)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        if src.valueContainsNull and not dst.valueContainsNull:
            return None
        kt = implicit_cast_type(src.keyType, dst.keyType)
        vt = implicit_cast_type(src.valueType, dst.valueType)
        return None if kt is None or vt is None else MapType(kt, vt, dst.valueContainsNull)
    return None


def contains_struct(dt: DataType) -> bool:
    """A struct anywhere inside ``dt`` (Delta's ``containsNestedStruct``)."""
    if isinstance(dt, StructType):
        return True
    if isinstance(dt, ArrayType):
        return contains_struct(dt.elementType)
    if isinstance(dt, MapType):
        return contains_struct(dt.keyType) or contains_struct(dt.valueType)
    return not isinstance(dt, AtomicType) and not isinstance(dt, NullType)


# --- type widening (TypeWidening / TypeWideningMode) -----------------------------------------------


def type_change_supported(src: DataType, dst: DataType) -> bool:
    """``TypeWidening.isTypeChangeSupported``: the widenings of PROTOCOL.md "Type Widening"."""
    if src == dst:
        return True
    if not can_up_cast(src, dst):
        return False
    if isinstance(src, IntegralType) and isinstance(dst, IntegralType):
        return _INTEGRAL_SIZE[type(src)] <= _INTEGRAL_SIZE[type(dst)]
    if isinstance(src, FloatType) and isinstance(dst, DoubleType):
        return True
    if isinstance(src, DateType) and isinstance(dst, TimestampNTZType):
        return True
    if isinstance(src, (ByteType, ShortType, IntegerType)) and isinstance(dst, DoubleType):
        return True
    if isinstance(src, DecimalType) and isinstance(dst, DecimalType):
        return is_wider_than(dst, src)
    if isinstance(src, (ByteType, ShortType, IntegerType)) and isinstance(dst, DecimalType):
        return is_wider_than(dst, IntegerType())
    if isinstance(src, LongType) and isinstance(dst, DecimalType):
        return is_wider_than(dst, LongType())
    return False


def _same_family(src: DataType, dst: DataType) -> bool:
    if src == dst:
        return True
    if not type_change_supported(src, dst):
        return False
    return (
        (isinstance(src, IntegralType) and isinstance(dst, IntegralType))
        or (isinstance(src, FloatType) and isinstance(dst, DoubleType))
        or (isinstance(src, DecimalType) and isinstance(dst, DecimalType))
        or (isinstance(src, DateType) and isinstance(dst, TimestampNTZType))
    )


def _iceberg_compatible(src: DataType, dst: DataType) -> bool:
    if src == dst:
        return True
    if not type_change_supported(src, dst):
        return False
    if isinstance(src, IntegralType) and isinstance(dst, IntegralType):
        return True
    if isinstance(src, FloatType) and isinstance(dst, DoubleType):
        return True
    return (
        isinstance(src, DecimalType)
        and isinstance(dst, DecimalType)
        and src.scale == dst.scale
        and src.precision <= dst.precision
    )


@dataclass(frozen=True)
class Widening:
    """Delta's ``TypeWideningMode.TypeEvolution``: which existing types schema evolution may widen.

    ``mode`` is ``typeWidening.allowAutomaticWidening`` (``always`` / ``same_family_type`` /
    ``never``); ``iceberg_only`` restricts to Iceberg V2 promotions (UniForm Iceberg tables).
    """

    mode: str = "always"
    iceberg_only: bool = False

    def widened(self, current: DataType, update: DataType) -> DataType | None:
        """``update`` when ``current`` may be widened to it, else None."""
        mode = self.mode.lower()
        if mode == "always":
            ok = type_change_supported(current, update)
        elif mode == "same_family_type":
            ok = _same_family(current, update)
        else:
            ok = False
        if ok and self.iceberg_only:
            ok = _iceberg_compatible(current, update)
        return update if ok else None


def widening_for(configuration: dict[str, str] | None, automatic: str) -> Widening | None:
    """The widening mode of a table (None unless ``delta.enableTypeWidening`` is true)."""
    conf = configuration or {}
    if str(conf.get("delta.enableTypeWidening", "false")).strip().lower() != "true":
        return None
    formats = str(conf.get("delta.universalFormat.enabledFormats", "")).lower()
    return Widening(mode=automatic, iceberg_only="iceberg" in formats)


# --- filterSchema and mergeSchemas -----------------------------------------------------------------


def filter_schema(
    source: StructType,
    assignments: Sequence[Sequence[str]],
    *,
    case_sensitive: bool,
    base: tuple[str, ...] = (),
) -> StructType:
    """Delta's ``filterSchema``: the source fields some action assigns (exactly or through a child)."""

    def eq(a: str, b: str) -> bool:
        return a == b if case_sensitive else a.lower() == b.lower()

    def is_prefix(prefix: Sequence[str], path: Sequence[str]) -> bool:
        return len(prefix) <= len(path) and all(eq(p, q) for p, q in zip(prefix, path, strict=False))

    kept: list[StructField] = []
    for f in source.fields:
        path = (*base, f.name)
        if any(len(a) == len(path) and is_prefix(a, path) for a in assignments):
            kept.append(f)
        elif isinstance(f.dataType, StructType) and any(is_prefix(path, a) for a in assignments):
            sub = filter_schema(f.dataType, assignments, case_sensitive=case_sensitive, base=path)
            kept.append(StructField(f.name, sub, f.nullable, f.metadata))
    return StructType(kept)


def _explode_names(dt: DataType, prefix: str = "") -> list[str]:
    names: list[str] = []
    if isinstance(dt, StructType):
        for f in dt.fields:
            name = f"{prefix}{f.name}"
            names.append(name)
            names += _explode_names(f.dataType, name + ".")
    elif isinstance(dt, ArrayType):
        names += _explode_names(dt.elementType, prefix + "element.")
    elif isinstance(dt, MapType):
        names += _explode_names(dt.keyType, prefix + "key.") + _explode_names(dt.valueType, prefix + "value.")
    return names


def check_duplicate_names(schema: StructType) -> None:
    """``checkColumnNameDuplication(dataSchema, "DATA", caseSensitive = false)``."""
    seen: dict[str, int] = {}
    for n in _explode_names(schema):
        seen[n.lower()] = seen.get(n.lower(), 0) + 1
    dups = [n for n, c in seen.items() if c > 1]
    if dups:
        raise AnalysisError(
            f"Found duplicate column(s): {', '.join(dups)}. The duplicate was found in the data being saved. "
            "Rename or drop one of the source columns that differ only in case.",
            error_class="DELTA_DUPLICATE_COLUMNS_FOUND.DATA",
            sql_state="42711",
        )


def _incompatible(current: DataType, update: DataType) -> AnalysisError:
    return AnalysisError(
        f"Failed to merge incompatible data types {scala_string(current)} and {scala_string(update)}",
        error_class="DELTA_MERGE_INCOMPATIBLE_DATATYPE",
        sql_state="42K09",
    )


def _merge_types(current: DataType, update: DataType, widening: Widening | None) -> DataType:
    if isinstance(current, StructType) and isinstance(update, StructType):
        by_name = {f.name.lower(): f for f in update.fields}
        merged: list[StructField] = []
        for cf in current.fields:
            uf = by_name.get(cf.name.lower())
            if uf is None:
                merged.append(cf)
                continue
            try:
                dt = _merge_types(cf.dataType, uf.dataType, widening)
            except AnalysisError as e:
                raise AnalysisError(
                    f"Failed to merge fields '{cf.name}' and '{uf.name}': {e}",
                    error_class="DELTA_FAILED_TO_MERGE_FIELDS",
                    sql_state="22005",
                ) from e
            merged.append(StructField(cf.name, dt, cf.nullable, cf.metadata))
        existing = {f.name.lower() for f in current.fields}
        # New fields are appended at the end of their struct; Delta writes them nullable.
        merged += [
            StructField(f.name, as_nullable(f.dataType), True, f.metadata)
            for f in update.fields
            if f.name.lower() not in existing
        ]
        return StructType(merged)
    if isinstance(current, ArrayType) and isinstance(update, ArrayType):
        return ArrayType(
            _merge_types(current.elementType, update.elementType, widening), current.containsNull
        )
    if isinstance(current, MapType) and isinstance(update, MapType):
        return MapType(
            _merge_types(current.keyType, update.keyType, widening),
            _merge_types(current.valueType, update.valueType, widening),
            current.valueContainsNull,
        )
    if widening is not None and isinstance(current, AtomicType) and isinstance(update, AtomicType):
        widened = widening.widened(current, update)
        if widened is not None:
            return widened
    implicit = implicit_cast_type(update, current)
    if implicit is not None:
        return implicit
    if isinstance(current, DecimalType) and isinstance(update, DecimalType) and current != update:
        if current.precision != update.precision and current.scale != update.scale:
            ranges = (
                f"precision {current.precision} and {update.precision} & "
                f"scale {current.scale} and {update.scale}"
            )
        elif current.precision != update.precision:
            ranges = f"precision {current.precision} and {update.precision}"
        else:
            ranges = f"scale {current.scale} and {update.scale}"
        raise AnalysisError(
            f"Failed to merge decimal types with incompatible {ranges}",
            error_class="DELTA_MERGE_INCOMPATIBLE_DECIMAL_TYPE",
            sql_state="42806",
        )
    if current == update:
        return current
    small = (ByteType, ShortType, IntegerType)
    if isinstance(current, small) and isinstance(update, small):
        return current if _INTEGRAL_SIZE[type(current)] >= _INTEGRAL_SIZE[type(update)] else update
    if isinstance(current, NullType):
        return update
    if isinstance(update, NullType):
        return current
    raise _incompatible(current, update)


def merge_schemas(table: StructType, data: StructType, *, widening: Widening | None = None) -> StructType:
    """``SchemaMergingUtils.mergeSchemas(table, data, allowImplicitConversions = true, typeWideningMode)``."""
    check_duplicate_names(data)
    merged = _merge_types(table, data, widening)
    assert isinstance(merged, StructType)
    return merged


def find_null_type_column(schema: StructType, prefix: tuple[str, ...] = ()) -> str | None:
    """The first VOID column (top level or nested in structs), dotted (``SchemaUtils.findNullTypeColumn``)."""
    for f in schema.fields:
        if isinstance(f.dataType, NullType):
            return ".".join((*prefix, f.name))
        if isinstance(f.dataType, StructType):
            found = find_null_type_column(f.dataType, (*prefix, f.name))
            if found:
                return found
    return None


# --- type change metadata (TypeWideningMetadata) ---------------------------------------------------


def _type_name(dt: DataType) -> str:
    return dt.typeName() if not isinstance(dt, DecimalType) else dt.simpleString()


def _changes_in_field(old: DataType, new: DataType, path: tuple[str, ...] = ()) -> list[dict[str, str]]:
    if isinstance(old, MapType) and isinstance(new, MapType):
        return _changes_in_field(old.keyType, new.keyType, (*path, "key")) + _changes_in_field(
            old.valueType, new.valueType, (*path, "value")
        )
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _changes_in_field(old.elementType, new.elementType, (*path, "element"))
    if (
        isinstance(old, AtomicType)
        and isinstance(new, AtomicType)
        and old != new
        and type_change_supported(old, new)
    ):
        change = {"fromType": _type_name(old), "toType": _type_name(new)}
        if path:
            change["fieldPath"] = ".".join(path)
        return [change]
    return []


def add_type_change_metadata(
    new: StructType, old: StructType, *, table_version: int | None = None
) -> StructType:
    """Record widened types in ``delta.typeChanges`` of their nearest struct field (PROTOCOL.md).

    Existing type changes are kept and new ones appended. ``table_version`` is only set for
    tables on the preview feature (``typeWidening-preview``), whose clients still read it.
    """
    old_by_name = {f.name.lower(): f for f in old.fields}
    fields: list[StructField] = []
    for f in new.fields:
        prev = old_by_name.get(f.name.lower())
        if prev is None:
            fields.append(f)
            continue
        dt = f.dataType
        if isinstance(dt, StructType) and isinstance(prev.dataType, StructType):
            dt = add_type_change_metadata(dt, prev.dataType, table_version=table_version)
        else:
            dt = _with_nested_struct_metadata(dt, prev.dataType, table_version)
        changes = _changes_in_field(prev.dataType, f.dataType)
        metadata = dict(f.metadata or {})
        if changes:
            if table_version is not None:
                changes = [{"tableVersion": table_version, **c} for c in changes]  # type: ignore[dict-item]
            metadata[TYPE_CHANGES_KEY] = list(metadata.get(TYPE_CHANGES_KEY, [])) + changes
        fields.append(StructField(f.name, dt, f.nullable, metadata))
    return StructType(fields)


def _with_nested_struct_metadata(new: DataType, old: DataType, table_version: int | None) -> DataType:
    # Structs inside arrays and maps carry their own fields' type changes.
    if isinstance(new, ArrayType) and isinstance(old, ArrayType):
        return ArrayType(
            _with_nested_struct_metadata(new.elementType, old.elementType, table_version), new.containsNull
        )
    if isinstance(new, MapType) and isinstance(old, MapType):
        return MapType(
            _with_nested_struct_metadata(new.keyType, old.keyType, table_version),
            _with_nested_struct_metadata(new.valueType, old.valueType, table_version),
            new.valueContainsNull,
        )
    if isinstance(new, StructType) and isinstance(old, StructType):
        return add_type_change_metadata(new, old, table_version=table_version)
    return new
