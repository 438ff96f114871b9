"""CREATE / REPLACE TABLE: ``create_table`` and delta-spark's ``DeltaTableBuilder``.

One transaction: protocol + metadata (+ the files of ``AS SELECT`` data; REPLACE removes every
current file) as ``CREATE TABLE`` / ``REPLACE TABLE`` / ``CREATE OR REPLACE TABLE`` [``AS SELECT``].
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from deltamerge import catalog, clustering_ddl, column_defaults
from deltamerge.builders import auto_compaction
from deltamerge.builders.common import discard, write_data
from deltamerge.builders.existing import verify as verify_existing
from deltamerge.errors import (
    AnalysisError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from deltamerge.generated import validate as validate_generated
from deltamerge.identifiers import name_parts
from deltamerge.identity import IdentityGenerator
from deltamerge.identity import column_metadata as identity_metadata
from deltamerge.identity import validate as validate_identity
from deltamerge.log import clustering
from deltamerge.log.actions import Action, Metadata
from deltamerge.log.paths import table_root
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import case_sensitive, conf_getter, table_property_defaults, user_properties
from deltamerge.spark.types import quote_name, schema_string
from deltamerge.spark.write import now_ms, optimized_write_bin_size
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

if TYPE_CHECKING:
    from deltamerge.table import DeltaTable

_MODES = ("create", "createIfNotExists", "replace", "createOrReplace")


def _warehouse(spark: SparkSession) -> str:
    return table_root(spark.conf.get("spark.sql.warehouse.dir") or "spark-warehouse")


def table_location(spark: SparkSession, name: str) -> str:
    """Where a name without LOCATION lives: its registered path, else ``<warehouse>/<name>``."""
    known = catalog.path_for_name(name)
    if known is not None:
        return known
    return os.path.join(_warehouse(spark), name.lower())


def _register_name(name: str) -> str:
    return catalog.session_name(name, "a path with .location(...)")


def replace_missing_error(shown: str) -> TableNotFoundError:
    """REPLACE TABLE of a table that does not exist (Delta's ``DELTA_CANNOT_REPLACE_MISSING_TABLE``)."""
    return TableNotFoundError(
        f"Table {shown} cannot be replaced as it does not exist. Use CREATE OR REPLACE TABLE to create the "
        "table.",
        error_class="DELTA_CANNOT_REPLACE_MISSING_TABLE",
    )


def _check_schema(schema: StructType, partition_by: Sequence[str]) -> list[str]:
    from deltamerge.io import _check_names

    _check_names(schema)
    clustering_ddl.duplicate_columns_error("PARTITION_COLUMNS", list(partition_by))
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


def _directory_in_use(root: str, *, ignore_log: bool = False) -> bool:
    """Whether ``root`` is a directory holding anything (Delta's test for a path table's existence);
    ``ignore_log``: anything but a ``_delta_log`` directory (an earlier attempt may leave one)."""
    try:
        with os.scandir(root) as entries:
            return any(not (ignore_log and e.name == "_delta_log") for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _already_exists(shown: str) -> TableAlreadyExistsError:
    """Spark's error for a CREATE of a table its catalog has."""
    return TableAlreadyExistsError(
        f"Cannot create table or view {shown} because it already exists. Choose a different name or "
        "path, drop or replace the existing table (CREATE OR REPLACE TABLE), or add the IF NOT EXISTS "
        "clause to tolerate pre-existing objects.",
        error_class="TABLE_OR_VIEW_ALREADY_EXISTS",
        sql_state="42P07",
    )


def _non_empty_location(shown: str, root: str) -> AnalysisError:
    return AnalysisError(
        f"Cannot create table ('{shown}'). The associated location ('{root}') is not empty and also "
        "not a Delta table. Choose an empty location, convert the files first (CONVERT TO DELTA), or "
        "create the table by its path to use the table that is there.",
        error_class="DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
        sql_state="42601",
    )


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
    cluster_by: Sequence[str] | None = None,
) -> str:
    """CREATE / REPLACE a Delta table (``mode``: create, createIfNotExists, replace, createOrReplace).

    ``data`` makes it ``... AS SELECT`` (the schema then comes from the data). A ``name`` is
    registered with ``deltamerge.register_table``; without ``location`` the table lives in the
    warehouse directory. ``cluster_by`` (column names, dotted for nested fields) makes a clustered
    table (CLUSTER BY). Returns the table path.
    """
    if mode not in _MODES:
        raise InvalidArgumentError(f"Unknown table creation mode {mode!r}; use one of {', '.join(_MODES)}.")
    clustering_ddl.check_no_feature_property(properties or {}, alter=False)
    clustered_by = [name_parts(c) for c in cluster_by] if cluster_by is not None else None
    clustering_ddl.reject_partitioning(clustered_by, partition_by)
    properties = user_properties(spark, properties)  # before anything is registered or written
    if name is None and location is None:
        raise AnalysisError(
            "Table name or location has to be specified", error_class="DELTA_ILLEGAL_ARGUMENT"
        )
    view = _register_name(name) if name is not None else None
    root = table_root(location) if location is not None else table_location(spark, view)  # type: ignore[arg-type]
    shown = f"`{name}`" if name else f"delta.`{root}`"
    if name is None and mode in ("create", "createIfNotExists") and _directory_in_use(root):
        # A path identifier (CREATE TABLE delta.`path`, a builder with only a location): Spark's
        # CREATE asks the catalog first, and Delta's catalog says a path table exists when its
        # directory is not empty (DeltaCatalog.tableExists), table or not. IF NOT EXISTS then does
        # nothing; a plain CREATE (or CTAS) is refused before Delta's command runs.
        if mode == "createIfNotExists":
            return root
        raise _already_exists(shown)
    log = DeltaLog.for_table(root)
    txn = OptimisticTransaction(log, conf=conf_getter(spark))
    auto_compaction.register(spark, txn)  # compacts only if the commit writes data
    exists = not txn.is_new_table
    replacing = mode in ("replace", "createOrReplace") and exists
    if exists and mode == "createIfNotExists":
        if view is not None:
            catalog.register_table(spark, view, root)
        return root
    if exists and mode == "create":
        # CREATE TABLE over an existing table at a given location (Delta's verifyTableMetadata):
        # what the statement specifies must match the table; then the name is registered and
        # nothing is committed.
        registered = view is not None and catalog.path_for_name(view)
        if location is not None and data is None and not registered and txn.snapshot is not None:
            given = schema_string(schema) if schema is not None and schema.fields else None
            verify_existing(txn.snapshot, root, given, partition_by, clustered_by, properties)
            if view is not None:
                catalog.register_table(spark, view, root)
            return root
        if registered:  # Spark asks the catalog first
            raise _already_exists(shown)
        # A CTAS, or a managed table, at the location of a table the catalog does not know.
        raise _non_empty_location(shown, root)
    if not exists and _directory_in_use(root, ignore_log=True):
        # A new table in a directory of other files (Delta's assertPathEmpty).
        raise _non_empty_location(shown, root)
    if mode == "replace" and not exists:
        if name is not None:  # Spark's REPLACE TABLE asks its catalog first
            raise TableNotFoundError(
                f"The table or view `{name}` cannot be found. Verify the spelling of the name; to create "
                "the table, use CREATE OR REPLACE TABLE (createOrReplace).",
                error_class="TABLE_OR_VIEW_NOT_FOUND",
                sql_state="42P01",
            )
        raise replace_missing_error(shown)
    if data is not None:
        schema = StructType([StructField(f.name, f.dataType, True, f.metadata) for f in data.schema.fields])
    if (schema is None or not schema.fields) and mode in ("replace", "createOrReplace"):
        # as Delta: a plain CREATE may make a table without columns (a later MERGE WITH SCHEMA
        # EVOLUTION or append with mergeSchema gives it some); a replacement must bring a schema
        raise AnalysisError(
            "Table schema is not provided. Please provide the schema (column definition) of the table "
            "or an AS SELECT query.",
            error_class="DELTA_SCHEMA_NOT_PROVIDED",
        )
    schema = schema if schema is not None else StructType([])
    was_clustered = replacing and txn.snapshot is not None and clustering.is_clustered(txn.snapshot.protocol)
    if was_clustered and partition_by:
        raise AnalysisError(
            "Replacing a clustered Delta table with a partitioned table is not allowed.",
            error_class="DELTA_CLUSTERING_REPLACE_TABLE_WITH_PARTITIONED_TABLE",
            sql_state="42000",
        )
    parts = _check_schema(schema, partition_by)
    validate_generated(spark, schema, case_sensitive=case_sensitive(spark))
    column_defaults.validate(spark, schema)
    validate_identity(schema, parts)
    conf = {} if replacing else table_property_defaults(spark)
    conf.update(properties)
    txn.update_metadata(
        Metadata(
            id="",
            schema_string=schema_string(schema),
            partition_columns=tuple(parts),
            configuration=conf,
            description=comment,
            created_time=now_ms(),
        )
    )
    actions: list[Action] = []
    cluster_names: list[str] = []
    if clustered_by is not None:
        actions.append(clustering_ddl.cluster(txn, clustered_by, conf_getter(spark)))
        cluster_names = [clustering_ddl.shown(c) for c in clustered_by]
    elif was_clustered:  # Delta: a replacement without CLUSTER BY keeps the feature, no columns
        actions.append(clustering.domain_for([]))
    written: list[str] = []
    metrics: dict[str, int] = {}
    if replacing:
        now = now_ms()
        actions += [f.remove(now) for f in txn.snapshot.files]  # type: ignore[union-attr]
        txn.mark_read_whole_table()
    if data is not None:
        adds = write_data(
            spark,
            root,
            data.select(*[F.col(quote_name(c)) for c in data.columns]),
            schema,
            parts,
            conf,
            metadata=txn.metadata,
            optimize_write_bin_size=optimized_write_bin_size(spark, conf),
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
        "clusterBy": cluster_names,
        "properties": dict(txn.metadata.configuration),  # type: ignore[union-attr]
    }
    try:
        txn.commit(actions, Operation(op_name, params, metrics, changes_data=data is not None or replacing))
    except BaseException:
        if txn.committed_version is None:  # a failed post-commit hook leaves a landed commit
            discard(root, written)
        raise
    if view is not None:
        catalog.register_table(spark, view, root)
    catalog.refresh_views(spark, root)
    return root


def _type_error(msg: str, objs: Iterable[Any]) -> TypeError:
    for obj in objs:
        msg += f" Found {obj} with type {type(obj)}"
    return TypeError(msg)


def column_field(
    colName: str,
    dataType: str | DataType,
    nullable: bool = True,
    generatedAlwaysAs: str | IdentityGenerator | None = None,
    comment: str | None = None,
    generatedByDefaultAs: IdentityGenerator | None = None,
) -> StructField:
    """The StructField of one column of ``addColumn`` / ``DeltaColumnBuilder`` (arguments checked
    as delta-spark checks them)."""
    if type(colName) is not str:
        raise _type_error("Column name must be str.", [colName])
    if type(dataType) is not str and not isinstance(dataType, DataType):
        raise _type_error("Column data type must be str or DataType.", [dataType])
    if type(nullable) is not bool:
        raise _type_error("Column nullable must be bool.", [nullable])
    metadata: dict[str, Any] = {}
    if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
        raise InvalidArgumentError(
            "generatedAlwaysAs and generatedByDefaultAs cannot both be set for one column."
        )
    for generator in (generatedAlwaysAs, generatedByDefaultAs):
        if isinstance(generator, IdentityGenerator) and generator.step == 0:
            # delta-spark's builder checks this in Python, before anything runs.
            raise ValueError("Column identity generation requires step to be non-zero.")
    if isinstance(generatedAlwaysAs, IdentityGenerator):
        metadata.update(identity_metadata(generatedAlwaysAs, always=True))
    elif generatedAlwaysAs is not None:
        if type(generatedAlwaysAs) is not str:
            raise _type_error("Column generation expression must be str.", [generatedAlwaysAs])
        metadata["delta.generationExpression"] = generatedAlwaysAs
    if generatedByDefaultAs is not None:
        if not isinstance(generatedByDefaultAs, IdentityGenerator):
            raise _type_error("generatedByDefaultAs must be an IdentityGenerator.", [generatedByDefaultAs])
        metadata.update(identity_metadata(generatedByDefaultAs, always=False))
    if comment is not None:
        if type(comment) is not str:
            raise _type_error("Column comment must be str.", [comment])
        metadata["comment"] = comment
    dtype = DataType.fromDDL(dataType) if isinstance(dataType, str) else dataType
    return StructField(colName, dtype, nullable, metadata)


class DeltaColumnBuilder:
    """delta-spark's ``DeltaTable.columnBuilder(spark, name)``: ``.dataType(...)``, ``.nullable(...)``,
    ``.generatedAlwaysAs(expr)``, ``.generatedAlwaysAsIdentity(start, step)``,
    ``.generatedByDefaultAsIdentity(start, step)``, ``.comment(...)``, then ``.build()`` -> a
    StructField for ``DeltaTableBuilder.addColumns``."""

    def __init__(self, colName: str) -> None:
        self._name = colName
        self._type: str | DataType | None = None
        self._nullable = True
        self._always: str | IdentityGenerator | None = None
        self._by_default: IdentityGenerator | None = None
        self._comment: str | None = None

    def dataType(self, dataType: str | DataType) -> DeltaColumnBuilder:
        """The column type: a DataType or a DDL type string."""
        self._type = dataType
        return self

    def nullable(self, nullable: bool) -> DeltaColumnBuilder:
        """Whether the column takes nulls (default true)."""
        self._nullable = nullable
        return self

    def generatedAlwaysAs(self, expression: str) -> DeltaColumnBuilder:
        """A generated column computed by ``expression`` (SQL text)."""
        self._always = expression
        return self

    def generatedAlwaysAsIdentity(self, start: int = 1, step: int = 1) -> DeltaColumnBuilder:
        """An identity column that refuses explicit values."""
        self._always = IdentityGenerator(start, step)
        return self

    def generatedByDefaultAsIdentity(self, start: int = 1, step: int = 1) -> DeltaColumnBuilder:
        """An identity column that accepts explicit values."""
        self._by_default = IdentityGenerator(start, step)
        return self

    def comment(self, comment: str) -> DeltaColumnBuilder:
        """The column comment."""
        self._comment = comment
        return self

    def build(self) -> StructField:
        """The column as a StructField."""
        if self._type is None:
            raise InvalidArgumentError(f"The data type of column {self._name} is not set: call dataType().")
        return column_field(
            self._name, self._type, self._nullable, self._always, self._comment, self._by_default
        )


def _column_names(cols: tuple[Any, ...], what: str) -> list[str]:
    """The columns of ``partitionedBy`` / ``clusterBy`` (given one by one, or as one list)."""
    names: Sequence[Any] = cols[0] if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
    for c in names:
        if type(c) is not str:
            raise _type_error(f"{what} column must be str.", [c])
    return list(names)


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
    _cluster_by: list[str] | None = None

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
        generatedAlwaysAs: str | IdentityGenerator | None = None,
        comment: str | None = None,
        generatedByDefaultAs: IdentityGenerator | None = None,
    ) -> DeltaTableBuilder:
        """One column; ``dataType`` is a DataType or a DDL type string (``"INT"``, ``"array<string>"``).

        ``generatedAlwaysAs``: a generation expression (SQL text) or an ``IdentityGenerator`` (an
        identity column that refuses explicit values); ``generatedByDefaultAs``: an
        ``IdentityGenerator`` for an identity column that accepts them."""
        self._fields.append(
            column_field(colName, dataType, nullable, generatedAlwaysAs, comment, generatedByDefaultAs)
        )
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
        self._partition_by = _column_names(cols, "Partitioning")
        return self

    def clusterBy(self, *cols: str | list[str] | tuple[str, ...]) -> DeltaTableBuilder:
        """Clustering columns (a clustered table: CLUSTER BY); dotted names reach struct fields."""
        self._cluster_by = _column_names(cols, "Clustering")
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
            cluster_by=self._cluster_by,
        )
        if self._name is None:  # as delta-spark: forPath, so a directory of other files is reported
            return DeltaTable.forPath(self._spark, root)
        return DeltaTable(self._spark, root, name=_register_name(self._name))
