"""Clustered tables (the ``clustering`` writer feature, Delta's liquid clustering).

The clustering columns live in the metadata domain ``delta.clustering`` (physical names under
column mapping; delta-spark writes each as a list of name parts, the protocol's example as plain
strings: both are read). deltamerge writes into clustered tables without clustering: new files have
no ``clusteringProvider`` and count as unclustered, which the protocol allows, and the statistics it
writes cover the clustering columns as Delta's do (Delta requires them within the indexed columns).
MERGE, UPDATE and DELETE write unclustered files; OPTIMIZE clusters them (``builders/compaction.py``).
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


def domain_for(columns: Sequence[Sequence[str]]) -> DomainMetadata:
    """The clustering domain naming ``columns`` (physical name parts), in delta-spark's form."""
    payload = {"clusteringColumns": [list(c) for c in columns]}
    return DomainMetadata(DOMAIN, json.dumps(payload, separators=(",", ":")))


def after_schema_change(
    protocol: Protocol, domains: Mapping[str, DomainMetadata], schema: Mapping[str, Any]
) -> DomainMetadata | None:
    """The clustering domain with the columns ``schema`` no longer has left out (a REPLACE or an
    overwrite of the schema), or None when every clustering column remains."""
    columns = clustering_columns(protocol, domains)
    if not columns:
        return None
    kept = [c for c in columns if logical_path(schema, c) is not None]
    return None if len(kept) == len(columns) else domain_for(kept)


def for_restore(
    now_domains: Mapping[str, DomainMetadata],
    old_protocol: Protocol,
    old_domains: Mapping[str, DomainMetadata],
) -> DomainMetadata | None:
    """RESTORE: the clustering columns of the restored version (none if it had none) when the table
    has a clustering domain now, as Delta's ``handleDomainMetadataForRestoreTable``."""
    now = now_domains.get(DOMAIN)
    if now is None or now.removed:
        return None
    return domain_for(clustering_columns(old_protocol, old_domains) or [])


def for_clone(
    source_protocol: Protocol,
    source_domains: Mapping[str, DomainMetadata],
    target_domains: Mapping[str, DomainMetadata],
) -> DomainMetadata | None:
    """CLONE: the source's clustering columns; a replaced target's own ones removed otherwise."""
    columns = clustering_columns(source_protocol, source_domains)
    if columns is not None and DOMAIN in source_domains and not source_domains[DOMAIN].removed:
        return domain_for(columns)
    old = target_domains.get(DOMAIN)
    if old is not None and not old.removed:
        return DomainMetadata(DOMAIN, old.configuration, removed=True)
    return None
