"""DELETE and UPDATE (Delta's ``DeleteCommand`` / ``UpdateCommand``) on the MERGE machinery.

Both run as a MERGE of a one-row, zero-column source matched on the statement's condition (every
column of the condition is then a target column, so all of it feeds data skipping):

* ``DELETE WHERE c``  ->  ``MERGE ... ON c WHEN MATCHED THEN DELETE``
* ``UPDATE SET ... WHERE c``  ->  ``MERGE ... ON c WHEN MATCHED THEN UPDATE SET ...``

so deletion vectors, the change data feed, data skipping, conflict detection and the executors
are MERGE's. The commit carries Delta's ``DELETE`` / ``UPDATE`` operation, parameters and metric key
sets instead of MERGE's, and is skipped when nothing changed (Delta's ``commitIfNeeded``).

A DELETE without condition, or whose condition only reads partition columns, removes whole files
without reading them (Delta's metadata-only delete); the deleted row count then comes from the
files' statistics.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType
from sqlglot import exp

from deltamerge import catalog
from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import AnalysisError, AppendOnlyTableError
from deltamerge.log.actions import AddFile
from deltamerge.log.paths import table_root as root_of
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.merge.clauses import DV_SETTING, ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
from deltamerge.merge.metrics import MergeMetrics
from deltamerge.predicates import (
    column_parts,
    column_references,
    has_aggregate,
    has_subquery,
    has_window,
    is_deterministic,
    rewrite_columns,
    to_sql,
)
from deltamerge.spark.arg_checks import check_condition_arg, check_set_arg
from deltamerge.spark.session import (
    case_sensitive,
    conf_getter,
    internal_plan,
    local_frame,
    session_time_zone,
    setting,
)
from deltamerge.spark.types import to_spark_schema
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = [
    "DELETE_METRIC_KEYS",
    "RESULT_SCHEMA",
    "UPDATE_METRIC_KEYS",
    "check_condition_arg",
    "check_set_arg",
    "delete",
    "matching_partitions",
    "predicate_parameter",
    "update",
]

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESULT_SCHEMA = StructType([StructField("num_affected_rows", LongType(), False)])

# DeltaOperationMetrics.DELETE / .UPDATE: the exact key sets Delta writes.
DELETE_METRIC_KEYS = (
    "numAddedFiles",
    "numRemovedFiles",
    "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved",
    "numDeletionVectorsUpdated",
    "numAddedChangeFiles",
    "numDeletedRows",
    "numCopiedRows",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
    "numRemovedBytes",
    "numAddedBytes",
)
UPDATE_METRIC_KEYS = (
    "numAddedFiles",
    "numRemovedFiles",
    "numAddedChangeFiles",
    "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved",
    "numDeletionVectorsUpdated",
    "numUpdatedRows",
    "numCopiedRows",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
    "numRemovedBytes",
    "numAddedBytes",
)


# --- helpers ----------------------------------------------------------------------------------------


def predicate_parameter(condition: exp.Expression | None) -> list[str]:
    """``operationParameters.predicate`` as Delta renders it: ``["(id > 5)"]`` (``[]`` when absent).

    Spark's ``Expression.sql`` parenthesizes every binary operator; the sqlglot tree is rendered the
    same way.
    """
    if condition is None:
        return []
    tree = condition.copy()
    while isinstance(tree, exp.Paren):
        tree = tree.this

    def unquote(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Identifier) and node.args.get("quoted") and _PLAIN.fullmatch(node.name):
            return exp.to_identifier(node.name, quoted=False)
        return node

    tree = tree.transform(unquote)
    binaries = [n for n in tree.find_all(exp.Binary, bfs=False) if not isinstance(n, exp.Dot)]
    for node in reversed(binaries):  # innermost first
        if node is tree:
            tree = exp.Paren(this=node)
        elif not isinstance(node.parent, exp.Paren):
            paren = exp.Paren()
            node.replace(paren)
            paren.set("this", node)
    return [to_sql(tree)]


def _check_dml_condition(node: exp.Expression, operation: str) -> None:
    shown = to_sql(node)
    if not is_deterministic(node):
        raise AnalysisError(
            f"Non-deterministic functions are not supported in the {operation} condition "
            f"(condition = {shown}).",
            error_class="DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
            sql_state="0AKDC",
        )
    if has_aggregate(node) or has_window(node):
        raise AnalysisError(
            f"Aggregate and window functions are not supported in the {operation} condition "
            f"(condition = {shown}).",
            error_class="DELTA_AGGREGATION_NOT_SUPPORTED",
            sql_state="42903",
        )
    if has_subquery(node):
        raise AnalysisError(
            f"Subqueries are not supported in the {operation} condition (condition = {shown}). "
            "Rewrite it as a MERGE with the subquery as the source.",
            error_class="DELTA_UNSUPPORTED_SUBQUERY",
            sql_state="0AKDC",
        )


def _check_append_only(snapshot: Snapshot, operation: str) -> None:
    if TableProperties.APPEND_ONLY.get(snapshot.metadata.configuration):
        raise AppendOnlyTableError(
            f"This table is configured to only allow appends (delta.appendOnly=true), so {operation} is not "
            "allowed. To allow it, set 'delta.appendOnly' to 'false' with ALTER TABLE ... SET TBLPROPERTIES."
        )


def _one_row_source(spark: SparkSession) -> DataFrame:
    # One row and no column: every column the condition names resolves to the target.
    return spark.range(1).select()


def _eq(a: str, b: str, sensitive: bool) -> bool:
    return a == b if sensitive else a.lower() == b.lower()


def _unqualified(node: exp.Expression, alias: str | None, sensitive: bool) -> exp.Expression:
    """``node`` with the target alias dropped from its column references."""

    def strip(parts: list[str]) -> exp.Expression:
        if len(parts) >= 2 and alias is not None and _eq(parts[0], alias, sensitive):
            parts = parts[1:]
        out: exp.Expression = exp.column(parts[0], quoted=True)
        for p in parts[1:]:
            out = exp.Dot(this=out, expression=exp.to_identifier(p, quoted=True))
        return out

    return rewrite_columns(node, strip)


def _named(
    cond: exp.Expression | None, assigns: Sequence[Assignment], full_name: Sequence[str], alias: str | None
) -> tuple[exp.Expression | None, tuple[Assignment, ...]]:
    """``cond`` and ``assigns`` with references qualified by the target's full name
    (``default.people.v``) qualified by its alias instead, as Spark resolves a catalog table's."""
    forms = [tuple(full_name[i:]) for i in range(len(full_name) - 1)]  # two parts or more
    if not forms or alias is None:
        return cond, tuple(assigns)

    def strip(parts: Sequence[str]) -> list[str]:
        for form in forms:
            if len(parts) > len(form) and all(
                a.lower() == b.lower() for a, b in zip(parts, form, strict=False)
            ):
                return [alias, *parts[len(form) :]]
        return list(parts)

    def column(parts: list[str]) -> exp.Expression:
        head, *rest = strip(parts)
        out: exp.Expression = exp.column(head, quoted=True)
        for p in rest:
            out = exp.Dot(this=out, expression=exp.to_identifier(p, quoted=True))
        return out

    def rewritten(node: exp.Expression) -> exp.Expression:
        return rewrite_columns(node, column)

    named = tuple(Assignment(tuple(strip(a.key)), rewritten(a.value)) for a in assigns)
    return (None if cond is None else rewritten(cond)), named


