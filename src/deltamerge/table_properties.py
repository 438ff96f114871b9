"""ALTER TABLE ... SET / UNSET TBLPROPERTIES and ALTER TABLE ... CLUSTER BY: one metadata-only
commit each.

Shared by the SQL statements and by ``DeltaTable.upgradeTableProtocol`` / ``addFeatureSupport``,
which Delta runs as ``SET TBLPROPERTIES`` too. Protocol properties (``delta.minReaderVersion``,
``delta.minWriterVersion``, ``delta.feature.<name>``) change the protocol and are not stored; the
transaction's ``update_metadata`` handles them.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from deltamerge import catalog, clustering_ddl
from deltamerge.errors import AnalysisError
from deltamerge.log import clustering, column_mapping, table_config
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter, user_properties
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction


def set_properties(spark: SparkSession, path: str, props: dict[str, str]) -> None:
    """Commit ``SET TBLPROPERTIES`` with ``props`` to the table at ``path``."""
    if any(k.lower().startswith("delta.constraints.") for k in props):
        raise AnalysisError(
            "Please use ALTER TABLE ADD CONSTRAINT to add CHECK constraints: it checks the existing "
            "rows first, which a property change would not.",
            error_class="DELTA_ADD_CONSTRAINTS",
            sql_state="0A000",
        )
    clustering_ddl.check_no_feature_property(props, alter=True)
    props = user_properties(spark, props)
    mode_key = next((k for k in props if k.lower() == column_mapping.MODE.lower()), None)
    if (
        mode_key is not None
        and str(props[mode_key]).strip().lower() == "none"
        and _removes_mapping(spark, path)
    ):
        # Delta's RemoveColumnMappingCommand: every file is rewritten under the logical names
        from deltamerge.feature_drop import remove_column_mapping

        remove_column_mapping(spark, path, drop_property=False)
        props = {k: v for k, v in props.items() if k != mode_key}
        if not props:
            catalog.refresh_views(spark, path)
            return
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    txn.update_metadata(replace(meta, configuration={**meta.configuration, **props}))
    txn.commit([], Operation("SET TBLPROPERTIES", {"properties": props}, {}, changes_data=False))
    catalog.refresh_views(spark, path)


def unset_properties(spark: SparkSession, path: str, keys: list[str], *, if_exists: bool) -> None:
    """Commit ``UNSET TBLPROPERTIES`` of ``keys`` (``DELTA_UNSET_NON_EXISTENT_PROPERTY`` for a key
    the table does not have, unless ``if_exists``)."""
    keys = [table_config.canonical_key(k) for k in keys]  # as Delta normalises them
    if column_mapping.MODE in keys and _removes_mapping(spark, path):
        from deltamerge.feature_drop import remove_column_mapping

        remove_column_mapping(spark, path, drop_property=True)
        keys = [k for k in keys if k != column_mapping.MODE]
        if not keys:
            catalog.refresh_views(spark, path)
            return
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    conf = dict(meta.configuration)
    missing = [k for k in keys if k not in conf]
    if missing and not if_exists:
        raise AnalysisError(
            f"Attempted to unset non-existent property '{missing[0]}' in table {path}",
            error_class="DELTA_UNSET_NON_EXISTENT_PROPERTY",
        )
    for k in keys:
        conf.pop(k, None)
    op = Operation("UNSET TBLPROPERTIES", {"properties": keys, "ifExists": if_exists}, {}, changes_data=False)
    txn.update_metadata(replace(meta, configuration=conf))
    txn.commit([], op)
    catalog.refresh_views(spark, path)


def _removes_mapping(spark: SparkSession, path: str) -> bool:
    """Whether setting the column mapping mode to none (or unsetting it) removes column mapping:
    the table has it and ``spark.databricks.delta.columnMapping.allowRemoval`` (on by default)."""
    allowed = str(conf_getter(spark)("spark.databricks.delta.columnMapping.allowRemoval") or "true")
    current = DeltaLog.for_table(path).update().metadata.configuration
    return allowed.strip().lower() == "true" and column_mapping.mode_of(current) != "none"


def cluster_by(spark: SparkSession, path: str, names: list[list[str]]) -> None:
    """``ALTER TABLE ... CLUSTER BY (names)`` (name parts per column) or, with no names, ``CLUSTER
    BY NONE``. An unpartitioned table that is not clustered becomes clustered; files already
    written keep their layout until OPTIMIZE (FULL) reclusters them."""
    get = conf_getter(spark)
    clustering_ddl.check_count(names, get)
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=get)
    meta, protocol, snapshot = txn.metadata, txn.protocol, txn.snapshot
    assert meta is not None and protocol is not None and snapshot is not None
    was_clustered = clustering.is_clustered(protocol)
    if not names and not was_clustered:
        return  # Delta skips CLUSTER BY NONE on a table that is not clustered
    if meta.partition_columns:
        raise AnalysisError(
            "ALTER TABLE CLUSTER BY cannot be applied to a partitioned table.",
            error_class="DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED",
            sql_state="42000",
        )
    old = clustering_ddl.logical_names(protocol, snapshot.domains, meta.schema)
    domain = clustering_ddl.cluster(txn, names, get)
    new = [clustering_ddl.shown(n) for n in names]
    params = {"oldClusteringColumns": ",".join(old), "newClusteringColumns": ",".join(new)}
    txn.commit([domain], Operation("CLUSTER BY", params, {}, changes_data=False))
    catalog.refresh_views(spark, path)
