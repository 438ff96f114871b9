"""State shared by the MERGE executors: the session, the transaction, the analysed merge and the
prepared inputs (source and target DataFrames with internal column names)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, StructType

from deltamerge.constraints import enforced_write
from deltamerge.identity import extremes as identity_extremes
from deltamerge.identity import fill as fill_identity
from deltamerge.identity import observed as observed_identity
from deltamerge.identity import stored_names as identity_stored_names
from deltamerge.identity import with_high_water_marks
from deltamerge.log.actions import AddCDCFile, AddFile
from deltamerge.log.column_mapping import is_mapped, physical_names
from deltamerge.merge.analysis import ResolvedMerge, scol, tcol
from deltamerge.merge.metrics import MergeMetrics
from deltamerge.spark.scan import FILE_COL, ROW_INDEX_COL, ROW_TRACKING_COLS, scan
from deltamerge.spark.session import observed_values, session_time_zone
from deltamerge.spark.types import quote_name, to_delta_schema
from deltamerge.spark.write import CDC_PARTITION, to_add_files, to_cdc_files, write_parquet


@dataclass
class MergeContext:
    """Everything an executor needs; executors fill ``metrics`` and return file actions."""

    spark: SparkSession
    txn: Any  # deltamerge.txn.transaction.OptimisticTransaction
    rm: ResolvedMerge
    source: DataFrame  # internal column names __s<i>
    metrics: MergeMetrics
    table_root: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    repartition_before_write: bool = True
    # Delta's optimized writes apply (spark/write.py): files of about this many shuffle bytes, and
    # the merge does not repartition by the partition columns itself.
    optimize_write_bin_size: int | None = None
    # Parquet writer options of the DataFrame write this merge runs for (replaceWhere).
    file_options: Mapping[str, str] = field(default_factory=dict)
    cdf_enabled: bool = False
    tight_bounds: bool | None = None  # stats carry tightBounds on tables that support DVs
    # No two source rows can match one target row (merge/pruning.py); None: not checked up front,
    # the broadcast variant's job 1 checks the matches (merge/broadcast.py).
    source_unique: bool | None = False
    source_rows: int | None = None  # counted by the source-key summary, when it ran
    # Reading the source again gives the same rows (merge/planner.py's rules). Delta reads an
    # insert-only merge's source once; the summary and the semi-join read it again only when True.
    source_repeatable: bool = True
    # The fewest source keys a candidate file is expected to match (merge/pruning.py), when known.
    min_expected_matches: float | None = None
    # Row tracking enabled: the materialized (row id, row commit version) column names. Target
    # rows then carry ROW_TRACKING_COLS, and written rows the materialized columns.
    row_tracking: tuple[str, str] | None = None
    written_paths: list[str] = field(default_factory=list)
    # Extreme identity values written so far, per column (max, min): the next write's values start
    # past them, and the commit records them as high-water marks (deltamerge/identity.py).
    identity_seen: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    # The last target scan, reused when job 2 reads the same files as job 1 (building a scan
    # resolves every file's status on the driver).
    _scan_cache: tuple[frozenset, DataFrame, bool, bool] | None = field(default=None, repr=False)

    @property
    def snapshot(self):  # type: ignore[no-untyped-def]
        """The snapshot the transaction reads."""
        return self.txn.snapshot

    def target(
        self, files: Sequence[AddFile], *, with_file: bool = False, with_row_index: bool = False
    ) -> DataFrame:
        """Target rows of ``files`` with internal column names (plus file / row index)."""
        names = [tcol(i) for i in range(len(self.rm.target_schema.fields))]
        tracking = list(ROW_TRACKING_COLS) if self.row_tracking else []
        key = frozenset(f.key for f in files)  # job 1 and job 2 list the files in different orders
        cached = self._scan_cache
        if cached and cached[0] == key and (cached[2] or not with_file) and (cached[3] or not with_row_index):
            wanted = names + ([FILE_COL] if with_file else []) + ([ROW_INDEX_COL] if with_row_index else [])
            return cached[1].select(*wanted, *tracking)
        snap = self.snapshot
        df = scan(
            self.spark,
            self.table_root,
            snap.metadata.schema,
            self.partition_columns,
            files,
            with_file=with_file,
            with_row_index=with_row_index,
            row_tracking=self.row_tracking,
        )
        if with_file:
            names.append(FILE_COL)
        if with_row_index:
            names.append(ROW_INDEX_COL)
        df = df.toDF(*names, *tracking)
        opaque = self.float_keys()
        if opaque:
            df = df.withColumns({n: F.nanvl(F.col(n), F.col(n)) for n in opaque})
        self._scan_cache = (key, df, with_file, with_row_index)
        return df

    def float_keys(self, *, partitions: bool = False) -> list[str]:
        """The float/double columns the ON condition reads (partition columns too when
        ``partitions``); the data columns are behind ``nanvl(k, k)`` in scans.

        Spark pushes filters it infers from the source's constraints (``k <=> NaN OR ...`` for a
        source of literal rows) into the target's Parquet scan, and Parquet's row-group statistics
        leave NaN out (arrow-rs writes ``min``/``max`` of the other values), so a row group holding
        NaN keys was skipped: a NaN target row went unmatched. ``nanvl(k, k)`` is ``k``, bit for bit,
        and no filter on it reaches the files (filters on partition columns are exact and stay)."""
        parts = set() if partitions else {c.lower() for c in self.partition_columns}
        fields = self.rm.target_schema.fields
        return [
            tcol(i)
            for i in self.condition_target_columns()
            if isinstance(fields[i].dataType, (FloatType, DoubleType)) and fields[i].name.lower() not in parts
        ]

    def condition_target_columns(self) -> list[int]:
        """Indexes of the target columns the ON condition reads."""
        from sqlglot import exp

        names = {col.name for col in self.rm.condition.find_all(exp.Column)}
        return [i for i in range(len(self.rm.target_schema.fields)) if tcol(i) in names]

    def condition(self) -> Column:
        """The ON condition over internal names."""
        from deltamerge.merge.output import sql_col

        return sql_col(self.rm.condition)

    def identity_schema(self) -> StructType:
        """The final schema with identity high-water marks past every value written so far."""
        return with_high_water_marks(self.rm.final_schema, self.identity_seen) or self.rm.final_schema

    def fill_identity(self, df: DataFrame) -> DataFrame:
        """``df`` with generated values in identity columns left NULL (new rows of INSERT clauses)."""
        return fill_identity(df, self.identity_schema())

    def write(self, df: DataFrame) -> list[AddFile]:
        """Write final-schema rows as new data files and return their AddFiles."""
        return self._write(self.fill_identity(df), None)[0]

    def write_with_changes(self, df: DataFrame, change_type: str) -> tuple[list[AddFile], list[AddCDCFile]]:
        """Write data rows and change rows in one job, as Delta does: ``df`` holds final-schema rows
        (identity values filled) and the string column ``change_type``, NULL in data rows, which go
        into data files, and the change type in change rows, which go into ``_change_data`` files.
        Data files carry the (NULL) change type column too, like Delta's; readers read the table's
        columns. Constraints are checked, and identity values observed, on data rows only."""
        return self._write(df, change_type)

    def _write(self, df: DataFrame, change_type: str | None) -> tuple[list[AddFile], list[AddCDCFile]]:
        data_rows: Column | None = None
        if change_type is not None:
            data_rows = F.col(quote_name(change_type)).isNull()
            df = df.withColumn(CDC_PARTITION, ~data_rows)
        df, identity_obs = observed_identity(df, self.rm.final_schema, data_rows)
        parts = list(self.partition_columns)
        if parts and self.repartition_before_write and not self.optimize_write_bin_size:
            df = df.repartition(*[F.col(quote_name(p)) for p in parts])
        metadata = self.txn.metadata
        # Under column mapping the committed schema holds the physical names (files, statistics).
        mapped = metadata is not None and is_mapped(metadata.schema)
        final = to_delta_schema(self.rm.final_schema)
        schema_json = metadata.schema if mapped and metadata is not None else final
        ts_parts = [
            f.name
            for f in self.rm.final_schema.fields
            if f.name in parts and f.dataType.typeName() == "timestamp"
        ]
        written = enforced_write(
            write_parquet,
            df,
            self.rm.final_schema,
            self.configuration,
            self.table_root,
            parts,
            kind="data" if change_type is None else "mixed",
            timestamp_partition_columns=ts_parts,
            metadata=metadata,
            optimize_write_bin_size=self.optimize_write_bin_size,
            file_options=self.file_options,
            checked_rows=data_rows,
        )
        self.written_paths += [w.relative_path for w in written]
        changes = [w for w in written if w.change_data]
        written = [w for w in written if not w.change_data]
        physical = physical_names(schema_json) if mapped else {}
        files = [os.path.join(self.table_root, w.relative_path) for w in written]
        seen = identity_extremes(identity_obs, files, identity_stored_names(self.rm.final_schema, physical))
        for name, (high, low) in seen.items():
            old_high, old_low = self.identity_seen.get(name, (None, None))
            highs = [v for v in (high, old_high) if v is not None]
            lows = [v for v in (low, old_low) if v is not None]
            self.identity_seen[name] = (max(highs) if highs else None, min(lows) if lows else None)
        adds = to_add_files(
            self.table_root,
            written,
            schema_json,
            parts,
            self.configuration,
            tz=session_time_zone(self.spark),
            tight_bounds=self.tight_bounds,
        )
        self.metrics.numTargetFilesAdded += len(adds)
        self.metrics.numTargetBytesAdded += sum(a.size for a in adds)
        self.metrics.numTargetPartitionsAddedTo += (
            len({tuple(sorted(a.partition_values.items())) for a in adds}) if parts else 0
        )
        cdc = to_cdc_files(self.table_root, changes)
        self.metrics.numTargetChangeFilesAdded += len(cdc)
        self.metrics.numTargetChangeFileBytes += sum(f.size for f in cdc)
        return adds, cdc


def renamed_source(source: DataFrame) -> DataFrame:
    """The user's source with positional internal names (robust to duplicate or odd names)."""
    return source.toDF(*[scol(i) for i in range(len(source.columns))])