def _partition_only(
    node: exp.Expression, partition_columns: Sequence[str], alias: str | None, sensitive: bool
) -> bool:
    """True when every column ``node`` reads is a partition column (Delta's metadata predicate)."""
    if not is_deterministic(node) or has_subquery(node) or has_aggregate(node):
        return False
    for col in column_references(node):
        parts = column_parts(col)
        if len(parts) >= 2 and alias is not None and _eq(parts[0], alias, sensitive):
            parts = parts[1:]
        if len(parts) != 1 or not any(_eq(parts[0], p, sensitive) for p in partition_columns):
            return False
    return True


def _partition_key(f: AddFile, partition_columns: Sequence[str]) -> tuple[str | None, ...]:
    lower = {k.lower(): v for k, v in f.partition_values.items()}
    return tuple(None if lower.get(c.lower()) == "" else lower.get(c.lower()) for c in partition_columns)


def matching_partitions(
    spark: SparkSession,
    snapshot: Snapshot,
    condition: exp.Expression | None,
    alias: str | None = None,
    files: Sequence[AddFile] | None = None,
) -> Callable[[AddFile], bool]:
    """Exact file filter for a condition over partition columns only, evaluated by Spark.

    The distinct partition values of ``files`` (default: the snapshot's) become a small typed
    DataFrame (aliased ``alias`` so qualified names resolve); the partitions where ``condition`` is
    TRUE are collected. Unpartitioned tables have one partition, the empty tuple.
    """
    if condition is None:
        return lambda f: True
    from deltamerge.log import column_mapping

    meta = snapshot.metadata
    mapped = column_mapping.is_mapped(meta.schema)
    parts = tuple(meta.partition_columns)
    pkeys = tuple(column_mapping.partition_key(meta.schema, p, mapped) for p in parts)  # physical names
    files = snapshot.files if files is None else files
    keys = sorted(
        {_partition_key(f, pkeys) for f in files}, key=lambda k: tuple((v is None, v or "") for v in k)
    )
    if not keys:
        return lambda f: False
    schema = to_spark_schema(snapshot.metadata.schema_string)
    types = {fld.name.lower(): fld for fld in schema.fields}
    from deltamerge.spark.scan import partition_value_column

    if parts:
        raw = [f"__dm_pv{i}" for i in range(len(parts))]
        df = local_frame(spark, keys, StructType([StructField(n, StringType(), True) for n in raw]))
        typed = [
            partition_value_column(
                F.col(n), types[p.lower()].dataType.typeName(), types[p.lower()].dataType
            ).alias(types[p.lower()].name)
            for n, p in zip(raw, parts, strict=True)
        ]
        df = df.select(*typed, *[F.col(n) for n in raw])
    else:
        raw = []
        df = spark.range(1).select()
    if alias:
        df = df.alias(alias)
    hits = df.where(F.expr(to_sql(condition))).select(*[F.col(n) for n in raw]).collect()
    keep = {tuple(r) for r in hits}
    return lambda f: _partition_key(f, pkeys) in keep


