"""Delta's ``MergeIntoCommand``: one transaction, the executor, the commit with metrics.

``run_merge`` analyses the spec against the transaction's snapshot, plans, runs the chosen
executor, and commits removes + adds (+ a metadata change when the schema evolves) as one
``MERGE`` commit. Files written by a merge that does not commit are deleted again when the commit
certainly did not happen (analysis errors, multiple matches, conflicts).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from deltamerge.config import SessionConf, TableProperties
from deltamerge.constraints import check_dependent_types
from deltamerge.errors import (
    ConcurrentModificationError,
    DeltaMergeError,
    MaterializedSourceLostError,
    MetadataChangedError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.log.actions import Action, AddCDCFile, AddFile, RemoveFile
from deltamerge.log.paths import table_root as root_of
from deltamerge.log.protocol import type_widening_enabled
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.merge.analysis import ResolvedMerge, analyze, display_name
from deltamerge.merge.clauses import (
    DV_SETTING,
    WIDENING_AT_ANALYSIS,
    ActionType,
    ClauseKind,
    MergeSpec,
    check_grammar,
)
from deltamerge.merge.context import MergeContext, renamed_source, timed_ms
from deltamerge.merge.metrics import MergeMetrics
from deltamerge.merge.planner import MergePlan, plan_merge
from deltamerge.merge.pruning import PruneKey, SourceKeySummary
from deltamerge.predicates import to_sql
from deltamerge.spark.analysis_errors import in_user_names
from deltamerge.spark.session import (
    case_sensitive,
    conf_getter,
    idempotent_skip,
    internal_plan,
    local_frame,
    quick_replies,
    setting,
    settings_snapshot,
    temporary_settings,
)
from deltamerge.spark.types import schema_string
from deltamerge.spark.write import file_writer_options, optimized_write_bin_size
from deltamerge.txn import row_tracking
from deltamerge.txn.idempotency import rearranges_only, writer_option
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

logger = logging.getLogger(__name__)

RESULT_SCHEMA = StructType(
    [
        StructField("num_affected_rows", LongType(), False),
        StructField("num_updated_rows", LongType(), False),
        StructField("num_deleted_rows", LongType(), False),
        StructField("num_inserted_rows", LongType(), False),
    ]
)


def result_frame(spark: SparkSession, metrics: MergeMetrics) -> DataFrame:
    """The one-row result DataFrame of ``execute()`` and SQL ``MERGE``."""
    return local_frame(spark, [metrics.result_row()], RESULT_SCHEMA)


def operation_parameters(spec: MergeSpec) -> dict[str, str]:
    """``operationParameters`` of a MERGE commit, as Delta writes them (JSON-encoded strings)."""

    def clauses(kind: ClauseKind) -> str:
        return json.dumps([c.describe() for c in spec.of_kind(kind)], separators=(",", ":"))

    return {
        "predicate": json.dumps([to_sql(spec.condition)]),
        "matchedPredicates": clauses(ClauseKind.MATCHED),
        "notMatchedPredicates": clauses(ClauseKind.NOT_MATCHED),
        "notMatchedBySourcePredicates": clauses(ClauseKind.NOT_MATCHED_BY_SOURCE),
    }


def _evolve_metadata(txn: OptimisticTransaction, rm: ResolvedMerge) -> None:
    """Commit the post-evolution schema in the merge's own commit (the txn upgrades the protocol).

    Widened column types are recorded in ``delta.typeChanges`` as Delta does when the table has
    type widening enabled (with ``tableVersion`` for tables on the preview feature).
    """
    if not rm.schema_changed:
        return
    from deltamerge.merge.evolution import add_type_change_metadata
    from deltamerge.spark.types import to_spark_schema

    metadata = txn.metadata
    assert metadata is not None  # prepare() checked that the table exists
    schema = rm.final_schema
    if TableProperties.ENABLE_TYPE_WIDENING.get(metadata.configuration):
        features = set(txn.protocol.writer_features or ()) if txn.protocol is not None else set()
        version = txn.read_version + 1 if "typeWidening-preview" in features else None
        current = to_spark_schema(metadata.schema_string)
        schema = add_type_change_metadata(schema, current, table_version=version)
    txn.update_metadata(replace(metadata, schema_string=schema_string(schema)))


def _record_identity_marks(txn: OptimisticTransaction, ctx: MergeContext) -> None:
    """Identity columns' high-water marks past the values this merge wrote, in its own commit."""
    if not ctx.identity_seen:
        return
    from deltamerge.identity import with_high_water_marks
    from deltamerge.spark.types import to_spark_schema

    metadata = txn.metadata
    assert metadata is not None  # prepare() checked that the table exists
    marked = with_high_water_marks(to_spark_schema(metadata.schema_string), ctx.identity_seen)
    if marked is not None:
        txn.update_metadata(replace(metadata, schema_string=schema_string(marked)))


