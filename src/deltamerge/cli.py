"""``deltamerge`` command line: demo, history, describe, merge --sql."""

from __future__ import annotations

import json

import typer

app = typer.Typer(help="Delta Lake MERGE for PySpark, without Delta jars.", no_args_is_help=True)


def _spark():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltamerge-cli")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@app.command()
def demo() -> None:
    """Run the bundled CDC upsert demo."""
    from deltamerge.demo import main

    main()


@app.command()
def history(path: str, limit: int = typer.Option(20, help="Newest N commits.")) -> None:
    """Print the commit history of the table at PATH (newest first)."""
    from deltamerge.log.snapshot import DeltaLog

    log = DeltaLog.for_table(path)
    if not log.exists():
        typer.echo(f"error: {path} is not a Delta table", err=True)
        raise typer.Exit(2)
    for version, ts, info in log.commit_infos(limit):
        typer.echo(json.dumps({"version": version, "timestamp": ts, "operation": info.operation,
                               "operationMetrics": info.raw.get("operationMetrics", {})}))


@app.command()
def describe(path: str) -> None:
    """Print version, schema, partitioning, properties and file counts of the table at PATH."""
    from deltamerge.log.snapshot import DeltaLog

    log = DeltaLog.for_table(path)
    if not log.exists():
        typer.echo(f"error: {path} is not a Delta table", err=True)
        raise typer.Exit(2)
    snap = log.update()
    typer.echo(json.dumps({
        "version": snap.version,
        "numFiles": len(snap.files),
        "sizeInBytes": sum(f.size for f in snap.files),
        "partitionColumns": list(snap.metadata.partition_columns),
        "properties": snap.metadata.configuration,
        "protocol": snap.protocol.to_json(),
        "schema": snap.metadata.schema,
    }, indent=2))


@app.command()
def merge(sql_file: str = typer.Option(..., "--sql", help="File holding one MERGE INTO statement.")) -> None:
    """Run the MERGE statement in a SQL file (targets as delta.`/path`)."""
    import deltamerge

    with open(sql_file, encoding="utf-8") as fh:
        text = fh.read()
    spark = _spark()
    try:
        row = deltamerge.sql(spark, text).collect()[0]
    except deltamerge.DeltaMergeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)
    typer.echo(json.dumps(row.asDict()))


if __name__ == "__main__":
    app()