def observed_count(df: DataFrame, name: str) -> tuple[DataFrame, Callable[[], int]]:
    """``df`` with a row counter attached, and a getter for the count after an action ran.

    Spark drops an observation when the optimizer removes its subtree (an empty side of a join);
    the getter then counts the DataFrame directly, which is cheap in exactly those cases.
    """
    obs = Observation(f"{name}_{time.monotonic_ns()}_{threading.get_ident()}")
    observed = df.observe(obs, F.count(F.lit(1)).alias("rows"))

    def get() -> int:
        try:
            value = observed_values(obs).get("rows")
            if value is not None:
                return int(value)
        except Exception:
            pass
        return int(df.count())

    return observed, get


def observed_metrics(
    df: DataFrame, cols: list[Column], name: str
) -> tuple[DataFrame, Callable[[Callable[[], dict[str, int]]], dict[str, int]]]:
    """``df`` with aggregate metrics attached; the getter takes a fallback computing them directly."""
    obs = Observation(f"{name}_{time.monotonic_ns()}_{threading.get_ident()}")
    observed = df.observe(obs, *cols)

    def get(fallback: Callable[[], dict[str, int]]) -> dict[str, int]:
        try:
            values = observed_values(obs)
            if values:
                return {k: int(v or 0) for k, v in values.items()}
        except Exception:
            pass
        return fallback()

    return observed, get


def timed_ms(start: float) -> int:
    """Elapsed ms since ``start`` (at least 1: Delta reports a phase that ran as >= 1 ms)."""
    return max(1, int((time.monotonic() - start) * 1000))
