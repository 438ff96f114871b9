"""OPTIMIZE: bin-packing compaction and delta-spark's ``DeltaOptimizeBuilder``; REORG TABLE ... APPLY
(PURGE).

Small files are packed per partition; adds and removes carry ``dataChange=false``, so the commit runs
at SnapshotIsolation (concurrent appends do not conflict, concurrent removal of a compacted file
does). Rows hidden by deletion vectors are dropped from the rewritten files.

REORG ... APPLY (PURGE) is the same command with Delta's purge selection: every file whose deletion
vector marks rows, and every file holding a column the table no longer has (a dropped column's data
stays in the files until then), is rewritten, a lone file in its bin too. With VACUUM afterwards the
deleted rows and dropped columns are gone from storage (the GDPR use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from deltamerge import catalog
from deltamerge.builders import liquid
from deltamerge.builders.common import discard, write_data
from deltamerge.clustering_ddl import logical_names
from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import (
    AnalysisError,
    ConcurrentModificationError,
    DeltaMergeError,
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.log.actions import Action, AddFile, Metadata
from deltamerge.log.clustering import is_clustered
from deltamerge.log.column_mapping import physical_schema
from deltamerge.log.paths import absolute_file_path
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.spark.session import conf_getter, internal_plan
from deltamerge.spark.types import to_spark_schema
from deltamerge.spark.write import now_ms
from deltamerge.stats.footer import column_paths, file_has_extra_columns
from deltamerge.txn import row_tracking
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

_SIZE = "struct<min:bigint,max:bigint,avg:double,totalFiles:bigint,totalSize:bigint>"
_ZFILES = "struct<num:bigint,size:bigint>"
_ZORDER = (
    f"struct<strategyName:string,inputCubeFiles:{_ZFILES},inputOtherFiles:{_ZFILES},inputNumCubes:bigint,"
    f"mergedFiles:{_ZFILES},numOutputCubes:bigint,mergedNumCubes:bigint>"
)
_LONGS = ["numBins", "numBatches", "totalConsideredFiles", "totalFilesSkipped"]
# Delta's OptimizeMetrics (commands/optimize/OptimizeStats.scala), without the clustering and
# auto-compaction statistics deltamerge never fills.
OPTIMIZE_SCHEMA = (
    "path string, metrics struct<numFilesAdded:bigint,numFilesRemoved:bigint,"
    f"filesAdded:{_SIZE},filesRemoved:{_SIZE},partitionsOptimized:bigint,zOrderStats:{_ZORDER},"
    + "".join(f"{n}:bigint," for n in _LONGS)
    + "preserveInsertionOrder:boolean,numFilesSkippedToReduceWriteAmplification:bigint,"
    "numBytesSkippedToReduceWriteAmplification:bigint,startTimeMs:bigint,endTimeMs:bigint,"
    "totalClusterParallelism:bigint,totalScheduledTasks:bigint,"
    "deletionVectorStats:struct<numDeletionVectorsRemoved:bigint,numDeletionVectorRowsRemoved:bigint>,"
    "numTableColumns:bigint,numTableColumnsWithStats:bigint>"
)


def _size_stats(sizes: Sequence[int]) -> tuple[Any, ...]:
    if not sizes:
        return (None, None, 0.0, 0, 0)
    return (min(sizes), max(sizes), sum(sizes) / len(sizes), len(sizes), sum(sizes))


def _partition_predicate(spark: SparkSession, snapshot, filters: Sequence[str]):  # type: ignore[no-untyped-def]
    from deltamerge.predicates import column_parts, column_references, conjunction, parse_expression

    parts = list(snapshot.metadata.partition_columns)
    nodes = [parse_expression(f) for f in filters]
    for node in nodes:
        for col in column_references(node):
            name = ".".join(column_parts(col))
            if name.lower() not in {p.lower() for p in parts}:
                raise AnalysisError(
                    f"Predicate references non-partition column '{name}'. Only the partition columns may be "
                    f"referenced: [{', '.join(parts)}]",
                    error_class="DELTA_NON_PARTITION_COLUMN_REFERENCE",
                )
    return conjunction(nodes)


def _pack(files: Sequence[AddFile], max_size: int, keep_single: bool = False) -> list[list[AddFile]]:
    """Delta's compaction bins: files by size, a new bin when the next file would overflow. A bin of
    one file is left alone (nothing to compact) unless ``keep_single`` (REORG rewrites every file)."""
    bins: list[list[AddFile]] = []
    current: list[AddFile] = []
    size = 0
    for f in sorted(files, key=lambda f: f.size):
        if current and f.size + size > max_size:
            bins.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size
    if current:
        bins.append(current)
    return [b for b in bins if len(b) > 1 or keep_single]


def _with_dropped_columns(
    table_root: str, schema: dict, files: Sequence[AddFile], hidden: Sequence[str] = ()
) -> list[AddFile]:
    """The files holding a column the table's physical schema lacks (row tracking's ``hidden``
    columns aside), their footers read a few at a time."""
    if not files:
        return []
    known = column_paths(physical_schema(schema, field_ids=False)) | {(h.lower(),) for h in hidden}

    def extra(f: AddFile) -> bool:
        return file_has_extra_columns(absolute_file_path(table_root, f.path), known)

    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        flags = list(pool.map(extra, files))
    return [f for f, flag in zip(files, flags, strict=True) if flag]


def _purge_selection(
    table_root: str, schema: dict, files: Sequence[AddFile], hidden: Sequence[str] = ()
) -> list[AddFile]:
    """REORG ... APPLY (PURGE)'s files: those with deleted rows (or a deletion vector and no row
    count) and those holding dropped columns."""

    def has_deleted_rows(f: AddFile) -> bool:
        dv = f.deletion_vector
        return dv is not None and (f.num_records is None or dv.cardinality > 0)

    with_dv = [f for f in files if has_deleted_rows(f)]
    chosen = {f.path for f in with_dv}
    rest = [f for f in files if f.path not in chosen]
    return with_dv + _with_dropped_columns(table_root, schema, rest, hidden)


PartitionKey = tuple[tuple[str, Any], ...]


def partition_key(f: AddFile) -> PartitionKey:
    """A file's partition values as a hashable key."""
    return tuple(sorted(f.partition_values.items()))


