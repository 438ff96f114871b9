"""CLUSTER BY: which columns a clustered table (Delta's liquid clustering) is clustered by.

Delta keeps them in the ``delta.clustering`` metadata domain as physical name parts
(``log/clustering.py``); users name them logically (``a``, ``s.b``, ```odd name```). The checks are
Delta's ``ClusteredTableUtils``: at most ``clusteredTable.numClusteringColumnsLimit`` (4) columns,
each existing, not a variant, and among the columns statistics are collected for with a type data
skipping can use (clustering is only worth its cost where files can be skipped). Pure Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from deltamerge.errors import AnalysisError, UnsupportedOperationError
from deltamerge.log import clustering
from deltamerge.log.actions import DomainMetadata
from deltamerge.log.protocol import CLUSTERING, FEATURE_PROPERTY_PREFIX
from deltamerge.spark.types import quote_if_needed
from deltamerge.stats.schema import physical_name, skipping_eligible, stats_columns, uses_column_mapping
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = [
    "check_count",
    "check_matches",
    "check_no_feature_property",
    "cluster",
    "columns_for",
    "logical_names",
    "reject_partitioning",
    "shown",
]  # fmt: skip

LIMIT_KEY = "spark.databricks.delta.clusteredTable.numClusteringColumnsLimit"
#: What a table property asks for to make the table clustered (the transaction turns it into the
#: ``clustering`` writer feature, with ``domainMetadata``).
FEATURE_PROPERTY = {FEATURE_PROPERTY_PREFIX + CLUSTERING: "supported"}


def shown(parts: Sequence[str]) -> str:
    """A column path as Delta prints it (``FieldReference``: odd parts in backticks)."""
    return ".".join(quote_if_needed(p) for p in parts)


def _variant(type_json: Any) -> bool:
    if type_json == "variant":
        return True
    if isinstance(type_json, dict):
        kind = type_json.get("type")
        if kind == "struct":
            return any(_variant(f["type"]) for f in type_json.get("fields", ()))
        if kind == "array":
            return _variant(type_json.get("elementType"))
        if kind == "map":
            return _variant(type_json.get("keyType")) or _variant(type_json.get("valueType"))
    return False


def _type_name(type_json: Any) -> str:
    return type_json if isinstance(type_json, str) else str(type_json.get("type"))


def check_count(names: Sequence[Any], get: Callable[[str], str | None]) -> None:
    """At most ``clusteredTable.numClusteringColumnsLimit`` (4) clustering columns."""
    limit = int(get(LIMIT_KEY) or 4)
    if len(names) > limit:
        raise AnalysisError(
            f"CLUSTER BY supports up to {limit} clustering columns, but the table has {len(names)} "
            "clustering columns. Please remove the extra clustering columns.",
            error_class="DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS",
            sql_state="54000",
        )


def duplicate_columns_error(where: str, names: Sequence[str]) -> None:
    """Delta's ``DELTA_DUPLICATE_COLUMNS_FOUND.<where>`` when a name repeats (case-insensitively, as
    the names resolve): ``CLUSTER_BY`` or ``PARTITION_COLUMNS``."""
    twice = sorted(n for n, k in Counter(n.lower() for n in names).items() if k > 1)
    if twice:
        found = {"CLUSTER_BY": "in CLUSTER BY", "PARTITION_COLUMNS": "in the partition columns"}[where]
        raise AnalysisError(
            f"Found duplicate column(s): {', '.join(f'`{n}`' for n in twice)}. The duplicate was "
            f"found {found}; name each column once.",
            error_class=f"DELTA_DUPLICATE_COLUMNS_FOUND.{where}",
            sql_state="42711",
        )


def columns_for(
    schema: Mapping[str, Any],
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    names: Sequence[Sequence[str]],
    get: Callable[[str], str | None],
) -> list[tuple[str, ...]]:
    """The physical name parts of the clustering columns ``names`` (logical name parts), checked as
    Delta checks CLUSTER BY; raises Delta's errors."""
    check_count(names, get)
    mapping = uses_column_mapping(schema, configuration)
    indexed = {leaf.physical_path for leaf in stats_columns(schema, partition_columns, configuration)}
    physical: list[tuple[str, ...]] = []
    missing: list[str] = []
    unsupported: list[str] = []
    for parts in names:
        fields: Sequence[Mapping[str, Any]] = schema.get("fields", ())
        path: list[str] = []
        type_json: Any = None
        for step in parts:
            found = next((f for f in fields if str(f["name"]).lower() == step.lower()), None)
            if found is None:
                raise AnalysisError(
                    f"Couldn't find clustering column {shown(parts)} in the table's columns: "
                    f"{', '.join(str(f['name']) for f in schema.get('fields', ()))}.",
                    error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA",
                    sql_state="42703",
                )
            type_json = found["type"]
            if _variant(type_json):
                raise AnalysisError(
                    f"CLUSTER BY is not supported because the following column(s): {shown(parts)} : "
                    f"{_type_name(type_json)} don't support data skipping.",
                    error_class="DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED",
                    sql_state="0A000",
                )
            path.append(physical_name(found, mapping))
            fields = type_json.get("fields", ()) if isinstance(type_json, dict) else ()
        if tuple(path) not in indexed or not skipping_eligible(type_json):
            if skipping_eligible(type_json):
                missing.append(shown(parts))
            else:
                unsupported.append(f"{shown(parts)} : {_type_name(type_json)}")
        physical.append(tuple(path))
    duplicate_columns_error("CLUSTER_BY", [shown(parts) for parts in names])
    if unsupported:
        raise AnalysisError(
            f"CLUSTER BY is not supported because the following column(s): {', '.join(unsupported)} "
            "don't support data skipping.",
            error_class="DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED",
            sql_state="0A000",
        )
    if missing:
        raise AnalysisError(
            f"Clustering requires clustering columns to have stats. Couldn't find clustering column(s) "
            f"'{', '.join(missing)}' among the columns statistics are collected for: raise "
            "delta.dataSkippingNumIndexedCols or list them in delta.dataSkippingStatsColumns.",
            error_class="DELTA_CLUSTERING_COLUMN_MISSING_STATS",
            sql_state="22000",
        )
    return physical