def _finish(spark: SparkSession, table_root: str, affected: int) -> DataFrame:
    catalog.refresh_views(spark, table_root)
    return local_frame(spark, [(int(affected),)], RESULT_SCHEMA)


class _NothingToCommit(Exception):
    """Raised by the operation factory when the statement changed nothing (no commit, as Delta)."""


def _dv_metrics(m: MergeMetrics) -> dict[str, int]:
    # DeltaOperationMetrics.DELETION_VECTORS: added/removed include the updated ones.
    return {
        "numDeletionVectorsAdded": m.numTargetDeletionVectorsAdded + m.numTargetDeletionVectorsUpdated,
        "numDeletionVectorsRemoved": m.numTargetDeletionVectorsRemoved + m.numTargetDeletionVectorsUpdated,
        "numDeletionVectorsUpdated": m.numTargetDeletionVectorsUpdated,
    }


def _rewrite_metrics(m: MergeMetrics, start: float) -> dict[str, int]:
    """The operation metrics DELETE and UPDATE share (each orders its own by its key list)."""
    return {
        "numAddedFiles": m.numTargetFilesAdded,
        "numRemovedFiles": m.numTargetFilesRemoved,
        "numAddedChangeFiles": m.numTargetChangeFilesAdded,
        **_dv_metrics(m),
        "numCopiedRows": m.numTargetRowsCopied,
        "executionTimeMs": max(1, int((time.monotonic() - start) * 1000)),
        "scanTimeMs": m.scanTimeMs,
        "rewriteTimeMs": m.rewriteTimeMs,
        "numRemovedBytes": m.numTargetBytesRemoved,
        "numAddedBytes": m.numTargetBytesAdded,
    }


def _changed_nothing(m: MergeMetrics) -> bool:
    return (
        m.numTargetRowsDeleted == 0
        and m.numTargetRowsUpdated == 0
        and m.numTargetFilesAdded == 0
        and m.numTargetFilesRemoved == 0
        and m.numTargetChangeFilesAdded == 0
        and m.numTargetDeletionVectorsAdded
        + m.numTargetDeletionVectorsUpdated
        + m.numTargetDeletionVectorsRemoved
        == 0
    )


