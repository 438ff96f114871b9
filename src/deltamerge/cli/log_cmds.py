"""``deltamerge history`` and ``deltamerge describe``: they read the transaction log only (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typer

from deltamerge.cli.common import _errors, _iso, _out, _print_json, _print_rows, _table_root
from deltamerge.clustering_ddl import logical_names


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
    rows: list[dict[str, Any]] = []
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
        "clusteringColumns": logical_names(proto, snap.domains, meta.schema),
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


def generate(
    path: str = typer.Argument(..., help="Delta table path."),
    mode: str = typer.Option("symlink_format_manifest", "--mode", help="What to generate."),
) -> None:
    """GENERATE symlink_format_manifest: write _symlink_format_manifest/ for Presto, Athena and Hive
    readers of the table at PATH (reads the log only)."""
    from deltamerge.log.snapshot import DeltaLog
    from deltamerge.txn.manifest import generate as run_generate

    root = _table_root(path)
    with _errors():
        log = DeltaLog.for_table(root)
        stats = run_generate(root, log.update() if log.exists() else None, mode)
    _out().print(
        f"{root}/_symlink_format_manifest: {stats.files_written} manifest(s) written, "
        f"{stats.files_deleted} deleted"
    )
