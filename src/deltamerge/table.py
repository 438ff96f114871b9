"""``DeltaTable``: delta-spark's table handle, delegating to the log, the readers and MERGE."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from deltamerge import catalog, views
from deltamerge.clustering_ddl import logical_names
from deltamerge.errors import DeltaMergeError, InvalidArgumentError, TableNotFoundError
from deltamerge.io import read_snapshot, snapshot_for
from deltamerge.log.paths import table_root
from deltamerge.log.protocol import supported_feature_names, type_widening_enabled
from deltamerge.log.snapshot import DeltaLog
from deltamerge.merge.builder import (
    DeltaMergeBuilder,
    attribute_renderer,
    dataframe_alias,
    validate_merge_args,
)
from deltamerge.merge.clauses import WIDENING_AT_ANALYSIS, MergeSpec
from deltamerge.merge.resolution import catalog_name
from deltamerge.spark.session import conf_getter

if TYPE_CHECKING:
    from deltamerge.builders import DeltaOptimizeBuilder, DeltaTableBuilder
    from deltamerge.builders.creation import DeltaColumnBuilder

HISTORY_SCHEMA = StructType(
    [
        StructField("version", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("userId", StringType()),
        StructField("userName", StringType()),
        StructField("operation", StringType()),
        StructField("operationParameters", MapType(StringType(), StringType())),
        StructField("clusterId", StringType()),
        StructField("readVersion", LongType()),
        StructField("isolationLevel", StringType()),
        StructField("isBlindAppend", BooleanType()),
        StructField("operationMetrics", MapType(StringType(), StringType())),
        StructField("userMetadata", StringType()),
        StructField("engineInfo", StringType()),
    ]
)

DETAIL_SCHEMA = StructType(
    [
        StructField("format", StringType()),
        StructField("id", StringType()),
        StructField("name", StringType()),
        StructField("description", StringType()),
        StructField("location", StringType()),
        StructField("createdAt", TimestampType()),
        StructField("lastModified", TimestampType()),
        StructField("partitionColumns", ArrayType(StringType())),
        StructField("clusteringColumns", ArrayType(StringType())),
        StructField("numFiles", LongType()),
        StructField("sizeInBytes", LongType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("minReaderVersion", LongType()),
        StructField("minWriterVersion", LongType()),
        StructField("tableFeatures", ArrayType(StringType())),
    ]
)


def _ts(ms: int | None) -> dt.datetime | None:
    # Aware (UTC): PySpark converts a naive datetime with the Python process's local zone.
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


class DeltaTable:
    """A Delta table by path or registered name (delta-spark's ``DeltaTable``)."""

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        *,
        alias: str | None = None,
        name: str | None = None,
        _handed_out: list[DataFrame] | None = None,
        _widening: bool | None = None,
    ):
        self._spark = spark
        self._path = table_root(path)
        self._alias = alias
        self._name = name
        # Whether type widening was enabled when the object was made: Delta analyses a builder's
        # MERGE against that state and refuses to run it once the setting has changed.
        self._widening = _widening
        # the DataFrames toDF() gave out: a Column df["x"] of one of them names the target in a
        # MERGE built from this table (shared with aliased copies)
        self._handed_out: list[DataFrame] = _handed_out if _handed_out is not None else []

    # --- construction ------------------------------------------------------------------------------

    @classmethod
    def forPath(
        cls, sparkSession: SparkSession, path: str, hadoopConf: dict[str, str] | None = None
    ) -> DeltaTable:
        """The table at ``path``; ``[DELTA_MISSING_DELTA_TABLE]`` when there is none.

        ``hadoopConf`` is accepted as delta-spark's signature has it; deltamerge's log layer reads
        the local file system, where those file-system options have no effect.
        """
        widening: bool | None = None
        try:
            # One log read, cached: the MERGE or read that follows starts from this snapshot.
            snap = DeltaLog.for_table(table_root(path)).update()
            widening = type_widening_enabled(snap.protocol, snap.metadata.configuration)
        except TableNotFoundError:
            raise TableNotFoundError(
                f"`{table_root(path)}` is not a Delta table. Create it with deltamerge.write(...) first."
            ) from None
        except DeltaMergeError:  # a log that does not load: the operation that reads it reports why
            pass
        return cls(sparkSession, path, _widening=widening)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> DeltaTable:
        """The table registered under a name with ``deltamerge.register_table``, or the table a temp
        view fully scans (``spark.read...createOrReplaceTempView(name)``; MERGE through it keeps the
        view current)."""
        name = tableOrViewName
        if name.lower().startswith("delta.`") and name.endswith("`"):
            return cls.forPath(sparkSession, name[len("delta.`") : -1])
        path = catalog.path_for_name(name)
        if path is None:
            path = views.view_target_path(sparkSession, name)
            if path is not None:
                catalog.track_view(name, path)
        if path is None:
            # Delta's notADeltaTableException, for an unknown name and a non-Delta one alike.
            raise TableNotFoundError(
                f"`{name}` is not a Delta table. Register the table's path under this name with "
                "deltamerge.register_table(spark, name, path) or use DeltaTable.forPath.",
                error_class="DELTA_MISSING_DELTA_TABLE",
            )
        table = cls.forPath(sparkSession, path)
        table._name = name
        return table

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """True when ``identifier`` is the path of a Delta table."""
        return DeltaLog.for_table(table_root(identifier)).exists()

    @classmethod
    def convertToDelta(
        cls,
        sparkSession: SparkSession,
        identifier: str,
        partitionSchema: str | StructType | None = None,
    ) -> DeltaTable:
        """CONVERT TO DELTA the Parquet directory ``identifier`` (``parquet.`/path```) in place and
        return the table; ``partitionSchema`` (DDL such as ``"part int, d string"``, or a
        StructType) declares its ``col=value`` directories. A Delta table is returned unchanged."""
        from deltamerge.convert import convert_identifier

        schema = partitionSchema
        if isinstance(schema, str):
            parsed = StructType.fromDDL(schema)
            if not isinstance(parsed, StructType):
                raise InvalidArgumentError(
                    f"partitionSchema must list columns (`name type, ...`), got {schema!r}."
                )
            schema = parsed
        path, name = convert_identifier(sparkSession, identifier, schema)
        return cls.forName(sparkSession, name) if name is not None else cls.forPath(sparkSession, path)

    # --- reading -------------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """Absolute table root."""
        return self._path

    def alias(self, aliasName: str) -> DeltaTable:
        """The same table under an alias (used to qualify target columns in merge)."""
        shared = self._handed_out
        widening = self._widening
        return DeltaTable(
            self._spark, self._path, alias=aliasName, name=self._name, _handed_out=shared, _widening=widening
        )

    def toDF(self) -> DataFrame:
        """The latest rows of the table."""
        df = read_snapshot(self._spark, snapshot_for(self._path))
        df = df.alias(self._alias) if self._alias else df
        self._handed_out.append(df)
        del self._handed_out[:-64]  # a long-lived table object keeps only its recent DataFrames
        return df

    def version(self) -> int:
        """The latest committed version."""
        return DeltaLog.for_table(self._path).update().version

    def history(self, limit: int | None = None) -> DataFrame:
        """Commits newest first, with delta-spark's history columns."""
        rows = []
        for version, ts, info in DeltaLog.for_table(self._path).commit_infos(limit):
            raw = info.raw
            params = {
                k: v if isinstance(v, str) else json.dumps(v)
                for k, v in (raw.get("operationParameters") or {}).items()
            }
            metrics = {k: str(v) for k, v in (raw.get("operationMetrics") or {}).items()}
            rows.append(
                (
                    version,
                    _ts(ts),
                    raw.get("userId"),
                    raw.get("userName"),
                    raw.get("operation"),
                    params,
                    raw.get("clusterId"),
                    raw.get("readVersion"),
                    raw.get("isolationLevel"),
                    raw.get("isBlindAppend"),
                    metrics,
                    raw.get("userMetadata"),
                    raw.get("engineInfo"),
                )
            )
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row describing the table (DESCRIBE DETAIL)."""
        snap = snapshot_for(self._path)
        meta, proto = snap.metadata, snap.protocol
        features = supported_feature_names(proto)
        row = (
            "delta",
            meta.id,
            self._name,
            meta.description,
            "file:" + self._path,
            _ts(meta.created_time),
            _ts(snap.timestamp),
            list(meta.partition_columns),
            logical_names(proto, snap.domains, meta.schema),
            len(snap.files),
            sum(f.size for f in snap.files),
            dict(meta.configuration),
            proto.min_reader_version,
            proto.min_writer_version,
            features,
        )
        return self._spark.createDataFrame([row], DETAIL_SCHEMA)

    # --- maintenance --------------------------------------------------------------------------------

    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delete files no longer referenced by the table and older than the retention period
        (the table's ``delta.deletedFileRetentionDuration`` by default); returns their paths."""
        from deltamerge.vacuum import vacuum_table

        deleted = vacuum_table(snapshot_for(self._path), retentionHours, conf_getter(self._spark))
        return self._spark.createDataFrame([(p,) for p in deleted], "path string")

    def generate(self, mode: str) -> None:
        """Generate files for other readers: ``"symlink_format_manifest"`` writes the Hive-style
        ``_symlink_format_manifest/`` that Presto, Athena and Hive read (Delta's ``GENERATE``)."""
        from deltamerge.txn.manifest import generate

        if not isinstance(mode, str):
            raise ValueError(f"The mode needs to be a string but got '{type(mode)}'.")
        log = DeltaLog.for_table(self._path)
        generate(self._path, log.update() if log.exists() else None, mode)

    # --- CLONE ---------------------------------------------------------------------------------------

    def clone(
        self,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """SHALLOW CLONE of the latest version to ``target`` (an absolute path or a table name): a new
        table reading this table's files; ``replace`` replaces a table there; ``properties`` override
        this table's. Deep clones are refused, as in open-source Delta."""
        return self._clone(target, isShallow, replace, properties)

    def cloneAtVersion(
        self,
        version: int,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """:meth:`clone` of the table as of ``version``."""
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"version needs to be an int but got '{type(version)}'.")
        return self._clone(target, isShallow, replace, properties, version=version)

    def cloneAtTimestamp(
        self,
        timestamp: str,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """:meth:`clone` of the table as of ``timestamp`` (``yyyy-MM-dd[ HH:mm:ss]``)."""
        if not isinstance(timestamp, str):
            raise ValueError(f"timestamp needs to be a string but got '{type(timestamp)}'.")
        return self._clone(target, isShallow, replace, properties, timestamp=timestamp)

    def _clone(
        self,
        target: str,
        shallow: bool,
        replace: bool,
        properties: dict[str, str] | None,
        *,
        version: int | None = None,
        timestamp: str | None = None,
    ) -> DeltaTable:
        from deltamerge.builders.cloning import clone_to

        for value, what in ((target, "target"),):
            if not isinstance(value, str):
                raise ValueError(f"{what} needs to be a string but got '{type(value)}'.")
        for flag, what in ((shallow, "isShallow"), (replace, "replace")):
            if not isinstance(flag, bool):
                raise ValueError(f"{what} needs to be a boolean but got '{type(flag)}'.")
        if properties is not None:
            if not isinstance(properties, dict):
                raise ValueError(f"properties needs to be a dict but got '{type(properties)}'.")
            for k, v in properties.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise ValueError(f"All property keys and values including {k} needs to be a string.")
        root, _ = clone_to(
            self._spark,
            self._path,
            self._name,
            target,
            shallow=shallow,
            mode="createOrReplace" if replace else "create",
            properties=properties,
            version=version,
            timestamp=timestamp,
        )
        return DeltaTable.forPath(self._spark, root)

    # --- MERGE ---------------------------------------------------------------------------------------

    def merge(self, source: DataFrame, condition: str | Column) -> DeltaMergeBuilder:
        """Start a MERGE of ``source`` into this table on ``condition``."""
        validate_merge_args(source, condition)
        target_alias = self._alias or (catalog.name_parts(self._name)[-1] if self._name else None)
        return DeltaMergeBuilder(
            _run=self._run_merge,
            _explain=self._explain_merge,
            _source=source,
            _condition=condition,
            _target_alias=target_alias,
            _source_alias=dataframe_alias(source),
            _target_name=self._target_name(),
            _refs=attribute_renderer(self._handed_out, source),
            _extras={} if self._widening is None else {WIDENING_AT_ANALYSIS: self._widening},
        )

    def _run_merge(self, spec: MergeSpec) -> DataFrame:
        from deltamerge.merge.command import run_merge

        result = run_merge(self._spark, self._path, spec)
        catalog.refresh_views(self._spark, self._path)
        return result

    def _explain_merge(self, spec: MergeSpec) -> str:
        from deltamerge.merge.command import explain_merge

        return explain_merge(self._spark, self._path, spec)

    # --- DELETE / UPDATE (on the MERGE machinery, see deltamerge.dml) ----------------------------------

    def _target_alias(self) -> str | None:
        return self._alias or (catalog.name_parts(self._name)[-1] if self._name else None)

    def _target_name(self) -> tuple[str, ...]:
        # Opened by name with no alias: a registered name is a catalog table's
        # (``spark_catalog.default.people``), another a temp view's (its one part).
        if self._alias or not self._name:
            return ()
        return catalog_name(
            catalog.name_parts(self._name), temp_view=catalog.path_for_name(self._name) is None
        )

    def delete(self, condition: str | Column | None = None) -> None:
        """Delete the rows matching ``condition`` (every row when None)."""
        from deltamerge.dml import delete
        from deltamerge.spark.arg_checks import check_condition_arg

        check_condition_arg(condition)
        delete(
            self._spark,
            self._path,
            condition,
            target_alias=self._target_alias(),
            target_name=self._target_name(),
        )

    def update(
        self, condition: str | Column | None = None, set: dict[str, str | Column] | None = None
    ) -> None:
        """Set columns (``set``: column -> SQL text or Column) of the rows matching ``condition``."""
        from deltamerge.dml import update
        from deltamerge.spark.arg_checks import check_condition_arg, check_set_arg

        values = check_set_arg(set)
        check_condition_arg(condition)
        update(
            self._spark,
            self._path,
            condition,
            values,
            target_alias=self._target_alias(),
            target_name=self._target_name(),
        )

    # --- CREATE / REPLACE, RESTORE, OPTIMIZE (see deltamerge.builders) --------------------------------

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE TABLE (error if the table exists)."""
        return _builder(sparkSession, "create")

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE TABLE IF NOT EXISTS."""
        return _builder(sparkSession, "createIfNotExists")

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for REPLACE TABLE (error if the table does not exist)."""
        return _builder(sparkSession, "replace")

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE OR REPLACE TABLE."""
        return _builder(sparkSession, "createOrReplace")

    @classmethod
    def columnBuilder(cls, sparkSession: SparkSession, colName: str) -> DeltaColumnBuilder:
        """Builder of one column for the table builders' ``addColumns``: ``.dataType(...)``, then
        ``.nullable``, ``.generatedAlwaysAs``, ``.generatedAlwaysAsIdentity``,
        ``.generatedByDefaultAsIdentity``, ``.comment`` as needed, and ``.build()``."""
        from deltamerge.builders.creation import DeltaColumnBuilder

        if type(colName) is not str:
            raise TypeError(f"Column name must be str. Found {colName} with type {type(colName)}")
        return DeltaColumnBuilder(colName)

    def restoreToVersion(self, version: int) -> DataFrame:
        """Restore the table to an older version; returns the RESTORE metrics row."""
        from deltamerge.builders import restore

        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"version needs to be an int but got '{type(version)}'.")
        return restore(self._spark, self._path, version=version)

    def restoreToTimestamp(self, timestamp: str) -> DataFrame:
        """Restore the table to the version current at ``timestamp`` (``yyyy-MM-dd[ HH:mm:ss]``)."""
        from deltamerge.builders import restore

        if not isinstance(timestamp, str):
            raise ValueError(f"timestamp needs to be a string but got '{type(timestamp)}'.")
        return restore(self._spark, self._path, timestamp=timestamp)

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the table's protocol to at least these versions (never lowers it: a lower version
        is a no-op, as in Delta). Committed as ``SET TBLPROPERTIES``."""
        from deltamerge.table_properties import set_properties

        for name, value in (("readerVersion", readerVersion), ("writerVersion", writerVersion)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"The {name} needs to be an integer but got '{type(value)}'.")
        set_properties(
            self._spark,
            self._path,
            {"delta.minReaderVersion": str(readerVersion), "delta.minWriterVersion": str(writerVersion)},
        )

    def addFeatureSupport(self, featureName: str) -> None:
        """Add a table feature to the protocol (``delta.feature.<name> = supported``), moving it to
        table-features form (writer 7, and reader 3 for a reader-writer feature) if needed."""
        from deltamerge.table_properties import set_properties

        if not isinstance(featureName, str):
            raise ValueError(f"The featureName needs to be a string but got '{type(featureName)}'.")
        set_properties(self._spark, self._path, {f"delta.feature.{featureName}": "supported"})

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """Drop a table feature from the protocol (``ALTER TABLE ... DROP FEATURE name [TRUNCATE
        HISTORY]``): its traces are removed first, then the protocol is normalized to its weakest
        form, e.g. ``(1,7,{appendOnly, invariants, checkConstraints})`` to ``(1,3)``."""
        from deltamerge.feature_drop import drop_feature

        if not isinstance(featureName, str):
            raise ValueError(f"featureName needs to be a string but got '{type(featureName)}'.")
        if truncateHistory is not None and not isinstance(truncateHistory, bool):
            raise ValueError(f"truncateHistory needs to be a boolean but got '{type(truncateHistory)}'.")
        drop_feature(self._spark, self._path, featureName, truncate_history=bool(truncateHistory))

    def optimize(self) -> DeltaOptimizeBuilder:
        """Builder for OPTIMIZE: ``.where(partition_filter)``, then ``.executeCompaction()``."""
        from deltamerge.builders import DeltaOptimizeBuilder

        return DeltaOptimizeBuilder(self._spark, self._path)


def _builder(spark: SparkSession | None, mode: str) -> DeltaTableBuilder:
    from deltamerge.builders import DeltaTableBuilder

    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise InvalidArgumentError("No active SparkSession: pass one to DeltaTable.create(spark).")
    return DeltaTableBuilder(session, mode)
