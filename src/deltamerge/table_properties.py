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
from deltamerge.log import clustering, table_config
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
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    txn.update_metadata(replace(meta, configuration={**meta.configuration, **props}))
    txn.commit([], Operation("SET TBLPROPERTIES", {"properties": props}, {}, changes_data=False))
    catalog.refresh_views(spark, path)


def unset_properties(spark: SparkSession, path: str, keys: list[str], *, if_exists: bool) -> None:
    """Commit ``UNSET TBLPROPERTIES`` of ``keys`` (``DELTA_UNSET_NON_EXISTENT_PROPERTY`` for a key
    the table does not have, unless ``if_exists``)."""
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    conf = dict(meta.configuration)
    keys = [table_config.canonical_key(k) for k in keys]  # as Delta normalises them
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