def compactable(f: AddFile, min_size: int, max_deleted_ratio: float) -> bool:
    """Whether compaction rewrites ``f``: smaller than ``min_size``, or with more than
    ``max_deleted_ratio`` of its rows deleted (or a deletion vector and no row count)."""
    dv, n = f.deletion_vector, f.num_records
    many_deleted = dv is not None and (n is None or (n > 0 and dv.cardinality / n > max_deleted_ratio))
    return f.size < min_size or many_deleted


@dataclass(frozen=True)
class AutoCompaction:
    """What an auto compaction compacts: the files below ``min_file_size`` (or with many deleted
    rows) of ``partitions`` (None: every partition), binned up to ``max_file_size``."""

    partitions: frozenset[PartitionKey] | None
    min_file_size: int
    max_file_size: int

    def condition(self, partition_columns: Sequence[str]) -> exp.Expression | None:
        """The partitions as a predicate on the partition columns (None: every partition)."""
        if self.partitions is None:
            return None

        def term(column: str, value: Any) -> exp.Expression:
            col = exp.column(column, quoted=True)
            return (
                exp.Is(this=col, expression=exp.Null())
                if value is None
                else exp.EQ(this=col, expression=exp.Literal.string(value))
            )

        branches = []
        for key in sorted(self.partitions, key=str):
            values = dict(key)
            branches.append(
                exp.and_(*(term(c, values.get(c)) for c in partition_columns))
                if partition_columns
                else exp.true()
            )
        return cast(exp.Expression, exp.or_(*branches)) if branches else None


