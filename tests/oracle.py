"""Pure-Python reference implementation ("oracle") of Delta Lake's MERGE INTO semantics.

Scope: flat tables of INT / STRING columns, rows as ``dict`` (column name -> ``int | str | None``),
conditions and values as a tiny expression AST (below) that can be both *evaluated* here and
*rendered* as SQL text for Spark (deltamerge / delta-spark), DataFusion (delta-rs) and DuckDB.

Semantics implemented (delta_merge_spec.md §1.5, §1.6, §3, §4):

* SQL three-valued logic.  A condition "holds" only when it evaluates to TRUE; NULL never
  satisfies an ON condition or a clause condition.  ``=``/``<>``/``<`` ... with a NULL operand
  are NULL, ``<=>`` is null-safe equality, ``AND``/``OR``/``NOT`` are Kleene logic, arithmetic
  propagates NULL.
* A (source row, target row) pair *matches* when the ON condition is TRUE for it.
  - target row with >= 1 matching source row: each pair runs the MATCHED clauses in declaration
    order, the first clause whose condition is TRUE (no condition = TRUE) applies; none -> the
    target row is kept unchanged (copied).
  - source row with no matching target row: NOT MATCHED [BY TARGET] clauses, first TRUE wins,
    none -> nothing is inserted.
  - target row with no matching source row: NOT MATCHED BY SOURCE clauses, first TRUE wins, none
    -> kept unchanged.
  This follows from the ON condition alone, so target-only / source-only conjuncts of ON make
  rows "unmatched" (spec C16: a target row failing a target-only ON conjunct is NMBS even if a
  source row with the same key exists).
* UPDATE evaluates all assignments against the *old* row (simultaneous assignment); unlisted
  columns keep their value.  ``UPDATE SET *`` / ``INSERT *`` assign every target column from the
  source column of the same name.  ``INSERT (cols) VALUES (...)``: unlisted columns get NULL (no
  column defaults are modelled).
* Multiple-match check (mode ``"delta"``): if a target row matches (via ON only, clause
  conditions are not looked at) more than one source row, the merge fails with
  ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`` unless the MATCHED clauses are
  exactly one *unconditional* DELETE (``WHEN MATCHED AND true THEN DELETE`` does not qualify).
  This holds even when there are no MATCHED clauses at all (e.g. a NOT MATCHED BY SOURCE-only
  merge fails on duplicate matches).  In the allowed case the row is deleted once and counted
  once.  An insert-only merge (only NOT MATCHED clauses) never raises (left anti join, assuming
  the default ``merge.optimizeInsertOnlyMerge.enabled=true``).
* Counters: ``num_affected_rows = updated + deleted + inserted``; NMBS updates count as updated,
  NMBS deletes as deleted; copied rows are not "affected".

Layout assumptions for the file-level metrics (``numTargetRowsCopied``, ``numOutputRows``,
``numTargetFilesRemoved``): copy-on-write (no deletion vectors), no data skipping beyond what is
semantically invisible, and every target row lives in the file given by ``target_file_ids``
(default: one single file holding all target rows).  A file is *touched* (rewritten) when

* insert-only merge: never;
* NOT MATCHED BY SOURCE clauses present: every file that holds a target row;
* matched-only merge (only MATCHED clauses): the file holds a row for which some matched pair
  satisfies some MATCHED clause condition (= a row that gets updated/deleted);
* otherwise: the file holds a row that matches at least one source row (even if no clause
  applies to it).

``numTargetRowsCopied`` = rows of touched files that are neither updated nor deleted;
``numOutputRows`` = inserted + updated + copied.  With ``copy_on_write=False`` (persistent
deletion vectors) copied is 0 and the file metrics are omitted.

Layout-dependent multiple-match error.  In a matched-only merge Delta data-skips target files
with the target-only conjuncts of the clause conditions *before* the multiple-match check.  When
every doubly matched target row fails that skipping predicate (so no clause could modify it),
whether Delta raises depends on file statistics.  The oracle still reports the error but sets
``MergeResult.error_layout_dependent`` and attaches ``MergeResult.unchecked`` (the outcome when
the check does not fire: those rows are copied unchanged).

Other duplicate-match policies (for differential testing against other engines) via
``multiple_match=``:

* ``"deltars"`` -- delta-rs 1.6.x: each matched pair is classified by the clause it selects
  (no clause -> noop; unconditional DELETE -> uncond-delete; any other UPDATE/DELETE -> action).
  Error iff a target row has >= 2 action pairs, or >= 1 action pair and >= 1 uncond-delete pair.
  Otherwise the (single) applying clause wins; several uncond-delete pairs delete the row once.
* ``"duckdb"`` -- DuckDB 1.4+/2.0: error iff a clause applies to >= 2 pairs of the same target
  row (unconditional duplicate DELETE included).
* ``"none"`` -- no check (only valid when every target row has at most one applying pair).

Whenever mode ``"delta"`` does not raise, modes ``"deltars"`` and ``"none"`` give the identical
result; ``"duckdb"`` too except that it raises for duplicate matches under the single
unconditional DELETE.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

# --------------------------------------------------------------------------------------------
# Expression AST
# --------------------------------------------------------------------------------------------

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

DIALECTS = ("spark", "datafusion", "duckdb")


@dataclass(frozen=True)
class Col:
    """Qualified column reference: ``side`` is ``"t"`` (target) or ``"s"`` (source)."""

    side: str
    name: str


@dataclass(frozen=True)
class Lit:
    """Literal: ``int``, ``str``, ``bool`` or ``None`` (SQL NULL).

    ``null_type`` ("int" | "string") optionally types a NULL: Spark renders it as a plain
    ``NULL`` anyway (Spark coerces untyped NULLs everywhere), DataFusion/DuckDB as
    ``CAST(NULL AS ...)`` because DataFusion cannot compare an untyped NULL literal with a
    number (``NULL = 2`` -> "Cast error: Casting from Int64 to Null not supported")."""

    value: int | str | bool | None
    null_type: str | None = None


@dataclass(frozen=True)
class Arith:
    op: str  # "+" | "-"
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Cmp:
    op: str  # "=" | "<>" | "<" | "<=" | ">" | ">=" | "<=>"
    left: Expr
    right: Expr


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class IsNull:
    operand: Expr
    negated: bool = False  # True -> IS NOT NULL


Expr = Union[Col, Lit, Arith, Cmp, And, Or, Not, IsNull]  # noqa: UP007 (runtime alias)

ARITH_OPS = ("+", "-")
CMP_OPS = ("=", "<>", "<", "<=", ">", ">=", "<=>")


# Convenience constructors -------------------------------------------------------------------


def t(name: str) -> Col:
    return Col("t", name)


def s(name: str) -> Col:
    return Col("s", name)


def lit(value: int | str | bool | None) -> Lit:
    return Lit(value)


def eq(a: Expr, b: Expr) -> Cmp:
    return Cmp("=", a, b)


def and_all(parts: Sequence[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = And(out, p)
    return out


# Evaluation ---------------------------------------------------------------------------------


class OracleUnsupported(Exception):
    """Input outside the oracle's modelled domain (e.g. INT overflow, mixed-type comparison)."""


