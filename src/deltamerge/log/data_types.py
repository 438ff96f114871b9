"""What a Delta table's schema may hold, checked whenever a commit sets new metadata, as Delta's
commit checks do: the data types (``SchemaUtils.findUnsupportedDataTypes``), the column names
without column mapping (``checkSchemaFieldNames``), NOT NULL nested in arrays and maps
(``removeUnenforceableNotNullConstraints``) and, with the change data feed on, no column named like
the feed's own (``CDCReader.checkMetadataChange``).

Spark has types Delta does not store: ANSI and calendar intervals, TIME, and the geospatial types
(which need the ``geospatial`` reader-writer feature, unsupported here). A table holding one would
be unreadable for other engines, so the commit is refused before anything is written to the log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from deltamerge.config import TableProperties
from deltamerge.errors import AnalysisError
from deltamerge.log.feature_removal import without_type_changes

_ATOMIC = frozenset(
    {
        "void",
        "boolean",
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "string",
        "date",
        "timestamp",
        "timestamp_ntz",
        "variant",
        "binary",
    }
)
_DECIMAL = re.compile(r"^decimal\(\s*\d+\s*,\s*-?\d+\s*\)$")
_GEO = re.compile(r"^(geometry|geography)\b")


def _pretty(path: list[str]) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def _unsupported(t: Any, path: list[str]) -> Iterator[tuple[str, str]]:
    if isinstance(t, str):
        if t not in _ATOMIC and not _DECIMAL.match(t):
            yield _pretty(path), t
        return
    kind = t.get("type") if isinstance(t, Mapping) else None
    if kind == "struct":
        for f in t.get("fields", ()):
            yield from _unsupported(f.get("type"), [*path, str(f.get("name"))])
    elif kind == "array":
        yield from _unsupported(t.get("elementType"), [*path[:-1], path[-1] + "[]"])
    elif kind == "map":
        yield from _unsupported(t.get("keyType"), [*path[:-1], path[-1] + "[key]"])
        yield from _unsupported(t.get("valueType"), [*path[:-1], path[-1] + "[value]"])
    elif kind == "udt":
        yield from _unsupported(t.get("sqlType"), path)
    else:
        yield _pretty(path), str(kind)


def check_supported_types(schema: Mapping[str, Any], *, type_check: bool = True) -> None:
    """Refuse a table schema holding a type Delta cannot store (``DELTA_UNSUPPORTED_DATA_TYPES``,
    unless ``type_check`` is off: Delta's ``schema.typeCheck.enabled``). A geospatial type is
    refused either way, with Spark's ``UNSUPPORTED_DATATYPE``, as Delta does without its preview."""
    found = list(_unsupported(schema, []))
    geo = [t for _, t in found if _GEO.match(t)]
    if geo:
        raise AnalysisError(
            f'Unsupported data type "{geo[0].upper()}". deltamerge does not write the geospatial '
            "table feature; store the geometry as WKB in a BINARY column instead.",
            error_class="UNSUPPORTED_DATATYPE",
            sql_state="0A000",
        )
    if found and type_check:
        listed = ", ".join(f"{column}: {t}" for column, t in found)
        raise AnalysisError(
            f"Found columns using unsupported data types: [{listed}]. You can set "
            "'spark.databricks.delta.schema.typeCheck.enabled' to 'false' to disable the type check. "
            "Disabling this type check may allow users to create unsupported Delta tables and should "
            "only be used when trying to read/write legacy tables.",
            error_class="DELTA_UNSUPPORTED_DATA_TYPES",
            sql_state="0AKDC",
        )


#: The columns the change data feed adds to what it reads.
CDC_COLUMN_NAMES = ("_change_type", "_commit_version", "_commit_timestamp")


def check_cdc_columns(
    schema: Mapping[str, Any], configuration: Mapping[str, str], old_configuration: Mapping[str, str] | None
) -> None:
    """With the change data feed enabled, no top-level column may be named like one of the feed's
    (Delta compares the names exactly): ``DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS`` when the feed
    is being turned on (or the table created), ``RESERVED_CDC_COLUMNS_ON_WRITE`` when it was on."""
    if not TableProperties.ENABLE_CDF.get(dict(configuration)):
        return
    names = {str(f.get("name")) for f in schema.get("fields", ())}
    used = [c for c in CDC_COLUMN_NAMES if c in names]
    if not used:
        return
    listed = "[" + ", ".join(used) + "]"
    if old_configuration is None or not TableProperties.ENABLE_CDF.get(dict(old_configuration)):
        raise AnalysisError(
            f"Unable to enable Change Data Capture on the table. The table already contains reserved "
            f"columns {listed} that will be used internally as metadata for the table's Change Data "
            "Feed. To enable Change Data Feed on the table rename/drop these columns.",
            error_class="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS",
            sql_state="42711",
        )
    raise AnalysisError(
        f"The write contains reserved columns {listed} that are used internally as metadata for "
        "Change Data Feed. To write to the table either rename/drop these columns or disable Change "
        "Data Feed on the table by setting delta.enableChangeDataFeed to false.",
        error_class="RESERVED_CDC_COLUMNS_ON_WRITE",
        sql_state="42939",
    )


_BAD_NAME_CHARS = frozenset(" ,;{}()\n\t=")


def _exploded_names(t: Any, path: list[str]) -> Iterator[str]:
    # Delta's SchemaMergingUtils.explodeNestedFieldNames: every field, nested ones by full path
    # (array elements as ``element``, map entries as ``key`` / ``value``), dotted parts quoted.
    kind = t.get("type") if isinstance(t, Mapping) else None
    if kind == "struct":
        for f in t.get("fields", ()):
            inner = [*path, str(f.get("name"))]
            yield _pretty(inner)
            yield from _exploded_names(f.get("type"), inner)
    elif kind == "array":
        yield from _exploded_names(t.get("elementType"), [*path, "element"])
    elif kind == "map":
        yield from _exploded_names(t.get("keyType"), [*path, "key"])
        yield from _exploded_names(t.get("valueType"), [*path, "value"])


def check_column_names(
    schema: Mapping[str, Any], partition_columns: Sequence[str], *, check_partitions: bool = True
) -> None:
    """Without column mapping, Delta refuses names holding any of `` ,;{}()\\n\\t=`` (Parquet's
    old limits): data columns at any depth (``DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES``) and
    partition columns (``DELTA_INVALID_PARTITION_COLUMN_NAME``, unless ``check_partitions`` is off:
    ``spark.databricks.delta.partitionColumnValidity.enabled``). Column mapping lifts both."""
    parts = set(partition_columns)
    data = {**schema, "fields": [f for f in schema.get("fields", ()) if f.get("name") not in parts]}
    bad = [n for n in _exploded_names(data, []) if _BAD_NAME_CHARS & set(n)]
    if bad:
        raise AnalysisError(
            "Found invalid character(s) among ' ,;{}()\\n\\t=' in the column names of your schema. "
            f"Invalid column names: {', '.join(bad)}. Please use other characters and try again. "
            "Alternatively, enable Column Mapping to keep using these characters "
            "(delta.columnMapping.mode = 'name').",
            error_class="DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES",
            sql_state="42K05",
        )
    if check_partitions and any(_BAD_NAME_CHARS & set(c) for c in partition_columns):
        raise AnalysisError(
            'Found partition columns having invalid character(s) among " ,;{}()\\n\\t=". Please '
            "change the name to your partition columns, or enable Column Mapping.",
            error_class="DELTA_INVALID_PARTITION_COLUMN_NAME",
            sql_state="42996",
        )


def _as_nullable(t: Any) -> Any:
    kind = t.get("type") if isinstance(t, Mapping) else None
    if kind == "struct":
        fields = [{**f, "nullable": True, "type": _as_nullable(f.get("type"))} for f in t.get("fields", ())]
        return {**t, "fields": fields}
    if kind == "array":
        return {**t, "elementType": _as_nullable(t.get("elementType")), "containsNull": True}
    if kind == "map":
        key, value = _as_nullable(t.get("keyType")), _as_nullable(t.get("valueType"))
        return {**t, "keyType": key, "valueType": value, "valueContainsNull": True}
    return t


def without_nested_not_null(schema: Mapping[str, Any], *, allow: bool = False) -> Mapping[str, Any]:
    """``schema`` with no NOT NULL inside an array's element or a map's key or value, which Delta
    cannot enforce: refused with ``DELTA_NESTED_NOT_NULL_CONSTRAINT``, or, when ``allow``
    (``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled``), dropped."""

    def fix(t: Any, path: list[str]) -> Any:
        kind = t.get("type") if isinstance(t, Mapping) else None
        if kind == "struct":
            fields = []
            for f in t.get("fields", ()):
                inner = [*path, str(f.get("name"))]
                fields.append({**f, "type": fix_nested(f.get("type"), inner)})
            return {**t, "fields": fields}
        return t

    def fix_nested(t: Any, path: list[str]) -> Any:
        kind = t.get("type") if isinstance(t, Mapping) else None
        if kind == "array":
            return {**t, "elementType": checked(t.get("elementType"), path, "element")}
        if kind == "map":
            key = checked(t.get("keyType"), path, "key")
            return {**t, "keyType": key, "valueType": checked(t.get("valueType"), path, "value")}
        return fix(t, path)

    def checked(t: Any, path: list[str], nest: str) -> Any:
        loose = _as_nullable(t)
        if loose != t and not allow:
            raise AnalysisError(
                f"The {nest} type of the field {_pretty(path)} contains a NOT NULL constraint. Delta "
                "does not support NOT NULL constraints nested within arrays or maps. To suppress this "
                "error and silently ignore the specified constraints, set "
                "spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled = true. Parsed "
                f"{nest} type: {json.dumps(t)}",
                error_class="DELTA_NESTED_NOT_NULL_CONSTRAINT",
                sql_state="0AKDC",
            )
        return loose

    return fix(schema, [])  # type: ignore[no-any-return]


#: Field metadata of top-level columns a Delta reader does not show (Delta's
#: removeInternalWriterMetadata): generation expressions and identity settings.
_GENERATED_OR_IDENTITY = frozenset(
    {
        "delta.generationExpression",
        "delta.identity.start",
        "delta.identity.step",
        "delta.identity.highWaterMark",
        "delta.identity.allowExplicitInsert",
    }
)


def reader_schema(schema: Mapping[str, Any]) -> dict:
    """``schema`` as a DataFrame read of the table shows it: without the writer-only metadata of
    generated and identity columns and without type-widening history (removeInternalDeltaMetadata;
    column mapping keys go in the scan). A read's schema written to a new table must not make
    generated or identity columns of it."""
    out: dict = without_type_changes(dict(schema))
    for f in out.get("fields", ()):
        md = f.get("metadata") or {}
        if _GENERATED_OR_IDENTITY & md.keys():
            f["metadata"] = {k: v for k, v in md.items() if k not in _GENERATED_OR_IDENTITY}
    return out
