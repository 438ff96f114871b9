"""SQL entry point: ``MERGE INTO`` on Delta tables runs here; every other statement goes to Spark.

The statement is parsed with SQLGlot (Spark dialect). Spark's MERGE grammar is enforced: all WHEN
MATCHED clauses first, then WHEN NOT MATCHED [BY TARGET], then WHEN NOT MATCHED BY SOURCE; only the
last clause of each kind may omit its condition (Spark's parser error classes). The target is
``delta.`<path>```, a name given with ``deltamerge.register_table``, or a temp view that is a full
scan of a Delta table (see ``views``).
"""

from __future__ import annotations

import re

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from deltamerge import catalog, views
from deltamerge.errors import AnalysisError, ParseError, TableNotFoundError
from deltamerge.identifiers import lookup_table
from deltamerge.log.paths import split_time_travel
from deltamerge.log.snapshot import DeltaLog
from deltamerge.merge.clauses import ActionType, Assignment, ClauseKind, MergeClause, MergeSpec
from deltamerge.merge.resolution import side_qualifier
from deltamerge.predicates import to_sql
from deltamerge.sql_common import (
    check_with_spark_parser,
    qualify_target_columns,
    refuse_extras,
    syntax_error_text,
    target_key,
)
from deltamerge.sql_dialect import DIALECT
from deltamerge.sql_params import inline_identifiers, normalize_time_travel
from deltamerge.sql_tables import sql_with_delta_tables

_EVOLUTION = re.compile(r"\bMERGE\s+WITH\s+SCHEMA\s+EVOLUTION\s+INTO\b", re.IGNORECASE)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+", re.IGNORECASE)
_MERGE_WORD = re.compile(r"\bMERGE\b", re.IGNORECASE)
MAX_SQL_LENGTH = 1_000_000

_SPARK_NON_LAST = {
    ClauseKind.MATCHED: (
        "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        "When there are more than one MATCHED clauses in a MERGE statement, only the last MATCHED clause "
        "can omit the condition.",
    ),
    ClauseKind.NOT_MATCHED: (
        "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
        "When there are more than one NOT MATCHED [BY TARGET] clauses in a MERGE statement, only the last "
        "NOT MATCHED [BY TARGET] clause can omit the condition.",
    ),
    ClauseKind.NOT_MATCHED_BY_SOURCE: (
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
        "When there are more than one NOT MATCHED BY SOURCE clauses in a MERGE statement, only the last "
        "NOT MATCHED BY SOURCE clause can omit the condition.",
    ),
}
_ORDER = {ClauseKind.MATCHED: 0, ClauseKind.NOT_MATCHED: 1, ClauseKind.NOT_MATCHED_BY_SOURCE: 2}


def _clause(when: exp.When) -> MergeClause:
    matched = bool(when.args.get("matched"))
    by_source = bool(when.args.get("source"))
    kind = (
        ClauseKind.MATCHED
        if matched
        else (ClauseKind.NOT_MATCHED_BY_SOURCE if by_source else ClauseKind.NOT_MATCHED)
    )
    condition = when.args.get("condition")
    then = when.args.get("then")
    refuse_extras(when, {"matched", "source", "condition", "then"}, "a WHEN clause", "MERGE")
    if isinstance(then, exp.Update):
        refuse_extras(then, {"expressions"}, "UPDATE", "MERGE")
    elif isinstance(then, exp.Insert):
        refuse_extras(then, {"this", "expression"}, "INSERT", "MERGE")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        if kind is ClauseKind.NOT_MATCHED:
            raise ParseError(
                "WHEN NOT MATCHED clauses can only INSERT. Use INSERT * or INSERT (...) VALUES (...)."
            )
        return MergeClause(kind, ActionType.DELETE, condition, ())
    if isinstance(then, exp.Update):
        if kind is ClauseKind.NOT_MATCHED:
            raise ParseError("WHEN NOT MATCHED clauses can only INSERT.")
        items = then.args.get("expressions")
        if not isinstance(items, list) or not items:  # e.g. ``UPDATE *``: Spark's parser rejects it too
            raise ParseError("Syntax error in MERGE: use UPDATE SET * or UPDATE SET column = expression, ...")
        if len(items) == 1 and isinstance(items[0], exp.Star):
            _plain_star(items[0], "UPDATE SET")
            if kind is ClauseKind.NOT_MATCHED_BY_SOURCE:
                raise ParseError("UPDATE SET * is not allowed in WHEN NOT MATCHED BY SOURCE clauses.")
            return MergeClause(kind, ActionType.UPDATE, condition, None)
        assigns = []
        for item in items:
            if not isinstance(item, exp.EQ):
                raise ParseError(f"Expected `column = expression` in UPDATE SET, found {to_sql(item)}.")
            assigns.append(Assignment(target_key(item.this), item.expression))
        return MergeClause(kind, ActionType.UPDATE, condition, tuple(assigns))
    if isinstance(then, exp.Insert):
        if kind is not ClauseKind.NOT_MATCHED:
            raise ParseError("INSERT is only allowed in WHEN NOT MATCHED [BY TARGET] clauses.")
        if isinstance(then.this, exp.Star):
            _plain_star(then.this, "INSERT")
            return MergeClause(kind, ActionType.INSERT, condition, None)
        # ``INSERT``, ``INSERT VALUES (...)``, ``INSERT ALL`` (no VALUES: SQLGlot leaves False)
        if then.this is None or not isinstance(then.expression, exp.Expression):
            raise ParseError(
                "Syntax error in MERGE: use INSERT * or INSERT (column, ...) VALUES (expression, ...)"
            )
        cols = then.this.expressions if isinstance(then.this, exp.Tuple) else [then.this]
        vals_node = then.expression
        vals = vals_node.expressions if isinstance(vals_node, exp.Tuple) else [vals_node]
        if len(cols) != len(vals):
            raise AnalysisError(
                f"INSERT has {len(cols)} column(s) but {len(vals)} value(s); list one value per column.",
                error_class="DELTA_INSERT_COLUMN_ARITY_MISMATCH",
            )
        assigns = [
            Assignment(target_key(c), v)
            for c, v in zip(cols, vals, strict=True)  # lengths checked above
        ]
        return MergeClause(kind, ActionType.INSERT, condition, tuple(assigns))
    raise ParseError(f"Unsupported MERGE action: {to_sql(then) if then is not None else 'none'}.")


