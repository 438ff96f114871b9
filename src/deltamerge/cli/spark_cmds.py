"""``deltamerge demo``, ``changes``, ``vacuum``, ``optimize`` and ``reorg``: the commands run on Spark."""

from __future__ import annotations

import json

import typer

from deltamerge.cli.common import EXIT_FAILED, _errors, _fail, _print_rows, _progress, _spark, _table_root


def demo(
    path: str | None = typer.Option(None, help="Where to create the demo table (default: a temp dir)."),
) -> None:
    """Run the bundled CDC upsert demo (creates a table, merges a change batch, prints each step)."""
    from deltamerge.demo import main

    with _errors():
        main(path)


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
    lite: bool | None = typer.Option(
        None,
        "--lite/--full",
        help="LITE: only files the log says were removed (no directory listing); default FULL.",
    ),
) -> None:
    """Delete files the table at PATH no longer references and that are older than the retention."""
    from deltamerge.io import snapshot_for
    from deltamerge.spark.session import conf_getter
    from deltamerge.vacuum import vacuum_table

    root = _table_root(path)
    with _errors():
        spark = _spark()
        deleted = vacuum_table(
            snapshot_for(root), retain_hours, conf_getter(spark), dry_run=dry_run, lite=lite
        )
    verb = "Would delete" if dry_run else "Deleted"
    typer.echo(f"{verb} {len(deleted)} file(s)")
    for p in deleted:
        typer.echo(p)


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
    _print_metrics(f"OPTIMIZE {root}", rows, as_json)


def _print_metrics(title: str, rows: list, as_json: bool) -> None:  # type: ignore[type-arg]
    """The (path, metrics) row of OPTIMIZE / REORG as JSON or as a metric table."""
    values = rows[0].asDict(recursive=True) if rows else {}
    if as_json:
        typer.echo(json.dumps(values, default=str))
        return
    metrics = values.get("metrics", values)
    _print_rows(title, ["metric", "value"], [[k, v] for k, v in metrics.items()])


def reorg(
    path: str = typer.Argument(..., help="Delta table path."),
    where: str | None = typer.Option(
        None, "--where", help="Partition predicate: purge only these partitions."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
) -> None:
    """REORG TABLE ... APPLY (PURGE): rewrite the files of PATH whose deletion vectors mark rows, or
    that still hold dropped columns (then VACUUM removes the old copies from storage)."""
    from deltamerge.builders import optimize as run_optimize

    root = _table_root(path)
    with _errors():
        spark = _spark()
        with _progress(spark, "REORG"):
            rows = run_optimize(spark, root, [where] if where else [], purge=True).collect()
    _print_metrics(f"REORG {root} APPLY (PURGE)", rows, as_json)


def drop_feature(
    path: str = typer.Argument(..., help="Delta table path."),
    feature: str = typer.Argument(..., help="Table feature to drop, e.g. deletionVectors."),
    truncate_history: bool = typer.Option(
        False, "--truncate-history", help="Delta's TRUNCATE HISTORY way (see ALTER TABLE ... DROP FEATURE)."
    ),
) -> None:
    """ALTER TABLE ... DROP FEATURE: remove FEATURE's traces from PATH, then drop it from the
    protocol (a reader+writer feature with Delta's fast drop unless --truncate-history)."""
    from deltamerge.feature_drop import drop_feature as run_drop
    from deltamerge.log.snapshot import DeltaLog

    root = _table_root(path)
    with _errors():
        spark = _spark()
        with _progress(spark, "DROP FEATURE"):
            run_drop(spark, root, feature, truncate_history=truncate_history)
    p = DeltaLog.for_table(root).update().protocol
    listed = sorted(set(p.reader_features or ()) | set(p.writer_features or ()))
    typer.echo(
        f"dropped {feature}: protocol ({p.min_reader_version}, {p.min_writer_version})"
        + (f" with {', '.join(listed)}" if listed else "")
    )
