"""Which leaves of a Delta schema get statistics, and how they are named in the files."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltamerge.config import TableProperties
from deltamerge.errors import AnalysisError, InvalidArgumentError

INTEGRAL_TYPES = frozenset({"byte", "short", "integer", "long"})
FLOAT_TYPES = frozenset({"float", "double"})
#: Delta types that get min/max statistics (``decimal(p,s)`` is matched by prefix).
MINMAX_TYPES = INTEGRAL_TYPES | FLOAT_TYPES | {"date", "timestamp", "timestamp_ntz", "string"}

_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")


def decimal_scale(type_name: Any) -> int | None:
    """The scale of a ``decimal(p,s)`` type name (``decimal`` alone is ``decimal(10,0)``), else None."""
    if not isinstance(type_name, str):
        return None
    if type_name == "decimal":
        return 0
    m = _DECIMAL_RE.match(type_name)
    return int(m.group(2)) if m else None


def physical_name(field_json: Mapping[str, Any], column_mapping: bool) -> str:
    """The name a field has in data files and stats: its physical name under column mapping."""
    if column_mapping:
        name = (field_json.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if name:
            return str(name)
    return str(field_json["name"])


def uses_column_mapping(schema: Mapping[str, Any], configuration: Mapping[str, str] | None = None) -> bool:
    """Whether physical names apply: the mode property when given, else any field carrying one."""
    if configuration is not None and "delta.columnMapping.mode" in configuration:
        return configuration["delta.columnMapping.mode"].strip().lower() not in ("", "none")

    def walk(struct: Mapping[str, Any]) -> bool:
        for f in struct.get("fields", ()):
            if (f.get("metadata") or {}).get("delta.columnMapping.physicalName"):
                return True
            if isinstance(f["type"], dict) and f["type"].get("type") == "struct" and walk(f["type"]):
                return True
        return False

    return configuration is None and walk(schema)


@dataclass(frozen=True)
class StatsLeaf:
    """One leaf column of the table schema: struct fields are recursed, arrays and maps are leaves."""

    logical_path: tuple[str, ...]
    physical_path: tuple[str, ...]
    type: Any  # a primitive type name, or the dict of an array/map type
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)


def _leaves(
    struct: Mapping[str, Any], column_mapping: bool, lpath: tuple[str, ...], ppath: tuple[str, ...]
) -> Iterator[StatsLeaf]:
    for f in struct.get("fields", ()):
        lp = (*lpath, str(f["name"]))
        pp = (*ppath, physical_name(f, column_mapping))
        t = f["type"]
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from _leaves(t, column_mapping, lp, pp)
        else:
            yield StatsLeaf(lp, pp, t, f.get("metadata") or {})


def _split_column_list(text: str) -> list[list[str]]:
    """Parse ``a, b.c, `d.e`.f`` (dataSkippingStatsColumns) into name parts."""
    columns: list[list[str]] = []
    parts: list[str] = []
    cur: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "`" and text[i + 1 : i + 2] == "`":
                cur.append("`")
                i += 1
            elif ch == "`":
                quoted = False
            else:
                cur.append(ch)
        elif ch == "`":
            quoted = True
        elif ch in ".,":
            parts.append("".join(cur).strip())
            cur = []
            if ch == ",":
                columns.append(parts)
                parts = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur).strip())
    columns.append(parts)
    return [c for c in columns if any(c)]


def stats_columns(
    schema: Mapping[str, Any], partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> list[StatsLeaf]:
    """The leaf columns statistics are collected for, in schema order (partition columns excluded)."""
    column_mapping = uses_column_mapping(schema, configuration)
    parts = {p.lower() for p in partition_columns}
    data_schema = {"fields": [f for f in schema.get("fields", ()) if str(f["name"]).lower() not in parts]}
    leaves = list(_leaves(data_schema, column_mapping, (), ()))
    listed = TableProperties.STATS_COLUMNS.get(configuration).strip()
    if listed:
        wanted = [tuple(p.lower() for p in c) for c in _split_column_list(listed)]
        return [
            leaf
            for leaf in leaves
            if any(tuple(n.lower() for n in leaf.logical_path[: len(w)]) == w for w in wanted)
        ]
    n = TableProperties.NUM_INDEXED_COLS.get(configuration)
    return leaves if n < 0 else leaves[:n]


_SKIPPING_TYPES = MINMAX_TYPES  # decimals too (matched by prefix)


def _quoted(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part) else "`" + part.replace("`", "``") + "`"


def skipping_eligible(type_json: Any) -> bool:
    """A type data skipping keeps min/max values for (Delta's ``SkippingEligibleDataType``)."""
    return isinstance(type_json, str) and (
        type_json in _SKIPPING_TYPES or decimal_scale(type_json) is not None
    )


def check_stats_columns(
    schema: Mapping[str, Any], partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> None:
    """Delta's ``validateDeltaStatsColumns`` for ``delta.dataSkippingStatsColumns``: every listed
    column exists (``DELTA_COLUMN_NOT_FOUND_IN_SCHEMA``), is not a partition column, has a type
    statistics can skip on (a struct's leaves always pass), and is listed once."""
    listed = TableProperties.STATS_COLUMNS.get(configuration).strip()
    if not listed:
        return
    parts = {p.lower() for p in partition_columns}
    data = [f for f in schema.get("fields", ()) if str(f["name"]).lower() not in parts]
    seen: list[str] = []

    def visit(name: str, type_json: Any, inside_struct: bool) -> None:
        if isinstance(type_json, dict) and type_json.get("type") == "struct":
            for f in type_json.get("fields", ()):
                visit(f"{name}.{_quoted(str(f['name']))}", f["type"], True)
        elif skipping_eligible(type_json) or inside_struct:  # a struct's other leaves only lack min/max
            seen.append(name)
        else:
            shown = type_json if isinstance(type_json, str) else type_json.get("type")
            raise InvalidArgumentError(
                f"Data skipping is not supported for column '{name}' of type {shown}: remove it from "
                "delta.dataSkippingStatsColumns.",
                error_class="DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE",
                sql_state="0AKDC",
            )

    for path in _split_column_list(listed):
        shown = ".".join(_quoted(p) for p in path)
        if len(path) == 1 and path[0].lower() in parts:
            raise InvalidArgumentError(
                f"Data skipping is not supported for partition column '{shown}': partition values "
                "already skip files. Remove it from delta.dataSkippingStatsColumns.",
                error_class="DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN",
                sql_state="0AKDC",
            )
        fields: Sequence[Mapping[str, Any]] = data
        type_json: Any = None
        for i, step in enumerate(path):
            found = next((f for f in fields if str(f["name"]).lower() == step.lower()), None)
            if found is None:
                raise AnalysisError(
                    f"Couldn't find column {shown} of delta.dataSkippingStatsColumns in the table's "
                    "data columns: list existing columns only.",
                    error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA",
                    sql_state="42703",
                )
            type_json = found["type"]
            if i < len(path) - 1:
                if not (isinstance(type_json, dict) and type_json.get("type") == "struct"):
                    raise AnalysisError(
                        f"Expected {'.'.join(_quoted(p) for p in path[: i + 1])} to be a struct in "
                        f"delta.dataSkippingStatsColumns ({shown}), but it is not: only struct fields "
                        "can be named with dots.",
                        error_class="DELTA_COLUMN_PATH_NOT_NESTED",
                        sql_state="42704",
                    )
                fields = type_json.get("fields", ())
        visit(shown, type_json, len(path) > 1)
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise InvalidArgumentError(
            f"Duplicated data skipping columns found: {', '.join(repeated)}. List each column once in "
            "delta.dataSkippingStatsColumns.",
            error_class="DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS",
            sql_state="42701",
        )