def _check_sql_grammar(clauses: list[MergeClause]) -> None:
    if not clauses:
        raise ParseError(
            "There must be at least one WHEN clause in a MERGE statement.", error_class="PARSE_SYNTAX_ERROR"
        )
    last = 0
    for c in clauses:
        if _ORDER[c.kind] < last:
            raise ParseError(
                "Syntax error in MERGE: WHEN MATCHED clauses must come first, then WHEN NOT MATCHED "
                "[BY TARGET], then WHEN NOT MATCHED BY SOURCE."
            )
        last = _ORDER[c.kind]
    for kind, (error_class, message) in _SPARK_NON_LAST.items():
        of_kind = [c for c in clauses if c.kind is kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise ParseError(message, error_class=error_class)


def _plain_star(star: exp.Star, action: str) -> None:
    """``*`` alone: ``UPDATE SET * EXCEPT (c)`` / ``INSERT * EXCEPT (c)`` (Databricks SQL) is not
    Spark's grammar, and reading it as ``*`` would write the columns the user meant to keep."""
    extra = next((k for k, v in star.args.items() if v), None)
    if extra is not None:
        raise ParseError(
            f"Syntax error in MERGE: {action} {to_sql(star)} is not part of Spark's MERGE syntax; only "
            f"{action} * is. List the columns to write instead: "
            + (
                "UPDATE SET c1 = s.c1, ..."
                if action == "UPDATE SET"
                else "INSERT (c1, ...) VALUES (s.c1, ...)."
            )
        )


def _column_aliases(alias: exp.Expression | None) -> list[str]:
    """The column names of an alias ``s(a, b)`` (none for ``s``)."""
    if not isinstance(alias, exp.TableAlias):
        return []
    return [c.name for c in alias.args.get("columns") or []]


def _target(spark: SparkSession, table: exp.Table) -> tuple[str, str | None, str | None]:
    """(path, alias, name) of the MERGE target."""
    if not isinstance(table, exp.Table):
        raise ParseError(
            f"MERGE INTO needs a table as target (a registered name or delta.`/path`), found "
            f"{to_sql(table)[:200] if table is not None else 'nothing'}."
        )
    alias = table.alias or None
    if table.args.get("version") is not None:  # Spark's MERGE grammar has no time travel on the target
        raise ParseError(
            "MERGE INTO cannot write to a table version: remove "
            f"{to_sql(table.args['version'])} from the target."
        )
    if _column_aliases(table.args.get("alias")):  # Spark's parser refuses them on either side
        raise ParseError(
            "Column aliases are not allowed in MERGE: name the target `t`, not `t(a, b)`.",
            error_class="COLUMN_ALIASES_NOT_ALLOWED",
        )
    refuse_extras(table, {"this", "db", "catalog", "alias"}, "the target table", "MERGE")
    if (
        table.args.get("db") is not None
        and table.args["db"].name.lower() == "delta"
        and table.args.get("catalog") is None
    ):
        return table.name, alias, None
    name = ".".join(p.name for p in table.parts)
    path = catalog.path_for_name(name) or catalog.path_for_name(table.name)
    if path is None and table.args.get("db") is None:
        path = views.view_target_path(spark, name)  # a temp view that fully scans a Delta table
        if path is not None:
            catalog.track_view(name, path)
    if path is None and _names_other_data(spark, table, name):
        raise AnalysisError(
            f"MERGE destination only supports Delta sources. `{name}` is not a Delta table: MERGE INTO "
            "a Delta table (delta.`/path/to/table`, a name registered with deltamerge.register_table, "
            "or a temp view that reads one whole).",
            error_class="DELTA_UNSUPPORTED_SOURCE",
            sql_state="0AKDD",
        )
    if path is None:
        raise TableNotFoundError(
            f"The table or view `{name}` cannot be found as a Delta table. Use delta.`/path/to/table` or "
            "register it with deltamerge.register_table(spark, name, path).",
            error_class="TABLE_OR_VIEW_NOT_FOUND",
        )
    return path, alias or table.name, name


_FILE_FORMATS = frozenset({"parquet", "json", "csv", "orc", "text", "avro", "binaryfile"})


def _names_other_data(spark: SparkSession, table: exp.Table, name: str) -> bool:
    """Whether the target names data Spark can read that is not a Delta table: a file path read
    by format (parquet.`/p`), a temp view or a catalog table. Delta then refuses the target as not
    a Delta source; an unknown name stays ``TABLE_OR_VIEW_NOT_FOUND``."""
    db = table.args.get("db")
    if db is not None and db.name.lower() in _FILE_FORMATS and table.args.get("catalog") is None:
        return True
    try:
        return bool(spark.catalog.tableExists(name))
    except Exception:  # a name Spark cannot parse or look up: not found
        return False


def _refresh_names(spark: SparkSession, statement: exp.Expression) -> None:
    for t in statement.find_all(exp.Table):
        if catalog.path_for_name(t.name) is not None:
            catalog.refresh_view(spark, t.name)


def _source(spark: SparkSession, merge: exp.Merge) -> tuple[DataFrame, str | None]:
    using = merge.args["using"]
    with_ = merge.args.get("with_") or merge.args.get("with")
    prefix = (with_.sql(dialect=DIALECT) + " ") if with_ is not None else ""
    alias = using.alias or None
    if _column_aliases(using.args.get("alias")):  # Spark's parser refuses them on either side
        raise ParseError(
            "Column aliases are not allowed in MERGE: name the source's columns inside it, e.g. "
            "USING (SELECT a AS id, b AS v FROM ...) s, or (VALUES (...) AS v(id, v)) s.",
            error_class="COLUMN_ALIASES_NOT_ALLOWED",
        )
    if isinstance(using, exp.Table):
        db = using.args.get("db")
        if db is not None and db.name.lower() == "delta" and using.args.get("catalog") is None:
            from deltamerge.io import read

            version, timestamp = _time_travel(using)
            path = using.name
            if version is None and timestamp is None:  # delta.`/path@v3`, delta-spark's suffix
                path, version, timestamp = split_time_travel(path)
            return read(spark, path, version=version, timestamp=timestamp), alias
        bare = using.copy()
        bare.set("alias", None)
        # Anything beyond the name (VERSION AS OF, TABLESAMPLE...) is for a query, not spark.table().
        beyond_name = any(v is not None for k, v in bare.args.items() if k not in ("this", "db", "catalog"))
        registered = lookup_table([p.name for p in using.parts])
        only_travel = not any(v is not None for k, v in bare.args.items() if k not in _NAME_AND_TRAVEL)
        if registered is not None and not prefix and only_travel:
            # A registered name read by deltamerge: its temp view has one part (``default.t`` would
            # not resolve) and cannot travel in time (``t VERSION AS OF 3``).
            from deltamerge.io import read

            version, timestamp = _time_travel(using)
            return read(spark, registered[0], version=version, timestamp=timestamp), alias or using.name
        if prefix or beyond_name:
            return _query(spark, f"{prefix}SELECT * FROM {bare.sql(dialect=DIALECT)}"), alias or using.name
        return spark.table(bare.sql(dialect=DIALECT)), alias or using.name
    query = using.this if isinstance(using, exp.Subquery) else using
    return _query(spark, prefix + query.sql(dialect=DIALECT)), alias


_NAME_AND_TRAVEL = ("this", "db", "catalog", "version")


def _query(spark: SparkSession, text: str) -> DataFrame:
    # A query may read delta.`<path>` tables, which Spark cannot resolve without Delta's jars.
    return sql_with_delta_tables(spark, text)


def _time_travel(table: exp.Table) -> tuple[int | None, str | None]:
    """(version, timestamp) of ``delta.`<path>` VERSION|TIMESTAMP AS OF <literal>``."""
    travel = table.args.get("version")
    if travel is None:
        return None, None
    value = travel.expression
    kind = travel.name.upper()
    if not isinstance(value, exp.Literal):
        raise ParseError(
            f"{kind} AS OF on {to_sql(table.this)} needs a literal (a version number or a timestamp "
            f"string), found {to_sql(value)}."
        )
    if kind == "VERSION":
        if value.is_string or not re.fullmatch(r"[-+]?\d+", value.name):
            raise ParseError(f"VERSION AS OF expects a version number, got {to_sql(value)}.")
        return int(value.name), None
    return None, value.name


def parse_merge(spark: SparkSession, text: str) -> tuple[str, MergeSpec] | None:
    """(target path, spec) for a MERGE statement; None when ``text`` is not a MERGE."""
    if len(text) > MAX_SQL_LENGTH:
        raise ParseError(f"SQL text of {len(text)} characters is longer than the {MAX_SQL_LENGTH} allowed.")
    if not _MERGE_WORD.search(text):
        return None
    evolve = bool(_EVOLUTION.search(text))
    cleaned = _EVOLUTION.sub("MERGE INTO", text)
    try:
        statement = sqlglot.parse_one(cleaned, read=DIALECT)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        if re.match(r"^\s*(WITH\b.*)?\bMERGE\b", cleaned, re.IGNORECASE | re.DOTALL):
            raise ParseError(f"Syntax error in MERGE statement: {syntax_error_text(e)}")
        return None
    if not isinstance(statement, exp.Merge):
        return None
    refuse_extras(
        statement, {"this", "using", "on", "using_cond", "whens", "with_", "with"}, "the statement", "MERGE"
    )
    qualify_target_columns(statement, ("on", "whens"), side_qualifier("target"))
    clauses = [_clause(w) for w in statement.args["whens"].expressions] if statement.args.get("whens") else []
    _check_sql_grammar(clauses)
    try:
        check_with_spark_parser(spark, text)
    except ParseError:
        # deltamerge reads a time-travelled or sampled source table, which Spark's MERGE grammar
        # has no place for; everything else Spark refuses, Delta refuses.
        using = statement.args.get("using")
        if not (isinstance(using, exp.Table) and (using.args.get("version") or using.args.get("sample"))):
            raise
    path, target_alias, _name = _target(spark, statement.this)
    if not DeltaLog.for_table(path).exists():
        root = views.enclosing_table_root(path)
        if root is not None:  # delta.`<table>/p=1`: reading it would be a partial scan, as in Delta
            raise AnalysisError(
                f"Expect a full scan of Delta sources, but found a partial scan. path:{root}. "
                f"`{path}` is a directory inside the Delta table at {root}; MERGE INTO the table "
                "and put the partition predicate into the ON condition instead.",
                error_class="DELTA_UNEXPECTED_PARTIAL_SCAN",
            )
        raise TableNotFoundError(
            f"`{path}` is not a Delta table: MERGE INTO needs an existing table. Create it with "
            "deltamerge.write(...) first, or check the path.",
            error_class="DELTA_MISSING_DELTA_TABLE",
        )
    _refresh_names(spark, statement)
    source, source_alias = _source(spark, statement)
    spec = MergeSpec(
        source=source,
        condition=statement.args["on"],
        clauses=tuple(clauses),
        target_alias=target_alias,
        source_alias=source_alias,
        schema_evolution=evolve,
    )
    return path, spec


def run_sql(spark: SparkSession, text: str) -> DataFrame:
    """Run one statement: deltamerge handles MERGE (and EXPLAIN MERGE); Spark runs everything else."""
    text = normalize_time_travel(inline_identifiers(text))
    explain = bool(_EXPLAIN.match(text))
    body = _EXPLAIN.sub("", text, count=1) if explain else text
    parsed = parse_merge(spark, body)
    if parsed is None:
        from deltamerge.sql_statements import run_statement

        return run_statement(spark, text)  # UPDATE, DELETE, CREATE TABLE, ... or spark.sql
    path, spec = parsed
    from deltamerge.merge.command import explain_merge, run_merge

    if explain:
        plan = explain_merge(spark, path, spec)
        return spark.createDataFrame([(plan,)], "plan string")
    result = run_merge(spark, path, spec)
    catalog.refresh_views(spark, path)
    return result
