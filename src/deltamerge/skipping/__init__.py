"""Data skipping over AddFiles (protocol.md §3.3): partition pruning and min/max/nullCount pruning.

A predicate (a SQLGlot tree in the Spark dialect, over unqualified target column names) is evaluated per
file in an abstract domain: for each sub-expression, which of TRUE / FALSE / NULL *some row* of the file
may produce. A file is kept when TRUE is possible. Partition columns are exact values; data columns are
ranges ``[min, max]`` plus "may be null" / "may be non-null" from ``nullCount``. Anything not understood
(functions, arithmetic on columns, subqueries, unknown types) may produce anything, so it never skips.

Soundness rules: missing stats keep the file; string max may be a truncated prefix; timestamp bounds are
widened by 999 µs (stats keep ms); with ``tightBounds=false`` only ``nullCount`` 0 and ``== numRecords``
are used (which is all this evaluation uses anyway); NaN in float stats disables the bounds.

Layout: ``values`` (typed literals, casts, comparison over values and stats ranges), ``compiler``
(the predicate compiler and ``file_filter`` / ``prune_files``); conjunct helpers live here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from sqlglot import exp

from deltamerge.skipping.compiler import file_filter, prune_files

__all__ = ["conjunction", "file_filter", "prune_files", "split_conjuncts"]


def split_conjuncts(expr: exp.Expr | None) -> list[exp.Expression]:
    """``a AND (b AND c)`` -> ``[a, b, c]`` (parentheses unwrapped); ``None`` -> ``[]``."""
    if expr is None:
        return []
    while isinstance(expr, exp.Paren):
        expr = expr.this
    if isinstance(expr, exp.And):
        return split_conjuncts(expr.this) + split_conjuncts(expr.expression)
    return [cast(exp.Expression, expr)]


def conjunction(exprs: Iterable[exp.Expr | None]) -> exp.Expression | None:
    """AND of the non-None ``exprs`` (operands parenthesised as needed); ``None`` when there are none."""
    items = [e for e in exprs if e is not None]
    if not items:
        return None
    return cast(exp.Expression, items[0] if len(items) == 1 else exp.and_(*items))
