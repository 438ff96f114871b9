"""``SHOW TBLPROPERTIES``, ``SHOW PARTITIONS``, ``SHOW CREATE TABLE``, ``DESCRIBE [EXTENDED]`` and
``TRUNCATE TABLE`` on Delta tables, as Delta answers them (Spark alone sees deltamerge's tables as
views, which it refuses or describes as views). ``HANDLERS`` pairs each pattern with its handler."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField

from deltamerge.clustering_ddl import logical_names, shown
from deltamerge.column_defaults import default_text
from deltamerge.errors import AnalysisError
from deltamerge.identifiers import lookup_table
from deltamerge.log import char_varchar, column_mapping
from deltamerge.log.clustering import clustering_columns, logical_path
from deltamerge.log.paths import table_root
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.merge.evolution import sql_type
from deltamerge.spark.types import quote_if_needed, quote_name
from deltamerge.sql_common import (
    FLAGS,
    TABLE_REF,
    empty_frame,
    parse_properties,
    resolve_table,
    table_reference,
)

__all__ = ["HANDLERS", "table_properties"]

_SHOW_PROPS = re.compile(rf"SHOW\s+TBLPROPERTIES\s+{TABLE_REF}(?:\s*\(\s*(?P<key>.+?)\s*\))?", FLAGS)
_SHOW_PARTITIONS = re.compile(rf"SHOW\s+PARTITIONS\s+{TABLE_REF}(?:\s+PARTITION\s*\((?P<spec>.*)\))?", FLAGS)
_DESCRIBE = re.compile(
    rf"(?:DESC|DESCRIBE)\s+(?:TABLE\s+)?(?P<ext>(?:EXTENDED|FORMATTED)\s+)?{TABLE_REF}", FLAGS
)
_SHOW_CREATE = re.compile(rf"SHOW\s+CREATE\s+TABLE\s+{TABLE_REF}(?:\s+AS\s+SERDE)?", FLAGS)
_TRUNCATE = re.compile(rf"TRUNCATE\s+TABLE\s+{TABLE_REF}(?P<partition>\s+PARTITION\s*\(.*\))?", FLAGS)


def _display(path: str, name: str | None) -> str:
    return name if name is not None else f"delta.{quote_name(path)}"


def table_properties(snap: Snapshot) -> dict[str, str]:
    """The properties Delta's table reports (``DeltaTableV2.properties`` without Spark's reserved
    ones): the configuration, the protocol versions, ``delta.feature.<name>`` for each table
    feature and, for a clustered table, ``clusteringColumns``."""
    meta, proto = snap.metadata, snap.protocol
    props = {k: v for k, v in meta.configuration.items() if k != "path"}
    props["delta.minReaderVersion"] = str(proto.min_reader_version)
    props["delta.minWriterVersion"] = str(proto.min_writer_version)
    features = set(proto.reader_features or ()) | set(proto.writer_features or ())
    props.update({f"delta.feature.{f}": "supported" for f in sorted(features)})
    clustered = clustering_columns(proto, snap.domains)
    if clustered is not None:
        logical = [logical_path(meta.schema, c) for c in clustered]
        props["clusteringColumns"] = json.dumps(
            [list(p) for p in logical if p is not None], separators=(",", ":")
        )
    return props


def _show_properties(spark: SparkSession, m: re.Match[str], path: str, name: str | None) -> DataFrame:
    props = table_properties(DeltaLog.for_table(path).update())
    schema = "key string, value string"
    if m.group("key") is not None:
        (key,) = parse_properties(m.group("key"), keys_only=True)
        value = props.get(key, f"Table {_display(path, name)} does not have property: {key}")
        return spark.createDataFrame([(key, value)], schema)
    return spark.createDataFrame(sorted(props.items()), schema)


def _show_partitions(spark: SparkSession, m: re.Match[str], path: str, name: str | None) -> DataFrame:
    from deltamerge.io import read_snapshot

    snap = DeltaLog.for_table(path).update()
    parts = list(snap.metadata.partition_columns)
    if not parts:
        raise AnalysisError(
            f"SHOW PARTITIONS is not allowed on a table that is not partitioned: {_display(path, name)}",
            error_class="DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_TABLE",
            sql_state="42809",
        )
    spec = parse_properties(m.group("spec"), keys_only=False) if m.group("spec") else {}
    by_lower = {p.lower(): p for p in parts}
    bad = [k for k in spec if k.lower() not in by_lower]
    if bad:
        raise AnalysisError(
            f"Non-partitioning column(s) [{', '.join(bad)}] are specified for SHOW PARTITIONS",
            error_class="DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_COLUMN",
            sql_state="42P10",
        )
    # Through a read of the table, as Delta: only partitions that hold rows are shown.
    df = read_snapshot(spark, snap)
    for key, value in spec.items():
        df = df.where(F.col(quote_name(by_lower[key.lower()])).eqNullSafe(F.lit(value)))
    columns = [F.col(quote_name(p)) for p in parts]
    return df.select(*columns).distinct().orderBy(*columns)


def _describe(spark: SparkSession, m: re.Match[str], path: str, name: str | None) -> DataFrame:
    """Spark's description of a Delta table (DescribeTableExec over DeltaTableV2): the columns,
    ``# Partition Information`` or ``# Clustering Information``, and with EXTENDED the table's
    details and properties."""
    from deltamerge.spark.types import to_spark_schema

    snap = DeltaLog.for_table(path).update()
    meta, proto = snap.metadata, snap.protocol
    schema = to_spark_schema(meta.schema_string)
    by_lower = {f.name.lower(): f for f in schema.fields}

    def row(f):  # type: ignore[no-untyped-def]
        return (f.name, f.dataType.simpleString(), f.metadata.get("comment"))

    rows: list[tuple[str, str, str | None]] = [row(f) for f in schema.fields]
    if meta.partition_columns:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [row(by_lower[p.lower()]) for p in meta.partition_columns if p.lower() in by_lower]
    clustered = clustering_columns(proto, snap.domains)
    if clustered:
        rows += [("# Clustering Information", "", ""), ("# col_name", "data_type", "comment")]
        for c in clustered:
            logical = logical_path(meta.schema, c)
            if logical is not None:
                field = schema[logical[0]]
                for part in logical[1:]:
                    field = field.dataType[part]  # type: ignore[index]
                rows.append((shown(logical), field.dataType.simpleString(), field.metadata.get("comment")))
    if m.group("ext"):
        props = table_properties(snap)
        rows += [("", "", ""), ("# Detailed Table Information", "", ""), ("Name", _display(path, name), "")]
        rows.append(("Type", "EXTERNAL" if name is not None else "MANAGED", ""))
        if meta.description:
            rows.append(("Comment", meta.description, ""))
        rows += [("Location", "file:" + path, ""), ("Provider", "delta", "")]
        listed = ",".join(f"{k}={v}" for k, v in sorted(props.items()))
        rows.append(("Table Properties", f"[{listed}]", ""))
    return spark.createDataFrame(rows, "col_name string, data_type string, comment string")


def _escaped(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _field_ddl(f: StructField) -> str:
    """Spark's ``StructField.toDDL``: name, type (CHAR/VARCHAR as declared), NOT NULL, DEFAULT,
    COMMENT."""
    declared = f.metadata.get(char_varchar.TYPE_STRING)
    text = f"{quote_if_needed(f.name)} {declared.upper() if declared else sql_type(f.dataType)}"
    if not f.nullable:
        text += " NOT NULL"
    if (default := default_text(f)) is not None:
        text += f" DEFAULT {default}"
    if f.metadata.get("comment") is not None:
        text += f" COMMENT {_escaped(str(f.metadata['comment']))}"
    return text


def _show_create(spark: SparkSession, m: re.Match[str], path: str, name: str | None) -> DataFrame:
    """Spark's SHOW CREATE TABLE of a Delta table (ShowCreateTableExec over DeltaTableV2)."""
    from deltamerge.spark.types import to_spark_schema

    snap = DeltaLog.for_table(path).update()
    meta, proto = snap.metadata, snap.protocol
    schema = to_spark_schema(column_mapping.without_mapping_metadata(meta.schema))

    def lines(items: list[str]) -> str:
        return "(\n  " + ",\n  ".join(items) + ")\n"

    text = f"CREATE TABLE {_display(path, name)} " + lines([_field_ddl(f) for f in schema.fields])
    text += "USING delta\n"
    if meta.partition_columns:
        text += "PARTITIONED BY (" + ", ".join(quote_if_needed(p) for p in meta.partition_columns) + ")\n"
    clustered = logical_names(proto, snap.domains, meta.schema)
    if clustered:
        text += "CLUSTER BY (" + ", ".join(clustered) + ")\n"
    if meta.description:
        text += f"COMMENT {_escaped(meta.description)}\n"
    text += f"LOCATION {_escaped('file:' + path)}\n"
    props = {k: v for k, v in table_properties(snap).items() if k != "clusteringColumns"}
    if props:
        text += "TBLPROPERTIES " + lines([f"{_escaped(k)} = {_escaped(v)}" for k, v in sorted(props.items())])
    return spark.createDataFrame([(text,)], "createtab_stmt string")


