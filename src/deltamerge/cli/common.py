"""What every ``deltamerge`` subcommand shares: the typer app and its global options, the session,
error-to-exit-code mapping, table paths and rich output."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
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
    from deltamerge.log.paths import table_root
    from deltamerge.log.snapshot import DeltaLog

    if path.lower().startswith("delta.`") and path.endswith("`"):
        path = path[len("delta.`") : -1]
    root = table_root(path)
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
