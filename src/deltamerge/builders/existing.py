"""CREATE TABLE over a table that exists already (not as a registered name): Delta's
``verifyTableMetadata``. What the statement specifies must match the table: the schema when
columns are given (then the partitioning and the clustering columns too, even when not given),
and the properties when some are given. A match changes nothing; a mismatch names the difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from deltamerge.clustering_ddl import logical_names, shown
from deltamerge.errors import AnalysisError
from deltamerge.log import char_varchar
from deltamerge.log.protocol import FEATURE_PROPERTY_PREFIX, MIN_READER_PROPERTY, MIN_WRITER_PROPERTY
from deltamerge.log.snapshot import Snapshot

__all__ = ["verify"]

# Field metadata the table keeps for itself: never part of what a CREATE specifies.
_INTERNAL = ("delta.columnMapping.", "delta.identity.highWaterMark", "EXISTS_DEFAULT")


def _user_metadata(field: Mapping[str, Any]) -> dict[str, Any]:
    meta = field.get("metadata") or {}
    return {k: v for k, v in meta.items() if not k.startswith(_INTERNAL)}


def _plain_type(t: Any) -> Any:
    """A type with the internal metadata of nested fields removed."""
    if not isinstance(t, dict):
        return t
    kind = t.get("type")
    if kind == "struct":
        fields = [
            {**f, "type": _plain_type(f["type"]), "metadata": _user_metadata(f)} for f in t.get("fields", ())
        ]
        return {**t, "fields": fields}
    if kind == "array":
        return {**t, "elementType": _plain_type(t["elementType"])}
    if kind == "map":
        return {**t, "keyType": _plain_type(t["keyType"]), "valueType": _plain_type(t["valueType"])}
    return t


def _differences(given: Mapping[str, Any], table: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    ours = {str(f["name"]): f for f in given.get("fields", ())}
    theirs = {str(f["name"]): f for f in table.get("fields", ())}
    missing = [prefix + n for n in theirs if n not in ours]
    extra = [prefix + n for n in ours if n not in theirs]
    if missing:
        out.append(f"Specified schema is missing field(s): {', '.join(missing)}")
    if extra:
        out.append(f"Specified schema has additional field(s): {', '.join(extra)}")
    for name, f in ours.items():
        g = theirs.get(name)
        if g is None:
            continue
        path = prefix + name
        ft, gt = f["type"], g["type"]
        if isinstance(ft, dict) and isinstance(gt, dict) and ft.get("type") == gt.get("type") == "struct":
            out += _differences(ft, gt, path + ".")
        elif _plain_type(ft) != _plain_type(gt):
            out.append(f"Specified type for {path} is different from existing schema")
        if bool(f.get("nullable", True)) != bool(g.get("nullable", True)):
            out.append(f"Specified nullability for {path} is different from existing schema")
        if _user_metadata(f) != _user_metadata(g):
            out.append(f"Specified metadata for field {path} is different from existing schema")
    return out


def _mismatch(
    what: str, path: str, given: str, table: str, error_class: str, extra: str = ""
) -> AnalysisError:
    return AnalysisError(
        f"The specified {what} does not match the existing {what} at {path}.\n\n== Specified ==\n{given}\n\n"
        f"== Existing ==\n{table}\n{extra}\nSpecify what the table has, or leave it out (CREATE TABLE "
        "IF NOT EXISTS), or replace the table (CREATE OR REPLACE TABLE).",
        error_class=error_class,
        sql_state="42KD7",
    )


def verify(
    snapshot: Snapshot,
    path: str,
    schema_json: str | None,
    partition_by: Sequence[str],
    cluster_by: Sequence[Sequence[str]] | None,
    properties: Mapping[str, str],
) -> None:
    """Raise Delta's error when the CREATE's ``schema_json`` (None: no columns given), partitioning,
    clustering or ``properties`` differ from the existing table's."""
    meta = snapshot.metadata
    if schema_json is not None:
        given = char_varchar.to_delta(json.loads(schema_json))
        diffs = _differences(given, meta.schema)
        if diffs:
            raise _mismatch(
                "schema",
                path,
                json.dumps(given),
                meta.schema_string,
                "DELTA_CREATE_TABLE_SCHEME_MISMATCH",
                "\n== Differences ==\n" + "\n".join(f"- {d}" for d in diffs) + "\n",
            )
        if list(partition_by) != list(meta.partition_columns):
            raise _mismatch(
                "partitioning",
                path,
                ", ".join(partition_by),
                ", ".join(meta.partition_columns),
                "DELTA_CREATE_TABLE_WITH_DIFFERENT_PARTITIONING",
            )
        existing = logical_names(snapshot.protocol, snapshot.domains, meta.schema)
        wanted = [shown(c) for c in cluster_by] if cluster_by is not None else []
        if [w.lower() for w in wanted] != [e.lower() for e in existing]:
            raise _mismatch(
                "clustering columns",
                path,
                ", ".join(wanted),
                ", ".join(existing),
                "DELTA_CREATE_TABLE_WITH_DIFFERENT_CLUSTERING",
            )
    if properties:
        protocol_keys = (MIN_READER_PROPERTY.lower(), MIN_WRITER_PROPERTY.lower())

        def kept(props: Mapping[str, str]) -> dict[str, str]:
            return {
                k: v
                for k, v in props.items()
                if not k.lower().startswith(FEATURE_PROPERTY_PREFIX)
                and k.lower() not in protocol_keys
                and k != "delta.columnMapping.maxColumnId"
            }

        if kept(properties) != kept(meta.configuration):
            raise _mismatch(
                "properties",
                path,
                json.dumps(kept(properties), sort_keys=True),
                json.dumps(kept(meta.configuration), sort_keys=True),
                "DELTA_CREATE_TABLE_WITH_DIFFERENT_PROPERTY",
            )
