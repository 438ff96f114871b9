"""Per-file statistics (protocol.md §2.9, §6.1): Delta's ``stats`` JSON from Parquet footers, and back.

Writing follows delta-spark: min/max for numeric, decimal, date, timestamp and string leaves only; null counts
for every leaf; the first ``delta.dataSkippingNumIndexedCols`` leaves (or exactly
``delta.dataSkippingStatsColumns``); partition columns excluded; strings truncated to a prefix with a max
that is never below the true max; timestamps in ms precision in the session time zone.

Parquet writers (arrow, parquet-mr) leave NaN out of float statistics, so a footer cannot show whether a
float column holds NaN. Spark orders NaN above every number, so a footer max could be below a NaN row:
float/double ``maxValues`` are written only when the caller says the data has no NaN (``nan_free=True``).
The footer min is still a true lower bound and is written.

Pure Python (pyarrow only): no pyspark here.
"""

from __future__ import annotations

from deltamerge.stats.footer import stats_from_parquet_metadata
from deltamerge.stats.reading import FileStats, parse_stats
from deltamerge.stats.schema import (
    FLOAT_TYPES,
    INTEGRAL_TYPES,
    MINMAX_TYPES,
    StatsLeaf,
    decimal_scale,
    physical_name,
    stats_columns,
    uses_column_mapping,
)
from deltamerge.stats.values import (
    DECIMAL_CONTEXT,
    parse_date_days,
    parse_timestamp_micros,
    truncate_max_string,
    truncate_min_string,
)

__all__ = [
    "DECIMAL_CONTEXT",
    "FLOAT_TYPES",
    "INTEGRAL_TYPES",
    "MINMAX_TYPES",
    "FileStats",
    "StatsLeaf",
    "decimal_scale",
    "parse_date_days",
    "parse_stats",
    "parse_timestamp_micros",
    "physical_name",
    "stats_columns",
    "stats_from_parquet_metadata",
    "truncate_max_string",
    "truncate_min_string",
    "uses_column_mapping",
]
