"""WHEN clauses as SQL text, as Delta's test ``MergeHelpers`` write them (shared by the suite ports)."""

from __future__ import annotations


def when(kind: str, condition: str | None, action: str) -> str:
    """``WHEN <kind> [AND <condition>] THEN <action>``."""
    cond = f" AND {condition}" if condition is not None else ""
    return f"WHEN {kind}{cond} THEN {action}"


def update(set_: str, condition: str | None = None) -> str:
    return when("MATCHED", condition, f"UPDATE SET {set_}")


def delete(condition: str | None = None) -> str:
    return when("MATCHED", condition, "DELETE")


def insert(values: str, condition: str | None = None) -> str:
    return when("NOT MATCHED", condition, f"INSERT {values}")
