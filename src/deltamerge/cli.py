"""The ``deltamerge`` command line (typer + rich).

Subcommands: ``demo``, ``merge``, ``explain``, ``history``, ``describe``, ``changes``, ``vacuum``,
``optimize``. ``history`` and ``describe`` read the transaction log only and start no Spark; the
others reuse the active SparkSession when there is one (``SparkSession.getActiveSession()``), else
start a local one (or connect to ``--remote sc://host:port`` / ``$SPARK_REMOTE``).

Exit codes: 0 success; 1 the operation failed (the Delta or Spark error class is on stderr, as
``error: [DELTA_...] message``); 2 usage errors and paths that are not Delta tables.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import typer

app = typer.Typer(
    help="Delta Lake MERGE for PySpark, without Delta jars.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class _Options:
    remote: str | None = None
    master: str = "local[2]"
    conf: list[str] = field(default_factory=list)


_OPTS = _Options()


@app.callback()
def _main(
    remote: str | None = typer.Option(
        None,
        "--remote",
        envvar="SPARK_REMOTE",
        help="Spark Connect URL (sc://host:port) instead of a local session.",
    ),
    master: str = typer.Option("local[2]", "--master", help="Master of the local session the CLI starts."),
    conf: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--conf", "-c", help="Spark setting KEY=VALUE (repeatable), e.g. spark.databricks.delta.*"
    ),
) -> None:
    """Delta Lake MERGE for PySpark, without Delta jars."""
    _OPTS.remote, _OPTS.master, _OPTS.conf = remote, master, list(conf)


# --- helpers ------------------------------------------------------------------------------------------


def _out():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(soft_wrap=True)


def _err():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int) -> typer.Exit:
    _err().print(f"error: {message}", markup=False, highlight=False)
    return typer.Exit(code)


def _error_class(e: BaseException) -> str | None:
    for getter in ("getCondition", "getErrorClass"):
        fn = getattr(e, getter, None)
        if callable(fn):
            with contextlib.suppress(Exception):
                value = fn()
                if value:
                    return str(value)
    return None


def _click_exceptions() -> tuple[type[BaseException], ...]:
    # typer >= 0.20 vendors click (typer._click); older typers use click itself.
    found: list[type[BaseException]] = [typer.Exit, typer.Abort]
    for module in ("typer._click.exceptions", "click.exceptions"):
        with contextlib.suppress(ImportError):
            import importlib

            found.append(importlib.import_module(module).ClickException)
    return tuple(found)


_PASS_THROUGH = _click_exceptions()


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Map failures to exit codes and one ``error:`` line on stderr."""
    from deltamerge.errors import DeltaMergeError, TableNotFoundError

    try:
        yield
    except _PASS_THROUGH:
        raise
    except TableNotFoundError as e:
        raise _fail(str(e), EXIT_USAGE) from None
    except DeltaMergeError as e:
        raise _fail(str(e), EXIT_FAILED) from None
    except Exception as e:
        from pyspark.errors import PySparkException

        if isinstance(e, PySparkException):
            cls = _error_class(e)
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if cls and f"[{cls}]" not in text:
                text = f"[{cls}] {text}"
            raise _fail(text, EXIT_FAILED) from None
        raise


def _spark():  # type: ignore[no-untyped-def]
    """The active session if there is one, else a new one (local, or Connect with --remote)."""
    from pyspark.sql import SparkSession

    settings = {}
    for item in _OPTS.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _fail(f"--conf takes KEY=VALUE, got {item!r}", EXIT_USAGE)
        settings[key.strip()] = value.strip()
    spark = SparkSession.getActiveSession()
    if spark is None:
        if _OPTS.remote:
            builder = SparkSession.builder.remote(_OPTS.remote)
        else:
            builder = (
                SparkSession.builder.master(_OPTS.master)
                .appName("deltamerge-cli")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
            )
        spark = builder.getOrCreate()
        from deltamerge.spark.session import is_connect

        if not is_connect(spark):
            spark.sparkContext.setLogLevel("ERROR")
    for key, value in settings.items():
        spark.conf.set(key, value)
    return spark


