"""ALTER TABLE column changes (Delta's ``AlterTableAddColumns`` / ``DropColumns`` /
``ChangeColumnDeltaCommand``): metadata-only commits that never touch a data file.

* ``ADD COLUMNS``: nullable columns, at the end, ``FIRST`` or ``AFTER c``, nested in structs too;
  on a column-mapped table they get fresh ids and physical names (the transaction hands them out).
* ``RENAME COLUMN`` and ``DROP COLUMN(S)``: only with column mapping, where files hold physical
  names: a rename changes the logical name only, a drop removes the field from the schema and the
  files keep the data that no reader asks for any more (Delta's advice to enable mapping otherwise).
* ``ALTER COLUMN``: comment, ``DROP NOT NULL``, position, and a type change that type widening
  allows (same type otherwise); ``SET NOT NULL`` is refused as in Delta.

A column that a CHECK constraint or a generated column names cannot be renamed or dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import AtomicType, DataType, StructField, StructType

from deltamerge import catalog
from deltamerge.column_defaults import CURRENT_DEFAULT
from deltamerge.column_defaults import validate as validate_defaults
from deltamerge.constraints import check_no_dependents
from deltamerge.errors import AnalysisError, UnsupportedOperationError
from deltamerge.log import column_mapping
from deltamerge.log.actions import Metadata
from deltamerge.log.clustering import clustering_columns, logical_path
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.session import conf_getter
from deltamerge.spark.types import as_nullable, schema_string, to_spark_schema
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

__all__ = ["NewColumn", "add_columns", "alter_column", "drop_columns", "rename_column"]

_STATS_COLUMNS = "delta.dataSkippingStatsColumns"


@dataclass(frozen=True)
class NewColumn:
    """A column for ``ADD COLUMNS``: the struct it goes into (``()`` for the top level), the field,
    and ``None`` (last), ``"FIRST"`` or ``"AFTER <name>"``."""

    parent: tuple[str, ...]
    field: StructField
    position: str | None = None


def _quoted(path: Sequence[str]) -> str:
    """A column path as Spark prints it (``UnresolvedAttribute.name``): parts with dots in backquotes."""
    return ".".join(f"`{p.replace('`', '``')}`" if "." in p or "`" in p else p for p in path)


def _mapping_advice() -> str:
    return (
        "Please enable Column Mapping on your Delta table with mapping mode 'name'. You can use: "
        "ALTER TABLE table_name SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name'). Column "
        "mapping requires at least protocol (2, 5); the table is upgraded if needed."
    )


def _not_found(path: Sequence[str], struct: StructType) -> AnalysisError:
    names = ", ".join(f"`{f.name}`" for f in struct.fields)
    return AnalysisError(
        f"A column, variable, or function parameter with name `{_quoted(path)}` cannot be resolved. "
        f"Did you mean one of the following? [{names}]",
        error_class="UNRESOLVED_COLUMN.WITH_SUGGESTION",
        sql_state="42703",
    )


def _index(struct: StructType, name: str) -> int | None:
    hits = [i for i, f in enumerate(struct.fields) if f.name.lower() == name.lower()]
    exact = [i for i in hits if struct.fields[i].name == name]
    return exact[0] if exact else hits[0] if hits else None


_NOT_STRUCT = "DELTA_UNSUPPORTED_DROP_NESTED_COLUMN_FROM_NON_STRUCT_TYPE"


def _struct_at(
    schema: StructType, parent: Sequence[str], what: str, error_class: str = _NOT_STRUCT
) -> StructType:
    """The struct ``parent`` names (the schema itself for ``()``)."""
    node = schema
    for depth, name in enumerate(parent):
        i = _index(node, name)
        if i is None:
            raise _not_found(parent[: depth + 1], node)
        dt = node.fields[i].dataType
        if not isinstance(dt, StructType):
            raise AnalysisError(
                f"Cannot {what} {_quoted(parent)}: its type is {dt.simpleString()}, not a struct.",
                error_class=error_class,
            )
        node = dt
    return node


def _resolve(schema: StructType, column: Sequence[str], what: str) -> tuple[tuple[str, ...], StructType, int]:
    """(parent path, parent struct, index) of the existing field ``column`` names."""
    parent = tuple(column[:-1])
    struct = _struct_at(schema, parent, what)
    i = _index(struct, column[-1])
    if i is None:
        raise _not_found(column, struct)
    return parent, struct, i


def _replace_struct(
    schema: StructType, parent: Sequence[str], edit: Callable[[StructType], StructType]
) -> StructType:
    """``schema`` with the struct at ``parent`` replaced by ``edit(struct)``."""
    if not parent:
        return edit(schema)
    i = _index(schema, parent[0])
    assert i is not None  # _struct_at resolved the path first
    f = schema.fields[i]
    assert isinstance(f.dataType, StructType)
    inner = _replace_struct(f.dataType, parent[1:], edit)
    fields = list(schema.fields)
    fields[i] = StructField(f.name, inner, f.nullable, f.metadata)
    return StructType(fields)


def _field_json(path: Sequence[str], f: StructField) -> dict[str, Any]:
    # Delta's structFieldToMap: the full dotted name, the type's name, nullability, metadata.
    return {
        "name": _quoted(path),
        "type": f.dataType.typeName(),
        "nullable": f.nullable,
        "metadata": f.metadata,
    }


class _Alter:
    """One ALTER TABLE transaction: the current schema, edited, then committed as metadata only."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        self.txn = OptimisticTransaction(DeltaLog.for_table(path), conf=conf_getter(spark))
        meta = self.txn.metadata
        if meta is None:
            raise AnalysisError(f"{path} is not a Delta table.", error_class="DELTA_MISSING_DELTA_TABLE")
        self.metadata: Metadata = meta
        self.schema = to_spark_schema(meta.schema_string)

    @property
    def mapped(self) -> bool:
        return column_mapping.mode_of(self.metadata.configuration) != "none"

    def commit(self, operation: Operation, **changes: Any) -> None:
        self.txn.update_metadata(replace(self.metadata, schema_string=schema_string(self.schema), **changes))
        self.txn.commit([], operation)
        catalog.refresh_views(self.spark, self.path)


