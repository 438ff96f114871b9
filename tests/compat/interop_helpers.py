"""Helpers for the delta-rs interop tests: deterministic rows and engine-neutral row comparison."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

UTC = dt.timezone.utc

#: String partition values that need escaping in directory names and/or in ``add.path``.
SPECIAL = ["a b", "50%", "us/east", "k=v", "日本:x", "#h", "a}b", None, ""]

SPARK_DDL = "id long, s string, n int, d date, ts timestamp, amt decimal(10,2), v string"


def row(i: int, s: str | None) -> dict[str, Any]:
    """One deterministic row; ``i`` drives every column but ``s``."""
    return {
        "id": i,
        "s": s,
        "n": i % 3,
        "d": dt.date(2024, 1, 1) + dt.timedelta(days=i % 2),
        "ts": None
        if i % 4 == 3
        else dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC) + dt.timedelta(hours=i),
        "amt": decimal.Decimal(i) + decimal.Decimal("0.25") if i % 5 else decimal.Decimal("-12345678.90"),
        "v": f"v{i}",
    }


def rows(ids: Iterable[int], strings: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
    """Rows for ``ids``; ``s`` cycles through ``strings`` (SPECIAL by default)."""
    vals = SPECIAL if strings is None else strings
    return [row(i, vals[k % len(vals)]) for k, i in enumerate(ids)]


def arrow_table(data: Sequence[dict[str, Any]]) -> pa.Table:
    """The rows as an Arrow table with delta-rs-friendly types."""
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("s", pa.string()),
            ("n", pa.int32()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("amt", pa.decimal128(10, 2)),
            ("v", pa.string()),
        ]
    )
    return pa.Table.from_pylist([dict(r) for r in data], schema=schema)


def spark_df(spark, data: Sequence[dict[str, Any]]):  # type: ignore[no-untyped-def]
    """The rows as a Spark DataFrame (timestamps passed tz-aware, so the process zone is irrelevant)."""
    cols = ["id", "s", "n", "d", "ts", "amt", "v"]
    return spark.createDataFrame([tuple(r[c] for c in cols) for r in data], SPARK_DDL)


def _norm_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        # Spark collects naive local datetimes, delta-rs aware UTC ones; compare instants.
        return v.astimezone(UTC)
    return v


def norm(records: Iterable[Any], null_empty: Sequence[str] = ("s",)) -> list[tuple]:
    """Sorted, comparable rows; ``""`` in partition columns is null (protocol §6.4)."""
    out = []
    for r in records:
        d = r.asDict() if hasattr(r, "asDict") else dict(r)
        for c in null_empty:
            if d.get(c) == "":
                d[c] = None
        out.append(tuple(sorted((k, _norm_value(v)) for k, v in d.items())))
    return sorted(out, key=repr)


def deltars_rows(table_or_path: Any, version: int | None = None) -> list[tuple]:
    """Normalized rows of a table as delta-rs reads it."""
    import deltalake

    dt_ = (
        deltalake.DeltaTable(table_or_path, version=version)
        if isinstance(table_or_path, (str, os.PathLike))
        else table_or_path
    )
    return norm(dt_.to_pyarrow_table().to_pylist())


def deltamerge_rows(spark, path: str, version: int | None = None) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Normalized rows of a table as deltamerge reads it."""
    import deltamerge

    return norm(deltamerge.read(spark, path, version=version).collect())


def log_actions(path: str, version: int) -> list[dict[str, Any]]:
    """The JSON actions of one commit file."""
    name = os.path.join(path, "_delta_log", f"{version:020d}.json")
    with open(name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def deltars_add_actions(table: Any) -> list[dict[str, Any]]:
    """delta-rs's flattened add actions as plain dicts."""
    return pa.table(table.get_add_actions(flatten=True)).to_pylist()
