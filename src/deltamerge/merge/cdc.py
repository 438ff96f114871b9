"""Change Data Feed output of a MERGE (Delta's CDC packing in ``MergeOutputGeneration``).

Every joined row becomes up to three output rows in one pass (an ``explode`` of a small array):
the data row (no change type), and the change rows — ``insert`` (new values), ``update_preimage``
(old target values) + ``update_postimage`` (new values), or ``delete`` (old values). Copied rows
produce data only. Data rows and change rows are then written by one Spark write, partitioned into
data files and ``_change_data`` files, so the join runs once.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from deltamerge.identity import fill_named, identity_columns
from deltamerge.merge.analysis import ResolvedMerge, tcol
from deltamerge.merge.clauses import ActionType
from deltamerge.merge.output import ACTION, COPY, output_columns, sql_col
from deltamerge.spark.scan import FILE_COL, ROW_INDEX_COL

CHANGE_TYPE = "_change_type"


def _old_values(rm: ResolvedMerge) -> list[Column]:
    # ``keep_values`` casts evolved structs by field name (a plain cast would go by position).
    if rm.keep_values:
        return [sql_col(v) for v in rm.keep_values]
    n_target = len(rm.target_schema.fields)
    cols = []
    for j, field in enumerate(rm.final_schema.fields):
        if j < n_target:
            old = F.col(tcol(j))
            if rm.target_schema.fields[j].dataType != field.dataType:
                old = old.cast(field.dataType)
        else:
            old = F.lit(None).cast(field.dataType)
        cols.append(old)
    return cols


def explode_changes(
    joined_with_action: DataFrame,
    rm: ResolvedMerge,
    *,
    dedupe_deletes: bool,
    copies: bool = True,
    identity: StructType | None = None,
    tracking: tuple[str, str] | None = None,
) -> DataFrame:
    """Joined rows (with the action code) -> data rows and change rows, told apart by ``_change_type``
    (NULL in data rows; no table column has that name when the feed is on).

    ``dedupe_deletes``: when duplicate matches are allowed (one unconditional DELETE), a target
    row joined with several source rows yields one ``delete`` record (keyed by file and row index,
    which the joined rows must then carry).
    """
    names = [f.name for f in rm.final_schema.fields]
    new_cols = output_columns(rm, has_target=True, copies=copies, tracking=tracking)
    new = [c.alias(f"v{j}") for j, c in enumerate(new_cols)]
    # The new values are projected below the explode, once: a new row's identity value must be the
    # same in its data row and its change row, and Spark refuses a (correlated) scalar subquery from
    # an UPDATE SET value inside the generator.
    joined_with_action = joined_with_action.select("*", *[c.alias(f"__dm_new{j}") for j, c in enumerate(new)])
    new = [F.col(f"__dm_new{j}").alias(f"v{j}") for j in range(len(new))]
    idents = identity_columns(identity) if identity is not None else []
    if idents:
        joined_with_action = fill_named(joined_with_action, {f"__dm_new{j}": ident for j, ident in idents})
    # Row tracking's materialized values go into data rows only (after the table's columns).
    hidden = list(tracking or ())
    if hidden:
        names += hidden
        new, new_tracking = new[: -len(hidden)], new[-len(hidden) :]
    none = [F.lit(None).cast("long").alias(f"v{len(new) + k}") for k in range(len(hidden))]
    old = [c.alias(f"v{j}") for j, c in enumerate(_old_values(rm))] + none
    action = F.col(ACTION)
    updates = [c.index for c in rm.clauses if c.action is ActionType.UPDATE]
    deletes = [c.index for c in rm.clauses if c.action is ActionType.DELETE]
    inserts = [c.index for c in rm.clauses if c.action is ActionType.INSERT]
    is_update = action.isin(updates) if updates else F.lit(False)
    is_delete = action.isin(deletes) if deletes else F.lit(False)
    is_insert = action.isin(inserts) if inserts else F.lit(False)
    written = is_update | is_insert | (action == F.lit(COPY))

    def entry(cond: Column, kind: str | None, values: list[Column]) -> Column:
        return F.when(cond, F.struct(F.lit(kind).cast("string").alias("k"), *values))

    entries = F.array(
        entry(written, None, new + (new_tracking if hidden else [])),
        entry(is_update, "update_preimage", old),
        entry(is_update, "update_postimage", new + none),
        entry(is_insert, "insert", new + none),
        entry(is_delete, "delete", old),
    )
    keys = [F.col(FILE_COL), F.col(ROW_INDEX_COL)] if dedupe_deletes else []
    # Explode, then drop the empty entries: filtering the array instead would put the values in a
    # higher-order function, where Spark refuses a scalar subquery (one in an UPDATE SET value).
    exploded = joined_with_action.select(*keys, F.explode(entries).alias("e")).where(F.col("e").isNotNull())
    # The change type goes last, where Delta's files hold it (NULL in data rows).
    out = exploded.select(
        *keys, *[F.col(f"e.v{j}").alias(n) for j, n in enumerate(names)], F.col("e.k").alias(CHANGE_TYPE)
    )
    if dedupe_deletes:
        rank = F.row_number().over(Window.partitionBy(FILE_COL, ROW_INDEX_COL, CHANGE_TYPE).orderBy(F.lit(1)))
        out = out.withColumn("__dm_rank", rank).where(
            F.col(CHANGE_TYPE).isNull()
            | (F.col(CHANGE_TYPE) != F.lit("delete"))
            | F.col(FILE_COL).isNull()
            | (F.col("__dm_rank") == 1)
        )
        out = out.drop("__dm_rank", FILE_COL, ROW_INDEX_COL)
    return out


def write_with_changes(ctx, joined_with_action: DataFrame, *, dedupe_deletes: bool, copies: bool = True):  # type: ignore[no-untyped-def]
    """Write data files and change-data files in one job over the joined rows (Delta's one write
    partitioned by ``__is_cdc``): no second evaluation of the join, nothing persisted."""
    changes = explode_changes(
        joined_with_action,
        ctx.rm,
        dedupe_deletes=dedupe_deletes,
        copies=copies,
        identity=ctx.identity_schema(),
        tracking=ctx.row_tracking,
    )
    return ctx.write_with_changes(changes, CHANGE_TYPE)
