"""Planning a MERGE: which executor runs, which target files are candidates, whether the source is
materialized (delta_merge_spec.md §1.5 step 5, §1.6, §1.7). ``explain()`` prints this and stops."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.merge.analysis import ResolvedMerge
from deltamerge.merge.clauses import ClauseKind
from deltamerge.predicates import conjunction, disjunction, to_sql
from deltamerge.spark.session import case_sensitive, session_time_zone, setting


@dataclass(frozen=True)
class MergePlan:
    """What the command will do."""

    executor: str  # "insertOnly" | "classic"
    deletion_vectors: bool
    candidate_files: tuple[AddFile, ...]
    skipping_predicate: str | None
    read_whole_table: bool
    materialize: bool
    materialize_reason: str
    job2_join: str
    may_match: Callable[[AddFile], bool] | None

    def describe(self, all_files: Sequence[AddFile]) -> str:
        """Human-readable plan for ``explain()``."""
        before_bytes = sum(f.size for f in all_files)
        after_bytes = sum(f.size for f in self.candidate_files)
        lines = [
            "== deltamerge MERGE plan ==",
            f"executor: {self.executor}" + (" (deletion vectors)" if self.deletion_vectors else ""),
            f"job 2 join type: {self.job2_join}",
            f"data skipping predicate: {self.skipping_predicate or 'none (all files are candidates)'}",
            f"target files before skipping: {len(all_files)} ({before_bytes} bytes)",
            f"target files after skipping: {len(self.candidate_files)} ({after_bytes} bytes)",
            f"source materialized: {self.materialize} (reason: {self.materialize_reason})",
        ]
        return "\n".join(lines)


def _materialization(spark: SparkSession, insert_only_path: bool) -> tuple[bool, str]:
    mode = str(setting(spark, SessionConf.MATERIALIZE_SOURCE)).lower()
    if mode == "none":
        return False, "notMaterializedNone"
    if mode == "all":
        return True, "materializeAll"
    if mode != "auto":
        return True, "invalidConfigurationFailsafe"
    if insert_only_path:
        return False, "notMaterializedAutoInsertOnly"
    # Sources reach deltamerge as opaque DataFrames (file scans, local data, queries); none is a
    # Delta scan Spark can pin to a version, so auto mode materializes as Delta does for them.
    return True, "materializeNonDeterministicSourceNonDelta"


def plan_merge(spark: SparkSession, rm: ResolvedMerge, snapshot, dv_enabled: bool) -> MergePlan:  # type: ignore[no-untyped-def]
    """Pick the executor and the candidate files."""
    from deltamerge.skipping import file_filter

    insert_only = rm.is_insert_only and setting(spark, SessionConf.OPTIMIZE_INSERT_ONLY)
    has_nmbs = bool(rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE))
    predicate = None
    if not has_nmbs:
        predicate = conjunction(list(rm.target_only_conjuncts))
        if rm.is_matched_only and not insert_only:
            per_clause = list(rm.clause_target_only)
            if per_clause and all(p is not None for p in per_clause):
                extra = disjunction([p for p in per_clause if p is not None])
                predicate = extra if predicate is None else conjunction([predicate, extra])  # type: ignore[list-item]
    files = snapshot.files
    may_match = None
    candidates = tuple(files)
    if predicate is not None:
        may_match = file_filter(
            predicate,
            snapshot.metadata.schema,
            snapshot.metadata.partition_columns,
            case_sensitive=case_sensitive(spark),
            session_tz=session_time_zone(spark),
        )
        if setting(spark, SessionConf.STATS_SKIPPING):
            candidates = tuple(f for f in files if may_match(f))
    if insert_only:
        job2 = "leftAnti"
    elif dv_enabled:
        if rm.is_matched_only:
            job2 = "inner"
        elif not has_nmbs:
            job2 = "leftOuter"
        elif not rm.of_kind(ClauseKind.NOT_MATCHED):
            job2 = "rightOuter"
        else:
            job2 = "fullOuter"
    else:
        job2 = "rightOuter" if rm.is_matched_only and setting(spark, SessionConf.OPTIMIZE_MATCHED_ONLY) else "fullOuter"
    materialize, reason = _materialization(spark, insert_only)
    return MergePlan(
        executor="insertOnly" if insert_only else "classic",
        deletion_vectors=dv_enabled and not insert_only,
        candidate_files=candidates,
        skipping_predicate=None if predicate is None else to_sql(predicate),
        read_whole_table=predicate is None,
        materialize=materialize,
        materialize_reason=reason,
        job2_join=job2,
        may_match=may_match,
    )
