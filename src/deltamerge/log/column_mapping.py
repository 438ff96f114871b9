"""Column mapping (protocol.md "Column Mapping"): logical names in the schema, physical names in files.

With ``delta.columnMapping.mode`` ``name`` or ``id`` every struct field, at any depth, carries
``delta.columnMapping.id`` (a table-unique number, the Parquet field id in ``id`` mode) and
``delta.columnMapping.physicalName`` (the column's name in data files, statistics and partition
values). ``delta.columnMapping.maxColumnId`` is the largest id ever handed out.

:func:`assign` is the one place that hands them out: every metadata change of a transaction goes
through it, so a new table, a column added by schema evolution or an append with ``mergeSchema``
gets fresh ids and ``col-<uuid>`` names, and a field that already exists keeps its own (even when
the caller rebuilt the schema without the field metadata). Upgrading a table from ``none`` to
``name`` gives the existing columns their current names as physical names, as Delta does: the
files already hold them.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from deltamerge.errors import InvalidArgumentError, UnsupportedOperationError

MODE = "delta.columnMapping.mode"
MAX_ID = "delta.columnMapping.maxColumnId"
ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
#: The metadata key Spark's Parquet writer and reader take a field id from.
PARQUET_FIELD_ID = "parquet.field.id"
MODES = ("none", "name", "id")
_MAPPING_KEYS = frozenset({ID, PHYSICAL_NAME, "delta.columnMapping.nested.ids", PARQUET_FIELD_ID})


def mode_of(configuration: Mapping[str, str]) -> str:
    """The table's mapping mode: ``none``, ``name`` or ``id`` (DELTA_MODE_NOT_SUPPORTED otherwise)."""
    raw = str(configuration.get(MODE, "none")).strip().lower()
    if raw not in MODES:
        raise InvalidArgumentError(
            f"The column mapping mode `{configuration.get(MODE)}` is not supported. Supported modes are "
            "none, name and id.",
            error_class="DELTA_MODE_NOT_SUPPORTED",
        )
    return raw


def _children(t: Any) -> Iterator[tuple[str | None, Any, Any]]:
    """``(path step, owner dict, key)`` of each nested type of ``t``: struct fields by name, array
    elements and map keys/values by a reserved step (``None`` for a struct field's own step)."""
    if not isinstance(t, dict):
        return
    if t.get("type") == "array":
        yield "[element]", t, "elementType"
    elif t.get("type") == "map":
        yield "[key]", t, "keyType"
        yield "[value]", t, "valueType"


def _fields(struct: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict]]:
    """Every struct field of ``struct`` at any depth (inside arrays and maps too), with its
    lower-cased logical path."""
    for f in struct.get("fields", ()):
        p = (*path, str(f["name"]).lower())
        yield p, f
        yield from _type_fields(f["type"], p)


def field_names(schema: Mapping[str, Any]) -> list[str]:
    """The name of every struct field at any depth (inside arrays and maps too)."""
    return [str(f["name"]) for _, f in _fields(schema)]


def _type_fields(t: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict]]:
    if isinstance(t, dict) and t.get("type") == "struct":
        yield from _fields(t, path)
    for step, owner, key in _children(t):
        yield from _type_fields(owner[key], (*path, step or ""))