def _table_root(path: str) -> str:
    """An existing Delta table's absolute root, or exit 2."""
    from deltamerge.io import _abs
    from deltamerge.log.snapshot import DeltaLog

    if path.lower().startswith("delta.`") and path.endswith("`"):
        path = path[len("delta.`") : -1]
    root = _abs(path)
    if not DeltaLog.for_table(root).exists():
        raise _fail(f"{path} is not a Delta table (no _delta_log/ with commits)", EXIT_USAGE)
    return root


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


def _print_rows(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for c in columns:
        narrow = c in ("version", "timestamp", "operation", "_commit_version", "_change_type")
        table.add_column(c, overflow="fold", no_wrap=narrow)
    for r in rows:
        table.add_row(
            *[
                "" if v is None else (json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v))
                for v in r
            ]
        )
    _out().print(table)


# --- progress -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _progress(spark: Any, what: str) -> Iterator[None]:
    """A status line on stderr naming the running phase (the job descriptions of merge/*.py) and,
    on classic sessions, the task progress of its active stage (polled from the status tracker)."""
    from rich.console import Console
    from rich.markup import escape

    from deltamerge.spark.session import is_connect, phase_listener

    console = Console(stderr=True)
    state = {"phase": f"{what}: planning"}
    done = threading.Event()

    def on_phase(description: str, started: bool) -> None:
        state["phase"] = description if started else f"{what}: finishing ({description}: done)"

    with console.status(escape(state["phase"])) as status, phase_listener(on_phase):
        tracker = None if is_connect(spark) else spark.sparkContext.statusTracker()

        def poll() -> None:
            while not done.wait(0.25):
                text = state["phase"]
                if tracker is not None:
                    with contextlib.suppress(Exception):
                        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
                        tasks = [(s.numCompletedTasks, s.numTasks) for s in stages if s is not None]
                        if tasks:
                            text += f"  (tasks {sum(a for a, _ in tasks)}/{sum(b for _, b in tasks)})"
                status.update(escape(text))

        poller = threading.Thread(target=poll, name="deltamerge-cli-progress", daemon=True)
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join(timeout=1)


# --- demo -------------------------------------------------------------------------------------------------


@app.command()
def demo(
    path: str | None = typer.Option(None, help="Where to create the demo table (default: a temp dir)."),
) -> None:
    """Run the bundled CDC upsert demo (creates a table, merges a change batch, prints each step)."""
    from deltamerge.demo import main

    with _errors():
        main(path)


# --- merge / explain -----------------------------------------------------------------------------------

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


@app.command(context_settings=_EXTRA, epilog=_CLAUSE_HELP)
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


@app.command(context_settings=_EXTRA, epilog=_CLAUSE_HELP)
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


# --- log-only commands -----------------------------------------------------------------------------------


@app.command()
def history(
    path: str = typer.Argument(..., help="Delta table path."),
    limit: int | None = typer.Option(20, "--limit", "-n", help="Newest N commits (0 for all)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per commit."),
) -> None:
    """The commit history of the table at PATH, newest first (reads the log only)."""
    from deltamerge.log.snapshot import DeltaLog

    root = _table_root(path)
    with _errors():
        commits = DeltaLog.for_table(root).commit_infos(limit or None)
    rows = []
    for version, ts, info in commits:
        raw = info.raw if info is not None else {}
        rows.append(
            {
                "version": version,
                "timestamp": _iso(ts),
                "operation": raw.get("operation"),
                "operationParameters": raw.get("operationParameters") or {},
                "operationMetrics": raw.get("operationMetrics") or {},
                "engineInfo": raw.get("engineInfo"),
            }
        )
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r, default=str))
        return
    _print_rows(
        f"History of {root} (all parameters and metrics: --json)",
        ["version", "timestamp", "operation", "parameters", "metrics"],
        [
            [
                r["version"],
                (r["timestamp"] or "")[:19].replace("T", " "),
                r["operation"],
                _short(r["operationParameters"], _PARAM_KEYS),
                _short(r["operationMetrics"], _METRIC_KEYS),
            ]
            for r in rows
        ],
    )


