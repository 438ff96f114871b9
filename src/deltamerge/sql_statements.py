"""Delta SQL statements beyond MERGE, for ``deltamerge.sql``.

``run_statement`` runs what Delta Lake adds to Spark SQL and passes everything else to
``spark.sql``:

* ``UPDATE``, ``DELETE FROM`` (sqlglot), run by ``deltamerge.dml``;
* ``INSERT INTO`` / ``INSERT OVERWRITE [TABLE]`` ``t [(cols)] [BY NAME] <query>`` (sqlglot), appended or
  overwritten with ``deltamerge.write`` after Spark's by-position store assignment;
* ``CREATE [OR REPLACE] TABLE`` / ``REPLACE TABLE`` / ``CREATE TABLE IF NOT EXISTS`` ``... USING delta``
  with columns or ``AS SELECT`` (sqlglot, ``sql_create``), run by ``deltamerge.builders.create_table``;
* ``ALTER TABLE t SET | UNSET TBLPROPERTIES (...)``, ``DROP FEATURE f [TRUNCATE HISTORY]``,
  ``ADD CONSTRAINT c CHECK (...)``,
  ``DROP CONSTRAINT [IF EXISTS] c`` (column clauses: ``sql_alter``),
  ``DESCRIBE HISTORY t [LIMIT n]``, ``DESCRIBE DETAIL t``, ``SHOW TBLPROPERTIES`` / ``SHOW
  PARTITIONS`` / ``SHOW CREATE TABLE`` / ``DESCRIBE [EXTENDED]`` / ``TRUNCATE TABLE`` (``sql_show``),
  ``VACUUM t [LITE | FULL] [RETAIN n HOURS] [DRY RUN]`` (modifiers in any order),
  ``RESTORE [TABLE] t [TO] VERSION | TIMESTAMP AS OF ...``, ``OPTIMIZE t [WHERE ...]``,
  ``REORG TABLE t [WHERE ...] APPLY (PURGE)``, ``GENERATE symlink_format_manifest FOR TABLE t``,
  ``CONVERT TO DELTA parquet.`/path` [NO STATISTICS] [PARTITIONED BY (col type, ...)]`` (a
  regular-expression front: sqlglot does not parse them);
* queries reading ``table_changes('t', start[, end])`` / ``table_changes_by_path(...)``: each call
  becomes a temporary view over ``deltamerge.read_changes`` and Spark runs the query.

A table ``t`` is a name registered with ``deltamerge.register_table`` (or created by CREATE TABLE),
``delta.`/path``` or, where Delta allows it, a quoted path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from deltamerge import catalog
from deltamerge.errors import (
    AnalysisError,
    ParseError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.identifiers import QUALIFIED, lookup_table, name_parts
from deltamerge.identifiers import unquote as _unquote
from deltamerge.merge.clauses import Assignment
from deltamerge.predicates import to_sql
from deltamerge.spark.types import quote_name
from deltamerge.sql_common import (
    FLAGS,
    TABLE_REF,
    check_with_spark_parser,
    delta_source,
    empty_frame,
    parse_properties,
    parse_statement,
    path_of,
    qualify_target_columns,
    refuse_extras,
    resolve_table,
    table_node,
    target_key,
)
from deltamerge.sql_create import create_statement
from deltamerge.sql_dialect import DIALECT
from deltamerge.sql_maintenance import HANDLERS
from deltamerge.sql_show import HANDLERS as SHOW_HANDLERS
from deltamerge.sql_tables import escape_braces, has_delta_tables, sql_with_delta_tables
from deltamerge.table_properties import set_properties, unset_properties

__all__ = ["run_statement"]

_ALTER = re.compile(rf"ALTER\s+TABLE\s+{TABLE_REF}\s+(?P<rest>.+)", FLAGS)
_SET_PROPS = re.compile(r"SET\s+TBLPROPERTIES\s*\((?P<props>.*)\)", FLAGS)
_NAME = r"(?P<name>`(?:[^`]|``)+`|\w+)"
_ADD_CONSTRAINT = re.compile(rf"ADD\s+CONSTRAINT\s+{_NAME}\s+CHECK\s*\((?P<expr>.*)\)", FLAGS)
_DROP_CONSTRAINT = re.compile(rf"DROP\s+CONSTRAINT\s+(?P<ifexists>IF\s+EXISTS\s+)?{_NAME}", FLAGS)
_UNSET_PROPS = re.compile(r"UNSET\s+TBLPROPERTIES\s+(?P<ifexists>IF\s+EXISTS\s+)?\((?P<props>.*)\)", FLAGS)
_DROP_FEATURE = re.compile(
    r"DROP\s+FEATURE\s+(?P<feature>`(?:[^`]|``)+`|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\w+)"
    r"(?P<truncate>\s+TRUNCATE\s+HISTORY)?",
    FLAGS,
)
_CLUSTER_BY = re.compile(r"CLUSTER\s+BY\s+(?:NONE|\((?P<columns>.*)\))", FLAGS)
_DML = re.compile(r"(UPDATE|DELETE\s+FROM)\s", FLAGS)
_INSERT = re.compile(r"(WITH\s.*?\s)?INSERT\s+(WITH\s+SCHEMA\s+EVOLUTION\s+)?(INTO|OVERWRITE)\s", FLAGS)
_INSERT_EVOLUTION = re.compile(r"\bINSERT\s+WITH\s+SCHEMA\s+EVOLUTION\s+", FLAGS)
_CREATE = re.compile(r"(?P<head>(?:CREATE\s+(?:OR\s+REPLACE\s+)?|REPLACE\s+)TABLE)\s", FLAGS)
_USING_DELTA = re.compile(r"\bUSING\s+delta\b", re.IGNORECASE)
_TABLE_CHANGES = re.compile(r"\btable_changes(?P<by_path>_by_path)?\s*\(", re.IGNORECASE)
_COMMENTS = re.compile(r"^\s*(?:--[^\n]*\n|/\*.*?\*/)\s*", re.DOTALL)
_LITERAL = re.compile(r"\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[-+]?\d+|[\w.`]+)\s*")


# --- statements ------------------------------------------------------------------------------------


def _alter(spark: SparkSession, m: re.Match[str]) -> DataFrame | None:
    try:
        path, _name = resolve_table(m.group("table"), allow_path=False)
    except TableNotFoundError:
        return None  # not a deltamerge table: Spark's ALTER TABLE
    rest = m.group("rest").strip()
    if (c := _ADD_CONSTRAINT.fullmatch(rest) or _DROP_CONSTRAINT.fullmatch(rest)) is not None:
        from deltamerge import constraint_ddl

        name = c.group("name")
        name = name[1:-1].replace("``", "`") if name.startswith("`") else name
        shown = _name or f"delta.`{path}`"
        if "expr" in c.groupdict():
            constraint_ddl.add_constraint(spark, path, name, c.group("expr").strip(), shown)
        else:
            exists = bool(c.group("ifexists"))
            constraint_ddl.drop_constraint(spark, path, name, if_exists=exists, table_name=shown)
        return empty_frame(spark)
    if (c := _DROP_FEATURE.fullmatch(rest)) is not None:
        from deltamerge.feature_drop import drop_feature

        feature = _unquote(c.group("feature"))  # bare, 'quoted', "quoted" or `backticked`
        drop_feature(spark, path, feature, truncate_history=bool(c.group("truncate")))
        return empty_frame(spark)
    if (c := _CLUSTER_BY.fullmatch(rest)) is not None:
        from deltamerge.table_properties import cluster_by

        listed = c.group("columns")
        cluster_by(spark, path, [name_parts(n) for n in re.findall(QUALIFIED, listed or "")])
        return empty_frame(spark)
    set_m, unset_m = _SET_PROPS.fullmatch(rest), _UNSET_PROPS.fullmatch(rest)
    if set_m is None and unset_m is None:
        from deltamerge.sql_alter import run_alter_columns, run_alter_name

        if run_alter_name(spark, path, _name, rest) or run_alter_columns(spark, path, rest):
            return empty_frame(spark)
        raise UnsupportedOperationError(
            f"ALTER TABLE ... {rest.split()[0].upper()} is not implemented by deltamerge; only "
            "SET / UNSET TBLPROPERTIES, ADD / DROP CONSTRAINT, DROP FEATURE, CLUSTER BY, ADD COLUMNS, RENAME "
            "COLUMN, DROP COLUMN(S), ALTER COLUMN, RENAME TO and SET LOCATION are."
        )
    if set_m is not None:
        set_properties(spark, path, parse_properties(set_m.group("props"), keys_only=False))
    else:
        assert unset_m is not None
        keys = list(parse_properties(unset_m.group("props"), keys_only=True))
        unset_properties(spark, path, keys, if_exists=bool(unset_m.group("ifexists")))
    return empty_frame(spark)


def _dml_target(spark: SparkSession, table: exp.Table, operation: str) -> tuple[str, str | None]:
    """(path, alias) of an UPDATE or DELETE target: a Delta path, a registered name, or a temp view
    that fully scans a Delta table (an UPDATE through a view of a table with generated columns is
    refused, as in Delta)."""
    from deltamerge import views

    try:
        path, alias, _name = table_node(table)
        return path, alias
    except TableNotFoundError:
        name = ".".join(p.name for p in table.parts)
        viewed = views.view_target_path(spark, name, operation=operation)
        if viewed is None:
            raise
    if operation == "UPDATE":
        views.refuse_generated_columns(viewed, operation)
    catalog.track_view(name, viewed)
    return viewed, table.alias or name


def _dml(spark: SparkSession, text: str) -> DataFrame | None:
    from deltamerge import dml

    statement = parse_statement(text)
    if not isinstance(statement, (exp.Update, exp.Delete)) or not isinstance(statement.this, exp.Table):
        return None
    operation = "UPDATE" if isinstance(statement, exp.Update) else "DELETE"
    target = statement.this
    if target.args.get("version") is not None:  # Spark's grammar has no time travel on the target
        raise ParseError(
            f"{operation} cannot write to a table version: remove {to_sql(target.args['version'])}."
        )
    refuse_extras(target, {"this", "db", "catalog", "alias"}, "the target table", operation)
    if statement.args.get("using"):
        raise UnsupportedOperationError("DELETE ... USING is not supported by Delta.")
    if statement.args.get("from") or statement.args.get("from_"):
        raise UnsupportedOperationError("UPDATE ... FROM is not supported by Delta; use MERGE INTO.")
    allowed = {"this", "where", "with_", "with", *(("expressions",) if operation == "UPDATE" else ())}
    refuse_extras(statement, allowed, "the statement", operation)
    path, alias = _dml_target(spark, target, operation)
    check_with_spark_parser(spark, text)
    qualify_target_columns(statement, ("where", "expressions"), None)
    where = statement.args.get("where")
    condition = where.this if where is not None else None
    if isinstance(statement, exp.Delete):
        return dml.delete(spark, path, condition, target_alias=alias)
    assigns = []
    for item in statement.expressions:
        if not isinstance(item, exp.EQ) or not isinstance(item.this, (exp.Column, exp.Dot, exp.Func)):
            raise ParseError(f"Expected `column = expression` in UPDATE SET, found {to_sql(item)}.")
        assigns.append(Assignment(target_key(cast(exp.Expression, item.this)), item.expression))
    return dml.update(spark, path, condition, assigns, target_alias=alias)


def _insert(spark: SparkSession, text: str) -> DataFrame | None:
    """INSERT INTO / INSERT OVERWRITE [TABLE] t [(cols)] <query>: by position (or BY NAME), values
    cast to the table's column types as Spark's store assignment does; None when ``t`` is not a
    Delta table deltamerge knows (Spark then runs the statement)."""
    evolve = _INSERT_EVOLUTION.search(text) is not None
    try:
        statement = parse_statement(_INSERT_EVOLUTION.sub("INSERT ", text, count=1) if evolve else text)
    except ParseError:
        if re.search(r"\bREPLACE\s+ON\b", text, re.IGNORECASE):  # Spark 4's form SQLGlot lacks
            raise UnsupportedOperationError(
                "INSERT ... REPLACE ON is not implemented by deltamerge. Use INSERT ... REPLACE USING, "
                "df.write.format('delta').mode('overwrite').option('replaceOn', '<condition>') or a "
                "MERGE to replace rows."
            ) from None
        raise
    if not isinstance(statement, exp.Insert):
        return None
    target = statement.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        return None
    db = target.args.get("db")
    if (
        not (db is not None and db.name.lower() == "delta")
        and lookup_table([p.name for p in target.parts]) is None
    ):
        return None
    check_with_spark_parser(spark, text)
    if evolve:
        raise UnsupportedOperationError(
            "INSERT WITH SCHEMA EVOLUTION is not implemented by deltamerge. Use df.write.format('delta')"
            ".option('mergeSchema', 'true').mode('append') for schema evolution."
        )
    using = [i.name for i in statement.args.get("using") or []]  # REPLACE USING (c, ...)
    if using and statement.args.get("overwrite"):
        raise ParseError("INSERT OVERWRITE takes no REPLACE USING; use INSERT INTO ... REPLACE USING.")
    refuse_extras(target, {"this", "db", "catalog", "partition"}, "the target table", "INSERT")
    refuse_extras(
        statement,
        {"this", "expression", "by_name", "overwrite", "where", "source", "with_", "with", "using"},
        "the statement",
        "INSERT",
    )
    path, _alias, _name = table_node(target)
    static, options = _insert_partitions(spark, path, statement)
    query = statement.expression
    source = statement.args.get("source")
    if query is None and isinstance(source, exp.Table):  # INSERT INTO t TABLE s
        query = exp.select("*").from_(source)
    if query is None:
        raise ParseError(f"INSERT without a query: {text.strip()[:200]!r}. Add VALUES or a SELECT.")
    if isinstance(query, exp.Values | exp.Select):
        from deltamerge.column_defaults import with_defaults
        from deltamerge.io import snapshot_for

        query = with_defaults(query, snapshot_for(path).metadata.schema_string, columns)
    with_ = statement.args.get("with_") or statement.args.get("with")
    prefix = (with_.sql(dialect=DIALECT) + " ") if with_ is not None else ""
    data = sql_with_delta_tables(spark, prefix + query.sql(dialect=DIALECT))
    from deltamerge.configure.writes import insert_rows

    if using:
        from deltamerge.configure.replace_on import check_aligned, check_using_columns

        if static or options:
            raise ParseError("INSERT ... REPLACE USING takes no PARTITION clause or REPLACE WHERE.")
        if columns is not None:  # the query's columns take the listed names by position
            check_using_columns(using, _table_columns(path), columns)
        elif statement.args.get("by_name"):
            check_using_columns(using, _table_columns(path), data.columns)
        else:
            check_aligned(using, _table_columns(path), data.columns)
        options = {"replaceUsing": ", ".join(using)}

    if static:  # PARTITION (p = 'v'): the query gives the other columns, the clause p
        from pyspark.sql import functions as F

        if columns is None and not statement.args.get("by_name"):
            columns = [c for c in _table_columns(path) if c.lower() not in {k.lower() for k in static}]
        if columns is not None:
            columns = [*columns, *static]
        data = data.select("*", *[F.expr(value).alias(name) for name, value in static.items()])
    insert_rows(
        data,
        path,
        columns=columns,
        by_name=bool(statement.args.get("by_name")),
        overwrite=bool(statement.args.get("overwrite")) or "replaceWhere" in options or bool(using),
        options=options,
    )
    return empty_frame(spark)


def _table_columns(path: str) -> list[str]:
    from deltamerge.io import snapshot_for
    from deltamerge.spark.types import to_spark_schema

    return [f.name for f in to_spark_schema(snapshot_for(path).metadata.schema_string).fields]


def _insert_partitions(
    spark: SparkSession, path: str, statement: exp.Insert
) -> tuple[dict[str, str], dict[str, str]]:
    """({partition column: value SQL} of a PARTITION clause, the write's options) of an INSERT.

    ``REPLACE WHERE cond`` overwrites the rows matching ``cond`` (Delta's replaceWhere);
    ``INSERT OVERWRITE ... PARTITION (p = 'v')`` overwrites partition p = 'v' only, unless some
    partition columns have no value and spark.sql.sources.partitionOverwriteMode is dynamic (then
    the partitions the rows fall into are replaced, as in Delta)."""
    from deltamerge.io import snapshot_for

    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    partition = target.args.get("partition")
    where = statement.args.get("where")
    if where is not None:
        if partition is not None:
            raise ParseError(
                "INSERT ... REPLACE WHERE takes no PARTITION clause; put the values in the query."
            )
        return {}, {"replaceWhere": to_sql(where)}
    if partition is None:
        return {}, {}
    partition_columns = {c.lower(): c for c in snapshot_for(path).metadata.partition_columns}
    static: dict[str, str] = {}
    for item in partition.expressions:
        column = item.this if isinstance(item, exp.EQ) else item
        name = column.name if isinstance(column, exp.Column | exp.Identifier) else to_sql(column)
        if name.lower() not in partition_columns:
            raise AnalysisError(
                f"PARTITION clause cannot contain the non-partition column: `{name}`. The table's "
                f"partition columns are {', '.join(partition_columns.values()) or 'none'}.",
                error_class="NON_PARTITION_COLUMN",
            )
        if isinstance(item, exp.EQ):
            static[partition_columns[name.lower()]] = to_sql(item.expression)
    mode = spark.conf.get("spark.sql.sources.partitionOverwriteMode", "static") or "static"
    if not statement.args.get("overwrite") or not static:
        return static, {}
    if len(static) < len(partition_columns) and mode.lower() == "dynamic":
        return static, {}
    condition = " AND ".join(f"{quote_name(name)} = {value}" for name, value in static.items())
    return static, {"replaceWhere": condition}


def _table_changes(spark: SparkSession, text: str) -> DataFrame:
    from deltamerge.cdf_read import read_changes

    # Each table_changes(...) goes to spark.sql as a DataFrame argument (a {field}): on Spark
    # Connect the query is analysed lazily, after a temporary view dropped here would be gone.
    frames: dict[str, Any] = {}
    out = []
    pos = 0
    for m in _TABLE_CHANGES.finditer(text):
        if m.start() < pos:
            continue
        args, i = [], m.end()
        while True:
            lit = _LITERAL.match(text, i)
            if lit is None:
                raise ParseError(
                    "table_changes arguments must be literals: table_changes('t', start[, end])."
                )
            args.append(lit.group(1))
            i = lit.end()
            if text[i : i + 1] == ",":
                i += 1
                continue
            if text[i : i + 1] == ")":
                break
            raise ParseError("table_changes arguments must be literals: table_changes('t', start[, end]).")
        if len(args) not in (2, 3):
            raise ParseError("table_changes takes a table and a start (and an optional end).")
        table = _unquote(args[0])
        path = _unquote(table) if m.group("by_path") else resolve_table(table)[0]
        bounds: dict[str, object] = {}
        for arg, kind in zip(args[1:], ("starting", "ending"), strict=False):
            if re.fullmatch(r"[-+]?\d+", arg):
                bounds[f"{kind}_version"] = int(arg)
            else:
                bounds[f"{kind}_timestamp"] = _unquote(arg)
        name = f"dm_table_changes_{len(frames)}"
        frames[name] = read_changes(spark, path, **bounds)  # type: ignore[arg-type]
        out.append(escape_braces(text[pos : m.start()]) + "{" + name + "}")
        pos = i + 1
    out.append(escape_braces(text[pos:]))
    _refresh_named(spark, text)
    return spark.sql("".join(out), **frames)


def _refresh_named(spark: SparkSession, text: str) -> None:
    try:
        tree = sqlglot.parse_one(text, read=DIALECT)
    except Exception:
        return
    for t in tree.find_all(exp.Table):
        if catalog.path_for_name(t.name) is not None:
            catalog.refresh_view(spark, t.name)


def _delta_by_default(spark: SparkSession, text: str) -> bool:
    """Whether a CREATE TABLE without ``USING`` makes a Delta table: Spark gives such a table the
    format ``spark.sql.sources.default`` names (``delta`` on Databricks), or its LIKE source's. A
    ``delta.`path``` target with another default would be a table ``/path`` in a schema ``delta``:
    refused with what to do."""
    try:
        statement = sqlglot.parse_one(text, read=DIALECT)
    except Exception:
        return False  # Spark reports it
    props = statement.args.get("properties")
    given = props.expressions if props is not None else []
    if any(isinstance(p, (exp.FileFormatProperty, exp.RowFormatSerdeProperty)) for p in given):
        return False  # USING / STORED AS another format: Spark's table
    if str(spark.conf.get("spark.sql.sources.default", "parquet") or "").lower() == "delta":
        return True
    like = next((p.this for p in given if isinstance(p, exp.LikeProperty)), None)
    if isinstance(like, exp.Table) and delta_source(like) is not None:
        return True  # CREATE TABLE ... LIKE takes its source's format
    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    if isinstance(target, exp.Table) and path_of(target) is not None:
        raise AnalysisError(
            f"The schema `delta` cannot be found: {to_sql(target)} names a Delta table by its path, "
            "but without USING the table would take Spark's default format "
            f"({spark.conf.get('spark.sql.sources.default', 'parquet')}). Add USING delta (or set "
            "spark.sql.sources.default to delta).",
            error_class="SCHEMA_NOT_FOUND",
            sql_state="42704",
        )
    return False


_HANDLERS: list[tuple[re.Pattern[str], Callable[[SparkSession, re.Match[str]], DataFrame | None]]] = [
    *HANDLERS,
    *SHOW_HANDLERS,
    (_ALTER, _alter),
]


def run_statement(spark: SparkSession, text: str) -> DataFrame:
    """Run one statement: a Delta statement deltamerge implements, else ``spark.sql(text)``."""
    body = text.strip()
    while (comment := _COMMENTS.match(body)) is not None:
        body = body[comment.end() :]
    body = body.rstrip().rstrip(";").strip()
    for pattern, handler in _HANDLERS:
        m = pattern.fullmatch(body)
        if m is not None:
            result = handler(spark, m)
            if result is not None:
                return result
            return spark.sql(text)
    if _INSERT.match(body):
        result = _insert(spark, body)
        if result is not None:
            return result
    if _DML.match(body):
        result = _dml(spark, body)
        if result is not None:
            return result
    create = _CREATE.match(body)
    if create is not None and (_USING_DELTA.search(body) or _delta_by_default(spark, body)):
        return create_statement(spark, body, create.group("head"))
    if _TABLE_CHANGES.search(body):
        return _table_changes(spark, body)
    if has_delta_tables(text):  # e.g. SELECT ... FROM delta.`/path` VERSION AS OF 3
        return sql_with_delta_tables(spark, text)
    return spark.sql(text)
