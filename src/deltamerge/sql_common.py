"""What the SQL front's statement modules share: the table-reference pattern, its resolution to a
path or registered name, property lists, and the empty result."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType
from sqlglot import exp

from deltamerge import catalog
from deltamerge.errors import ParseError, TableNotFoundError
from deltamerge.identifiers import QUALIFIED, lookup_table
from deltamerge.identifiers import unquote as _unquote
from deltamerge.merge.resolution import catalog_name
from deltamerge.sql_dialect import DIALECT

__all__ = [
    "FLAGS",
    "TABLE_REF",
    "check_with_spark_parser",
    "delta_table",
    "empty_frame",
    "parse_properties",
    "qualify_target_columns",
    "refuse_extras",
    "resolve_table",
    "syntax_error_text",
    "table_node",
]

TABLE_REF = (
    r"(?P<table>delta\s*\.\s*`(?:[^`]|``)+`|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|"
    rf"{QUALIFIED})"
)
FLAGS = re.IGNORECASE | re.DOTALL
_PROP = re.compile(
    r"\s*(?P<key>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]+`|[\w.]+)"
    r"(?:\s*=?\s*(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[\w.+-]+))?\s*(?:,|$)",
    re.DOTALL,
)


def empty_frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], StructType([]))


# --- tables ----------------------------------------------------------------------------------------


def table_reference(text: str, *, allow_path: bool = True) -> tuple[str | None, list[str]]:
    """(path, []) of ``delta.`/path``` (or, with ``allow_path``, a quoted path), else (None, the
    unquoted parts of the name)."""
    text = text.strip()
    m = re.fullmatch(r"delta\s*\.\s*(`(?:[^`]|``)+`)", text, re.IGNORECASE)
    if m:
        return _unquote(m.group(1)), []
    if allow_path and text[:1] in "'\"":
        return _unquote(text), []
    return None, [_unquote(p) for p in re.findall(r"`(?:[^`]|``)+`|[^.\s`]+", text)]


def resolve_table(text: str, *, allow_path: bool = True) -> tuple[str, str | None]:
    """(path, name) of a table reference in statement text."""
    path, parts = table_reference(text, allow_path=allow_path)
    if path is not None:
        return path, None
    return resolve_name(parts)


def resolve_name(parts: Sequence[str]) -> tuple[str, str | None]:
    """(path, name) of the registered table the unquoted name ``parts`` names;
    TABLE_OR_VIEW_NOT_FOUND when none is."""
    parts = list(parts)
    found = lookup_table(parts)
    if found is None:
        name = ".".join(parts)
        raise TableNotFoundError(
            f"The table or view `{name}` cannot be found as a Delta table. Use delta.`/path/to/table` or "
            "register it with deltamerge.register_table(spark, name, path).",
            error_class="TABLE_OR_VIEW_NOT_FOUND",
        )
    return found[0], found[1].split(".")[-1]


def path_of(table: exp.Table) -> str | None:
    """The path a ``delta.`path``` table node names; None for a name."""
    db = table.args.get("db")
    return (
        table.name
        if db is not None and db.name.lower() == "delta" and table.args.get("catalog") is None
        else None
    )


def delta_source(table: exp.Table) -> str | None:
    """The root of the Delta table a table node names (a path, or a registered name); None else."""
    path = path_of(table)
    if path is not None:
        return path
    found = lookup_table([p.name for p in table.parts])
    return None if found is None else found[0]


def qualify_target_columns(
    statement: exp.Expression, parts_of: Sequence[str], path_qualifier: str | None
) -> None:
    """Columns in ``statement``'s ``parts_of`` arguments qualified by its unaliased target's full
    name (``default.people.id``, ``spark_catalog.default.people.id``, ``delta.`/p`.id``) rewritten to
    the qualifier the statement resolves: the table's name, or ``path_qualifier`` for a path (None:
    no qualifier, for an UPDATE or DELETE, whose only table is the target), as Spark resolves them
    for Delta."""
    table = statement.this
    if not isinstance(table, exp.Table) or table.alias:
        return
    parts = [p.name for p in table.parts]
    path = path_of(table)
    qualifier: str | None
    if path is not None:  # delta.`/p`: the path is case-sensitive, the rest is not
        forms, qualifier = [["delta", path], [path]], path_qualifier
    else:
        full = list(catalog_name(parts, temp_view=catalog.path_for_name(".".join(parts)) is None))
        forms, qualifier = [full[i:] for i in range(len(full) - 1)], table.name

    def same(a: list[str], b: list[str]) -> bool:
        return all(x == y or (x.lower() == y.lower() and y != path) for x, y in zip(a, b, strict=True))

    for clause_part in (statement.args.get(k) for k in parts_of):
        if clause_part is None:
            continue
        for column in list(_columns_in(clause_part)):
            nodes = [n for key in ("catalog", "db", "table") if (n := column.args.get(key)) is not None]
            names = [n.name for n in nodes]
            for form in forms:
                if len(names) >= len(form) and same(names[: len(form)], form):
                    head = [exp.to_identifier(qualifier, quoted=True)] if qualifier is not None else []
                    rest = [*head, *nodes[len(form) :], column.this]
                    keys = ("this", "table", "db", "catalog")
                    column.replace(exp.Column(**dict(zip(keys, reversed(rest), strict=False))))
                    break


def _columns_in(node: exp.Expression | list[exp.Expression]) -> list[exp.Column]:
    items = node if isinstance(node, list) else [node]
    return [c for item in items for c in item.find_all(exp.Column)]


def table_node(table: exp.Table) -> tuple[str, str | None, str | None]:
    """(path, alias, name) of a sqlglot table node."""
    alias = table.alias or None
    path = path_of(table)
    if path is not None:
        return path, alias, None
    # The parts as parsed: joined and parsed again, a quoted ``my t`` would split at its space.
    path, name = resolve_name([p.name for p in table.parts])
    return path, alias or name, name


def delta_table(spark: SparkSession, text: str):  # type: ignore[no-untyped-def]
    from deltamerge.table import DeltaTable

    path, name = resolve_table(text)
    return DeltaTable.forPath(spark, path) if name is None else DeltaTable(spark, path, name=name)


def parse_properties(text: str, *, keys_only: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _PROP.match(text, pos)
        if m is None or m.end() == pos:
            raise ParseError(f"Cannot parse the table property list ({text}).")
        key = _unquote(m.group("key"))
        value = m.group("value")
        if value is None and not keys_only:
            raise ParseError(f"Table property {key!r} needs a value ('key' = 'value').")
        out[key] = "" if value is None else _unquote(value)
        pos = m.end()
    return out


def target_key(node: exp.Expression) -> tuple[str, ...]:
    """The table column (and nested field) an UPDATE SET or INSERT column list names."""
    from deltamerge.merge.builder import parse_key
    from deltamerge.predicates import column_parts, to_sql

    if isinstance(node, (exp.Column, exp.Dot)):
        try:
            return tuple(column_parts(node))
        except ValueError:
            raise ParseError(f"Expected a column name, found {to_sql(node)}.") from None
    if isinstance(node, exp.Func) and not any(node.args.values()):
        # a column named like a niladic function (current_date): SQLGlot reads the function
        return (node.sql_name().lower(),)
    return (node.name,) if node.name else parse_key(to_sql(node))


def refuse_extras(node: exp.Expression, allowed: set[str], where: str, statement: str) -> None:
    """Refuse a part of ``statement`` that Spark's grammar does not have at ``where`` (``UPDATE SET
    ... WHERE c`` in MERGE, ``DELETE ... LIMIT n``, ``RETURNING``, ``TABLESAMPLE`` on a target,
    ``ON CONFLICT``, ...): SQLGlot parses such text from other dialects, and a part not read would
    be dropped silently (a DELETE ... LIMIT 1 deleted every row its WHERE matched)."""
    from deltamerge.predicates import to_sql

    extra = next((k for k, v in node.args.items() if k not in allowed and v not in (None, False, [])), None)
    if extra is None:
        return
    value = node.args[extra]
    shown = to_sql(value) if isinstance(value, exp.Expression) else extra.upper()
    hint = (
        " Put the condition into the clause: WHEN [NOT] MATCHED AND <condition> THEN ..."
        if extra == "where" and statement == "MERGE"
        else ""
    )
    raise ParseError(
        f"Syntax error in {statement}: {shown[:200]} is not part of Spark's {statement} syntax for "
        f"{where}.{hint}"
    )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def syntax_error_text(error: Exception) -> str:
    """SQLGlot's parse error as plain text (it underlines the offending token with terminal escape
    codes, which a log or a notebook shows as ``[4m``)."""
    return _ANSI.sub("", str(error))


def parse_statement(text: str) -> exp.Expression:
    """One SQL statement parsed by SQLGlot; a syntax error becomes deltamerge's ``ParseError``."""
    try:
        # sqlglot types parse_one as its Expr base; statements are always Expressions.
        return cast(exp.Expression, sqlglot.parse_one(text, read=DIALECT))
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise ParseError(f"Syntax error in statement: {syntax_error_text(e)}")


def check_with_spark_parser(spark: SparkSession, text: str) -> None:
    """Spark's own parser over a MERGE, UPDATE or DELETE deltamerge runs itself (classic sessions;
    Spark Connect has no parse-only call): SQLGlot parses other dialects' text too and may drop a
    token it has no place for (``MERGE INTO t * x``, a second ``USING``, ``WITH (NOLOCK)``), which
    Spark, and so Delta, refuses. Raises Spark's error class and message."""
    from deltamerge.spark.pyspark_errors import quiet_query_context

    jss = getattr(spark, "_jsparkSession", None)
    if jss is None:
        return
    try:
        with quiet_query_context():  # a refused statement is re-raised as deltamerge's error
            jss.sessionState().sqlParser().parsePlan(text)
    except Exception as e:
        condition = getattr(e, "getCondition", lambda: None)()
        if type(e).__name__ != "ParseException" or not condition:
            return  # not a syntax verdict (a py4j or JVM problem): deltamerge's own parse decides
        message = re.sub(rf"^\s*\[{re.escape(condition)}\]\s*", "", str(e))
        state = getattr(e, "getSqlState", lambda: None)() or None
        raise ParseError(message.strip(), error_class=condition, sql_state=state) from None