def _check_int(v: int) -> int:
    if not (INT32_MIN <= v <= INT32_MAX):
        raise OracleUnsupported(f"INT overflow: {v} (Spark ANSI mode would raise)")
    return v


def evaluate(expr: Expr, trow: Mapping[str, Any] | None, srow: Mapping[str, Any] | None) -> Any:
    """Evaluate ``expr`` with SQL semantics; ``None`` is SQL NULL (also for booleans)."""
    if isinstance(expr, Col):
        row = trow if expr.side == "t" else srow if expr.side == "s" else None
        if expr.side not in ("t", "s"):
            raise ValueError(f"bad column side {expr.side!r}")
        if row is None:
            raise OracleUnsupported(f"{expr.side}.{expr.name} referenced where that side is absent")
        if expr.name not in row:
            raise OracleUnsupported(f"unknown column {expr.side}.{expr.name}")
        return row[expr.name]
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Arith):
        a, b = evaluate(expr.left, trow, srow), evaluate(expr.right, trow, srow)
        if a is None or b is None:
            return None
        if not (_is_int(a) and _is_int(b)):
            raise OracleUnsupported(f"arithmetic on non-INT values {a!r} {expr.op} {b!r}")
        return _check_int(a + b if expr.op == "+" else a - b)
    if isinstance(expr, Cmp):
        a, b = evaluate(expr.left, trow, srow), evaluate(expr.right, trow, srow)
        if expr.op == "<=>":
            if a is None or b is None:
                return a is None and b is None
            _check_comparable(a, b)
            return a == b
        if a is None or b is None:
            return None
        _check_comparable(a, b)
        return {
            "=": a == b,
            "<>": a != b,
            "<": a < b,
            "<=": a <= b,
            ">": a > b,
            ">=": a >= b,
        }[expr.op]
    if isinstance(expr, And):
        a, b = _bool(evaluate(expr.left, trow, srow)), _bool(evaluate(expr.right, trow, srow))
        if a is False or b is False:
            return False
        if a is None or b is None:
            return None
        return True
    if isinstance(expr, Or):
        a, b = _bool(evaluate(expr.left, trow, srow)), _bool(evaluate(expr.right, trow, srow))
        if a is True or b is True:
            return True
        if a is None or b is None:
            return None
        return False
    if isinstance(expr, Not):
        a = _bool(evaluate(expr.operand, trow, srow))
        return None if a is None else not a
    if isinstance(expr, IsNull):
        v = evaluate(expr.operand, trow, srow)
        return (v is not None) if expr.negated else (v is None)
    raise TypeError(f"not an expression: {expr!r}")