def logical_names(protocol: Any, domains: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The clustering columns as users name them (DESCRIBE DETAIL's ``clusteringColumns``); empty
    for a table that is not clustered."""
    stored = clustering.clustering_columns(protocol, domains) or []
    out = []
    for physical in stored:
        logical = clustering.logical_path(schema, physical)
        if logical is not None:
            out.append(shown(logical))
    return out


def cluster(
    txn: OptimisticTransaction, names: Sequence[Sequence[str]], get: Callable[[str], str | None]
) -> DomainMetadata:
    """The clustering domain that makes the table of ``txn`` (its metadata as the commit leaves it)
    clustered by ``names``, checked as :func:`columns_for` checks. A table that is not clustered
    yet gets the feature property, which the transaction turns into the writer features."""
    meta = txn.metadata
    assert meta is not None
    if txn.protocol is None or not clustering.is_clustered(txn.protocol):
        txn.update_metadata(replace(meta, configuration={**meta.configuration, **FEATURE_PROPERTY}))
        meta = txn.metadata
        assert meta is not None
    physical = columns_for(meta.schema, meta.partition_columns, meta.configuration, names, get)
    return clustering.domain_for(physical)


def check_matches(
    protocol: Any, domains: Mapping[str, Any], schema: Mapping[str, Any], names: Sequence[Sequence[str]]
) -> None:
    """An append that names clustering columns must name the table's own
    (``DELTA_CLUSTERING_COLUMNS_MISMATCH``): only CREATE, REPLACE, an overwrite or ALTER TABLE ...
    CLUSTER BY change them."""
    existing = logical_names(protocol, domains, schema)
    given = [shown(n) for n in names]
    if [g.lower() for g in given] != [e.lower() for e in existing]:
        raise AnalysisError(
            "The provided clustering columns do not match the existing table's.\n"
            f"- provided: {','.join(given)}\n- existing: {','.join(existing)}\n"
            "Leave clusterBy out when appending, or change them with ALTER TABLE ... CLUSTER BY.",
            error_class="DELTA_CLUSTERING_COLUMNS_MISMATCH",
            sql_state="42P10",
        )


def reject_partitioning(cluster_by: Sequence[Any] | None, partition_by: Sequence[str]) -> None:
    """Clustering and partitioning exclude each other (``DELTA_CLUSTER_BY_WITH_PARTITIONED_BY``)."""
    if cluster_by is not None and partition_by:
        raise AnalysisError(
            "Clustering and partitioning cannot both be specified. Please remove partitionedBy if you "
            "want to create a Delta table with clustering.",
            error_class="DELTA_CLUSTER_BY_WITH_PARTITIONED_BY",
            sql_state="42613",
        )


def check_no_feature_property(properties: Mapping[str, str], *, alter: bool) -> None:
    """A user may not make a table clustered by naming the feature: CLUSTER BY says which columns."""
    key = FEATURE_PROPERTY_PREFIX + CLUSTERING
    if any(k.lower() == key.lower() for k in properties):
        how = "ALTER TABLE SET TBLPROPERTIES" if alter else "TBLPROPERTIES"
        raise UnsupportedOperationError(
            f"Cannot enable clustering table feature using {how}. Please use CREATE OR REPLACE TABLE "
            "CLUSTER BY to create a Delta table with clustering.",
            error_class=(
                "DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"
                if alter
                else "DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"
            ),
            sql_state="42000",
        )
