"""ALTER TABLE ... SET / UNSET TBLPROPERTIES: one metadata-only commit each.

Shared by the SQL statements and by ``DeltaTable.upgradeTableProtocol`` / ``addFeatureSupport``,
which Delta runs as ``SET TBLPROPERTIES`` too. Protocol properties (``delta.minReaderVersion``,
``delta.minWriterVersion``, ``delta.feature.<name>``) change the protocol and are not stored; the
transaction's ``update_metadata`` handles them.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from deltamerge import catalog
from deltamerge.errors import AnalysisError
from deltamerge.log import table_config
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
