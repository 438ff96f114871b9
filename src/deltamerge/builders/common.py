"""What CREATE / REPLACE TABLE, RESTORE and OPTIMIZE share: writing data files and discarding them
when the commit fails."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from deltamerge.log.actions import AddFile, Metadata
from deltamerge.spark.session import session_time_zone
from deltamerge.spark.types import to_delta_schema


def write_data(
    spark: SparkSession,
    root: str,
    df: DataFrame,
    schema: StructType,
    parts: Sequence[str],
    conf: dict[str, str],
    *,
    data_change: bool = True,
    tight_bounds: bool | None = None,
    metadata: Metadata | None = None,
    optimize_write_bin_size: int | None = None,
) -> list[AddFile]:
    """Write ``df`` as Parquet files under ``root``; their ``add`` actions, with statistics.

    ``metadata`` (the table's, as the commit leaves it) carries the physical names under column
    mapping."""
    from deltamerge.log.column_mapping import is_mapped
    from deltamerge.spark.write import to_add_files, write_parquet

    ts_parts = [f.name for f in schema.fields if f.name in parts and f.dataType.typeName() == "timestamp"]
    written = write_parquet(
        df,
        root,
        list(parts),
        timestamp_partition_columns=ts_parts,
        metadata=metadata,
        optimize_write_bin_size=optimize_write_bin_size,
    )
    mapped = metadata is not None and is_mapped(metadata.schema)
    return to_add_files(
        root,
        written,
        metadata.schema if mapped and metadata is not None else to_delta_schema(schema),
        list(parts),
        conf,
        data_change=data_change,
        tight_bounds=tight_bounds,
        tz=session_time_zone(spark),
    )


def discard(root: str, add_paths: Iterable[str]) -> None:
    """Best-effort removal of files written for a commit that did not happen."""
    from urllib.parse import unquote

    for p in add_paths:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(root, unquote(p)))
