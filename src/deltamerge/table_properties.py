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
from deltamerge.config import parse_bool
from deltamerge.errors import AnalysisError, InvalidArgumentError
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

_BOOLEAN_PROPERTIES = {
    "delta.appendonly",
    "delta.enablechangedatafeed",
    "delta.enabledeletionvectors",
    "delta.enabletypewidening",
    "delta.enableincommittimestamps",
    "delta.enablerowtracking",
}


def check_properties(props: dict[str, str]) -> dict[str, str]:
    """``props`` with boolean Delta properties normalised to ``true`` / ``false``
    (``DELTA_INVALID_CONFIGURATION_VALUE`` for anything else)."""
    out = {}
    for key, value in props.items():
        if key.lower() in _BOOLEAN_PROPERTIES:
            try:
                value = "true" if parse_bool(value) else "false"
            except ValueError:
                raise InvalidArgumentError(
                    f"{value} is not a valid value for {key}: it must be true or false.",
                    error_class="DELTA_INVALID_CONFIGURATION_VALUE",
                ) from None
        out[key] = value
    return out


def set_properties(spark: SparkSession, path: str, props: dict[str, str]) -> None:
    """Commit ``SET TBLPROPERTIES`` with ``props`` to the table at ``path``."""
    if any(k.lower().startswith("delta.constraints.") for k in props):
        raise AnalysisError(
            "Please use ALTER TABLE ADD CONSTRAINT to add CHECK constraints: it checks the existing "
            "rows first, which a property change would not.",
            error_class="DELTA_ADD_CONSTRAINTS",
            sql_state="0A000",
        )
    props = check_properties(props)
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
