"""Clustered tables (the ``clustering`` writer feature, Delta's liquid clustering).

The clustering columns live in the metadata domain ``delta.clustering`` (physical names under
column mapping; delta-spark writes each as a list of name parts, the protocol's example as plain
strings: both are read). deltamerge writes into clustered tables without clustering: new files have
no ``clusteringProvider`` and count as unclustered, which the protocol allows, and the statistics it
writes cover the clustering columns as Delta's do (Delta requires them within the indexed columns).
It never rewrites files a clustering implementation produced except for a row change (MERGE,
UPDATE, DELETE); OPTIMIZE compacts unclustered files only (``builders/compaction.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from deltamerge.log.actions import DomainMetadata, Protocol
from deltamerge.log.protocol import CLUSTERING, writer_features

DOMAIN = "delta.clustering"
_PHYSICAL = "delta.columnMapping.physicalName"


def is_clustered(protocol: Protocol) -> bool:
    """The protocol lists ``clustering``: the table is a clustered table."""
    return CLUSTERING in writer_features(protocol)


def clustering_columns(
    protocol: Protocol, domains: Mapping[str, DomainMetadata]
) -> list[tuple[str, ...]] | None:
    """The clustering columns as stored (physical name parts), or None for a table that is not clustered."""
    if not is_clustered(protocol):
        return None
    found = domains.get(DOMAIN)
    if found is None or found.removed:
        return []
    columns = json.loads(found.configuration or "{}").get("clusteringColumns") or []
    return [(c,) if isinstance(c, str) else tuple(str(p) for p in c) for c in columns]


def logical_path(schema: Mapping[str, Any], physical: Sequence[str]) -> tuple[str, ...] | None:
    """The logical name parts of a stored column path (physical names under column mapping)."""
    fields = schema.get("fields", [])
    out: list[str] = []
    for part in physical:
        match = next(
            (f for f in fields if (f.get("metadata") or {}).get(_PHYSICAL, f.get("name")) == part), None
        )
        if match is None:
            return None
        out.append(str(match["name"]))
        child = match.get("type")
        fields = child.get("fields", []) if isinstance(child, dict) else []
    return tuple(out)


def after_schema_change(
    protocol: Protocol, domains: Mapping[str, DomainMetadata], schema: Mapping[str, Any]
) -> DomainMetadata | None:
    """The clustering domain with the columns ``schema`` no longer has left out (a REPLACE or an
    overwrite of the schema), or None when every clustering column remains."""
    columns = clustering_columns(protocol, domains)
    if not columns:
        return None
    kept = [list(c) for c in columns if logical_path(schema, c) is not None]
    if len(kept) == len(columns):
        return None
    return DomainMetadata(DOMAIN, json.dumps({"clusteringColumns": kept}, separators=(",", ":")))
