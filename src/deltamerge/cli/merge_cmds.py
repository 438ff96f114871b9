"""``deltamerge merge`` and ``deltamerge explain``: a MERGE from clause options or a SQL file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

import typer

from deltamerge.cli.common import EXIT_USAGE, _errors, _fail, _print_rows, _progress, _spark, _table_root

_CLAUSES = {
    "--when-matched-update-all": "whenMatchedUpdateAll",
    "--when-matched-delete": "whenMatchedDelete",
    "--when-not-matched-insert-all": "whenNotMatchedInsertAll",
    "--when-not-matched-by-source-delete": "whenNotMatchedBySourceDelete",
}
_CLAUSE_HELP = """Clauses, in command-line order; each takes an optional condition COND
(within a kind, the first clause whose condition holds wins):

--when-matched-update-all [COND]: WHEN MATCHED THEN UPDATE SET *

--when-matched-delete [COND]: WHEN MATCHED THEN DELETE

--when-not-matched-insert-all [COND]: WHEN NOT MATCHED THEN INSERT *

--when-not-matched-by-source-delete [COND]: WHEN NOT MATCHED BY SOURCE THEN DELETE

For anything else (SET/VALUES lists, schema evolution) use --sql FILE."""
_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


def _parse_clauses(ctx: typer.Context, args: Sequence[str]) -> list[tuple[str, str | None]]:
    """``--when-...`` options in command-line order, each with its optional condition."""
    clauses: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, inline = token.partition("=")
        if name not in _CLAUSES:
            ctx.fail(
                f"No such option: {token}" if token.startswith("-") else f"Unexpected argument: {token!r}"
            )
        if eq:
            clauses.append((name, inline or None))
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            clauses.append((name, args[i + 1]))
            i += 2
        else:
            clauses.append((name, None))
            i += 1
    return clauses


def _read_source(spark: Any, source: str) -> Any:
    """A source given as a file (parquet/csv/json by extension), a Delta table path or a table name."""
    import deltamerge
    from deltamerge.log.snapshot import DeltaLog

    if os.path.exists(source):
        if DeltaLog.for_table(os.path.abspath(source)).exists():
            return deltamerge.read(spark, source)
        ext = os.path.splitext(source.rstrip("/"))[1].lower()
        if ext in (".parquet", ".pq"):
            return spark.read.parquet(source)
        if ext == ".csv":
            return spark.read.csv(source, header=True, inferSchema=True)
        if ext in (".json", ".jsonl", ".ndjson"):
            return spark.read.json(source)
        raise _fail(
            f"cannot tell the format of source {source!r}: use a .parquet, .csv or .json file, a Delta "
            "table directory or a table name",
            EXIT_USAGE,
        )
    if source.lower().startswith("delta.`"):
        return deltamerge.read(spark, _table_root(source))
    if "/" in source or os.sep in source:
        raise _fail(f"source {source!r} does not exist", EXIT_USAGE)
    return spark.table(source)


def _builder(
    ctx: typer.Context,
    spark: Any,
    target: str,
    source: str,
    on: str,
    target_alias: str,
    source_alias: str,
    args: Sequence[str],
) -> Any:
    from deltamerge import DeltaTable

    clauses = _parse_clauses(ctx, args)
    if not clauses:
        ctx.fail("give at least one --when-... clause (see --help), or --sql FILE")
    root = _table_root(target)
    src = _read_source(spark, source)
    builder = DeltaTable.forPath(spark, root).alias(target_alias).merge(src.alias(source_alias), on)
    for name, condition in clauses:
        builder = getattr(builder, _CLAUSES[name])(condition)
    return builder


def _sql_text(sql_file: str) -> str:
    if sql_file == "-":
        return typer.get_text_stream("stdin").read()
    try:
        with open(sql_file, encoding="utf-8") as fh:
            return fh.read()
    except OSError as e:
        raise _fail(f"cannot read {sql_file}: {e.strerror}", EXIT_USAGE) from None


def _print_result(row: Any, as_json: bool, seconds: float) -> None:
    values = row.asDict()
    if as_json:
        typer.echo(json.dumps(values))
        return
    _print_rows(f"MERGE done in {seconds:.1f} s", list(values), [list(values.values())])


def merge(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="Target Delta table path (or delta.`path`)."),
    source: str | None = typer.Option(
        None, "--source", "-s", help="Source: .parquet/.csv/.json file, Delta table path or table name."
    ),
    on: str | None = typer.Option(None, "--on", help='Merge condition, e.g. "t.id = s.id".'),
    target_alias: str = typer.Option("t", "--target-alias", help="Alias of the target in conditions."),
    source_alias: str = typer.Option("s", "--source-alias", help="Alias of the source in conditions."),
    sql_file: str | None = typer.Option(
        None, "--sql", help="File ('-' for stdin) holding one MERGE INTO statement."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """MERGE a source into the Delta table TARGET, with clause options or a SQL file."""
    import deltamerge

    start = time.monotonic()
    if sql_file is not None:
        if target is not None or source is not None or on is not None or ctx.args:
            ctx.fail("--sql takes the whole statement: give no TARGET, --source, --on or clauses")
        text = _sql_text(sql_file)
        with _errors():
            spark = _spark()
            with _progress(spark, "MERGE"):
                row = deltamerge.sql(spark, text).collect()[0]
        _print_result(row, as_json, time.monotonic() - start)
        return
    if target is None or source is None or on is None:
        ctx.fail("give TARGET, --source and --on (or --sql FILE)")
    with _errors():
        spark = _spark()
        builder = _builder(ctx, spark, target, source, on, target_alias, source_alias, ctx.args)
        with _progress(spark, "MERGE"):
            row = builder.execute().collect()[0]
    _print_result(row, as_json, time.monotonic() - start)


def explain(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="Target Delta table path."),
    source: str | None = typer.Option(
        None, "--source", "-s", help="Source file, Delta table path or table name."
    ),
    on: str | None = typer.Option(None, "--on", help="Merge condition."),
    target_alias: str = typer.Option("t", "--target-alias"),
    source_alias: str = typer.Option("s", "--source-alias"),
    sql_file: str | None = typer.Option(
        None, "--sql", help="File ('-' for stdin) holding one MERGE INTO statement."
    ),
) -> None:
    """Print the plan of a MERGE (executor, join, files before/after skipping) without running it."""
    import deltamerge

    if sql_file is not None:
        if target is not None or source is not None or on is not None or ctx.args:
            ctx.fail("--sql takes the whole statement: give no TARGET, --source, --on or clauses")
        text = _sql_text(sql_file)
        with _errors():
            plan = deltamerge.sql(_spark(), "EXPLAIN " + text).collect()[0][0]
        typer.echo(plan)
        return
    if target is None or source is None or on is None:
        ctx.fail("give TARGET, --source and --on (or --sql FILE)")
    with _errors():
        spark = _spark()
        plan = _builder(ctx, spark, target, source, on, target_alias, source_alias, ctx.args).explain()
    typer.echo(plan)