@internal_plan
def optimize(
    spark: SparkSession,
    table_root: str,
    partition_filters: Sequence[str] = (),
    *,
    purge: bool = False,
    zorder_by: Sequence[str] = (),
    auto: AutoCompaction | None = None,
    full: bool = False,
) -> DataFrame:
    """Compact small files (OPTIMIZE [WHERE partition_filter]), Z-order every file of each selected
    partition (``zorder_by``: OPTIMIZE ... ZORDER BY), cluster a clustered table (``full``: OPTIMIZE
    FULL, which reclusters files clustered by other columns too), or with ``purge`` rewrite the files
    REORG TABLE ... APPLY (PURGE) selects; returns (path, metrics) like Delta. ``auto`` makes it an
    auto compaction: its partitions and file sizes, committed with ``auto`` = true."""
    from deltamerge.dml import matching_partitions, predicate_parameter

    start_ms = now_ms()
    get = conf_getter(spark)
    txn = OptimisticTransaction(DeltaLog.for_table(table_root), conf=get)
    snapshot = txn.snapshot
    if snapshot is None:
        raise TableNotFoundError(f"`{table_root}` is not a Delta table.")
    clustered = is_clustered(snapshot.protocol)
    if clustered and zorder_by:
        raise UnsupportedOperationError(
            "OPTIMIZE command for Delta table with clustering cannot specify ZORDER BY. Please remove "
            f"ZORDER BY ({', '.join(zorder_by)}).",
            error_class="DELTA_CLUSTERING_WITH_ZORDER_BY",
            sql_state="42613",
        )
    if clustered and partition_filters:
        raise UnsupportedOperationError(
            "OPTIMIZE command for Delta table with clustering doesn't support partition predicates. "
            f"Please remove the predicates: {', '.join(partition_filters)}.",
            error_class="DELTA_CLUSTERING_WITH_PARTITION_PREDICATE",
            sql_state="0A000",
        )
    cluster_names = (
        logical_names(snapshot.protocol, snapshot.domains, snapshot.metadata.schema) if clustered else []
    )
    if full and not cluster_names:
        raise AnalysisError(
            "OPTIMIZE FULL is only supported for clustered tables with non-empty clustering columns.",
            error_class="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED",
            sql_state="42601",
        )
    # Clustering columns make OPTIMIZE cluster, auto compaction included (Delta's OptimizeTableStrategy).
    liquid_run = bool(cluster_names) and not purge
    zorder = None
    if zorder_by or liquid_run:
        from deltamerge.builders.zorder import zorder_columns
        from deltamerge.spark.session import case_sensitive

        zorder = zorder_columns(
            snapshot.metadata.schema,
            snapshot.metadata.partition_columns,
            snapshot.metadata.configuration,
            zorder_by or cluster_names,
            check_stats=SessionConf.ZORDER_STATS_CHECK.get(get) and not liquid_run,
            case_sensitive=case_sensitive(spark),
        )
    # Row tracking: every row keeps its id and commit version (materialized in the new files).
    tracking = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    hidden = tracking.names if tracking else None
    cond = _partition_predicate(spark, snapshot, partition_filters)
    keep = matching_partitions(spark, snapshot, cond)
    candidates = [f for f in snapshot.files if keep(f)]
    if auto is not None and auto.partitions is not None:
        candidates = [f for f in candidates if partition_key(f) in auto.partitions]
    conf = dict(snapshot.metadata.configuration)
    # The table's target file size wins over the session's maxFileSize (Delta's OptimizeExecutor).
    max_size = replace(
        TableProperties.TARGET_FILE_SIZE, default=SessionConf.OPTIMIZE_MAX_FILE_SIZE.get(get)
    ).get(conf)
    min_size = min(SessionConf.OPTIMIZE_MIN_FILE_SIZE.get(get), max_size)
    if auto is not None:
        max_size, min_size = auto.max_file_size, auto.min_file_size
    ratio = SessionConf.OPTIMIZE_MAX_DELETED_ROWS_RATIO.get(get)

    if purge:
        selected = _purge_selection(table_root, snapshot.metadata.schema, candidates, hidden or ())
    elif liquid_run:
        min_cube = int(get(liquid.MIN_CUBE_SIZE_KEY) or 100 * SessionConf.OPTIMIZE_MAX_FILE_SIZE.get(get))
        selected = liquid.selection(candidates, cluster_names, min_cube, full)
    elif zorder is not None:  # every file of a partition, one bin per partition (Delta's ZOrderStrategy)
        selected = list(candidates)
    else:
        selected = [f for f in candidates if compactable(f, min_size, ratio)]
    groups: dict[tuple[tuple[str, Any], ...], list[AddFile]] = {}
    for f in selected:
        groups.setdefault(partition_key(f), []).append(f)
    if zorder is not None:
        jobs = list(groups.items())
    else:
        jobs = [(key, b) for key, fs in groups.items() for b in _pack(fs, max_size, keep_single=purge)]

    added: list[AddFile] = []

    def compact(bin_files: list[AddFile]) -> None:
        # One Spark job per bin (as Delta), a few at a time; a compacted bin becomes one file, a
        # Z-ordered one total size / maxFileSize files.
        def shape(df: DataFrame) -> DataFrame:
            if zorder is None:
                return df.repartition(1)
            from deltamerge.builders.zorder import cluster

            counts = [f.num_logical_records for f in bin_files]
            rows = None if any(n is None for n in counts) else sum(n or 0 for n in counts)
            return cluster(df, zorder, max(1, sum(f.size for f in bin_files) // max_size), get, rows)

        written = _rewritten(spark, table_root, snapshot, bin_files, snapshot.metadata, shape)
        added.extend(liquid.marked(written, cluster_names) if liquid_run else written)

    threads = max(1, min(len(jobs), int(get("spark.databricks.delta.optimize.maxThreads") or 15)))
    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(compact, [b for _, b in jobs]))
    except BaseException:
        discard(table_root, [a.path for a in added])
        raise
    ts = now_ms()
    removed_files = [f for _, b in jobs for f in b]
    removes = [f.remove(ts, data_change=False) for f in removed_files]
    dvs = [f.deletion_vector for f in removed_files if f.deletion_vector is not None]
    if added or removes:
        sizes = sorted(a.size for a in added)
        n = len(sizes)
        pct = (sizes[0], sizes[n // 4], sizes[n // 2], sizes[n * 3 // 4], sizes[-1]) if sizes else (0,) * 5
        metrics = {
            "numAddedFiles": len(added),
            "numRemovedFiles": len(removes),
            "numAddedBytes": sum(sizes),
            "numRemovedBytes": sum(f.size for f in removed_files),
            "minFileSize": pct[0],
            "p25FileSize": pct[1],
            "p50FileSize": pct[2],
            "p75FileSize": pct[3],
            "maxFileSize": pct[4],
            "numDeletionVectorsRemoved": len(dvs),
        }
        predicate = predicate_parameter(cond) if cond is not None else []
        if auto is not None and auto.partitions is not None:
            predicate = predicate_parameter(auto.condition(snapshot.metadata.partition_columns))
        params: dict[str, Any] = (
            {"predicate": predicate, "applyPurge": True}
            if purge
            else {
                "predicate": predicate,
                "zOrderBy": list(zorder_by),
                "clusterBy": list(cluster_names) if liquid_run else [],
                "auto": auto is not None,
            }
        )
        if liquid_run:
            params["isFull"] = full
        txn.add_read_files(removed_files)
        try:
            name = "REORG" if purge else "OPTIMIZE"
            txn.commit([*added, *removes], Operation(name, params, metrics, changes_data=False))
        except (ConcurrentModificationError, DeltaMergeError):
            if txn.committed_version is None:  # a failed post-commit hook leaves a landed commit
                discard(table_root, [a.path for a in added])
            raise
        catalog.refresh_views(spark, table_root)
    n_cols = len(to_spark_schema(snapshot.metadata.schema_string).fields)
    zorder_stats = None
    if zorder is not None and not liquid_run:
        # Delta's ZOrderStrategy: every file is "other", one cube per partition
        merged = (len(removed_files), sum(f.size for f in removed_files))
        zorder_stats = ("all", (0, 0), merged, 0, merged, len({key for key, _ in jobs}), None)
    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext
        parallelism = 0
    row = (
        len(added),
        len(removes),
        _size_stats([a.size for a in added]),
        _size_stats([f.size for f in removed_files]),
        len({key for key, _ in jobs}),
        zorder_stats,
        len(jobs),
        len(jobs),
        len(candidates),
        len(candidates) - len(removes),
        False,
        0,
        0,
        start_ms,
        now_ms(),
        parallelism,
        len(jobs),
        (len(dvs), sum(d.cardinality for d in dvs)) if dvs else None,
        n_cols,
        min(TableProperties.NUM_INDEXED_COLS.get(conf), n_cols),
    )
    return spark.createDataFrame([("file:" + table_root, row)], OPTIMIZE_SCHEMA)


def _rewritten(
    spark: SparkSession,
    root: str,
    snapshot: Snapshot,
    files: Sequence[AddFile],
    metadata: Metadata,
    shape: Callable[[DataFrame], DataFrame],
) -> list[AddFile]:
    """``files`` read as ``snapshot`` has them (rows their deletion vectors hide left out, row ids
    and commit versions kept) and written, shaped by ``shape``, as ``metadata`` says: the
    ``dataChange = false`` adds of OPTIMIZE, REORG and DROP FEATURE's rewrites."""
    from deltamerge.spark.scan import ROW_TRACKING_COLS, scan

    tracking = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    hidden = tracking.names if tracking else None
    df = scan(
        spark, root, snapshot.metadata.schema, snapshot.metadata.partition_columns, files, row_tracking=hidden
    )
    if hidden:
        df = df.withColumnsRenamed(dict(zip(ROW_TRACKING_COLS, hidden, strict=True)))
    return write_data(
        spark,
        root,
        shape(df),
        to_spark_schema(metadata.schema_string),
        tuple(metadata.partition_columns),
        dict(metadata.configuration),
        data_change=False,
        tight_bounds=True if "deletionVectors" in (snapshot.protocol.writer_features or ()) else None,
        metadata=metadata,
    )


def rewrite(
    spark: SparkSession,
    txn: OptimisticTransaction,
    files: Sequence[AddFile],
    operation: Operation,
    extra: Sequence[Action] = (),
) -> int:
    """Rewrite ``files`` in one commit of ``operation`` without a data change: rows are read as the
    transaction's snapshot has them and written as its new metadata says (DROP FEATURE's removal
    of column mapping, its rewrite of files from before a type widening). One file per partition;
    row ids and commit versions are kept; ``extra`` actions join the commit. Returns the committed
    version."""
    snapshot, meta = txn.snapshot, txn.metadata
    assert snapshot is not None and meta is not None
    root = snapshot.table_root
    groups: dict[PartitionKey, list[AddFile]] = {}
    for f in files:
        groups.setdefault(partition_key(f), []).append(f)
    added: list[AddFile] = []
    try:
        for group in groups.values():
            added += _rewritten(spark, root, snapshot, group, meta, lambda df: df.repartition(1))
        ts = now_ms()
        txn.add_read_files(files)
        version = txn.commit([*added, *(f.remove(ts, data_change=False) for f in files), *extra], operation)
    except BaseException:
        if txn.committed_version is None:
            discard(root, [a.path for a in added])
        raise
    catalog.refresh_views(spark, root)
    return version


@dataclass
class DeltaOptimizeBuilder:
    """delta-spark's ``DeltaOptimizeBuilder``: ``where(partitionFilter)`` then ``executeCompaction()``."""

    _spark: SparkSession
    _path: str
    _filters: list[str] = field(default_factory=list)

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        """Limit OPTIMIZE to the partitions matching ``partitionFilter`` (partition columns only)."""
        if not isinstance(partitionFilter, str):
            raise TypeError(f"partitionFilter must be a string, found {type(partitionFilter)}")
        self._filters.append(partitionFilter)
        return self

    def executeCompaction(self) -> DataFrame:
        """Bin-pack the small files of the selected partitions; returns the metrics DataFrame."""
        return optimize(self._spark, self._path, self._filters)

    def executeZOrderBy(self, *cols: str | list[str] | tuple[str, ...]) -> DataFrame:
        """Z-order every file of the selected partitions by ``cols`` (data columns with statistics,
        nested ones as ``a.b``); returns the metrics DataFrame."""
        names: list[str] = []
        for c in cols:
            names.extend([c] if isinstance(c, str) else list(c))
        if not names:
            raise InvalidArgumentError(
                "executeZOrderBy needs at least one column.", error_class="DELTA_ILLEGAL_USAGE"
            )
        return optimize(self._spark, self._path, self._filters, zorder_by=names)
