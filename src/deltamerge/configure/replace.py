"""Partial overwrites for ``format("delta")``: ``replaceWhere`` and dynamic partition overwrite, as
one ``WRITE`` commit run on the MERGE machinery, and ``replaceWhere``'s constraint check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deltamerge.config import Setting, parse_bool
from deltamerge.errors import InvalidArgumentError
from deltamerge.log.paths import table_root

_REPLACE_MARKER = "__dm_replace_marker"
REPLACE_WHERE_CONSTRAINT_CHECK = Setting(
    "spark.databricks.delta.replaceWhere.constraintCheck.enabled", True, parse_bool
)
REPLACE_WHERE_DATA_COLUMNS = Setting(
    "spark.databricks.delta.replaceWhere.dataColumns.enabled", True, parse_bool
)
_MISMATCH_TAG = "DELTAMERGE_REPLACE_WHERE_MISMATCH"


def checked_against(df: Any, predicate: str) -> Any:
    """``df`` with a lazy check that every row satisfies ``predicate`` (Delta's replaceWhere
    constraint check): a row that does not fails the write."""
    from pyspark.sql import functions as F

    message = _MISMATCH_TAG.replace("'", "")
    return df.where(
        F.expr(f"CASE WHEN coalesce(({predicate}), false) THEN true ELSE raise_error('{message}') END")
    )


def raise_if_mismatch(error: BaseException, predicate: str | None) -> None:
    if predicate is not None and _MISMATCH_TAG in str(error):
        raise InvalidArgumentError(
            f"Written data does not conform to partial table overwrite condition or constraint "
            f"'{predicate}'. Write only rows that satisfy the replaceWhere predicate.",
            error_class="DELTA_REPLACE_WHERE_MISMATCH",
        ) from None


def check_replace_where(
    predicate: str, partition_columns: Sequence[str], *, data_columns: bool, rearranging: bool
) -> None:
    """Delta's rules on what a replaceWhere predicate may reference: only partition columns when
    ``replaceWhere.dataColumns.enabled`` is off (``DELTA_NON_PARTITION_COLUMN_REFERENCE``), and no
    conjunct on data columns in a ``dataChange=false`` write
    (``DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET``)."""
    from deltamerge.errors import AnalysisError
    from deltamerge.predicates import (
        column_parts,
        column_references,
        parse_expression,
        split_conjuncts,
        to_sql,
    )

    parts = {p.lower() for p in partition_columns}

    def data_columns_of(node: Any) -> list[str]:
        names = [".".join(column_parts(c)) for c in column_references(node)]
        return [n for n in names if n.lower() not in parts]

    node = parse_expression(predicate)
    if not data_columns and (names := data_columns_of(node)):
        raise AnalysisError(
            f"Predicate references non-partition column '{names[0]}'. Only the partition columns may be "
            f"referenced: [{', '.join(partition_columns)}]",
            error_class="DELTA_NON_PARTITION_COLUMN_REFERENCE",
            sql_state="42P10",
        )
    filters = [to_sql(c) for c in split_conjuncts(node) if data_columns_of(c)]
    if rearranging and filters:
        raise AnalysisError(
            f"'replaceWhere' cannot be used with data filters when 'dataChange' is set to false. "
            f"Filters: {','.join(filters)}",
            error_class="DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET",
            sql_state="42613",
        )


def write_metrics(m: Any) -> dict[str, int]:
    """The ``operationMetrics`` of a partial overwrite's ``WRITE`` commit (Delta's replaceWhere
    metrics), from the metrics of the MERGE it ran as."""
    return {
        "numFiles": m.numTargetFilesAdded,
        "numOutputRows": m.numTargetRowsInserted + m.numTargetRowsCopied,
        "numOutputBytes": m.numTargetBytesAdded,
        "numRemovedFiles": m.numTargetFilesRemoved,
        "numRemovedBytes": m.numTargetBytesRemoved,
        "numDeletedRows": m.numTargetRowsDeleted,
        "numCopiedRows": m.numTargetRowsCopied,
        "numAddedChangeFiles": m.numTargetChangeFilesAdded,
        "numDeletionVectorsAdded": m.numTargetDeletionVectorsAdded,
        "numDeletionVectorsRemoved": m.numTargetDeletionVectorsRemoved,
    }


def quoted(parts: Sequence[str]) -> str:
    """A dotted name of backtick-quoted parts (``a.b`` -> ```a`.`b```)."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def replace_rows(
    df: Any,
    path: str,
    partition_by: Sequence[str],
    merge_schema: bool,
    *,
    predicate: str | None,
    options: Mapping[str, str] | None = None,
) -> int | None:
    """Overwrite the rows matching ``predicate`` (replaceWhere), or the partitions present in ``df``
    (dynamic partition overwrite, ``predicate=None``), with ``df``, in one ``WRITE`` commit.

    Runs as one MERGE: the source is ``df`` plus one marker row; ``ON marker AND <rows to replace>``
    deletes the replaced rows (data skipping applies to the predicate; deletion vectors and change
    data files as the table is configured), ``WHEN NOT MATCHED AND NOT marker`` inserts ``df``.
    """
    from pyspark.sql import functions as F

    from deltamerge import catalog
    from deltamerge.io import _align, _check_names, partitioning_mismatch, snapshot_for
    from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
    from deltamerge.merge.command import run_merge
    from deltamerge.predicates import parse_expression, rewrite_columns, to_sql
    from deltamerge.spark.session import setting
    from deltamerge.spark.types import to_spark_schema
    from deltamerge.txn.idempotency import data_change_false_error, rearranges_only
    from deltamerge.txn.operations import Operation

    spark = df.sparkSession
    root = table_root(path)
    snap = snapshot_for(root)
    meta = snap.metadata
    parts = list(meta.partition_columns)
    if partition_by and [p.lower() for p in partition_by] != [p.lower() for p in parts]:
        raise partitioning_mismatch(partition_by, parts, overwrite=True)
    if predicate is None and not parts:
        # Dynamic partition overwrite of an unpartitioned table replaces everything (as Delta).
        from deltamerge.io import write

        return write(df, root, "overwrite", merge_schema=merge_schema, options=options)
    _check_names(df.schema)
    rearranging = rearranges_only(options)
    data_columns = bool(setting(spark, REPLACE_WHERE_DATA_COLUMNS))
    if predicate is not None:
        check_replace_where(predicate, parts, data_columns=data_columns, rearranging=rearranging)
    table_schema = to_spark_schema(meta.schema_string)
    data, final = _align(df, table_schema, merge_schema=merge_schema, overwrite=True)
    new_columns = [f.name for f in final.fields[len(table_schema.fields) :]]
    if new_columns and rearranging:
        raise data_change_false_error("Change the Delta table schema")
    # Without data columns Delta checks the written files' partitions, whatever constraintCheck says.
    if predicate is not None and (setting(spark, REPLACE_WHERE_CONSTRAINT_CHECK) or not data_columns):
        data = checked_against(data, predicate)
    marker = _REPLACE_MARKER
    target, source = "__dm_t", "__dm_s"
    if predicate is not None:
        # The replaced rows: target rows matching the predicate (names qualified to the target).
        pred = rewrite_columns(parse_expression(predicate), lambda p: parse_expression(quoted([target, *p])))
        trigger = spark.range(1).select(
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in final.fields], F.lit(True).alias(marker)
        )
        condition = f"{source}.`{marker}` AND ({to_sql(pred)})"
    else:
        # The replaced partitions: one marker row per distinct partition tuple of the new data.
        trigger = data.select(*[F.col(quoted([p])) for p in parts]).distinct()
        trigger = trigger.select(
            *[
                (F.col(quoted([f.name])) if f.name in parts else F.lit(None).cast(f.dataType)).alias(f.name)
                for f in final.fields
            ],
            F.lit(True).alias(marker),
        )
        keys = " AND ".join(f"{quoted([target, p])} <=> {quoted([source, p])}" for p in parts)
        condition = f"{source}.`{marker}` AND {keys}"
    merge_source = data.withColumn(marker, F.lit(False)).unionByName(trigger).alias(source)
    insert = MergeClause(
        ClauseKind.NOT_MATCHED,
        ActionType.INSERT,
        parse_expression(f"NOT {source}.`{marker}`"),
        tuple(Assignment((f.name,), parse_expression(quoted([source, f.name]))) for f in final.fields),
    )
    delete = MergeClause(ClauseKind.MATCHED, ActionType.DELETE, None, ())
    spec = MergeSpec(
        source=merge_source,
        condition=parse_expression(condition),
        clauses=(delete, insert),
        target_alias=target,
        source_alias=source,
        schema_evolution=bool(new_columns),
    )
    params: dict[str, Any] = {"mode": "Overwrite", "partitionBy": parts}
    if predicate is not None:
        params["predicate"] = [predicate]
    else:
        params["dynamicPartitionOverwrite"] = "true"

    def operation(_spec: MergeSpec, m: Any) -> Operation:
        return Operation("WRITE", params, write_metrics(m))

    try:
        run_merge(spark, root, spec, operation=operation, write_options=options)
    except Exception as e:
        raise_if_mismatch(e, predicate)
        raise
    catalog.refresh_views(spark, root)
    from deltamerge.log.snapshot import DeltaLog

    return DeltaLog.for_table(root).update().version