def _run_as_merge(
    spark: SparkSession,
    table_root: str,
    spec: MergeSpec,
    build: Callable[[MergeMetrics], Operation],
) -> MergeMetrics | None:
    """Run ``spec`` through MERGE, committing ``build(metrics)``; None when nothing was committed."""
    from deltamerge.merge.command import run_merge

    seen: list[MergeMetrics] = []
    skip_empty = bool(setting(spark, SessionConf.SKIP_EMPTY_COMMITS))

    def factory(_spec: MergeSpec, metrics: MergeMetrics) -> Operation:
        seen.append(metrics)
        if skip_empty and _changed_nothing(metrics):
            raise _NothingToCommit()
        return build(metrics)

    try:
        run_merge(spark, table_root, spec, operation=factory)
    except _NothingToCommit:
        return None
    return seen[0] if seen else None


def _resolve_condition(condition: exp.Expression | str | Column | None) -> exp.Expression | None:
    if condition is None or isinstance(condition, exp.Expression):
        return condition
    from deltamerge.merge.builder import parse_condition

    return parse_condition(condition)


# --- DELETE -----------------------------------------------------------------------------------------


@internal_plan
def delete(
    spark: SparkSession,
    table_root: str,
    condition: exp.Expression | str | Column | None = None,
    *,
    target_alias: str | None = None,
    target_name: Sequence[str] = (),
) -> DataFrame:
    """Delete the rows matching ``condition`` (all rows when None).

    Returns one row ``num_affected_rows`` (Delta's DELETE output: ``-1`` when whole files were removed
    and their row counts are unknown). ``target_name``: the full name of a table opened by name.
    """
    table_root = root_of(table_root)  # a file: URI or a relative path: the root Spark's scans report
    cond, _ = _named(_resolve_condition(condition), (), target_name, target_alias)
    log = DeltaLog.for_table(table_root)
    snapshot = log.update()
    _check_append_only(snapshot, "DELETE")
    if cond is not None:
        _check_dml_condition(cond, "DELETE")
    sensitive = case_sensitive(spark)
    parts = tuple(snapshot.metadata.partition_columns)
    if cond is None or _partition_only(cond, parts, target_alias, sensitive):
        return _metadata_only_delete(spark, table_root, cond, target_alias)

    start = time.monotonic()
    spec = MergeSpec(
        source=_one_row_source(spark),
        condition=cond,
        clauses=(MergeClause(ClauseKind.MATCHED, ActionType.DELETE, None, ()),),
        target_alias=target_alias,
        extras={DV_SETTING: SessionConf.DELETE_DV_PERSISTENT},
    )
    predicate = predicate_parameter(cond)

    def build(m: MergeMetrics) -> Operation:
        metrics = {**_rewrite_metrics(m, start), "numDeletedRows": m.numTargetRowsDeleted}
        return Operation("DELETE", {"predicate": predicate}, _delete_metrics(metrics))

    m = _run_as_merge(spark, table_root, spec, build)
    return _finish(spark, table_root, 0 if m is None else m.numTargetRowsDeleted)


def _delete_metrics(values: Mapping[str, int]) -> dict[str, int]:
    out = {k: int(values.get(k, 0)) for k in DELETE_METRIC_KEYS}
    if out["numDeletedRows"] == 0 and out["numRemovedFiles"] != 0:
        # Delta: row-level metrics are unknown when whole files were dropped without stats.
        for k in ("numDeletedRows", "numCopiedRows", "numAddedFiles"):
            del out[k]
    return out