def add_columns(spark: SparkSession, path: str, columns: Sequence[NewColumn]) -> None:
    """``ALTER TABLE t ADD COLUMNS (...)``: nullable columns only, as in Delta."""
    alter = _Alter(spark, path)
    for c in columns:
        if not c.field.nullable or as_nullable(c.field.dataType) != c.field.dataType:
            raise UnsupportedOperationError(
                "Operation not allowed: `NOT NULL in ALTER TABLE ADD COLUMNS` is not supported for Delta "
                "tables. Add the column as nullable.",
                error_class="DELTA_OPERATION_NOT_ALLOWED",
            )
        md = c.field.metadata or {}
        if any(k.startswith(("delta.generationExpression", "delta.identity")) for k in md):
            raise UnsupportedOperationError(
                f"Adding the generated or identity column {c.field.name} to an existing table is not "
                "supported; define it when the table is created.",
                error_class="DELTA_OPERATION_NOT_ALLOWED",
            )
        struct = _struct_at(alter.schema, c.parent, "add a column to", "DELTA_ADD_COLUMN_PARENT_NOT_STRUCT")
        if _index(struct, c.field.name) is not None:
            raise AnalysisError(
                f"Cannot add column, because `{_quoted([*c.parent, c.field.name])}` already exists in "
                f"{_quoted(c.parent) or 'root'}. Choose another name.",
                error_class="FIELD_ALREADY_EXISTS",
                sql_state="42710",
            )
        at = len(struct.fields)
        if c.position is not None and c.position.upper() == "FIRST":
            at = 0
        elif c.position is not None:
            after = c.position.split(None, 1)[1]
            i = _index(struct, after)
            if i is None:
                raise _not_found([*c.parent, after], struct)
            at = i + 1

        def insert(s: StructType, f: StructField = c.field, at: int = at) -> StructType:
            return StructType([*s.fields[:at], f, *s.fields[at:]])

        alter.schema = _replace_struct(alter.schema, c.parent, insert)
    params = [
        {
            "column": _field_json([*c.parent, c.field.name], c.field),
            **({"position": c.position} if c.position else {}),
        }
        for c in columns
    ]
    alter.commit(Operation("ADD COLUMNS", {"columns": params}, {}, changes_data=False))