def _dv_enabled(spark: SparkSession, spec: MergeSpec, configuration: dict[str, str]) -> bool:
    conf = spec.extras.get(DV_SETTING, SessionConf.DV_PERSISTENT)
    return bool(setting(spark, conf)) and TableProperties.ENABLE_DVS.get(configuration)


def prepare(
    spark: SparkSession, table_root: str, spec: MergeSpec
) -> tuple[OptimisticTransaction, ResolvedMerge, MergePlan]:
    """Open the transaction, analyse and plan (no Spark job runs here)."""
    quick_replies(spark)
    check_grammar(spec.clauses)
    log = DeltaLog.for_table(table_root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    from deltamerge.builders import auto_compaction  # Delta's AutoCompact hook, as for any write

    auto_compaction.register(spark, txn)
    snapshot = _snapshot(txn, table_root)
    _check_widening_unchanged(spec, snapshot, table_root)
    from deltamerge.spark.types import to_spark_schema

    evolve = spec.schema_evolution or bool(setting(spark, SessionConf.SCHEMA_AUTO_MERGE))
    target_schema = to_spark_schema(snapshot.metadata.schema_string)
    try:
        rm = analyze(
            spec,
            target_schema,
            case_sensitive=case_sensitive(spark),
            evolve=evolve,
            table_configuration=dict(snapshot.metadata.configuration),
        )
    except Exception as e:  # Spark typing a clause expression over internal names
        translated = in_user_names(e, _user_name_of(target_schema, lambda: spec.source.schema, spec))
        if translated is not None:
            raise translated from e
        raise
    check_dependent_types(rm.target_schema, rm.final_schema, snapshot.metadata.configuration)
    plan = plan_merge(spark, rm, snapshot, _dv_enabled(spark, spec, dict(snapshot.metadata.configuration)))
    return txn, rm, plan


def _check_widening_unchanged(spec: MergeSpec, snapshot: Snapshot, table_root: str) -> None:
    """Delta's ``TypeWidening.ensureFeatureConsistentlyEnabled``: a builder made from a table
    object while type widening was off (on) does not run once it is on (off)."""
    before = spec.extras.get(WIDENING_AT_ANALYSIS)
    if before is None:
        return
    now = type_widening_enabled(snapshot.protocol, snapshot.metadata.configuration)
    if bool(before) != now:
        raise MetadataChangedError(
            f"The metadata of the Delta table {table_root} has been changed by a concurrent update: type "
            f"widening was {'enabled' if before else 'disabled'} when the DeltaTable object was created and "
            f"is {'enabled' if now else 'disabled'} now. Create the DeltaTable again (DeltaTable.forPath) "
            "and retry the MERGE."
        )


def _snapshot(txn: OptimisticTransaction, table_root: str) -> Snapshot:
    if txn.snapshot is None:
        raise TableNotFoundError(
            f"{table_root} is not a Delta table. Create it first (e.g. deltamerge.write)."
        )
    return txn.snapshot


@internal_plan
def explain_merge(spark: SparkSession, table_root: str, spec: MergeSpec) -> str:
    """The plan of a MERGE, without running it."""
    table_root = root_of(table_root)
    txn, _rm, plan = prepare(spark, table_root, spec)
    return plan.describe(_snapshot(txn, table_root).files)


OperationFactory = Callable[[MergeSpec, MergeMetrics], Operation]


@internal_plan
def run_merge(
    spark: SparkSession,
    table_root: str,
    spec: MergeSpec,
    *,
    operation: OperationFactory | None = None,
    write_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Run one MERGE and return its one-row result DataFrame.

    ``operation`` lets UPDATE and DELETE, which run on this machinery (a one-row source matched on
    their condition), commit under their own operation name, parameters and metrics.
    ``write_options`` are a DataFrame write's (``replaceWhere``, dynamic partition overwrite):
    ``txnAppId``/``txnVersion`` and ``userMetadata``.

    A source the merge materialized is dropped when it ends. When an executor holding part of it
    is lost, the whole merge runs again with more replicas of the source (Delta's retry on
    ``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``), at most ``merge.materializeSource.maxAttempts`` times.
    """
    # A ``file:`` URI or a relative path names the root Spark's scans report as an absolute path.
    table_root = root_of(table_root)
    with settings_snapshot(spark):
        return _attempts(spark, table_root, spec, operation, write_options)


def _attempts(
    spark: SparkSession,
    table_root: str,
    spec: MergeSpec,
    operation: OperationFactory | None,
    write_options: Mapping[str, str] | None,
) -> DataFrame:
    from deltamerge.merge.source import SourceBlocksLost, release

    attempts = max(1, int(setting(spark, SessionConf.MATERIALIZE_MAX_ATTEMPTS)))
    for attempt in range(1, attempts + 1):
        materialized: list[DataFrame] = []
        try:
            return _run(spark, table_root, spec, operation, write_options, attempt, materialized)
        except SourceBlocksLost as lost:
            if attempt == attempts:
                raise MaterializedSourceLostError(
                    f"Keeping the source of the MERGE statement materialized has failed repeatedly "
                    f"({attempts} attempts lost blocks of it: executors holding them were lost). Nothing "
                    "was committed. Retry once the cluster is stable, or raise "
                    f"{SessionConf.MATERIALIZE_MAX_ATTEMPTS.key}."
                ) from lost.__cause__
            logger.warning(
                "MERGE source blocks lost in attempt %d of %d; running the merge again", attempt, attempts
            )
        finally:
            for df in materialized:
                release(df)
    raise AssertionError("unreachable")


def _run(
    spark: SparkSession,
    table_root: str,
    spec: MergeSpec,
    operation: OperationFactory | None,
    write_options: Mapping[str, str] | None,
    attempt: int,
    materialized: list[DataFrame],
) -> DataFrame:
    """One attempt of ``run_merge``; the sources it materializes go into ``materialized``, which
    the caller releases."""
    start = time.monotonic()
    from deltamerge.merge.current_time import pin_clock
    from deltamerge.merge.source import SourceBlocksLost, blocks_lost

    # now() & co. read once for the whole statement; history keeps the statement as written.
    written = spec
    spec, clock_source = pin_clock(spark, spec, attempt=attempt)
    if clock_source is not None:
        materialized.append(clock_source)
    pin_ms = timed_ms(start)
    txn, rm, plan = prepare(spark, table_root, spec)
    metrics = MergeMetrics(executor=plan.executor, materialize_reason=plan.materialize_reason)
    if idempotent_skip(spark, txn, write_options):
        return result_frame(spark, metrics)
    snapshot = _snapshot(txn, table_root)
    _evolve_metadata(txn, rm)
    rearranging = rearranges_only(write_options)

    all_files = snapshot.files
    metrics.numTargetFilesBeforeSkipping = len(all_files)
    metrics.numTargetBytesBeforeSkipping = sum(f.size for f in all_files)
    metrics.numTargetFilesAfterSkipping = len(plan.candidate_files)
    metrics.numTargetBytesAfterSkipping = sum(f.size for f in plan.candidate_files)
    if snapshot.metadata.partition_columns:
        metrics.numTargetPartitionsAfterSkipping = len(
            {tuple(sorted(f.partition_values.items())) for f in plan.candidate_files}
        )

    # Conflict detection: what this merge read.
    if plan.read_whole_table or plan.may_match is None:
        txn.mark_read_whole_table()
    else:
        txn.add_read_predicate(plan.may_match, plan.skipping_predicate or "true")
    txn.add_read_files(plan.candidate_files)

    source = renamed_source(spec.source if clock_source is None else clock_source)
    if clock_source is not None:
        metrics.materializeSourceTimeMs = pin_ms
    elif plan.materialize:
        m_start = time.monotonic()
        from deltamerge.merge.source import materialize

        source = materialize(source, attempt)
        materialized.append(source)
        metrics.materializeSourceTimeMs = timed_ms(m_start)

    ctx = MergeContext(
        spark=spark,
        txn=txn,
        rm=rm,
        source=source,
        metrics=metrics,
        table_root=table_root,
        partition_columns=tuple(snapshot.metadata.partition_columns),
        configuration=dict(snapshot.metadata.configuration),
        repartition_before_write=bool(setting(spark, SessionConf.REPARTITION_BEFORE_WRITE)),
        optimize_write_bin_size=optimized_write_bin_size(
            spark, snapshot.metadata.configuration, write_options
        ),
        file_options=file_writer_options(write_options),
        # A dataChange=false rewrite has no changes to record.
        cdf_enabled=TableProperties.ENABLE_CDF.get(snapshot.metadata.configuration) and not rearranging,
        tight_bounds=True if "deletionVectors" in (snapshot.protocol.writer_features or ()) else None,
        row_tracking=_row_tracking_columns(snapshot),
    )
    committing = False
    try:
        # The user's source: its schema is known from the analysis (the renamed one's is not).
        with temporary_settings(spark, _wide_plan_settings(spark, snapshot, spec.source)):
            try:
                actions = _execute(ctx, plan)
            except Exception as e:
                _multiple_matches_first(ctx, plan, e)
                raise
        if rearranging:
            actions = _rearranged(actions)
        _check_source_unchanged(spark, metrics)
        metrics.executionTimeMs = timed_ms(start)
        if operation is not None:
            op = operation(written, metrics)
        else:
            op = Operation("MERGE", operation_parameters(written), dict(metrics.to_operation_metrics()))
        if not setting(spark, SessionConf.HISTORY_METRICS):
            op = Operation(op.name, op.parameters, {}, op.changes_data)
        _record_identity_marks(txn, ctx)
        _validate_num_records(spark, rm, actions, op.name)
        committing = True
        user_metadata = writer_option(write_options, "userMetadata")
        txn.commit(actions, op, user_metadata=user_metadata)
    except BaseException as e:
        # Delete our files only when the commit certainly did not happen; after an unknown
        # outcome they stay for vacuum (deleting them could break a commit that landed).
        landed = txn.committed_version is not None  # a failed post-commit hook leaves a landed commit
        if not landed and (not committing or isinstance(e, (ConcurrentModificationError, DeltaMergeError))):
            _discard(table_root, ctx.written_paths)
        if materialized and not landed and blocks_lost(e, materialized):
            raise SourceBlocksLost() from e
        from deltamerge.merge.leaf_casts import translate_runtime_error

        translated = translate_runtime_error(e) or in_user_names(
            e, _user_name_of(rm.target_schema, lambda: rm.source_schema, rm.spec)
        )
        if translated is not None:
            raise translated from e
        raise
    return result_frame(spark, metrics)


def _rearranged(actions: Sequence[Action]) -> list[Action]:
    """A ``dataChange=false`` write's actions: its files marked as not changing data (Delta's
    rearrangeOnly); change data files cannot be part of one."""
    cdc = [a.path for a in actions if isinstance(a, AddCDCFile)]
    if cdc:
        raise DeltaMergeError(
            "Change files found in a dataChange = false transaction. Files: " + ", ".join(cdc),
            error_class="DELTA_UNEXPECTED_CHANGE_FILES_FOUND",
            sql_state="XXKDS",
        )
    return [replace(a, data_change=False) if isinstance(a, (AddFile, RemoveFile)) else a for a in actions]


def _user_name_of(
    target_schema: StructType, source_schema: Callable[[], StructType], spec: MergeSpec
) -> Callable[[str, int], str]:
    """The user's name (``alias.column``) of internal column ``__<side><i>``, for error messages."""

    def name_of(side: str, i: int) -> str:
        schema, alias = (
            (target_schema, spec.target_alias) if side == "t" else (source_schema(), spec.source_alias)
        )
        if i >= len(schema.fields):
            return f"__{side}{i}"
        name = display_name(schema.fields[i].name)
        return f"{alias}.{name}" if alias else name

    return name_of


def _validate_num_records(
    spark: SparkSession, rm: ResolvedMerge, actions: Sequence[Action], operation: str
) -> None:
    """Delta's ``validateNumRecords``: refuse a commit whose row counts the clauses cannot produce
    (a writer bug), or only log it when ``numRecordsValidation.enabled`` is false."""
    from deltamerge.txn.num_records import mismatch

    inserts = bool(rm.of_kind(ClauseKind.NOT_MATCHED))
    deletes = any(c.action is ActionType.DELETE for c in rm.clauses)
    error = mismatch(actions, operation, inserts=inserts, deletes=deletes)
    if error is None:
        return
    if setting(spark, SessionConf.NUM_RECORDS_VALIDATION):
        raise error
    logger.warning("%s", error.message)


#: From this many columns (target and source together) a MERGE's queries run without constraint
#: propagation, unless the session sets it.
WIDE_PLAN_COLUMNS = 100
_CONSTRAINTS = "spark.sql.constraintPropagation.enabled"


def _wide_plan_settings(spark: SparkSession, snapshot: Snapshot, source: DataFrame) -> dict[str, str]:
    """Spark's constraint propagation (inferred filters, PruneFilters) is quadratic in a plan's
    aliases; a MERGE's output has a CASE per column, and on a 500-column table it took 4 of the
    merge's 11 s on this machine (200 columns: 1.4 of 6 s). It only infers extra filters, which
    these plans do not need."""
    if conf_getter(spark)(_CONSTRAINTS) is not None:
        return {}  # the user chose
    if len(snapshot.metadata.schema.get("fields", [])) + len(source.columns) < WIDE_PLAN_COLUMNS:
        return {}
    return {_CONSTRAINTS: "false"}


def _check_source_unchanged(spark: SparkSession, m: MergeMetrics) -> None:
    """Delta's ``checkNonDeterministicSource``: the source read twice gave different row counts
    (only an error under ``merge.failIfSourceChanged``; the numbers stay in the metrics)."""
    second = m.numSourceRowsInSecondScan
    if second >= 0 and second != m.numSourceRows and setting(spark, SessionConf.FAIL_IF_SOURCE_CHANGED):
        raise UnsupportedOperationError(
            "Cannot perform Merge because the source dataset is not deterministic: it gave "
            f"{m.numSourceRows} rows in the first scan and {second} in the second. Make the source "
            "deterministic, or let MERGE materialize it (spark.databricks.delta.merge.materializeSource)."
        )  # Delta raises this one without an error class


def _multiple_matches_first(ctx: MergeContext, plan: MergePlan, error: Exception) -> None:
    """Raise Delta's multiple-match error when ``error`` came from an execution that writes in the
    job that also finds the matches (a value overflowing its column, a constraint) while a target
    row was matched by several source rows: Delta's job 1 reports those before anything is
    written. Only when the source may hold duplicate keys, and not for an analysis error (Delta
    reports those before job 1 runs); any other outcome leaves ``error``."""
    from pyspark.errors import AnalysisException

    from deltamerge.errors import AnalysisError, MultipleSourceRowMatchingTargetRowError
    from deltamerge.merge.classic import find_touched_files

    settled = (MultipleSourceRowMatchingTargetRowError, AnalysisError, AnalysisException)
    if ctx.source_unique is True or plan.executor == "insertOnly" or not plan.candidate_files:
        return
    if isinstance(error, settled):
        return
    try:
        find_touched_files(ctx, plan.candidate_files)
    except MultipleSourceRowMatchingTargetRowError as duplicate:
        raise duplicate from error
    except Exception:
        return


def _execute(ctx: MergeContext, plan: MergePlan) -> list[Action]:
    candidates = _source_key_summary(ctx, plan)
    if plan.executor == "insertOnly":
        from deltamerge.merge.insert_only import write_only_inserts

        return list(write_only_inserts(ctx, filter_matched_rows=True, candidate_files=candidates))
    if plan.deletion_vectors:
        from deltamerge.merge.dv import run_with_deletion_vectors

        return run_with_deletion_vectors(ctx, candidates)
    from deltamerge.merge.classic import run_classic

    return run_classic(ctx, candidates)


def _source_key_summary(ctx: MergeContext, plan: MergePlan) -> tuple[AddFile, ...]:
    """One job over the source's join keys (``merge/pruning.py``): the candidates after dynamic
    file pruning, the source's row count, and whether job 1 can skip its per-row aggregation.

    ``ctx.source_unique``: True/False when the summary checked uniqueness; None when the broadcast
    variant can apply, which checks the matches itself (``merge/broadcast.py``), so the summary
    skips its costliest part, an aggregation per key.

    No pruning with NOT MATCHED BY SOURCE clauses: they act on target rows no source row matches.
    Metrics and the transaction's read set keep the statically skipped candidates.
    """
    from deltamerge.merge import broadcast, uniform_upsert
    from deltamerge.merge.insert_only import semi_join_possible
    from deltamerge.merge.pruning import MIN_FILES, pruning_key, summarize_source_keys
    from deltamerge.spark.session import job_phase

    candidates = plan.candidate_files
    prune = (
        len(candidates) >= MIN_FILES
        and not ctx.rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE)
        and bool(setting(ctx.spark, SessionConf.DYNAMIC_FILE_PRUNING))
    )
    insert_only = plan.executor == "insertOnly"
    if insert_only and not plan.materialize:
        # Delta reads this source once; unchecked counts as not repeatable (no semi-join either).
        ctx.source_repeatable = prune and _repeatable(ctx)
        prune = ctx.source_repeatable
    matching = not insert_only and bool(candidates)
    if matching and not plan.materialize and setting(ctx.spark, SessionConf.FAIL_IF_SOURCE_CHANGED):
        # Delta's check that the source gave as many rows to job 2 as to job 1 needs two counted
        # reads; the broadcast variants read an unmaterialized source once after the summary.
        ctx.source_repeatable = _repeatable(ctx)
    # The broadcast variant checks the matches itself (DV mode: job 1's row positions; copy-on-write:
    # the rows its write reads and joins), so the per-key aggregation is not needed up front.
    later = matching and (broadcast.eligible(ctx) or uniform_upsert.eligible(ctx))
    if not prune and not matching:
        return candidates
    with job_phase(ctx.spark, "MERGE operation - summarizing source keys"):
        summary = None
        key_ranges = pruning_key(ctx.rm, candidates) if prune else None
        if prune and (later or not matching):  # no uniqueness check needed up front
            summary = _summary_from_source_statistics(ctx, candidates, key_ranges)
        if summary is None:
            check = matching and not later
            summary = summarize_source_keys(
                ctx.rm,
                ctx.source,
                candidates,
                prune=prune,
                check_unique=check,
                # The insert-only semi-join (merge/insert_only.py) needs the count to size its broadcast.
                count_rows=later or (insert_only and semi_join_possible(ctx, candidates)),
                key_ranges=key_ranges,
            )
        if summary.note is not None and logger.isEnabledFor(logging.INFO):
            # The metrics keep Delta's static skipping counts; what the source keys pruned is logged.
            logger.info(
                "MERGE dynamic file pruning: %s",
                summary.note,
                extra={
                    "files_after_pruning": len(summary.files),
                    "bytes_after_pruning": sum(f.size for f in summary.files),
                },
            )
        ctx.source_rows = summary.rows
        ctx.min_expected_matches = summary.min_expected_matches
        ctx.source_unique = None if later else summary.unique
        if later and not broadcast.fits(ctx):
            # Too large to broadcast after all: the Delta-shaped path wants the answer up front.
            checked = summarize_source_keys(ctx.rm, ctx.source, summary.files, prune=False, check_unique=True)
            ctx.source_unique = checked.unique
    return summary.files


