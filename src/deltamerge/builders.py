"""Table creation and maintenance: delta-spark's ``DeltaTableBuilder`` (CREATE / REPLACE TABLE),
``restoreToVersion`` / ``restoreToTimestamp`` (RESTORE) and ``DeltaOptimizeBuilder`` (OPTIMIZE).

Each is one optimistic transaction with Delta's operation name, parameters and metrics:

* ``create_table``: protocol + metadata (+ the files of ``AS SELECT`` data; REPLACE removes every
  current file) as ``CREATE TABLE`` / ``REPLACE TABLE`` / ``CREATE OR REPLACE TABLE`` [``AS SELECT``].
* ``restore``: re-adds (``dataChange=true``) the files of the old version that are gone, removes the
  files the old version did not have, and restores its metadata (the protocol is never downgraded).
* ``optimize``: bin-packs small files per partition; adds and removes carry ``dataChange=false``, so
  the commit runs at SnapshotIsolation (concurrent appends do not conflict, concurrent removal of a
  compacted file does). Rows hidden by deletion vectors are dropped from the rewritten files.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    StructField,
    StructType,
)

from deltamerge import catalog
from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import (
    AnalysisError,
    ConcurrentModificationError,
    DeltaMergeError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.log.actions import Action, AddFile, Metadata
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter, session_time_zone
from deltamerge.spark.types import schema_string, to_delta_schema, to_spark_schema
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

if TYPE_CHECKING:
    from deltamerge.table import DeltaTable

__all__ = ["DeltaOptimizeBuilder", "DeltaTableBuilder", "create_table", "optimize", "restore"]

_MODES = ("create", "createIfNotExists", "replace", "createOrReplace")


def _abs(path: str) -> str:
    from deltamerge.io import _abs as io_abs

    return io_abs(path)


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- CREATE / REPLACE TABLE -------------------------------------------------------------------------


def _warehouse(spark: SparkSession) -> str:
    return _abs(spark.conf.get("spark.sql.warehouse.dir") or "spark-warehouse")


def table_location(spark: SparkSession, name: str) -> str:
    """Where a name without LOCATION lives: its registered path, else ``<warehouse>/<name>``."""
    known = catalog.path_for_name(name)
    if known is not None:
        return known
    return os.path.join(_warehouse(spark), name.lower())


def _register_name(name: str) -> str:
    parts = name.split(".")
    while len(parts) > 1 and parts[0].lower() in ("spark_catalog", "default"):
        parts = parts[1:]
    if len(parts) != 1 or not parts[0]:
        raise InvalidArgumentError(
            f"deltamerge table names are single-part (they become Spark temp views); got `{name}`. "
            "Use a name without a database, or a path with .location(...)."
        )
    return parts[0]


def _session_defaults(spark: SparkSession) -> dict[str, str]:
    """``spark.databricks.delta.properties.defaults.*`` for new tables (as Delta applies them)."""
    get = conf_getter(spark)
    out = {}
    for s in (
        SessionConf.DEFAULT_ENABLE_CDF,
        SessionConf.DEFAULT_ENABLE_DVS,
        SessionConf.DEFAULT_ENABLE_TYPE_WIDENING,
    ):
        value = get(s.key)
        if value:
            out["delta." + s.key.rsplit(".", 1)[1]] = value
    return out


def _check_schema(schema: StructType, partition_by: Sequence[str]) -> list[str]:
    from deltamerge.io import _check_names

    _check_names(schema)
    lower = {f.name.lower(): f.name for f in schema.fields}
    missing = [p for p in partition_by if p.lower() not in lower]
    if missing:
        raise AnalysisError(
            f"Couldn't find column {missing[0]} in: {schema.simpleString()}. Partition columns must be "
            "columns of the table.",
            error_class="DELTA_PARTITION_COLUMN_NOT_FOUND",
        )
    parts = [lower[p.lower()] for p in partition_by]
    if parts and len(set(parts)) >= len(schema.fields):
        raise InvalidArgumentError(
            "Cannot use all columns for partition columns: the data files need at least one column.",
            error_class="DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION",
        )
    return parts


def create_table(
    spark: SparkSession,
    mode: str,
    *,
    name: str | None = None,
    location: str | None = None,
    schema: StructType | None = None,
    partition_by: Sequence[str] = (),
    properties: dict[str, str] | None = None,
    comment: str | None = None,
    data: DataFrame | None = None,
) -> str:
    """CREATE / REPLACE a Delta table (``mode``: create, createIfNotExists, replace, createOrReplace).

    ``data`` makes it ``... AS SELECT`` (the schema then comes from the data). A ``name`` is
    registered with ``deltamerge.register_table``; without ``location`` the table lives in the
    warehouse directory. Returns the table path.
    """
    if mode not in _MODES:
        raise InvalidArgumentError(f"Unknown table creation mode {mode!r}; use one of {', '.join(_MODES)}.")
    if name is None and location is None:
        raise AnalysisError(
            "Table name or location has to be specified", error_class="DELTA_ILLEGAL_ARGUMENT"
        )
    view = _register_name(name) if name is not None else None
    root = _abs(location) if location is not None else table_location(spark, view)  # type: ignore[arg-type]
    shown = f"`{name}`" if name else f"delta.`{root}`"
    log = DeltaLog.for_table(root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    exists = not txn.is_new_table
    replacing = mode in ("replace", "createOrReplace") and exists
    if exists and mode == "createIfNotExists":
        if view is not None:
            catalog.register_table(spark, view, root)
        return root
    if exists and mode == "create":
        # CREATE TABLE name LOCATION '<existing table>' without columns registers the existing table.
        if (
            view is not None
            and location is not None
            and schema is None
            and data is None
            and not catalog.path_for_name(view)
        ):
            catalog.register_table(spark, view, root)
            return root
        raise TableAlreadyExistsError(
            f"Cannot create table {shown}: it already exists at {root}. Use createIfNotExists / "
            "CREATE TABLE IF NOT EXISTS, or createOrReplace / CREATE OR REPLACE TABLE.",
            error_class="DELTA_TABLE_ALREADY_EXISTS",
        )
    if mode == "replace" and not exists:
        raise TableNotFoundError(
            f"Table {shown} cannot be replaced as it does not exist. "
            "Use CREATE OR REPLACE TABLE to create the table.",
            error_class="DELTA_CANNOT_REPLACE_MISSING_TABLE",
        )
    if data is not None:
        schema = StructType([StructField(f.name, f.dataType, True, f.metadata) for f in data.schema.fields])
    if schema is None or not schema.fields:
        raise AnalysisError(
            "Table schema is not provided. Please provide the schema (column definition) of the table "
            "or an AS SELECT query.",
            error_class="DELTA_SCHEMA_NOT_PROVIDED",
        )
    parts = _check_schema(schema, partition_by)
    conf = {} if replacing else _session_defaults(spark)
    conf.update(
        {
            k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in (properties or {}).items()
        }
    )
    txn.update_metadata(
        Metadata(
            id="",
            schema_string=schema_string(schema),
            partition_columns=tuple(parts),
            configuration=conf,
            description=comment,
            created_time=_now_ms(),
        )
    )
    actions: list[Action] = []
    written: list[str] = []
    metrics: dict[str, int] = {}
    if replacing:
        now = _now_ms()
        actions += [f.remove(now) for f in txn.snapshot.files]  # type: ignore[union-attr]
        txn.mark_read_whole_table()
    if data is not None:
        adds = _write_data(
            spark, root, data.select(*[F.col(f"`{c}`") for c in data.columns]), schema, parts, conf
        )
        written = [a.path for a in adds]
        actions += adds
        metrics = {
            "numFiles": len(adds),
            "numOutputRows": sum(a.num_records or 0 for a in adds),
            "numOutputBytes": sum(a.size for a in adds),
        }
    op_name = {"create": "CREATE TABLE", "createIfNotExists": "CREATE TABLE"}.get(mode) or (
        "CREATE OR REPLACE TABLE" if mode == "createOrReplace" else "REPLACE TABLE"
    )
    if data is not None:
        op_name += " AS SELECT"
    params = {
        "isManaged": "false" if location is not None else "true",
        "description": comment,
        "partitionBy": list(parts),
        "clusterBy": [],
        "properties": dict(txn.metadata.configuration),  # type: ignore[union-attr]
    }
    try:
        txn.commit(actions, Operation(op_name, params, metrics, changes_data=data is not None or replacing))
    except BaseException:
        _discard(root, written)
        raise
    if view is not None:
        catalog.register_table(spark, view, root)
    catalog.refresh_views(spark, root)
    return root


def _write_data(
    spark: SparkSession,
    root: str,
    df: DataFrame,
    schema: StructType,
    parts: Sequence[str],
    conf: dict[str, str],
    *,
    data_change: bool = True,
    tight_bounds: bool | None = None,
) -> list[AddFile]:
    from deltamerge.spark.write import to_add_files, write_parquet

    ts_parts = [f.name for f in schema.fields if f.name in parts and f.dataType.typeName() == "timestamp"]
    written = write_parquet(df, root, list(parts), timestamp_partition_columns=ts_parts)
    return to_add_files(
        root,
        written,
        to_delta_schema(schema),
        list(parts),
        conf,
        data_change=data_change,
        tight_bounds=tight_bounds,
        tz=session_time_zone(spark),
    )


def _discard(root: str, add_paths: Iterable[str]) -> None:
    from urllib.parse import unquote

    for p in add_paths:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(root, unquote(p)))


def _type_error(msg: str, objs: Iterable[Any]) -> TypeError:
    for obj in objs:
        msg += f" Found {obj} with type {type(obj)}"
    return TypeError(msg)


@dataclass
class DeltaTableBuilder:
    """delta-spark's ``DeltaTableBuilder``: from ``DeltaTable.create / createIfNotExists / replace /
    createOrReplace``; set a ``tableName`` and/or a ``location``, the columns, then ``execute()``."""

    _spark: SparkSession
    _mode: str
    _name: str | None = None
    _location: str | None = None
    _comment: str | None = None
    _fields: list[StructField] = field(default_factory=list)
    _partition_by: list[str] = field(default_factory=list)
    _properties: dict[str, str] = field(default_factory=dict)

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        """The table name (registered with ``deltamerge.register_table``)."""
        if type(identifier) is not str:
            raise _type_error("Identifier must be str.", [identifier])
        self._name = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        """The directory of the table."""
        if type(location) is not str:
            raise _type_error("Location must be str.", [location])
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        """The table comment (``metaData.description``)."""
        if type(comment) is not str:
            raise _type_error("Table comment must be str.", [comment])
        self._comment = comment
        return self

    def addColumn(
        self,
        colName: str,
        dataType: str | DataType,
        nullable: bool = True,
        generatedAlwaysAs: str | None = None,
        comment: str | None = None,
    ) -> DeltaTableBuilder:
        """One column; ``dataType`` is a DataType or a DDL type string (``"INT"``, ``"array<string>"``)."""
        if type(colName) is not str:
            raise _type_error("Column name must be str.", [colName])
        if type(dataType) is not str and not isinstance(dataType, DataType):
            raise _type_error("Column data type must be str or DataType.", [dataType])
        if type(nullable) is not bool:
            raise _type_error("Column nullable must be bool.", [nullable])
        metadata: dict[str, Any] = {}
        if generatedAlwaysAs is not None:
            if type(generatedAlwaysAs) is not str:
                raise _type_error("Column generation expression must be str.", [generatedAlwaysAs])
            metadata["delta.generationExpression"] = generatedAlwaysAs
        if comment is not None:
            if type(comment) is not str:
                raise _type_error("Column comment must be str.", [comment])
            metadata["comment"] = comment
        dtype = DataType.fromDDL(dataType) if isinstance(dataType, str) else dataType
        self._fields.append(StructField(colName, dtype, nullable, metadata))
        return self

    def addColumns(self, cols: StructType | list[StructField]) -> DeltaTableBuilder:
        """Columns of an existing schema (a StructType or a list of StructFields)."""
        if isinstance(cols, list):
            for col in cols:
                if type(col) is not StructField:
                    raise _type_error("Column in existing schema must be StructField.", [col])
            cols = StructType(cols)
        if type(cols) is not StructType:
            raise _type_error("Schema must be StructType or a list of StructField.", [cols])
        self._fields.extend(cols.fields)
        return self

    def partitionedBy(self, *cols: str | list[str] | tuple[str, ...]) -> DeltaTableBuilder:
        """Partition columns."""
        names: Sequence[Any] = cols[0] if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        for c in names:
            if type(c) is not str:
                raise _type_error("Partitioning column must be str.", [c])
        self._partition_by = list(names)
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        """A table property."""
        if type(key) is not str or type(value) is not str:
            raise _type_error("Key and value of property must be string.", [key, value])
        self._properties[key] = value
        return self

    def execute(self) -> DeltaTable:
        """Create / replace the table and return its ``DeltaTable``."""
        from deltamerge.table import DeltaTable

        root = create_table(
            self._spark,
            self._mode,
            name=self._name,
            location=self._location,
            schema=StructType(list(self._fields)) if self._fields else None,
            partition_by=self._partition_by,
            properties=dict(self._properties),
            comment=self._comment,
        )
        return DeltaTable(self._spark, root, name=_register_name(self._name) if self._name else None)


# --- RESTORE ----------------------------------------------------------------------------------------

_RESTORE_METRICS = (
    "tableSizeAfterRestore",
    "numOfFilesAfterRestore",
    "numRemovedFiles",
    "numRestoredFiles",
    "removedFilesSize",
    "restoredFilesSize",
)
# The SQL output columns: the metric names in snake case.
RESTORE_SCHEMA = ", ".join(
    "".join("_" + c.lower() if c.isupper() else c for c in name) + " bigint" for name in _RESTORE_METRICS
)


def restore(
    spark: SparkSession, table_root: str, version: int | None = None, timestamp: str | None = None
) -> DataFrame:
    """Restore the table to ``version`` or to the version current at ``timestamp`` (RESTORE).

    Returns one row: table_size_after_restore, num_of_files_after_restore, num_removed_files,
    num_restored_files, removed_files_size, restored_files_size.
    """
    from deltamerge.deletion_vectors import dv_file_path
    from deltamerge.io import _timestamp_ms
    from deltamerge.spark.scan import absolute_file_path

    if (version is None) == (timestamp is None):
        raise InvalidArgumentError("Either the version or timestamp should be provided for restore")
    log = DeltaLog.for_table(table_root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    if txn.snapshot is None:
        raise TableNotFoundError(f"`{table_root}` is not a Delta table.")
    latest = txn.snapshot
    target = version
    if target is None:
        target = log.version_at_timestamp(_timestamp_ms(str(timestamp), session_time_zone(spark)))
    if target >= latest.version:
        raise InvalidArgumentError(
            f"requirement failed: Version to restore ({target})should be less then last available version "
            f"({latest.version})"
        )
    old = log.snapshot(target)
    now_keys = {f.key for f in latest.files}
    old_keys = {f.key for f in old.files}
    to_add = [replace(f, data_change=True) for f in old.files if f.key not in now_keys]
    ts = _now_ms()
    to_remove = [f.remove(ts) for f in latest.files if f.key not in old_keys]
    if spark.conf.get("spark.sql.files.ignoreMissingFiles", "false").lower() != "true":
        missing = [f.path for f in to_add if not os.path.exists(absolute_file_path(table_root, f.path))]
        missing += [
            f.path
            for f in to_add
            if f.deletion_vector is not None
            and f.deletion_vector.storage_type != "i"
            and not os.path.exists(dv_file_path(table_root, f.deletion_vector))
        ]
        if missing:
            raise InvalidArgumentError(
                f"Not all files from version {target} are available in file system.\n Missed files (top 100 "
                f"files): {','.join(missing[:100])}.\n Please use more recent version or timestamp for "
                "restoring. To disable check update option spark.sql.files.ignoreMissingFiles",
                error_class="DELTA_RESTORE_MISSING_DATA_FILES",
            )
    txn.update_metadata(old.metadata)
    txn.mark_read_whole_table()
    metrics = {
        "tableSizeAfterRestore": sum(f.size for f in old.files),
        "numOfFilesAfterRestore": len(old.files),
        "numRemovedFiles": len(to_remove),
        "numRestoredFiles": len(to_add),
        "removedFilesSize": sum(r.size or 0 for r in to_remove),
        "restoredFilesSize": sum(f.size for f in to_add),
    }
    params = {"version": version, "timestamp": timestamp}
    txn.commit([*to_add, *to_remove], Operation("RESTORE", params, metrics))
    catalog.refresh_views(spark, table_root)
    row = tuple(metrics[k] for k in _RESTORE_METRICS)
    return spark.createDataFrame([row], RESTORE_SCHEMA)


# --- OPTIMIZE ---------------------------------------------------------------------------------------

_SIZE = "struct<min:bigint,max:bigint,avg:double,totalFiles:bigint,totalSize:bigint>"
_LONGS = ["partitionsOptimized", "numBins", "numBatches", "totalConsideredFiles", "totalFilesSkipped"]
# Delta's OptimizeMetrics (commands/optimize/OptimizeStats.scala), without the z-order, clustering and
# auto-compaction statistics OPTIMIZE compaction never fills.
OPTIMIZE_SCHEMA = (
    "path string, metrics struct<numFilesAdded:bigint,numFilesRemoved:bigint,"
    f"filesAdded:{_SIZE},filesRemoved:{_SIZE},"
    + "".join(f"{n}:bigint," for n in _LONGS)
    + "preserveInsertionOrder:boolean,numFilesSkippedToReduceWriteAmplification:bigint,"
    "numBytesSkippedToReduceWriteAmplification:bigint,startTimeMs:bigint,endTimeMs:bigint,"
    "totalClusterParallelism:bigint,totalScheduledTasks:bigint,"
    "deletionVectorStats:struct<numDeletionVectorsRemoved:bigint,numDeletionVectorRowsRemoved:bigint>,"
    "numTableColumns:bigint,numTableColumnsWithStats:bigint>"
)
_GIB = 1024 * 1024 * 1024


def _bytes(text: str | None, default: int) -> int:
    if text is None or not str(text).strip():
        return default
    t = str(text).strip().lower()
    units = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    num = t.rstrip("kmgtb")
    try:
        return int(float(num) * units[t[len(num) :].rstrip("b") or ""])
    except (KeyError, ValueError):
        return default


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


def _pack(files: Sequence[AddFile], max_size: int) -> list[list[AddFile]]:
    """Delta's compaction bins: files by size, a new bin when the next file would overflow."""
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
    return [b for b in bins if len(b) > 1]