def _metadata_only_delete(
    spark: SparkSession, table_root: str, cond: exp.Expression | None, alias: str | None
) -> DataFrame:
    from deltamerge.skipping import file_filter
    from deltamerge.spark.write import now_ms

    start = time.monotonic()
    txn = OptimisticTransaction(DeltaLog.for_table(table_root), conf=conf_getter(spark))
    snapshot = txn.snapshot
    assert snapshot is not None
    if cond is None:
        files = list(snapshot.files)
        txn.mark_read_whole_table()
    else:
        keep = matching_partitions(spark, snapshot, cond, alias)
        files = [f for f in snapshot.files if keep(f)]
        sensitive = case_sensitive(spark)
        plain = _unqualified(cond, alias, sensitive)
        may_match = file_filter(
            plain,
            snapshot.metadata.schema,
            snapshot.metadata.partition_columns,
            case_sensitive=sensitive,
            session_tz=session_time_zone(spark),
        )
        txn.add_read_predicate(may_match, to_sql(plain))
    txn.add_read_files(files)
    scan_ms = max(1, int((time.monotonic() - start) * 1000)) if files else 0
    counts = [f.num_logical_records for f in files]
    deleted = sum(c for c in counts if c is not None) if files and all(c is not None for c in counts) else 0
    if not files and setting(spark, SessionConf.SKIP_EMPTY_COMMITS):
        return _finish(spark, table_root, 0)
    ts = now_ms()
    metrics = {
        "numAddedFiles": 0,
        "numRemovedFiles": len(files),
        "numDeletionVectorsAdded": 0,
        "numDeletionVectorsRemoved": sum(1 for f in files if f.deletion_vector is not None),
        "numDeletionVectorsUpdated": 0,
        "numAddedChangeFiles": 0,
        "numDeletedRows": deleted,
        "numCopiedRows": 0,
        "executionTimeMs": max(1, int((time.monotonic() - start) * 1000)),
        "scanTimeMs": scan_ms,
        "rewriteTimeMs": 0,
        "numRemovedBytes": sum(f.size for f in files),
        "numAddedBytes": 0,
    }
    metrics_out = _delete_metrics(metrics) if setting(spark, SessionConf.HISTORY_METRICS) else {}
    txn.commit(
        [f.remove(ts) for f in files],
        Operation("DELETE", {"predicate": predicate_parameter(cond)}, metrics_out),
    )
    return _finish(spark, table_root, -1 if files and deleted == 0 else deleted)


# --- UPDATE -----------------------------------------------------------------------------------------


def _check_keys(
    snapshot: Snapshot, keys: Sequence[tuple[str, ...]], alias: str | None, sensitive: bool
) -> None:
    names = [f.name for f in to_spark_schema(snapshot.metadata.schema_string).fields]
    for key in keys:
        parts = list(key)
        if len(parts) >= 2 and alias is not None and _eq(parts[0], alias, sensitive):
            parts = parts[1:]
        if not any(_eq(parts[0], n, sensitive) for n in names):
            shown = ", ".join(f"`{n}`" for n in names)
            raise AnalysisError(
                f"A column, variable, or function parameter with name `{'.'.join(key)}` cannot be resolved. "
                f"Did you mean one of the following? [{shown}].",
                error_class="UNRESOLVED_COLUMN.WITH_SUGGESTION",
                sql_state="42703",
            )


@internal_plan
def update(
    spark: SparkSession,
    table_root: str,
    condition: exp.Expression | str | Column | None,
    assignments: Sequence[Assignment] | Mapping[str, str | Column],
    *,
    target_alias: str | None = None,
    target_name: Sequence[str] = (),
) -> DataFrame:
    """Set columns of the rows matching ``condition`` (all rows when None).

    ``assignments``: parsed ``Assignment``s or a delta-spark ``set`` dict (column name -> SQL text or
    Column). Returns one row ``num_affected_rows``. ``target_name``: as ``delete``'s.
    """
    if isinstance(assignments, Mapping):
        from deltamerge.merge.builder import assignments as to_assignments

        assigns = to_assignments(dict(assignments))
    else:
        assigns = tuple(assignments)
    table_root = root_of(table_root)
    cond, assigns = _named(_resolve_condition(condition), assigns, target_name, target_alias)
    log = DeltaLog.for_table(table_root)
    snapshot = log.update()
    _check_append_only(snapshot, "UPDATE")
    if cond is not None:
        _check_dml_condition(cond, "UPDATE")
    _check_keys(snapshot, [a.key for a in assigns], target_alias, case_sensitive(spark))
    if not assigns:
        return _finish(spark, table_root, 0)

    start = time.monotonic()
    spec = MergeSpec(
        source=_one_row_source(spark),
        condition=cond if cond is not None else exp.true(),
        clauses=(MergeClause(ClauseKind.MATCHED, ActionType.UPDATE, None, assigns),),
        target_alias=target_alias,
        extras={DV_SETTING: SessionConf.UPDATE_DV_PERSISTENT},
    )
    predicate = predicate_parameter(cond)

    def build(m: MergeMetrics) -> Operation:
        values = {**_rewrite_metrics(m, start), "numUpdatedRows": m.numTargetRowsUpdated}
        return Operation("UPDATE", {"predicate": predicate}, {k: int(values[k]) for k in UPDATE_METRIC_KEYS})

    m = _run_as_merge(spark, table_root, spec, build)
    return _finish(spark, table_root, 0 if m is None else m.numTargetRowsUpdated)
