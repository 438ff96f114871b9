"""Row-count validation of a commit (txn/num_records.py, Delta's validateNumRecords)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from deltamerge.errors import NumRecordsMismatchError
from deltamerge.log.actions import AddCDCFile, AddFile, DeletionVectorDescriptor
from deltamerge.txn.num_records import NumRecords, count_records, mismatch


def add(name: str, rows: int | None, deleted: int = 0) -> AddFile:
    stats = None if rows is None else json.dumps({"numRecords": rows})
    dv = None if not deleted else DeletionVectorDescriptor("i", "abc", 10, deleted)
    return AddFile(name, {}, 100, 0, stats=stats, deletion_vector=dv)


def test_logical_rows_subtract_deletion_vectors() -> None:
    old = add("a", 10, deleted=2)
    grown = replace(old, deletion_vector=DeletionVectorDescriptor("i", "abd", 10, 5))
    # DV update of file a (8 -> 5 live rows) and 3 rows rewritten elsewhere; change data not counted.
    actions = [old.remove(1), grown, add("b", 3), AddCDCFile("c", {}, 5)]
    assert count_records(actions) == NumRecords(added=8, removed=8)


def test_a_file_without_row_count_skips_its_side() -> None:
    assert count_records([add("a", None), add("b", 4).remove(1)]) == NumRecords(None, 4)
    assert count_records([add("a", 4), add("b", None).remove(1)]) == NumRecords(4, None)
    # Either side unknown: no verdict, as Delta.
    assert mismatch([add("a", None), add("b", 4).remove(1)], "UPDATE", inserts=False, deletes=False) is None


@pytest.mark.parametrize(
    "operation, inserts, deletes, added, removed, shown",
    [
        ("MERGE", False, True, 5, 4, "MERGE without INSERT clauses"),
        ("MERGE", True, False, 3, 4, "MERGE without DELETE clauses"),
        ("UPDATE", False, False, 5, 4, "UPDATE"),
        ("UPDATE", False, False, 3, 4, "UPDATE"),
        ("DELETE", False, True, 5, 4, "DELETE"),
        ("MERGE", True, True, 50, 4, None),  # both kinds of clause: any count
        ("MERGE", False, False, 4, 4, None),
        ("DELETE", False, True, 0, 4, None),
        ("MERGE", True, False, 9, 4, None),
    ],
)
def test_rules(operation, inserts, deletes, added, removed, shown) -> None:  # type: ignore[no-untyped-def]
    error = mismatch(
        [add("new", added), add("old", removed).remove(1)], operation, inserts=inserts, deletes=deletes
    )
    if shown is None:
        assert error is None
        return
    assert isinstance(error, NumRecordsMismatchError)
    assert str(error).startswith(
        f"[DELTA_NUM_RECORDS_MISMATCH] Failed to validate the number of records in {shown}."
    )
    assert f"Added {added} records and removed {removed} records" in str(error)
