"""Hypothesis strategies for random MERGE cases (:class:`oracle.MergeCase`).

Tables use the schema ``key INT, value INT, tag STRING`` (target and source alike, so ``UPDATE
SET *`` / ``INSERT *`` resolve by name), small value domains so that keys collide (duplicate
matches) and NULLs are frequent.  Expressions are generated *typed* (INT expressions compare
with INT expressions, STRING with STRING; conditions are boolean), values stay tiny so no INT
overflow can happen, and each clause kind only references what Delta lets it see:

* ON and MATCHED clauses: ``t.*`` and ``s.*``;
* NOT MATCHED [BY TARGET]: ``s.*`` only;
* NOT MATCHED BY SOURCE: ``t.*`` only.

Grammar rule respected: within each clause kind only the last clause may omit its condition.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import Any

from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/ for oracle

from oracle import (
    ARITH_OPS,
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    And,
    Arith,
    Clause,
    Cmp,
    Col,
    Expr,
    IsNull,
    Lit,
    MergeCase,
    Not,
    Or,
)

SCHEMA: tuple[tuple[str, str], ...] = (("key", "int"), ("value", "int"), ("tag", "string"))
INT_COLS = ("key", "value")
STR_COLS = ("tag",)

# A string containing a quote exercises literal escaping in every SQL dialect.
STR_VALUES = ("a", "b", "c", "q'")
KEY_VALUES = (0, 1, 2)

SCOPES = {
    "on": ("t", "s"),
    MATCHED: ("t", "s"),
    NOT_MATCHED: ("s",),
    NOT_MATCHED_BY_SOURCE: ("t",),
}

# ----------------------------------------------------------------------------------------------
# Rows
# ----------------------------------------------------------------------------------------------

# Strategy objects are built once (module level / lru_cache): building them per draw dominated
# the generation time.
_ints = st.sampled_from((*range(-3, 6), None))  # NULL in 1/10 of the rows
_strs = st.sampled_from((*STR_VALUES[:3], *STR_VALUES[:3], None))  # NULL in 1/7
_keys = st.sampled_from((*KEY_VALUES, *KEY_VALUES, *KEY_VALUES, None))  # NULL key in 1/10
_row = st.tuples(_keys, _ints, _strs)
_bools = st.booleans()
_d20 = st.integers(0, 19)


@cache
def rows(max_size: int = 6) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Lists of (key, value, tag) rows, length uniform in 0..max_size (plain ``st.lists``
    favours very short lists); keys in 0..2 or NULL so that they collide."""
    sizes = st.sampled_from((0, *range(1, max_size + 1), *range(1, max_size + 1)))
    return sizes.flatmap(lambda n: st.lists(_row, min_size=n, max_size=n))