def rename_column(spark: SparkSession, path: str, column: Sequence[str], new_name: str) -> None:
    """``ALTER TABLE t RENAME COLUMN a.b TO c``: column-mapped tables only (the files keep the
    physical name); a partition column is renamed in ``partitionColumns`` too."""
    alter = _Alter(spark, path)
    parent, struct, i = _resolve(alter.schema, column, "rename a field of")
    old = struct.fields[i]
    if old.name == new_name:
        return
    if not alter.mapped:
        raise UnsupportedOperationError(
            f"Column rename is not supported for your Delta table. {_mapping_advice()}",
            error_class="DELTA_UNSUPPORTED_RENAME_COLUMN",
        )
    clash = _index(struct, new_name)
    if clash is not None and clash != i:
        raise AnalysisError(
            f"Cannot rename column, because `{_quoted([*parent, new_name])}` already exists in "
            f"{_quoted(parent) or 'root'}. Choose another name.",
            error_class="FIELD_ALREADY_EXISTS",
            sql_state="42710",
        )
    check_no_dependents((*parent, old.name), alter.schema, alter.metadata.configuration)

    def rename(s: StructType) -> StructType:
        fields = list(s.fields)
        fields[i] = StructField(new_name, old.dataType, old.nullable, old.metadata)
        return StructType(fields)

    alter.schema = _replace_struct(alter.schema, parent, rename)
    partitions = tuple(alter.metadata.partition_columns)
    if not parent:
        partitions = tuple(new_name if p == old.name else p for p in partitions)
    conf = _renamed_stats_columns(alter.metadata.configuration, (*parent, old.name), new_name)
    params = {"oldColumnPath": _quoted([*parent, old.name]), "newColumnPath": _quoted([*parent, new_name])}
    alter.commit(
        Operation("RENAME COLUMN", params, {}, changes_data=False),
        partition_columns=partitions,
        configuration=conf,
    )


def _is_clustering_column(alter: _Alter, column: Sequence[str]) -> bool:
    snapshot = alter.txn.snapshot
    stored = clustering_columns(snapshot.protocol, snapshot.domains) if snapshot is not None else None
    wanted = tuple(p.lower() for p in column)
    for physical in stored or []:
        logical = logical_path(alter.metadata.schema, physical)
        if logical is not None and tuple(p.lower() for p in logical[: len(wanted)]) == wanted:
            return True  # the column or a struct holding one
    return False


def drop_columns(
    spark: SparkSession, path: str, columns: Sequence[Sequence[str]], *, if_exists: bool = False
) -> None:
    """``ALTER TABLE t DROP COLUMN(S) [IF EXISTS] ...``: column-mapped tables only; partition
    columns, the last field of a struct and columns that constraints name cannot be dropped."""
    alter = _Alter(spark, path)
    if not alter.mapped:
        raise UnsupportedOperationError(
            f"DROP COLUMN is not supported for your Delta table. {_mapping_advice()}",
            error_class="DELTA_UNSUPPORTED_DROP_COLUMN",
        )
    dropped: list[tuple[str, ...]] = []
    for column in columns:
        parent, name = tuple(column[:-1]), column[-1]
        try:
            struct = _struct_at(alter.schema, parent, "drop a field of")
        except AnalysisError:
            if if_exists:
                continue
            raise
        i = _index(struct, name)
        if i is None:
            if if_exists:
                continue
            raise _not_found(column, struct)
        full = (*parent, struct.fields[i].name)
        if not parent and full[0] in alter.metadata.partition_columns:
            raise UnsupportedOperationError(
                f"Dropping partition columns ({full[0]}) is not allowed.",
                error_class="DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN",
            )
        if len(struct.fields) == 1:
            raise AnalysisError(
                f"Cannot drop column from a schema with a single column. Schema:\n{struct.treeString()}",
                error_class="DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA",
            )
        check_no_dependents(full, alter.schema, alter.metadata.configuration)
        if _is_clustering_column(alter, full):
            raise UnsupportedOperationError(
                f"Dropping clustering columns ({_quoted(full)}) is not allowed.",
                error_class="DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN",
                sql_state="0AKDC",
            )

        def drop(s: StructType, i: int = i) -> StructType:
            return StructType([f for j, f in enumerate(s.fields) if j != i])

        alter.schema = _replace_struct(alter.schema, parent, drop)
        dropped.append(full)
    if not dropped:
        return
    conf = dict(alter.metadata.configuration)
    for full in dropped:
        conf = _renamed_stats_columns(conf, full, None)
    params = {"columns": [_quoted(p) for p in dropped]}
    alter.commit(Operation("DROP COLUMNS", params, {}, changes_data=False), configuration=conf)


