"""``ALTER TABLE ... ADD CONSTRAINT name CHECK (expr)`` and ``... DROP CONSTRAINT [IF EXISTS] name``.

A CHECK constraint is the table property ``delta.constraints.<name>`` (the name lower-cased, the
expression as written); every later write enforces it (``deltamerge.constraints``). Adding one
first checks the existing rows: any row for which the expression is false or NULL fails the
command (``DELTA_NEW_CHECK_CONSTRAINT_VIOLATION``) and nothing is committed. The check reads the
whole table in the committing transaction, so a concurrent write that adds rows conflicts.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import SparkSession

from deltamerge import catalog
from deltamerge.constraints import CONSTRAINT_PREFIX
from deltamerge.errors import AnalysisError, InvariantViolationError
from deltamerge.io import read_snapshot
from deltamerge.log.snapshot import DeltaLog
from deltamerge.predicates import has_aggregate, is_deterministic, parse_expression
from deltamerge.spark.pyspark_errors import quiet_query_context
from deltamerge.spark.session import conf_getter
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction


def _existing(configuration: dict[str, str], name: str) -> str | None:
    """The property key of the constraint ``name`` (names are case-insensitive), if any."""
    want = (CONSTRAINT_PREFIX + name).lower()
    return next((k for k in configuration if k.lower() == want), None)


def add_constraint(spark: SparkSession, path: str, name: str, expression: str, table_name: str) -> None:
    """Add the CHECK constraint ``name`` after checking every row of the table satisfies it."""
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    snap = txn.snapshot
    assert meta is not None and snap is not None
    old = _existing(dict(meta.configuration), name)
    if old is not None:
        raise AnalysisError(
            f"Constraint '{name}' already exists. Please delete the old constraint first.\n"
            f"Old constraint:\n{meta.configuration[old]}",
            error_class="DELTA_CONSTRAINT_ALREADY_EXISTS",
            sql_state="42710",
        )
    node = parse_expression(expression)
    if not is_deterministic(node):
        raise AnalysisError(
            f"Found {expression}. A CHECK constraint cannot use a non deterministic expression.",
            error_class="DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT",
            sql_state="42621",
        )
    if has_aggregate(node):
        raise AnalysisError(
            f"Found {expression} in a CHECK constraint. Aggregate expressions are not allowed in "
            "CHECK constraints.",
            error_class="DELTA_AGGREGATE_IN_CHECK_CONSTRAINT",
            sql_state="42621",
        )
    rows = read_snapshot(spark, snap)
    try:
        with quiet_query_context():  # re-raised as Delta's error below
            checked = rows.selectExpr(f"({expression}) AS __dm_check")
    except Exception as e:  # Spark's analysis error: an unknown column, a bad function call
        raise AnalysisError(
            f"CHECK constraint '{name}' ({expression}) cannot be evaluated on the table: "
            f"{str(e).splitlines()[0]}",
            error_class="DELTA_INVALID_CHECK_CONSTRAINT_REFERENCES",
            sql_state="42621",
        ) from None
    if checked.schema.fields[0].dataType.typeName() != "boolean":
        raise AnalysisError(
            f"CHECK constraint '{name}' ({expression}) should be a boolean expression.",
            error_class="DELTA_NON_BOOLEAN_CHECK_CONSTRAINT",
            sql_state="42621",
        )
    txn.mark_read_whole_table()
    violating = checked.where("__dm_check IS NOT TRUE").count()
    if violating:
        raise InvariantViolationError(
            f"{violating} rows in {table_name} violate the new CHECK constraint ({expression}). "
            "Fix or delete those rows first, then add the constraint.",
            error_class="DELTA_NEW_CHECK_CONSTRAINT_VIOLATION",
            sql_state="23512",
        )
    key = CONSTRAINT_PREFIX + name.lower()
    txn.update_metadata(replace(meta, configuration={**meta.configuration, key: expression}))
    txn.commit([], Operation("ADD CONSTRAINT", {"name": name, "expr": expression}, {}, changes_data=False))
    catalog.refresh_views(spark, path)


def drop_constraint(spark: SparkSession, path: str, name: str, *, if_exists: bool, table_name: str) -> None:
    """Drop the CHECK constraint ``name`` (``DELTA_CONSTRAINT_DOES_NOT_EXIST`` when there is none,
    unless ``if_exists`` or ``spark.databricks.delta.constraints.assumesDropIfExists.enabled``)."""
    txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
    meta = txn.metadata
    assert meta is not None
    conf = dict(meta.configuration)
    key = _existing(conf, name)
    assumes = "spark.databricks.delta.constraints.assumesDropIfExists.enabled"
    if key is None and not if_exists and str(spark.conf.get(assumes, "false")).lower() != "true":
        raise AnalysisError(
            f"Cannot drop nonexistent constraint {name} from table {table_name}. To avoid throwing an "
            f"error, provide the parameter IF EXISTS or set the SQL session configuration {assumes} to true.",
            error_class="DELTA_CONSTRAINT_DOES_NOT_EXIST",
            sql_state="42704",
        )
    params = {"name": name}
    if key is not None:
        params["expr"] = conf.pop(key)
    txn.update_metadata(replace(meta, configuration=conf))
    txn.commit([], Operation("DROP CONSTRAINT", params, {}, changes_data=False))
    catalog.refresh_views(spark, path)
