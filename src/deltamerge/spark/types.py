"""Delta schema JSON <-> PySpark types. Delta stores Spark's own StructType JSON, so this is thin."""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from pyspark.sql.types import DataType, StringType, StructField, StructType

_SPECIAL = re.compile(r"(['\\])")


def to_spark_schema(schema_json: dict[str, Any] | str) -> StructType:
    """A Delta ``schemaString`` (or its parsed dict) as a PySpark StructType."""
    data = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    result = StructType.fromJson(data)
    return result


def to_delta_schema(schema: StructType) -> dict[str, Any]:
    """A PySpark StructType as Delta schema JSON (every field nullable, as Delta writes)."""
    return schema.jsonValue()  # type: ignore[no-any-return]


def schema_string(schema: StructType) -> str:
    """Compact JSON string for ``metaData.schemaString``."""
    return json.dumps(schema.jsonValue(), separators=(",", ":"))


def is_collated(dt: DataType) -> TypeGuard[StringType]:
    """A string type with a collation other than the default UTF8_BINARY."""
    # getattr: the attribute's presence and default differ between PySpark releases.
    return (
        isinstance(dt, StringType)
        and str(getattr(dt, "collation", None) or "UTF8_BINARY").upper() != "UTF8_BINARY"
    )


def as_nullable(dt: DataType) -> DataType:
    """The same type with every nested field nullable (Delta makes written columns nullable)."""
    from pyspark.sql.types import ArrayType, MapType

    if isinstance(dt, StructType):
        return StructType([StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(as_nullable(dt.elementType), True)
    if isinstance(dt, MapType):
        return MapType(as_nullable(dt.keyType), as_nullable(dt.valueType), True)
    return dt


def same_shape(a: DataType, b: DataType) -> bool:
    """Whether two types are equal up to nullability and field metadata (comments, column mapping)."""
    return _bare(as_nullable(a)) == _bare(as_nullable(b))


def _bare(dt: DataType) -> DataType:
    from pyspark.sql.types import ArrayType, MapType

    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _bare(f.dataType), f.nullable) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_bare(dt.elementType), dt.containsNull)
    if isinstance(dt, MapType):
        return MapType(_bare(dt.keyType), _bare(dt.valueType), dt.valueContainsNull)
    return dt


def data_schema(schema: StructType, partition_columns: tuple[str, ...] | list[str]) -> StructType:
    """The columns stored in data files: the table schema minus partition columns."""
    parts = {p.lower() for p in partition_columns}
    return StructType([f for f in schema.fields if f.name.lower() not in parts])


def field_names(schema: StructType) -> list[str]:
    """Top-level column names in order."""
    return [f.name for f in schema.fields]


def quote_name(name: str) -> str:
    """A column name as a Spark SQL identifier in backticks (inner backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")


def quote_if_needed(name: str) -> str:
    """Spark's ``quoteIfNeeded``: a name of ASCII word characters, not all digits, stays bare;
    any other goes in backticks."""
    return name if _PLAIN_NAME.fullmatch(name) and not name.isdigit() else quote_name(name)


def string_pieces(value: str) -> list[str | int]:
    """``value`` split for SQL that reads the same under ``spark.sql.parser.escapedStringLiterals``:
    runs of plain text, and the code point of each quote or backslash (an escaped literal would
    keep its backslashes under that setting)."""
    return [ord(p) if p in ("'", "\\") else p for p in _SPECIAL.split(value) if p]


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string expression that parses to ``value`` whatever the session's
    ``spark.sql.parser.escapedStringLiterals``: ``'text'``, or ``concat('it', chr(39), 's')`` when it
    holds a quote or backslash."""
    parts = [f"chr({p})" if isinstance(p, int) else f"'{p}'" for p in string_pieces(value)]
    if len(parts) == 1:
        return parts[0]
    return f"concat({', '.join(parts)})" if parts else "''"
