"""OPTIMIZE ... ZORDER BY: Delta's Z-order clustering (``skipping/MultiDimClustering.scala``) written
with Spark's own expressions.

Delta maps each Z-order column to a range id in ``[0, rangeId.max)`` (``range_partition_id``: the
partition a range partitioner of that many ranges would give the value), interleaves the ids' bits
(``interleave_bits``), range-partitions the rows by that value plus a byte of noise against skew,
and writes one file per partition. Here a column's range boundaries are its approximate quantiles
(``percentile_approx``, one aggregate over the bin for all columns); a string, binary or boolean
column is ranked by an order-preserving number (its first 7 bytes). A value's range id is the count
of boundaries below it, found by a binary search over the boundary array in ~10 projections; the
bits of the ids are interleaved into one long. The noise byte is a hash of the row (deterministic,
so a retried task sends every row where the first attempt did).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deltamerge.config import SessionConf
from deltamerge.errors import AnalysisError, InvalidArgumentError
from deltamerge.identifiers import name_parts
from deltamerge.spark.types import quote_name
from deltamerge.stats.schema import stats_columns

__all__ = ["cluster", "zorder_columns"]


_NATIVE = {"byte", "short", "integer", "long", "float", "double", "date", "timestamp", "timestamp_ntz"}
_PROXIED = {"string", "binary", "boolean"}


def _same(a: str, b: str, case_sensitive: bool) -> bool:
    return a == b if case_sensitive else a.lower() == b.lower()


def _field(struct: Mapping[str, Any], parts: Sequence[str], case_sensitive: bool) -> Any:
    """The type of the field at ``parts`` in a Delta schema dict, None when there is none."""
    node: Any = struct
    for part in parts:
        if not isinstance(node, dict) or node.get("type") != "struct":
            return None
        found = [f for f in node.get("fields", ()) if _same(str(f["name"]), part, case_sensitive)]
        if not found:
            return None
        node = found[0]["type"]
    return node


def zorder_columns(
    schema: Mapping[str, Any],
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    names: Sequence[str],
    *,
    check_stats: bool,
    case_sensitive: bool = False,
) -> list[tuple[list[str], str]]:
    """Delta's ``validateZorderByColumns``: each name's parts and type; a partition column
    (``DELTA_ZORDERING_ON_PARTITION_COLUMN``), a column the data schema lacks
    (``DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST``) and, with ``check_stats``, columns without statistics
    (``DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS``) are refused."""
    parts_of = {p.lower() for p in partition_columns}
    data = {
        "type": "struct",
        "fields": [f for f in schema["fields"] if str(f["name"]).lower() not in parts_of],
    }
    with_stats = {
        tuple(p.lower() for p in leaf.logical_path)
        for leaf in stats_columns(schema, partition_columns, configuration)
    }
    out: list[tuple[list[str], str]] = []
    without_stats: list[str] = []
    for name in names:
        parts = name_parts(name) or [name]
        if check_stats and tuple(p.lower() for p in parts) not in with_stats:
            without_stats.append(name)
        if len(parts) == 1 and parts[0].lower() in parts_of:
            raise InvalidArgumentError(
                f"{name} is a partition column. Z-Ordering can only be performed on data columns",
                error_class="DELTA_ZORDERING_ON_PARTITION_COLUMN",
                sql_state="42P10",
            )
        kind = _field(data, parts, case_sensitive)
        if kind is None:
            raise InvalidArgumentError(
                f"Z-Ordering column {name} does not exist in data schema.",
                error_class="DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST",
                sql_state="42703",
            )
        kind_name = kind if isinstance(kind, str) else str(kind.get("type"))
        if not (kind_name in _NATIVE or kind_name in _PROXIED or kind_name.startswith("decimal")):
            raise AnalysisError(
                f"Z-Ordering by {name} of type {kind_name} is not supported by deltamerge: Z-order by "
                "columns of an atomic type (numbers, strings, dates, timestamps, booleans, binary).",
                error_class="DELTA_UNSUPPORTED_DATA_TYPES",
            )
        out.append((parts, kind_name))
    if without_stats:
        raise AnalysisError(
            f"Z-Ordering on [{', '.join(without_stats)}] will be ineffective, because we currently do not "
            "collect stats for these columns. You can disable this check by setting "
            f"SET {SessionConf.ZORDER_STATS_CHECK.key} = false",
            error_class="DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS",
            sql_state="KD00D",
        )
    return out


def _ranked(column: Column, kind: str) -> Column:
    # What percentile_approx orders: the value itself, or an order-preserving number for types it
    # does not take (the first 7 bytes of a string or binary, big-endian, zero-padded).
    if kind == "boolean":
        return column.cast("int")
    if kind in ("string", "binary"):
        return F.conv(F.rpad(F.substring(F.hex(column), 1, 14), 14, "0"), 16, 10).cast("bigint")
    return column


def _search_step(bounds: Column, value: Column) -> Callable[[Column, Column], Column]:
    """One step of the binary search: move up by ``step`` when the boundary there is below ``value``."""

    def step(acc: Column, size: Column) -> Column:
        nxt = acc + size
        return F.when(F.element_at(bounds, nxt.cast("int")) < value, nxt).otherwise(acc)

    return step


def cluster(
    df: DataFrame,
    columns: Sequence[tuple[list[str], str]],
    num_files: int,
    get: Callable[[str], str | None],
    rows: int | None = None,
) -> DataFrame:
    """``df`` range-partitioned into ``num_files`` partitions by the Z-order value of ``columns``.
    ``rows`` (the bin's row count, when the statistics give it) bounds the number of ranges: a
    range per row at most, as a range partitioner's bounds over all of few rows would be (asking
    percentile_approx for 999 quantiles costs about a second even for 100 rows)."""
    num_ranges = SessionConf.MDC_RANGE_ID_MAX.get(get)
    if num_ranges < 2:
        raise InvalidArgumentError(
            f"'{SessionConf.MDC_RANGE_ID_MAX.key}' must be greater than 1", error_class="DELTA_INVALID_CONF"
        )
    if rows is not None:
        num_ranges = max(2, min(num_ranges, rows))
    add_noise = SessionConf.MDC_ADD_NOISE.get(get)
    sort_within = SessionConf.MDC_SORT_WITHIN_FILES.get(get)
    original = df.columns
    ranked = [f"__dm_z{i}" for i in range(len(columns))]
    df = df.select(
        "*",
        *[
            _ranked(F.col(".".join(quote_name(p) for p in parts)), kind).alias(r)
            for r, (parts, kind) in zip(ranked, columns, strict=True)
        ],
    )
    quantiles = [i / num_ranges for i in range(1, num_ranges)]
    # Range boundaries: one aggregate over the bin (statistics of the columns, not rows).
    bounds_row = df.agg(*[F.percentile_approx(r, quantiles, 10000).alias(r) for r in ranked]).first()
    steps = max(1, math.ceil(math.log2(num_ranges)))
    ids: list[str] = []
    range_ids: list[Column] = []
    for i, r in enumerate(ranked):
        bounds = sorted({v for v in (bounds_row[r] if bounds_row else None) or [] if v is not None})
        ids.append(f"__dm_r{i}")
        if not bounds:
            range_ids.append(F.lit(0).cast("bigint"))
            continue
        # Binary search for the number of boundaries below the value (Spark's range partitioner
        # sends a value to the first range whose upper bound is >= it); the array is padded with
        # NULLs to 2^m - 1 entries, and a NULL boundary (or value) compares as not below. One
        # expression (a fold over the steps m-1 .. 0), not a column per step: each withColumn is
        # an analysis of the whole plan.
        m = max(1, math.ceil(math.log2(len(bounds) + 1)))
        array = F.array(
            *[F.lit(b) for b in bounds],
            *[F.lit(None).cast(df.schema[r].dataType) for _ in range((1 << m) - 1 - len(bounds))],
        )
        steps_down = F.array(*[F.lit(1 << k).cast("bigint") for k in reversed(range(m))])
        range_ids.append(F.aggregate(steps_down, F.lit(0).cast("bigint"), _search_step(array, F.col(r))))
    df = df.select("*", *[c.alias(n) for c, n in zip(range_ids, ids, strict=True)])
    # Interleave the ids' bits, the first column's bit highest at each level, into one long.
    bits = min(steps, 62 // len(ids))
    z: Column = F.lit(0).cast("bigint")
    for b in range(bits):
        for i, rid in enumerate(ids):
            shifted = F.shiftright(F.col(rid), b + steps - bits)
            z = z + F.shiftleft(shifted.bitwiseAND(1), b * len(ids) + (len(ids) - 1 - i))
    keys = {"__dm_zvalue": z}
    if add_noise:
        # Spark hashes no map values: the row's other columns make the noise.
        hashable = [
            f.name for f in df.schema.fields if f.name in original and "map<" not in f.dataType.simpleString()
        ]
        keys["__dm_noise"] = F.xxhash64(*[F.col(quote_name(c)) for c in hashable or ranked]).bitwiseAND(255)
    df = df.select(*[F.col(quote_name(c)) for c in original], *[v.alias(k) for k, v in keys.items()])
    out = df.repartitionByRange(num_files, *keys)
    if sort_within:
        out = out.sortWithinPartitions("__dm_zvalue")
    return out.drop("__dm_zvalue", "__dm_noise")
