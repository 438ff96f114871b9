"""Helpers over SQLGlot expression trees (in `sql_dialect.DIALECT`): parsing, column references, checks.

Pure Python. MERGE analysis uses these to find which side every column reference belongs to, to
rewrite references into the internal column names of the joined DataFrame, and to reject what
Delta rejects in conditions (non-deterministic functions, aggregates, subqueries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError

from deltamerge.errors import ParseError
from deltamerge.sql_dialect import DIALECT

# Functions whose value changes from call to call (Spark's Nondeterministic expressions).
NON_DETERMINISTIC = {
    "rand",
    "randn",
    "random",
    "uuid",
    "shuffle",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "input_file_block_start",
    "input_file_block_length",
    "randstr",
    "uniform",
}


def parse_expression(text: str) -> exp.Expression:
    """Parse one Spark SQL expression; a syntax error becomes ``[PARSE_SYNTAX_ERROR]``."""
    parsed: exp.Expression | None
    try:
        parsed = cast(exp.Expression, sqlglot.parse_one(text, read=DIALECT, into=exp.Condition))
    except (SqlglotParseError, sqlglot.errors.TokenError) as e:
        try:
            parsed = cast(exp.Expression, sqlglot.parse_one(text, read=DIALECT))
        except Exception:
            raise ParseError(f"Syntax error in expression {text!r}: {e}. Check the SQL expression text.")
    if parsed is None:
        raise ParseError(f"Empty expression {text!r}.")
    if ";" in text and len([s for s in sqlglot.parse(text, read=DIALECT) if s is not None]) > 1:
        raise ParseError(f"Syntax error in expression {text!r}: one expression expected, found several.")
    return parsed


def to_sql(node: exp.Expression) -> str:
    """Render a tree as Spark SQL."""
    return node.sql(dialect=DIALECT)


def catalyst_sql(node: exp.Expression) -> str:
    """Render a tree the way Spark's ``Expression.sql`` shows it in error messages: binary
    operators parenthesised, function names in lower case (``(max(0) > 0)``)."""
    node = node.copy()
    binaries = [n for n in node.walk() if isinstance(n, exp.Binary) and not isinstance(n, exp.Dot)]
    for n in reversed(binaries):  # innermost first
        wrapped = exp.Paren(this=n.copy())
        if n is node:
            node = wrapped
        else:
            n.replace(wrapped)
    return node.sql(dialect=DIALECT, normalize_functions="lower")


def column_parts(col: exp.Column | exp.Dot) -> list[str]:
    """The dotted name of a column reference as parts (``t.a.b`` -> ["t", "a", "b"])."""
    if isinstance(col, exp.Column):
        return [p.name for p in col.parts]
    parts: list[str] = []
    node: exp.Expression = col
    while isinstance(node, exp.Dot):
        parts.insert(0, node.expression.name)
        node = node.this
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts] + parts
    raise ValueError(f"not a column reference: {col.sql()}")


def _lambda_variables(node: exp.Expression) -> set[str]:
    names: set[str] = set()
    for lam in node.find_all(exp.Lambda):
        for var in lam.expressions:
            names.add(var.name.lower())
    return names


def _subquery_names(select: exp.Expression) -> set[str]:
    # The relation names and aliases a subquery defines (its tables, derived tables and CTEs).
    names: set[str] = set()
    for table in select.find_all(exp.Table):
        names.update(n.lower() for n in (table.name, table.alias_or_name) if n)
    for node in select.find_all(exp.Subquery, exp.CTE):
        if node.alias:
            names.add(node.alias.lower())
    return names


def _own_column(col: exp.Column, root: exp.Expression, outer: Callable[[str], bool] | None = None) -> bool:
    """Whether ``col`` is a subquery's own column (resolved by Spark inside the subquery), not a
    reference to the expression's tables: unqualified, or qualified by a relation of an enclosing
    subquery. Any other qualified name is an outer (correlated) reference, or, given ``outer``,
    one whose qualifier ``outer`` accepts (the rest, e.g. ``st.field`` of a struct column, stays
    the subquery's)."""
    node = col.parent
    inside = False
    names: set[str] = set()
    while node is not None:
        if isinstance(node, exp.Select):
            inside = True
            names |= _subquery_names(node)
        if node is root:
            break
        node = node.parent
    if not inside:
        return False
    qualifier = col.parts[0].name if len(col.parts) >= 2 else None
    if qualifier is None or qualifier.lower() in names:
        return True
    return outer is not None and not outer(qualifier)


def column_references(node: exp.Expression) -> list[exp.Column]:
    """Column nodes in ``node`` that refer to table columns (lambda variables and a subquery's own
    columns excluded)."""
    lambda_vars = _lambda_variables(node)
    out = []
    for col in node.find_all(exp.Column):
        if len(col.parts) == 1 and col.name.lower() in lambda_vars:
            continue
        if _own_column(col, node):
            continue
        out.append(col)
    return out


def _outermost_dot(col: exp.Column) -> exp.Expression:
    # `t.a.b.c` parses as Dot(Column(t.a.b), c): the whole reference is the outermost Dot.
    node: exp.Expression = col
    while isinstance(node.parent, exp.Dot) and node.parent.this is node:
        node = node.parent
    return node


def rewrite_columns(
    node: exp.Expression,
    resolve: Callable[[list[str]], exp.Expression],
    outer: Callable[[str], bool] | None = None,
) -> exp.Expression:
    """Copy ``node`` with each column reference replaced by ``resolve(parts)`` (a subquery's own
    columns are left for Spark to resolve in the subquery; ``outer`` tells which qualifiers name
    the expression's own tables there)."""
    tree = node.copy()
    _name_struct_fields(tree)
    lambda_vars = _lambda_variables(tree)
    targets = []
    for col in list(tree.find_all(exp.Column)):
        if len(col.parts) == 1 and col.name.lower() in lambda_vars:
            continue
        if _own_column(col, tree, outer):
            continue
        targets.append(_outermost_dot(col))
    for ref in targets:
        parts = column_parts(ref) if isinstance(ref, (exp.Column, exp.Dot)) else []
        replacement = resolve(parts)
        if ref is tree:
            tree = replacement
        else:
            ref.replace(replacement)
    return tree


def _name_struct_fields(tree: exp.Expression) -> None:
    # struct(s.a, s.b) names its fields after the columns; make the names explicit before the
    # columns are renamed.
    for struct in list(tree.find_all(exp.Struct)):
        for arg in list(struct.expressions):
            if isinstance(arg, (exp.Column, exp.Dot)):
                name = column_parts(arg)[-1]
                arg.replace(exp.alias_(arg.copy(), name, quoted=True))


def function_names(node: exp.Expression) -> set[str]:
    """Lower-case names of the functions called in ``node``."""
    names = set()
    for fn in node.find_all(exp.Func):
        if isinstance(fn, exp.Anonymous):
            names.add(str(fn.this).lower())
        else:
            names.add(fn.sql_name().lower())
            names.update(n.lower() for n in getattr(fn, "_sql_names", []) or [])
    return names


# A non-deterministic Python UDF of a builder Column is registered under a name with this prefix
# (spark/columns.py).
NON_DETERMINISTIC_UDF_PREFIX = "__dm_udf_nd_"


def is_deterministic(node: exp.Expression) -> bool:
    """False when the expression calls a non-deterministic function such as ``rand()``."""
    if node.find(exp.Rand, exp.Randn) is not None:
        return False
    names = function_names(node)
    return not (names & NON_DETERMINISTIC or any(n.startswith(NON_DETERMINISTIC_UDF_PREFIX) for n in names))


def _in_own_query(found: exp.Expr, root: exp.Expr, *also: type[exp.Expr]) -> bool:
    # Whether ``found`` sits in a subquery of ``root`` (or under one of ``also``): a subquery's
    # aggregates and windows belong to its own plan, not to the expression (as in Catalyst).
    parent = found.parent
    while parent is not None and found is not root:
        if isinstance(parent, (exp.Select, exp.Subquery, *also)):
            return True
        if parent is root:
            break
        parent = parent.parent
    return False


def has_aggregate(node: exp.Expression) -> bool:
    """True when the expression contains an aggregate function (outside a window and outside a
    subquery)."""
    return any(not _in_own_query(agg, node, exp.Window) for agg in node.find_all(exp.AggFunc))


def has_window(node: exp.Expression) -> bool:
    """True when the expression contains a window function (outside a subquery)."""
    return any(not _in_own_query(w, node) for w in node.find_all(exp.Window))


def has_subquery(node: exp.Expression) -> bool:
    """True when the expression contains a subquery (scalar, IN or EXISTS)."""
    # SQLGlot writes the higher-order exists(array, x -> ...) as an Exists, with its lambda
    return any(
        not (isinstance(found, exp.Exists) and isinstance(found.expression, exp.Lambda))
        for found in node.find_all(exp.Subquery, exp.Exists, exp.Select)
    )


def unparen(node: exp.Expr) -> exp.Expr:
    """``node`` without the parentheses around it."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def split_conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """``a AND (b AND c)`` -> [a, b, c] (parentheses unwrapped)."""
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return split_conjuncts(node.this) + split_conjuncts(node.expression)
    return [node]


def conjunction(nodes: list[exp.Expression]) -> exp.Expression | None:
    """AND of ``nodes`` (None for an empty list)."""
    if not nodes:
        return None
    out = nodes[0]
    for n in nodes[1:]:
        out = cast(exp.Expression, exp.and_(out, n))
    return out


def disjunction(nodes: list[exp.Expression]) -> exp.Expression | None:
    """OR of ``nodes`` (None for an empty list)."""
    if not nodes:
        return None
    out = nodes[0]
    for n in nodes[1:]:
        out = cast(exp.Expression, exp.or_(out, n))
    return out


def replace_current_time(node: exp.Expression, now_sql: dict[str, str]) -> exp.Expression:
    """Replace current_timestamp()/now()/current_date() with literals fixed once per MERGE."""

    def fix(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.CurrentTimestamp) or (
            isinstance(n, exp.Anonymous) and str(n.this).lower() in ("now", "localtimestamp")
        ):
            return parse_expression(now_sql["timestamp"])
        if isinstance(n, exp.CurrentDate):
            return parse_expression(now_sql["date"])
        return n

    return node.transform(fix)