def alter_column(
    spark: SparkSession,
    path: str,
    column: Sequence[str],
    *,
    comment: str | None = None,
    nullable: bool | None = None,
    data_type: DataType | None = None,
    position: str | None = None,
    default: str | None = None,
) -> None:
    """``ALTER TABLE t ALTER COLUMN c`` ``COMMENT 'x'`` | ``DROP NOT NULL`` | ``TYPE t`` |
    ``FIRST`` | ``AFTER d`` | ``SET DEFAULT expr`` | ``DROP DEFAULT`` (``default=""``) (Delta's
    CHANGE COLUMN): metadata only, nothing is rewritten."""
    alter = _Alter(spark, path)
    parent, struct, i = _resolve(alter.schema, column, "alter a field of")
    old = struct.fields[i]
    new = StructField(old.name, old.dataType, old.nullable, dict(old.metadata or {}))
    if comment is not None:
        new.metadata["comment"] = comment
    if default == "":
        new.metadata.pop(CURRENT_DEFAULT, None)
    elif default is not None:
        new.metadata[CURRENT_DEFAULT] = default  # rows already written keep EXISTS_DEFAULT
        validate_defaults(spark, StructType([new]))
    if nullable is not None:
        if old.nullable and not nullable:
            raise _change_refused((*parent, old.name), old, StructField(old.name, old.dataType, False))
        new.nullable = nullable
    if data_type is not None and data_type != old.dataType:
        new.dataType = _widened(alter, (*parent, old.name), old, data_type)
    fields = [f for j, f in enumerate(struct.fields) if j != i]
    at = i
    if position is not None and position.upper() == "FIRST":
        at = 0
    elif position is not None:
        after = position.split(None, 1)[1]
        k = _index(StructType(fields), after)
        if k is None:
            raise _not_found([*parent, after], struct)
        at = k + 1
    fields.insert(at, new)
    alter.schema = _replace_struct(alter.schema, parent, lambda _s: StructType(fields))
    if new.dataType != old.dataType:
        from deltamerge.merge.evolution import add_type_change_metadata

        features = set(alter.txn.protocol.writer_features or ()) if alter.txn.protocol is not None else set()
        version = alter.txn.read_version + 1 if "typeWidening-preview" in features else None
        alter.schema = add_type_change_metadata(
            alter.schema, to_spark_schema(alter.metadata.schema_string), table_version=version
        )
    params: dict[str, Any] = {
        "column": json.dumps(_field_json([*parent, new.name], new), separators=(",", ":"))
    }
    if position is not None:
        params["position"] = (
            position.upper() if position.upper() == "FIRST" else f"AFTER {position.split(None, 1)[1]}"
        )
    alter.commit(Operation("CHANGE COLUMN", params, {}, changes_data=False))


def _change_refused(path: Sequence[str], old: StructField, new: StructField) -> UnsupportedOperationError:
    def show(f: StructField) -> str:
        return f"{f.name} ({f.dataType.simpleString().upper()}{'' if f.nullable else ' NOT NULL'})"

    return UnsupportedOperationError(
        f"ALTER TABLE CHANGE COLUMN is not supported for changing column {_quoted(path)} from {show(old)} "
        f"to {show(new)}.",
        error_class="DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP",
    )


def _widened(alter: _Alter, path: tuple[str, ...], old: StructField, new_type: DataType) -> DataType:
    """The new type of a column when type widening allows the change (``delta.enableTypeWidening``)."""
    from deltamerge.merge.evolution import type_change_supported, widening_for

    allowed = (
        widening_for(dict(alter.metadata.configuration), "always") is not None
        and isinstance(old.dataType, AtomicType)
        and isinstance(new_type, AtomicType)
        and type_change_supported(old.dataType, new_type)
    )
    if not allowed:
        raise _change_refused(path, old, StructField(old.name, new_type, old.nullable))
    check_no_dependents(path, alter.schema, alter.metadata.configuration)
    return new_type


def _renamed_stats_columns(conf: Any, old: tuple[str, ...], new_name: str | None) -> dict[str, str]:
    """``delta.dataSkippingStatsColumns`` with ``old`` renamed (or removed for ``None``)."""
    out = dict(conf)
    raw = out.get(_STATS_COLUMNS)
    if not raw:
        return out
    target = ".".join(old).lower()
    kept = []
    for item in (c.strip() for c in str(raw).split(",")):
        bare = item.replace("`", "")
        if bare.lower() == target or bare.lower().startswith(target + "."):
            if new_name is None:
                continue
            item = ".".join([*old[:-1], new_name]) + bare[len(target) :]
        kept.append(item)
    out[_STATS_COLUMNS] = ",".join(kept)
    return out