def holds(expr: Expr | None, trow: Mapping[str, Any] | None, srow: Mapping[str, Any] | None) -> bool:
    """True iff the condition is TRUE (``None`` condition = TRUE); NULL and FALSE do not hold."""
    return expr is None or _bool(evaluate(expr, trow, srow)) is True


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bool(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    raise OracleUnsupported(f"non-boolean value {v!r} used as a condition")


def _check_comparable(a: Any, b: Any) -> None:
    kinds = {type(a) if not isinstance(a, bool) else bool, type(b) if not isinstance(b, bool) else bool}
    if len(kinds) != 1:
        raise OracleUnsupported(f"comparison of mixed types {a!r} / {b!r}")


def referenced_sides(expr: Expr | None) -> set[str]:
    if expr is None or isinstance(expr, Lit):
        return set()
    if isinstance(expr, Col):
        return {expr.side}
    if isinstance(expr, (Arith, Cmp, And, Or)):
        return referenced_sides(expr.left) | referenced_sides(expr.right)
    if isinstance(expr, (Not, IsNull)):
        return referenced_sides(expr.operand)
    raise TypeError(f"not an expression: {expr!r}")


def split_conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, And):
        return split_conjuncts(expr.left) + split_conjuncts(expr.right)
    return [expr]


# Rendering ----------------------------------------------------------------------------------