_PARAM_KEYS = ("mode", "predicate", "partitionBy", "version", "timestamp", "retentionCheckEnabled")
_METRIC_KEYS = (
    "numOutputRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numUpdatedRows",
    "numDeletedRows",
    "numCopiedRows",
    "numFiles",
    "numAddedFiles",
    "numRemovedFiles",
    "numTargetFilesAdded",
    "numTargetFilesRemoved",
    "numTargetDeletionVectorsAdded",
)


def _short(values: dict[str, Any], keys: Sequence[str]) -> str:
    """The most telling entries of a parameters/metrics map, one per line."""
    picked = [(k, values[k]) for k in keys if k in values and values[k] not in (None, "", "[]")]
    if not picked:
        picked = list(values.items())[:4]
    return "\n".join(f"{k}={v}" for k, v in picked)


@app.command()
def describe(
    path: str = typer.Argument(..., help="Delta table path."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Version, schema, partitioning, properties, protocol and size of the table at PATH (log only)."""
    from deltamerge.log.snapshot import DeltaLog

    root = _table_root(path)
    with _errors():
        snap = DeltaLog.for_table(root).update()
    meta, proto = snap.metadata, snap.protocol
    columns = [
        {
            "name": f["name"],
            "type": f["type"] if isinstance(f["type"], str) else json.dumps(f["type"]),
            "nullable": f.get("nullable", True),
        }
        for f in meta.schema.get("fields", [])
    ]
    info: dict[str, Any] = {
        "location": root,
        "id": meta.id,
        "version": snap.version,
        "createdAt": _iso(meta.created_time),
        "lastModified": _iso(snap.timestamp),
        "numFiles": len(snap.files),
        "sizeInBytes": sum(f.size for f in snap.files),
        "numRecords": sum(f.num_records or 0 for f in snap.files)
        if all(f.num_records is not None for f in snap.files)
        else None,
        "partitionColumns": list(meta.partition_columns),
        "properties": dict(meta.configuration),
        "minReaderVersion": proto.min_reader_version,
        "minWriterVersion": proto.min_writer_version,
        "tableFeatures": sorted(set(proto.reader_features or ()) | set(proto.writer_features or ())),
        "schema": columns,
    }
    if as_json:
        _print_json(info)
        return
    out = _out()
    from rich.table import Table

    summary = Table(title=f"Delta table {root}", show_header=False)
    summary.add_column("key", style="bold")
    summary.add_column("value", overflow="fold")
    for key, value in info.items():
        if key == "schema":
            continue
        summary.add_row(key, json.dumps(value) if isinstance(value, (dict, list)) else str(value))
    out.print(summary)
    _print_rows(
        "Schema",
        ["column", "type", "nullable"],
        [[c["name"], c["type"], c["nullable"]] for c in columns],
    )


# --- Spark commands ----------------------------------------------------------------------------------------


@app.command()
def changes(
    path: str = typer.Argument(..., help="Delta table path (change data feed enabled)."),
    from_version: int = typer.Option(0, "--from", help="First version (inclusive)."),
    to_version: int | None = typer.Option(None, "--to", help="Last version (inclusive; default latest)."),
    limit: int = typer.Option(1000, "--limit", "-n", help="Print at most N rows (0 for all)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per row."),
) -> None:
    """The change data feed rows of the table at PATH between two versions."""
    import deltamerge

    root = _table_root(path)
    with _errors():
        spark = _spark()
        df = deltamerge.read_changes(spark, root, from_version, to_version)
        df = df.orderBy(
            "_commit_version", "_change_type", *[c for c in df.columns if not c.startswith("_")][:1]
        )
        rows = (df.limit(limit) if limit else df).collect()
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r.asDict(recursive=True), default=str))
        return
    columns = list(rows[0].asDict()) if rows else ["_change_type", "_commit_version", "_commit_timestamp"]
    _print_rows(
        f"Changes of {root}, versions {from_version}..{'latest' if to_version is None else to_version}",
        columns,
        [list(r) for r in rows],
    )


def _vacuum_candidates(root: str, retention_ms: int) -> list[str]:
    """What ``vacuum`` would delete now (the same walk as deltamerge.vacuum, without deleting)."""
    from deltamerge.io import snapshot_for
    from deltamerge.spark.write import STAGING_PREFIX
    from deltamerge.vacuum import _referenced

    snap = snapshot_for(root)
    now_ms = int(time.time() * 1000)
    keep = _referenced(snap, retention_ms, now_ms)
    cutoff_s = (now_ms - retention_ms) / 1000
    out: list[str] = []
    for entry in os.listdir(root):
        full = os.path.join(root, entry)
        if entry.startswith(STAGING_PREFIX) and os.path.isdir(full) and os.path.getmtime(full) < cutoff_s:
            out.append(entry)
    for dirpath, dirs, names in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirs[:] = [d for d in dirs if d == "_change_data" or not d.startswith(("_", "."))]
        else:
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            rel = name if rel_dir == "." else os.path.join(rel_dir, name)
            if name.startswith(("_", ".")) or rel in keep:
                continue
            if os.path.getmtime(os.path.join(dirpath, name)) < cutoff_s:
                out.append(rel)
    return sorted(out)


@app.command()
def vacuum(
    path: str = typer.Argument(..., help="Delta table path."),
    retain_hours: float | None = typer.Option(
        None,
        "--retain-hours",
        help="Keep unreferenced files newer than this (default: the table's retention, 7 days).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="List the files that would be deleted; delete nothing."
    ),
) -> None:
    """Delete files the table at PATH no longer references and that are older than the retention."""
    from deltamerge import DeltaTable
    from deltamerge.config import SessionConf, TableProperties
    from deltamerge.errors import InvalidArgumentError
    from deltamerge.io import snapshot_for
    from deltamerge.spark.session import conf_getter

    root = _table_root(path)
    with _errors():
        spark = _spark()
        if not dry_run:
            deleted = [r[0] for r in DeltaTable.forPath(spark, root).vacuum(retain_hours).collect()]
        else:
            default_ms = TableProperties.DELETED_FILE_RETENTION_MS.get(
                snapshot_for(root).metadata.configuration
            )
            retention_ms = default_ms if retain_hours is None else int(retain_hours * 3_600_000)
            if SessionConf.RETENTION_CHECK.get(conf_getter(spark)) and retention_ms < default_ms:
                raise InvalidArgumentError(
                    f"Requested {retention_ms / 3_600_000:g} hours, less than the table's retention of "
                    f"{default_ms / 3_600_000:g} hours. If no writer is running, set "
                    "spark.databricks.delta.retentionDurationCheck.enabled=false (--conf).",
                    error_class="DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT",
                )
            deleted = [os.path.join(root, p) for p in _vacuum_candidates(root, retention_ms)]
    verb = "Would delete" if dry_run else "Deleted"
    typer.echo(f"{verb} {len(deleted)} file(s)")
    for p in deleted:
        typer.echo(p)


@app.command()
def optimize(
    path: str = typer.Argument(..., help="Delta table path."),
    where: str | None = typer.Option(
        None, "--where", help="Partition predicate: compact only these partitions."
    ),
    zorder_by: list[str] = typer.Option([], "--zorder-by", help="Z-order by these columns (repeatable)."),  # noqa: B008
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
) -> None:
    """Compact small files of the table at PATH (bin-packing, or Z-order with --zorder-by)."""
    from deltamerge import DeltaTable

    root = _table_root(path)
    with _errors():
        spark = _spark()
        table = DeltaTable.forPath(spark, root)
        if not hasattr(table, "optimize"):
            raise _fail("OPTIMIZE is not available in this deltamerge build", EXIT_FAILED)
        builder = table.optimize()
        if where:
            builder = builder.where(where)
        with _progress(spark, "OPTIMIZE"):
            result = builder.executeZOrderBy(*zorder_by) if zorder_by else builder.executeCompaction()
            rows = result.collect()
    values = rows[0].asDict(recursive=True) if rows else {}
    if as_json:
        typer.echo(json.dumps(values, default=str))
        return
    metrics = values.get("metrics", values)
    _print_rows(f"OPTIMIZE {root}", ["metric", "value"], [[k, v] for k, v in metrics.items()])


if __name__ == "__main__":
    app()
