"""CREATE TABLE ... LIKE: what a new table copies from its source (Delta's ``CREATE TABLE LIKE``).

From a Delta source: the schema (with its column comments, generation expressions, defaults and
identity columns), the partition or clustering columns, the description, the table properties (check
constraints included) and the protocol, so the new table supports the same features; the
statement's own TBLPROPERTIES override. Column mapping is kept as a mode: the new table's columns
get ids and physical names of their own. From a view or another table of the session: its schema
alone. The new table is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from deltamerge.clustering_ddl import logical_names
from deltamerge.errors import UnsupportedOperationError
from deltamerge.log.clustering import is_clustered
from deltamerge.log.column_mapping import without_mapping_metadata
from deltamerge.log.feature_removal import without_type_changes
from deltamerge.log.protocol import (
    CLUSTERING,
    FEATURE_PROPERTY_PREFIX,
    MIN_READER_PROPERTY,
    MIN_WRITER_PROPERTY,
)
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.types import to_spark_schema

__all__ = ["LikeSource", "from_delta", "from_session"]

# Properties a table keeps about itself and its history: the new table sets its own.
_OWN = (
    "delta.columnMapping.maxColumnId",
    "delta.rowTracking.materializedRowIdColumnName",
    "delta.rowTracking.materializedRowCommitVersionColumnName",
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
    "delta.requireCheckpointProtectionBeforeVersion",
)


@dataclass(frozen=True)
class LikeSource:
    """What CREATE TABLE ... LIKE gives the new table."""

    schema: StructType
    partition_by: list[str] = field(default_factory=list)
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    cluster_by: list[str] | None = None  # a clustered source's clustering columns


def from_delta(root: str) -> LikeSource:
    """The copy of the Delta table at ``root`` (its latest version)."""
    snap = DeltaLog.for_table(root).update()
    meta, protocol = snap.metadata, snap.protocol
    props = {k: v for k, v in meta.configuration.items() if k not in _OWN}
    # The source's protocol, as properties the new table's protocol is built from.
    props[MIN_READER_PROPERTY] = str(protocol.min_reader_version)
    props[MIN_WRITER_PROPERTY] = str(protocol.min_writer_version)
    clustered = is_clustered(protocol)
    for feature in sorted({*(protocol.reader_features or ()), *(protocol.writer_features or ())}):
        if not (clustered and feature == CLUSTERING):  # comes with CLUSTER BY, not a property
            props[f"{FEATURE_PROPERTY_PREFIX}{feature}"] = "supported"
    cluster_by = logical_names(protocol, snap.domains, meta.schema) if clustered else None
    # The type changes are the source's history, not the new table's.
    schema = to_spark_schema(without_type_changes(without_mapping_metadata(meta.schema)))
    return LikeSource(schema, list(meta.partition_columns), meta.description, props, cluster_by)


def from_session(spark: SparkSession, name: str, using_delta: bool) -> LikeSource:
    """The copy of a view or a non-Delta table of the session: its schema (Delta: only with
    ``USING delta``, else the new table would take the source's format)."""
    if not using_delta:
        raise UnsupportedOperationError(
            f"CREATE TABLE ... LIKE {name}: {name} is not a Delta table, so the new table would take its "
            "format. Add USING delta to create a Delta table with its schema.",
        )
    return LikeSource(spark.table(name).schema)
