"""MERGE metrics under Delta's names (delta_merge_spec.md §3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from deltamerge.merge.analysis import ResolvedMerge
from deltamerge.merge.clauses import ActionType, ClauseKind

# The exact operationMetrics key set Delta writes for MERGE (DeltaOperationMetrics.MERGE).
OPERATION_METRIC_KEYS = (
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsMatchedUpdated",
    "numTargetRowsNotMatchedBySourceUpdated",
    "numTargetRowsDeleted",
    "numTargetRowsMatchedDeleted",
    "numTargetRowsNotMatchedBySourceDeleted",
    "numTargetRowsCopied",
    "numOutputRows",
    "numTargetBytesAdded",
    "numTargetBytesRemoved",
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetChangeFilesAdded",
    "executionTimeMs",
    "materializeSourceTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsRemoved",
    "numTargetDeletionVectorsUpdated",
)


@dataclass
class MergeMetrics:
    """Everything one MERGE measures (Delta's SQL metrics of ``MergeIntoCommand``)."""

    numSourceRows: int = 0
    numSourceRowsInSecondScan: int = -1
    numTargetRowsCopied: int = 0
    numTargetRowsInserted: int = 0
    numTargetRowsMatchedUpdated: int = 0
    numTargetRowsNotMatchedBySourceUpdated: int = 0
    numTargetRowsMatchedDeleted: int = 0
    numTargetRowsNotMatchedBySourceDeleted: int = 0
    numTargetFilesBeforeSkipping: int = 0
    numTargetBytesBeforeSkipping: int = 0
    numTargetFilesAfterSkipping: int = 0
    numTargetBytesAfterSkipping: int = 0
    numTargetPartitionsAfterSkipping: int = 0
    numTargetFilesRemoved: int = 0
    numTargetBytesRemoved: int = 0
    numTargetPartitionsRemovedFrom: int = 0
    numTargetFilesAdded: int = 0
    numTargetBytesAdded: int = 0
    numTargetPartitionsAddedTo: int = 0
    numTargetChangeFilesAdded: int = 0
    numTargetChangeFileBytes: int = 0
    numTargetDeletionVectorsAdded: int = 0
    numTargetDeletionVectorsRemoved: int = 0
    numTargetDeletionVectorsUpdated: int = 0
    executionTimeMs: int = 0
    materializeSourceTimeMs: int = 0
    scanTimeMs: int = 0
    rewriteTimeMs: int = 0
    # history numSourceRows comes from the second scan when job 2 read the whole source
    use_second_scan_source_rows: bool = False
    materialize_reason: str = "notMaterializedAuto"
    executor: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def numTargetRowsUpdated(self) -> int:
        """Matched plus not-matched-by-source updates."""
        return self.numTargetRowsMatchedUpdated + self.numTargetRowsNotMatchedBySourceUpdated

    @property
    def numTargetRowsDeleted(self) -> int:
        """Matched plus not-matched-by-source deletes."""
        return self.numTargetRowsMatchedDeleted + self.numTargetRowsNotMatchedBySourceDeleted

    @property
    def numOutputRows(self) -> int:
        """Rows written to data files: inserted + updated + copied."""
        return self.numTargetRowsInserted + self.numTargetRowsUpdated + self.numTargetRowsCopied

    @property
    def operation_num_source_rows(self) -> int:
        """The ``numSourceRows`` history reports."""
        if self.use_second_scan_source_rows and self.numSourceRowsInSecondScan >= 0:
            return self.numSourceRowsInSecondScan
        return self.numSourceRows

    def add_clause_counts(self, rm: ResolvedMerge, counts: dict[str, int]) -> None:
        """Fold per-clause row counts (from ``output.counter_columns``) into the row metrics."""
        for c in rm.clauses:
            n = int(counts.get(f"clause_{c.index}", 0) or 0)
            if c.action is ActionType.INSERT:
                self.numTargetRowsInserted += n
            elif c.action is ActionType.UPDATE and c.kind is ClauseKind.MATCHED:
                self.numTargetRowsMatchedUpdated += n
            elif c.action is ActionType.UPDATE:
                self.numTargetRowsNotMatchedBySourceUpdated += n
            elif c.kind is ClauseKind.MATCHED:
                self.numTargetRowsMatchedDeleted += n
            else:
                self.numTargetRowsNotMatchedBySourceDeleted += n
        self.numTargetRowsCopied += int(counts.get("copied", 0) or 0)

    def to_operation_metrics(self) -> dict[str, str]:
        """``commitInfo.operationMetrics`` with Delta's exact key set (string values)."""
        values = {**asdict(self)}
        values.update(
            numSourceRows=self.operation_num_source_rows,
            numTargetRowsUpdated=self.numTargetRowsUpdated,
            numTargetRowsDeleted=self.numTargetRowsDeleted,
            numOutputRows=self.numOutputRows,
            numTargetDeletionVectorsAdded=self.numTargetDeletionVectorsAdded
            + self.numTargetDeletionVectorsUpdated,
            numTargetDeletionVectorsRemoved=self.numTargetDeletionVectorsRemoved
            + self.numTargetDeletionVectorsUpdated,
        )
        return {k: str(int(values[k])) for k in OPERATION_METRIC_KEYS}

    def result_row(self) -> tuple[int, int, int, int]:
        """``(num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows)``."""
        updated, deleted, inserted = (
            self.numTargetRowsUpdated,
            self.numTargetRowsDeleted,
            self.numTargetRowsInserted,
        )
        return (updated + deleted + inserted, updated, deleted, inserted)
