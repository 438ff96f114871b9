"""``merge/output.py``'s per-column CASE over the action code: branches with the same value share one
``IN`` test, and a branch giving the fallback's value is left to the fallback. Checked against the
plain one-branch-per-code CASE by evaluating both in DuckDB for every action code."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamerge.merge.output import _choose

VALUES = ["'a'", "'b'", "'c'", "NULL", "'a' || 'b'"]


def _plain(action: str, branches: list[tuple[int, str]], keep: str) -> str:
    if not branches:
        return f"({keep})"
    whens = " ".join(f"WHEN {action} = {k} THEN ({v})" for k, v in branches)
    return f"CASE {whens} ELSE ({keep}) END"


@st.composite
def _cases(draw):  # type: ignore[no-untyped-def]
    codes = draw(st.lists(st.integers(-2, 6), unique=True, max_size=6))
    branches = [(k, draw(st.sampled_from(VALUES))) for k in codes]
    return branches, draw(st.sampled_from(VALUES))


@settings(max_examples=150, deadline=None)
@given(_cases())
def test_merged_branches_choose_the_same_value_for_every_action(case) -> None:  # type: ignore[no-untyped-def]
    branches, keep = case
    merged, plain = _choose("a", branches, keep), _plain("a", branches, keep)
    con = duckdb.connect()
    for a in range(-3, 8):
        got = con.execute(f"SELECT {merged}, {plain} FROM (SELECT {a} AS a)").fetchone()
        assert got is not None and got[0] == got[1], (a, merged, plain)


def test_an_upsert_column_is_one_test() -> None:
    # UPDATE SET * and INSERT * both take the source value: one IN test, not two.
    assert _choose("act", [(0, "s1"), (1, "s1")], "t1") == "CASE WHEN act IN (0, 1) THEN (s1) ELSE (t1) END"
    # A clause that writes the kept value needs no branch.
    assert _choose("act", [(0, "t1")], "t1") == "(t1)"
    assert (
        _choose("act", [(0, "s1"), (2, "x")], "t1")
        == "CASE WHEN act = 0 THEN (s1) WHEN act = 2 THEN (x) ELSE (t1) END"
    )