def render(expr: Expr, dialect: str = "spark") -> str:
    """Render as SQL text, fully parenthesised so that precedence never matters.

    Dialect differences handled here:

    * null-safe equality: Spark ``a <=> b``; DataFusion and DuckDB ``a IS NOT DISTINCT FROM b``
      (DuckDB's ``<=>`` is a *vector distance* function and fails to bind on INTs).
    * string literals: Spark treats backslash as an escape character and concatenates adjacent
      literals (``'a''b'`` is ``ab`` in Spark!), so quotes/backslashes are backslash-escaped;
      DataFusion/DuckDB use standard SQL ``''`` doubling and no backslash escapes.
    * negative integer literals are parenthesised (``x - (-3)``; ``--`` would start a comment).
    * integer literal types differ (Spark INT, DataFusion Int64, DuckDB INTEGER); harmless for
      the small values generated, results are cast to the INT column on write.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    if isinstance(expr, Col):
        return f"{expr.side}.{expr.name}"
    if isinstance(expr, Lit):
        if expr.value is None and expr.null_type is not None and dialect != "spark":
            return f"CAST(NULL AS {_NULL_TYPES[expr.null_type]})"
        return _render_lit(expr.value, dialect)
    if isinstance(expr, Arith):
        return f"({render(expr.left, dialect)} {expr.op} {render(expr.right, dialect)})"
    if isinstance(expr, Cmp):
        op = expr.op
        if op == "<=>" and dialect != "spark":
            op = "IS NOT DISTINCT FROM"
        return f"({render(expr.left, dialect)} {op} {render(expr.right, dialect)})"
    if isinstance(expr, And):
        return f"({render(expr.left, dialect)} AND {render(expr.right, dialect)})"
    if isinstance(expr, Or):
        return f"({render(expr.left, dialect)} OR {render(expr.right, dialect)})"
    if isinstance(expr, Not):
        return f"(NOT {render(expr.operand, dialect)})"
    if isinstance(expr, IsNull):
        return f"({render(expr.operand, dialect)} IS {'NOT ' if expr.negated else ''}NULL)"
    raise TypeError(f"not an expression: {expr!r}")


_NULL_TYPES = {"int": "INT", "string": "VARCHAR"}


def _render_lit(v: Any, dialect: str) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"({v})" if v < 0 else str(v)
    if isinstance(v, str):
        if dialect == "spark":
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + v.replace("'", "''") + "'"
    raise TypeError(f"unsupported literal {v!r}")


# --------------------------------------------------------------------------------------------
# Clauses and cases
# --------------------------------------------------------------------------------------------

MATCHED = "matched"
NOT_MATCHED = "not_matched"  # [BY TARGET]
NOT_MATCHED_BY_SOURCE = "not_matched_by_source"
KINDS = (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE)

# actions: "update" (SET list), "update_all" (SET *), "delete", "insert" (column list),
# "insert_all" (INSERT *)
ALLOWED_ACTIONS = {
    MATCHED: ("update", "update_all", "delete"),
    NOT_MATCHED: ("insert", "insert_all"),
    NOT_MATCHED_BY_SOURCE: ("update", "delete"),
}


@dataclass(frozen=True)
class Clause:
    kind: str
    action: str
    condition: Expr | None = None
    assignments: tuple[tuple[str, Expr], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ALLOWED_ACTIONS:
            raise ValueError(f"bad clause kind {self.kind!r}")
        if self.action not in ALLOWED_ACTIONS[self.kind]:
            raise ValueError(f"action {self.action!r} not allowed for {self.kind}")
        if self.action in ("update", "insert") and not self.assignments:
            raise ValueError(f"{self.kind} {self.action} needs at least one assignment")
        if self.action not in ("update", "insert") and self.assignments:
            raise ValueError(f"{self.action} takes no assignments")
        cols = [c for c, _ in self.assignments]
        if len(set(cols)) != len(cols):
            raise ValueError(f"duplicate assignment target in {cols}")


def matched_update(assignments: Mapping[str, Expr], condition: Expr | None = None) -> Clause:
    return Clause(MATCHED, "update", condition, tuple(assignments.items()))


def matched_update_all(condition: Expr | None = None) -> Clause:
    return Clause(MATCHED, "update_all", condition)


def matched_delete(condition: Expr | None = None) -> Clause:
    return Clause(MATCHED, "delete", condition)


def not_matched_insert(values: Mapping[str, Expr], condition: Expr | None = None) -> Clause:
    return Clause(NOT_MATCHED, "insert", condition, tuple(values.items()))


def not_matched_insert_all(condition: Expr | None = None) -> Clause:
    return Clause(NOT_MATCHED, "insert_all", condition)


def nmbs_update(assignments: Mapping[str, Expr], condition: Expr | None = None) -> Clause:
    return Clause(NOT_MATCHED_BY_SOURCE, "update", condition, tuple(assignments.items()))


def nmbs_delete(condition: Expr | None = None) -> Clause:
    return Clause(NOT_MATCHED_BY_SOURCE, "delete", condition)


@dataclass(frozen=True)
class MergeCase:
    """One MERGE: schemas are tuples of (column name, "int" | "string")."""

    target_schema: tuple[tuple[str, str], ...]
    source_schema: tuple[tuple[str, str], ...]
    target_rows: tuple[tuple[Any, ...], ...]
    source_rows: tuple[tuple[Any, ...], ...]
    on: Expr
    clauses: tuple[Clause, ...]
    # Optional: file index of each target row (metrics model); None = a single file.
    target_file_ids: tuple[int, ...] | None = None

    @property
    def target_columns(self) -> list[str]:
        return [c for c, _ in self.target_schema]

    @property
    def source_columns(self) -> list[str]:
        return [c for c, _ in self.source_schema]

    def target_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.target_columns, r, strict=True)) for r in self.target_rows]

    def source_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.source_columns, r, strict=True)) for r in self.source_rows]

    def clauses_of(self, kind: str) -> list[Clause]:
        return [c for c in self.clauses if c.kind == kind]

    def ordered_clauses(self) -> list[Clause]:
        """Clauses grouped MATCHED, NOT MATCHED, NOT MATCHED BY SOURCE (order kept per kind)."""
        return [c for k in KINDS for c in self.clauses_of(k)]


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------

MULTIPLE_MATCH = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
MISSING_WHEN = "DELTA_MERGE_MISSING_WHEN"
NON_LAST_OMIT = {
    MATCHED: "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
    NOT_MATCHED: "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
    NOT_MATCHED_BY_SOURCE: "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
}

MULTIPLE_MATCH_MODES = ("delta", "deltars", "duckdb", "none")


@dataclass
class MergeResult:
    error: str | None = None
    rows: list[dict[str, Any]] | None = None
    num_affected_rows: int = 0
    num_updated_rows: int = 0
    num_deleted_rows: int = 0
    num_inserted_rows: int = 0
    # history-style operationMetrics (row metrics + file-level ones of the layout model)
    metrics: dict[str, int] = field(default_factory=dict)
    # multiple-match error that Delta may not raise depending on file layout (see module doc)
    error_layout_dependent: bool = False
    unchecked: MergeResult | None = None

    @property
    def counters(self) -> tuple[int, int, int, int]:
        """(num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows)."""
        return (self.num_affected_rows, self.num_updated_rows, self.num_deleted_rows, self.num_inserted_rows)

    @property
    def num_copied_rows(self) -> int:
        return self.metrics.get("numTargetRowsCopied", 0)

    def row_multiset(self, columns: Sequence[str] | None = None) -> Counter[tuple[Any, ...]]:
        assert self.rows is not None, "no rows for an error result"
        return rows_multiset(self.rows, columns)


def rows_multiset(rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Counter:
    out: Counter = Counter()
    for r in rows:
        cols = columns if columns is not None else sorted(r)
        out[tuple(r.get(c) for c in cols)] += 1
    return out


# --------------------------------------------------------------------------------------------
# The reference merge
# --------------------------------------------------------------------------------------------


def grammar_error(clauses: Sequence[Clause]) -> str | None:
    """Delta/Spark analysis checks on the clause list (checked before anything else)."""
    if not clauses:
        return MISSING_WHEN
    for kind in KINDS:
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            return NON_LAST_OMIT[kind]
    return None


def _is_uncond_delete(c: Clause) -> bool:
    return c.action == "delete" and c.condition is None


def is_single_unconditional_delete(matched: Sequence[Clause]) -> bool:
    """Delta's exemption from the multiple-match error: MATCHED clauses == [uncond. DELETE]."""
    return len(matched) == 1 and _is_uncond_delete(matched[0])