def _truncate(spark: SparkSession, m: re.Match[str], path: str, _name: str | None) -> DataFrame:
    from deltamerge.catalog import refresh_views
    from deltamerge.spark.session import conf_getter
    from deltamerge.txn.operations import Operation
    from deltamerge.txn.transaction import OptimisticTransaction

    if m.group("partition"):
        raise AnalysisError(
            "Operation not allowed: TRUNCATE TABLE on Delta tables does not support partition predicates; "
            "use DELETE to delete specific partitions or rows.",
            error_class="DELTA_TRUNCATE_TABLE_PARTITION_NOT_SUPPORTED",
            sql_state="0AKDC",
        )
    start = time.monotonic()
    root = table_root(path)
    txn = OptimisticTransaction(DeltaLog.for_table(root), conf=conf_getter(spark))
    files = list(txn.snapshot.files) if txn.snapshot is not None else []
    if files:
        txn.mark_read_whole_table()
        now = int(time.time() * 1000)
        metrics = {"numRemovedFiles": len(files), "executionTimeMs": int((time.monotonic() - start) * 1000)}
        txn.commit([f.remove(now) for f in files], Operation("TRUNCATE", {}, metrics))
        refresh_views(spark, root)
    return empty_frame(spark)


_Handler = Callable[[SparkSession, re.Match[str]], DataFrame | None]


def _on_delta(handler: Callable[[SparkSession, re.Match[str], str, str | None], DataFrame]) -> _Handler:
    """``handler`` on a ``delta.`/path``` or a name deltamerge knows; None (Spark runs the
    statement) for any other name."""

    def run(spark: SparkSession, m: re.Match[str]) -> DataFrame | None:
        path, parts = table_reference(m.group("table"), allow_path=False)
        if path is None and lookup_table(parts) is None:
            return None
        path, name = resolve_table(m.group("table"), allow_path=False)
        return handler(spark, m, path, name)

    return run


HANDLERS: list[tuple[re.Pattern[str], _Handler]] = [
    (_SHOW_PROPS, _on_delta(_show_properties)),
    (_SHOW_PARTITIONS, _on_delta(_show_partitions)),
    (_TRUNCATE, _on_delta(_truncate)),
    (_DESCRIBE, _on_delta(_describe)),
    (_SHOW_CREATE, _on_delta(_show_create)),
]
