"""Row-count validation of a commit (Delta's ``NumRecordsStats`` and ``validateNumRecords``).

A safety net against writer bugs, checked before a MERGE, UPDATE or DELETE commits: from the
statistics of the files it adds and removes, a statement without INSERT clauses must not add rows
and one without DELETE clauses must not lose any. Logical rows are a file's ``numRecords`` minus
its deletion vector's cardinality. When a file has no row count the check is skipped, as Delta
does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from deltamerge.errors import NumRecordsMismatchError
from deltamerge.log.actions import Action, AddFile, RemoveFile


@dataclass(frozen=True)
class NumRecords:
    """Logical rows of a commit's added and removed files (None: some file has no row count)."""

    added: int | None
    removed: int | None


def count_records(actions: Iterable[Action]) -> NumRecords:
    """The logical rows the actions add and remove."""
    added: int | None = 0
    removed: int | None = 0
    for a in actions:
        if isinstance(a, AddFile) and added is not None:
            n = a.num_logical_records
            added = None if n is None else added + n
        elif isinstance(a, RemoveFile) and removed is not None:
            n = a.num_logical_records
            removed = None if n is None else removed + n
    return NumRecords(added, removed)


def mismatch(
    actions: Iterable[Action], operation: str, *, inserts: bool, deletes: bool
) -> NumRecordsMismatchError | None:
    """The error for a commit whose row counts its statement cannot produce, else None.

    ``operation`` names the statement (MERGE, UPDATE, DELETE); ``inserts`` / ``deletes`` say
    whether it has clauses that add or remove rows."""
    counts = count_records(actions)
    if counts.added is None or counts.removed is None:
        return None
    added, removed = counts.added, counts.removed
    what = None
    if not inserts and added > removed:
        what = operation if operation != "MERGE" else "MERGE without INSERT clauses"
    elif not deletes and added < removed:
        what = operation if operation != "MERGE" else "MERGE without DELETE clauses"
    if what is None:
        return None
    return NumRecordsMismatchError(
        f"Failed to validate the number of records in {what}. Added {added} records and removed "
        f"{removed} records. This is a bug: nothing was committed. Please report it with the "
        "statement; spark.databricks.delta.numRecordsValidation.enabled=false skips the check."
    )