def optimize(spark: SparkSession, table_root: str, partition_filters: Sequence[str] = ()) -> DataFrame:
    """Compact small files (OPTIMIZE [WHERE partition_filter]); returns (path, metrics) like Delta."""
    from deltamerge.dml import matching_partitions, predicate_parameter
    from deltamerge.spark.scan import scan

    start_ms = _now_ms()
    get = conf_getter(spark)
    txn = OptimisticTransaction(DeltaLog.for_table(table_root), conf=get)
    snapshot = txn.snapshot
    if snapshot is None:
        raise TableNotFoundError(f"`{table_root}` is not a Delta table.")
    cond = _partition_predicate(spark, snapshot, partition_filters)
    keep = matching_partitions(spark, snapshot, cond)
    candidates = [f for f in snapshot.files if keep(f)]
    conf = dict(snapshot.metadata.configuration)
    max_size = _bytes(
        conf.get("delta.targetFileSize"), _bytes(get("spark.databricks.delta.optimize.maxFileSize"), _GIB)
    )
    min_size = min(_bytes(get("spark.databricks.delta.optimize.minFileSize"), _GIB), max_size)
    ratio = float(get("spark.databricks.delta.optimize.maxDeletedRowsRatio") or 0.05)

    def worth_it(f: AddFile) -> bool:
        dv = f.deletion_vector
        n = f.num_records
        many_deleted = dv is not None and (n is None or (n > 0 and dv.cardinality / n > ratio))
        return f.size < min_size or many_deleted

    groups: dict[tuple[tuple[str, Any], ...], list[AddFile]] = {}
    for f in candidates:
        if worth_it(f):
            groups.setdefault(tuple(sorted(f.partition_values.items())), []).append(f)
    jobs = [(key, b) for key, fs in groups.items() for b in _pack(fs, max_size)]

    parts = tuple(snapshot.metadata.partition_columns)
    schema = to_spark_schema(snapshot.metadata.schema_string)
    tight = True if "deletionVectors" in (snapshot.protocol.writer_features or ()) else None

    added: list[AddFile] = []

    def compact(bin_files: list[AddFile]) -> None:
        # One Spark job per bin (as Delta), a few at a time; each bin becomes one file.
        df = scan(spark, table_root, snapshot.metadata.schema, parts, bin_files).repartition(1)
        added.extend(
            _write_data(spark, table_root, df, schema, parts, conf, data_change=False, tight_bounds=tight)
        )

    threads = max(1, min(len(jobs), int(get("spark.databricks.delta.optimize.maxThreads") or 15)))
    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(compact, [b for _, b in jobs]))
    except BaseException:
        _discard(table_root, [a.path for a in added])
        raise
    ts = _now_ms()
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
        params = {
            "predicate": predicate_parameter(cond) if cond is not None else [],
            "zOrderBy": [],
            "auto": False,
        }
        txn.add_read_files(removed_files)
        try:
            txn.commit([*added, *removes], Operation("OPTIMIZE", params, metrics, changes_data=False))
        except (ConcurrentModificationError, DeltaMergeError):
            _discard(table_root, [a.path for a in added])
            raise
        catalog.refresh_views(spark, table_root)
    n_cols = len(schema.fields)
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
        len(jobs),
        len(jobs),
        len(candidates),
        len(candidates) - len(removes),
        False,
        0,
        0,
        start_ms,
        _now_ms(),
        parallelism,
        len(jobs),
        (len(dvs), sum(d.cardinality for d in dvs)) if dvs else None,
        n_cols,
        min(TableProperties.NUM_INDEXED_COLS.get(conf), n_cols),
    )
    return spark.createDataFrame([("file:" + table_root, row)], OPTIMIZE_SCHEMA)


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
        """Z-ordering is not implemented by deltamerge."""
        raise UnsupportedOperationError(
            "OPTIMIZE ... ZORDER BY is not implemented by deltamerge; use executeCompaction().",
            error_class="DELTA_UNSUPPORTED_OPERATION",
        )