def _dedupe_keys(rs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    seen: set[Any] = set()
    out = []
    for r in rs:
        if r[0] not in seen:
            seen.add(r[0])
            out.append(r)
    return out


# ----------------------------------------------------------------------------------------------
# Expressions
# ----------------------------------------------------------------------------------------------

_int_lits = st.builds(Lit, st.integers(min_value=-2, max_value=4))
_arith_ops = st.sampled_from(ARITH_OPS)
_str_lits = st.builds(Lit, st.sampled_from(STR_VALUES))
_bool_kinds = st.sampled_from(("and", "and", "or", "not"))
CMP = ("=", "=", "<>", "<", "<=", ">", ">=", "<=>")
_cmp_ops = st.sampled_from(CMP)


@cache
def _int_cols(scope: tuple[str, ...]) -> st.SearchStrategy[Col]:
    return st.sampled_from([Col(side, c) for side in scope for c in INT_COLS])


@cache
def _str_cols(scope: tuple[str, ...]) -> st.SearchStrategy[Col]:
    return st.sampled_from([Col(side, c) for side in scope for c in STR_COLS])


@cache
def int_exprs(scope: tuple[str, ...], depth: int = 1) -> st.SearchStrategy[Expr]:
    """INT-typed expressions: columns, small literals, typed NULL, ``+``/``-`` up to ``depth``."""

    @st.composite
    def gen(draw: st.DrawFn) -> Expr:
        choice = draw(_d20)
        if choice == 0:
            return Lit(None, "int")
        if depth > 0 and choice >= 15:
            sub = int_exprs(scope, depth - 1)
            return Arith(draw(_arith_ops), draw(sub), draw(sub))
        if choice <= 5:
            return draw(_int_lits)
        return draw(_int_cols(scope))

    return gen()


@cache
def str_exprs(scope: tuple[str, ...]) -> st.SearchStrategy[Expr]:
    """STRING-typed expressions: the ``tag`` column, literals (one with a quote), typed NULL."""

    @st.composite
    def gen(draw: st.DrawFn) -> Expr:
        choice = draw(_d20)
        if choice == 0:
            return Lit(None, "string")
        if choice <= 6:
            return draw(_str_lits)
        return draw(_str_cols(scope))

    return gen()


@cache
def bool_exprs(scope: tuple[str, ...], depth: int = 1) -> st.SearchStrategy[Expr]:
    """Boolean conditions: comparisons (incl. ``<=>``), IS [NOT] NULL, TRUE/FALSE and, up to
    ``depth`` levels, AND / OR / NOT."""

    @st.composite
    def gen(draw: st.DrawFn) -> Expr:
        choice = draw(_d20)
        if depth > 0 and choice >= 14:
            kind = draw(_bool_kinds)
            sub = bool_exprs(scope, depth - 1)
            if kind == "not":
                return Not(draw(sub))
            left, right = draw(sub), draw(sub)
            return And(left, right) if kind == "and" else Or(left, right)
        if choice == 0:
            return Lit(draw(_bools))
        if choice <= 2:
            operand = draw(int_exprs(scope, 0)) if draw(_bools) else draw(str_exprs(scope))
            return IsNull(operand, negated=draw(_bools))
        op = draw(_cmp_ops)
        if choice <= 4:
            return Cmp(op, draw(str_exprs(scope)), draw(str_exprs(scope)))
        return Cmp(op, draw(int_exprs(scope, 1)), draw(int_exprs(scope, 1)))

    return gen()


def value_expr(col: str, scope: tuple[str, ...]) -> st.SearchStrategy[Expr]:
    """An expression assignable to ``col``."""
    if col in STR_COLS:
        return str_exprs(scope)
    return int_exprs(scope, 1)


_assign_cols = st.lists(
    st.sampled_from([c for c, _ in SCHEMA]), min_size=1, max_size=len(SCHEMA), unique=True
)


@cache
def assignments(scope: tuple[str, ...]) -> st.SearchStrategy[tuple[tuple[str, Expr], ...]]:
    """A non-empty SET / INSERT column list with typed values over ``scope``."""

    @st.composite
    def gen(draw: st.DrawFn) -> tuple[tuple[str, Expr], ...]:
        return tuple((c, draw(value_expr(c, scope))) for c in draw(_assign_cols))

    return gen()


# ----------------------------------------------------------------------------------------------
# ON condition and clauses
# ----------------------------------------------------------------------------------------------


@cache
def simple_predicates(scope: tuple[str, ...]) -> st.SearchStrategy[Expr]:
    """``col <op> literal`` / ``col IS [NOT] NULL``: selective but rarely empty filters."""
    int_pred = st.builds(Cmp, _cmp_ops, _int_cols(scope), _int_lits)
    str_pred = st.builds(Cmp, _cmp_ops, _str_cols(scope), _str_lits)
    null_pred = st.builds(IsNull, st.one_of(_int_cols(scope), _str_cols(scope)), _bools)
    return st.one_of(int_pred, int_pred, str_pred, null_pred)


_on_base_kinds = st.sampled_from(["eq"] * 6 + ["nulleq"] * 2 + ["tag", "random"])
_n_extra = st.sampled_from([0, 0, 0, 0, 0, 1, 1, 2])
_extra_scopes = st.sampled_from([("t",), ("t",), ("s",), ("t", "s")])


@st.composite
def on_conditions(draw: st.DrawFn) -> Expr:
    """Mostly ``t.key = s.key``; sometimes ``t.key <=> s.key``, ``t.tag = s.tag`` or an
    arbitrary predicate; plus 0-2 extra target-only / source-only / mixed conjuncts."""
    base_kind = draw(_on_base_kinds)
    if base_kind == "eq":
        base: Expr = Cmp("=", Col("t", "key"), Col("s", "key"))
    elif base_kind == "nulleq":
        base = Cmp("<=>", Col("t", "key"), Col("s", "key"))
    elif base_kind == "tag":
        base = Cmp("=", Col("t", "tag"), Col("s", "tag"))
    else:
        base = draw(bool_exprs(("t", "s"), 1))
    for _ in range(draw(_n_extra)):
        scope = draw(_extra_scopes)
        extra = draw(bool_exprs(scope, 0)) if draw(_bools) else draw(simple_predicates(scope))
        base = And(base, extra) if draw(_bools) else And(extra, base)
    return base


ACTIONS = {
    MATCHED: ("update", "update", "update_all", "delete", "delete"),
    NOT_MATCHED: ("insert", "insert", "insert_all"),
    NOT_MATCHED_BY_SOURCE: ("update", "delete"),
}
_cond_depth = st.integers(0, 2)


@cache
def clause(kind: str, needs_condition: bool) -> st.SearchStrategy[Clause]:
    """One clause of ``kind``; the condition is optional unless ``needs_condition``."""
    scope = SCOPES[kind]
    actions = st.sampled_from(ACTIONS[kind])

    @st.composite
    def gen(draw: st.DrawFn) -> Clause:
        action = draw(actions)
        condition: Expr | None = None
        if needs_condition or draw(_bools):
            condition = draw(bool_exprs(scope, draw(_cond_depth)))
        assigns = draw(assignments(scope)) if action in ("update", "insert") else ()
        return Clause(kind, action, condition, assigns)

    return gen()


@st.composite
def clause_lists(
    draw: st.DrawFn,
    kinds: tuple[str, ...] = (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE),
    max_per_kind: int = 3,
    interleave: bool = False,
) -> tuple[Clause, ...]:
    """0..max_per_kind clauses of each kind in ``kinds`` (at least one clause in total); only the
    last clause of a kind may lack a condition.  Grouped by kind, unless ``interleave``: then
    kinds are mixed at random, order within each kind kept (legal for the builder APIs)."""
    counts = [draw(st.integers(0, max_per_kind)) for _ in kinds]
    if not any(counts):
        counts[draw(st.integers(0, len(kinds) - 1))] = 1
    out: list[Clause] = []
    for kind, n in zip(kinds, counts, strict=True):
        out += [draw(clause(kind, needs_condition=i < n - 1)) for i in range(n)]
    if interleave:
        queues = {k: [c for c in out if c.kind == k] for k in kinds}
        order = draw(st.permutations([c.kind for c in out]))
        out = [queues[k].pop(0) for k in order]
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# Whole cases
# ----------------------------------------------------------------------------------------------


@st.composite
def merge_cases(
    draw: st.DrawFn,
    max_target_rows: int = 6,
    max_source_rows: int = 6,
    kinds: tuple[str, ...] = (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE),
    max_per_kind: int = 3,
    with_file_ids: bool = False,
    interleave: bool = False,
) -> MergeCase:
    """A random :class:`oracle.MergeCase`.  In about half of the cases the source keys are made
    unique so that not too many cases end in the multiple-match error.  ``with_file_ids``
    spreads the target rows over up to 3 files (only the oracle's metrics model uses that);
    ``interleave`` mixes the clause kinds (builder-API order; SQL rendering regroups them)."""
    target = draw(rows(max_target_rows))
    source = draw(rows(max_source_rows))
    if draw(_bools):
        source = _dedupe_keys(source)
    file_ids = None
    if with_file_ids and target:
        file_ids = tuple(draw(st.lists(st.integers(0, 2), min_size=len(target), max_size=len(target))))
    return MergeCase(
        target_schema=SCHEMA,
        source_schema=SCHEMA,
        target_rows=tuple(target),
        source_rows=tuple(source),
        on=draw(on_conditions()),
        clauses=draw(clause_lists(kinds, max_per_kind, interleave)),
        target_file_ids=file_ids,
    )