def run_case(case: MergeCase, *, multiple_match: str = "delta", copy_on_write: bool = True) -> MergeResult:
    return merge(
        case.target_dicts(),
        case.source_dicts(),
        case.on,
        case.clauses,
        target_columns=case.target_columns,
        source_columns=case.source_columns,
        target_file_ids=case.target_file_ids,
        multiple_match=multiple_match,
        copy_on_write=copy_on_write,
    )


def merge(
    target_rows: Sequence[Mapping[str, Any]],
    source_rows: Sequence[Mapping[str, Any]],
    on: Expr,
    clauses: Sequence[Clause],
    *,
    target_columns: Sequence[str] | None = None,
    source_columns: Sequence[str] | None = None,
    target_file_ids: Sequence[int] | None = None,
    multiple_match: str = "delta",
    copy_on_write: bool = True,
) -> MergeResult:
    """Reference MERGE.  Returns a :class:`MergeResult` (``error`` set instead of raising)."""
    if multiple_match not in MULTIPLE_MATCH_MODES:
        raise ValueError(f"multiple_match must be one of {MULTIPLE_MATCH_MODES}")
    err = grammar_error(clauses)
    if err:
        return MergeResult(error=err)

    tcols = list(target_columns) if target_columns is not None else _columns(target_rows)
    scols = list(source_columns) if source_columns is not None else _columns(source_rows)
    target = [{c: r.get(c) for c in tcols} for r in target_rows]
    source = [{c: r.get(c) for c in scols} for r in source_rows]
    file_ids = list(target_file_ids) if target_file_ids is not None else [0] * len(target)
    if len(file_ids) != len(target):
        raise ValueError("target_file_ids must have one entry per target row")
    _validate_clauses(clauses, tcols, scols)

    matched_cl = [c for c in clauses if c.kind == MATCHED]
    not_matched_cl = [c for c in clauses if c.kind == NOT_MATCHED]
    nmbs_cl = [c for c in clauses if c.kind == NOT_MATCHED_BY_SOURCE]
    insert_only = not matched_cl and not nmbs_cl
    matched_only = not not_matched_cl and not nmbs_cl

    # Join on the ON condition only.
    matches: list[list[int]] = [[] for _ in target]
    source_matched = [False] * len(source)
    for ti, trow in enumerate(target):
        for si, srow in enumerate(source):
            if holds(on, trow, srow):
                matches[ti].append(si)
                source_matched[si] = True

    # For every matched pair: index of the first MATCHED clause whose condition is TRUE.
    def first_applying(cands: Sequence[Clause], trow: Any, srow: Any) -> Clause | None:
        for c in cands:
            if holds(c.condition, trow, srow):
                return c
        return None

    pair_clause: list[list[Clause | None]] = [
        [first_applying(matched_cl, target[ti], source[si]) for si in matches[ti]]
        for ti in range(len(target))
    ]

    # Multiple-match check.
    error_layout_dependent = False
    if not insert_only:
        dup_rows = [ti for ti in range(len(target)) if len(matches[ti]) > 1]
        if multiple_match == "delta":
            if dup_rows and not is_single_unconditional_delete(matched_cl):
                if matched_only:
                    skip = _matched_only_skipping_predicate(matched_cl)
                    error_layout_dependent = all(not holds(skip, target[ti], None) for ti in dup_rows)
                res = MergeResult(error=MULTIPLE_MATCH, error_layout_dependent=error_layout_dependent)
                if error_layout_dependent:
                    res.unchecked = merge(
                        target_rows,
                        source_rows,
                        on,
                        clauses,
                        target_columns=tcols,
                        source_columns=scols,
                        target_file_ids=file_ids,
                        multiple_match="none",
                        copy_on_write=copy_on_write,
                    )
                return res
        elif multiple_match == "deltars":
            for ti in dup_rows:
                chosen = [c for c in pair_clause[ti] if c is not None]  # noop pairs ignored
                n_uncond_delete = sum(1 for c in chosen if _is_uncond_delete(c))
                n_action = len(chosen) - n_uncond_delete
                if n_action > 1 or (n_action and n_uncond_delete):
                    return MergeResult(error=MULTIPLE_MATCH)
        elif multiple_match == "duckdb":
            for ti in dup_rows:
                if sum(1 for c in pair_clause[ti] if c is not None) > 1:
                    return MergeResult(error=MULTIPLE_MATCH)
        else:  # "none"
            for ti in dup_rows:
                applying = [c for c in pair_clause[ti] if c is not None]
                if len(applying) > 1 and not all(c.action == "delete" for c in applying):
                    raise OracleUnsupported("multiple_match='none' but a target row is modified twice")

    out_rows: list[dict[str, Any]] = []
    m_updated = m_deleted = nmbs_updated = nmbs_deleted = inserted = 0
    modified = [False] * len(target)  # updated or deleted

    for ti, trow in enumerate(target):
        if matches[ti]:
            applying = [(si, c) for si, c in zip(matches[ti], pair_clause[ti], strict=True) if c is not None]
            if not applying:
                out_rows.append(dict(trow))
                continue
            si, c = applying[0]
            modified[ti] = True
            if c.action == "delete":
                m_deleted += 1
            else:
                m_updated += 1
                out_rows.append(_apply_update(c, trow, source[si], tcols))
        else:
            c = first_applying(nmbs_cl, trow, None)
            if c is None:
                out_rows.append(dict(trow))
                continue
            modified[ti] = True
            if c.action == "delete":
                nmbs_deleted += 1
            else:
                nmbs_updated += 1
                out_rows.append(_apply_update(c, trow, None, tcols))

    for si, srow in enumerate(source):
        if source_matched[si]:
            continue
        c = first_applying(not_matched_cl, None, srow)
        if c is None:
            continue
        inserted += 1
        if c.action == "insert_all":
            out_rows.append({col: srow[col] for col in tcols})
        else:
            vals = dict.fromkeys(tcols)
            for col, e in c.assignments:
                vals[col] = _store(evaluate(e, None, srow))
            out_rows.append(vals)

    updated = m_updated + nmbs_updated
    deleted = m_deleted + nmbs_deleted

    # File-level metrics of the copy-on-write layout model.
    if insert_only:
        touched: set[int] = set()
    elif nmbs_cl:
        touched = set(file_ids)
    elif matched_only:
        touched = {file_ids[ti] for ti in range(len(target)) if modified[ti]}
    else:
        touched = {file_ids[ti] for ti in range(len(target)) if matches[ti]}
    copied = 0
    if copy_on_write:
        copied = sum(1 for ti in range(len(target)) if file_ids[ti] in touched and not modified[ti])

    metrics = {
        "numSourceRows": len(source),
        "numTargetRowsInserted": inserted,
        "numTargetRowsUpdated": updated,
        "numTargetRowsMatchedUpdated": m_updated,
        "numTargetRowsNotMatchedBySourceUpdated": nmbs_updated,
        "numTargetRowsDeleted": deleted,
        "numTargetRowsMatchedDeleted": m_deleted,
        "numTargetRowsNotMatchedBySourceDeleted": nmbs_deleted,
        "numTargetRowsCopied": copied,
        "numOutputRows": inserted + updated + copied,
    }
    if copy_on_write:
        metrics["numTargetFilesRemoved"] = len(touched)

    return MergeResult(
        rows=out_rows,
        num_affected_rows=updated + deleted + inserted,
        num_updated_rows=updated,
        num_deleted_rows=deleted,
        num_inserted_rows=inserted,
        metrics=metrics,
    )


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        for c in r:
            if c not in cols:
                cols.append(c)
    return cols