def _id(f: Mapping[str, Any]) -> int | None:
    raw = (f.get("metadata") or {}).get(ID)
    try:
        return int(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        return None


def _has_mapping_keys(schema: Mapping[str, Any]) -> bool:
    return any(_MAPPING_KEYS & set(f.get("metadata") or {}) for _, f in _fields(schema))


def is_mapped(schema: Mapping[str, Any]) -> bool:
    """Whether any field of ``schema`` carries a physical name."""
    return any((f.get("metadata") or {}).get(PHYSICAL_NAME) for _, f in _fields(schema))


def assign(
    schema: Mapping[str, Any],
    configuration: Mapping[str, str],
    previous_schema: Mapping[str, Any] | None = None,
    previous_configuration: Mapping[str, str] | None = None,
) -> tuple[dict, dict[str, str]]:
    """``(schema, configuration)`` with every field's id and physical name in place (mode ``name``
    or ``id``); unchanged copies with mode ``none``.

    A field of ``previous_schema`` (same logical path, case-insensitive) keeps its id and physical
    name; a previous field without them (the table had no mapping yet) keeps its name as physical
    name; only new fields get fresh ones. Mode changes other than ``none`` -> ``name`` are refused.
    """
    out_schema = copy.deepcopy(dict(schema))
    out_conf = dict(configuration)
    mode = mode_of(configuration)
    old_mode = mode_of(previous_configuration) if previous_configuration is not None else None
    # none -> name turns mapping on; -> none with the mapping metadata gone is its removal
    # (DROP FEATURE columnMapping, which rewrites every file under the logical names).
    removal = mode == "none" and not _has_mapping_keys(schema)
    if (
        old_mode is not None
        and old_mode != mode
        and not (old_mode == "none" and mode == "name")
        and not removal
    ):
        raise UnsupportedOperationError(
            f"Changing column mapping mode from '{old_mode}' to '{mode}' is not supported. Only "
            "'none' to 'name' is; recreate the table to use another mode.",
        )
    if mode == "none":
        return out_schema, out_conf
    previous: dict[tuple[str, ...], dict] = {}
    if previous_schema is not None:
        previous = dict(_fields(previous_schema))
    known = [i for _, f in _fields(out_schema) if (i := _id(f)) is not None]
    known += [i for f in previous.values() if (i := _id(f)) is not None]
    try:
        top = int((previous_configuration or {}).get(MAX_ID, "0") or 0)
        top = max(top, int(out_conf.get(MAX_ID, "0") or 0), *known, 0)
    except ValueError:
        top = max([0, *known])
    for path, f in _fields(out_schema):
        md = dict(f.get("metadata") or {})
        if _id(f) is not None and md.get(PHYSICAL_NAME):
            continue
        old = previous.get(path)
        old_md = (old.get("metadata") or {}) if old is not None else {}
        if old is not None and _id(old) is not None and old_md.get(PHYSICAL_NAME):
            md[ID], md[PHYSICAL_NAME] = _id(old), old_md[PHYSICAL_NAME]
        else:
            top += 1
            md[ID] = top
            # An existing unmapped column's files hold its name; a new column gets a unique name.
            md[PHYSICAL_NAME] = str(old["name"]) if old is not None else f"col-{uuid.uuid4()}"
        f["metadata"] = md
    out_conf[MAX_ID] = str(top)
    return out_schema, out_conf


def physical_schema(schema: Mapping[str, Any], *, field_ids: bool) -> dict:
    """``schema`` with physical names at every level, the schema of the data files: no metadata but
    the ids as Parquet field ids when ``field_ids``. Fields without a physical name keep theirs."""
    out = copy.deepcopy(dict(schema))
    for _, f in _fields(out):
        md = dict(f.get("metadata") or {})
        if md.get(PHYSICAL_NAME):
            f["name"] = md[PHYSICAL_NAME]
        field_id = _id(f)
        f["metadata"] = {PARQUET_FIELD_ID: field_id} if field_ids and field_id is not None else {}
    return out


def without_mapping_metadata(schema: Mapping[str, Any]) -> dict:
    """``schema`` without the column-mapping keys: what readers show (Delta drops them too)."""
    out = copy.deepcopy(dict(schema))
    for _, f in _fields(out):
        md = f.get("metadata") or {}
        f["metadata"] = {k: v for k, v in md.items() if k not in _MAPPING_KEYS}
    return out


def physical_names(schema: Mapping[str, Any]) -> dict[str, str]:
    """Top-level logical name -> physical name (the name itself without one)."""
    out = {}
    for f in schema.get("fields", ()):
        out[str(f["name"])] = str((f.get("metadata") or {}).get(PHYSICAL_NAME) or f["name"])
    return out


def partition_key(schema: Mapping[str, Any], column: str, mapped: bool) -> str:
    """The key of partition column ``column`` in ``partitionValues``: its physical name when the
    table is mapped, else the column name."""
    if not mapped:
        return column
    names = physical_names(schema)
    if column in names:
        return names[column]
    hits = [p for n, p in names.items() if n.lower() == column.lower()]
    return hits[0] if len(hits) == 1 else column


def _physical_paths(schema: Mapping[str, Any]) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Physical path -> logical path of every struct field (an unmapped field's name is both)."""
    out: dict[tuple[str, ...], tuple[str, ...]] = {}

    def walk(struct: Mapping[str, Any], phys: tuple[str, ...], logical: tuple[str, ...]) -> None:
        for f in struct.get("fields", ()):
            name = str(f["name"])
            p = (*phys, str((f.get("metadata") or {}).get(PHYSICAL_NAME) or name))
            lg = (*logical, name)
            out[p] = lg
            t = f["type"]
            while isinstance(t, dict) and t.get("type") in ("array", "map"):
                t = t.get("elementType") if t.get("type") == "array" else t.get("valueType")
            if isinstance(t, dict) and t.get("type") == "struct":
                walk(t, p, lg)

    walk(schema, (), ())
    return out


def renamed_or_dropped(old_schema: Mapping[str, Any], new_schema: Mapping[str, Any]) -> str | None:
    """``"rename"`` or ``"drop"`` when a column of ``old_schema`` was renamed or dropped on the way to
    ``new_schema`` (compared by physical name, Delta's ``hasNoColumnMappingSchemaChanges``), else None."""
    old, new = _physical_paths(old_schema), _physical_paths(new_schema)
    for phys, logical in old.items():
        now = new.get(phys)
        if now is None:
            return "drop"
        if now[-1] != logical[-1]:
            return "rename"
    return None