def _repeatable(ctx: MergeContext) -> bool:
    """Whether reading the source again gives the same rows: the rules by which auto mode leaves a
    source unmaterialized, plus local rows and ranges (no UDF, no non-deterministic operator, no
    ignored unreadable files). A plan that could not be inspected is not. On Spark Connect, a plan
    holding relations the client cannot see into (SQL text, a view by name) is asked of the server."""
    from deltamerge.merge.planner import ignores_unreadable_files, opaque_source_repeatable, source_traits

    traits = source_traits(ctx.spark, ctx.source)
    if traits is None or ignores_unreadable_files(ctx.spark):
        return False
    if traits.nondeterministic or traits.has_udf:
        return False
    return not traits.opaque or opaque_source_repeatable(ctx.source)


def _summary_from_source_statistics(
    ctx: MergeContext, candidates: Sequence[AddFile], key_ranges: PruneKey | None
) -> SourceKeySummary | None:
    """The source-key summary from the statistics of a source that plainly reads Delta files
    (``merge/source_stats.py``), or None (the Spark job then runs)."""
    from deltamerge.merge.source_stats import summarize_from_statistics

    if not setting(ctx.spark, SessionConf.SOURCE_STATISTICS):
        return None
    try:
        return summarize_from_statistics(ctx.rm, ctx.source, candidates, key_ranges)
    except Exception:  # an unexpected plan text or log: the job answers instead
        return None


def _discard(table_root: str, relative_paths: list[str]) -> None:
    # Files of a merge that did not commit: no reader can see them; remove them now rather than
    # leave them for vacuum.
    for rel in relative_paths:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(table_root, rel))


def _row_tracking_columns(snapshot: Snapshot) -> tuple[str, str] | None:
    """The materialized row tracking columns the rewrite fills, when row tracking is enabled."""
    names = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    return None if names is None else names.names