def _validate_clauses(clauses: Sequence[Clause], tcols: Sequence[str], scols: Sequence[str]) -> None:
    for c in clauses:
        allowed = {MATCHED: {"t", "s"}, NOT_MATCHED: {"s"}, NOT_MATCHED_BY_SOURCE: {"t"}}[c.kind]
        exprs = [c.condition] + [e for _, e in c.assignments]
        for e in exprs:
            if not referenced_sides(e) <= allowed:
                raise OracleUnsupported(f"{c.kind} clause references {referenced_sides(e) - allowed}")
        for col, _ in c.assignments:
            if col not in tcols:
                raise OracleUnsupported(f"assignment to unknown target column {col!r}")
        if c.action in ("update_all", "insert_all"):
            missing = [col for col in tcols if col not in scols]
            if missing:
                # Delta (no schema evolution): "Cannot resolve <c> in UPDATE clause|INSERT clause"
                raise OracleUnsupported(f"{c.action} with target columns missing from source: {missing}")


def _matched_only_skipping_predicate(matched: Sequence[Clause]) -> Expr | None:
    """OR over MATCHED clauses of the conjunction of their target-only conjuncts (None = TRUE)."""
    parts: list[Expr] = []
    for c in matched:
        if c.condition is None:
            return None
        t_only = [p for p in split_conjuncts(c.condition) if referenced_sides(p) <= {"t"}]
        if not t_only:
            return None
        parts.append(and_all(t_only))
    out = parts[0]
    for p in parts[1:]:
        out = Or(out, p)
    return out


def _apply_update(c: Clause, trow: Mapping[str, Any], srow: Mapping[str, Any] | None, tcols: Sequence[str]):
    if c.action == "update_all":
        assert srow is not None
        return {col: srow[col] for col in tcols}
    new = dict(trow)
    for col, e in c.assignments:  # all evaluated against the old row
        new[col] = _store(evaluate(e, trow, srow))
    return new


def _store(v: Any) -> Any:
    if isinstance(v, bool):
        raise OracleUnsupported("BOOLEAN value stored in an INT/STRING column")
    return v
