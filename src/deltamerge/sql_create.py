"""``CREATE [OR REPLACE] TABLE ... USING delta`` for ``deltamerge.sql`` (parsed by sqlglot), run by
``deltamerge.builders.create_table``: column definitions (types, NOT NULL, comments, generated and
identity columns, defaults, collations), PARTITIONED BY, CLUSTER BY, LOCATION, TBLPROPERTIES,
``AS SELECT`` and ``LIKE``."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType, StructField, StructType
from sqlglot import exp

from deltamerge.errors import ParseError, UnsupportedOperationError
from deltamerge.predicates import to_sql
from deltamerge.spark.types import quote_name
from deltamerge.sql_common import delta_source, empty_frame, parse_statement, path_of
from deltamerge.sql_dialect import DIALECT
from deltamerge.sql_tables import sql_with_delta_tables


def _column(node: exp.ColumnDef) -> StructField:
    kind = node.args.get("kind")
    if kind is None:
        raise ParseError(f"Column {node.name} needs a data type.")
    nullable = True
    metadata: dict[str, Any] = {}
    collation = ""
    for c in node.args.get("constraints") or []:
        k = c.args.get("kind")
        if isinstance(k, exp.CollateColumnConstraint):  # `name STRING COLLATE UTF8_LCASE`
            collation = f" COLLATE {quote_name(k.this.name)}"
        elif isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.CommentColumnConstraint):
            metadata["comment"] = k.this.name
        elif isinstance(k, exp.ComputedColumnConstraint):
            metadata["delta.generationExpression"] = to_sql(k.this)
        elif isinstance(k, exp.DefaultColumnConstraint):
            from deltamerge.column_defaults import metadata as default_metadata

            metadata.update(default_metadata(to_sql(k.this)))
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint) and k.args.get("expression") is None:
            from deltamerge.identity import IdentityGenerator, column_metadata

            def number(node: exp.Expression | None) -> int:
                if node is None:
                    return 1
                if isinstance(node, exp.Neg):
                    return -number(node.this)
                return int(node.name)

            generator = IdentityGenerator(number(k.args.get("start")), number(k.args.get("increment")))
            metadata.update(column_metadata(generator, always=bool(k.this)))
        else:
            raise UnsupportedOperationError(
                f"Column constraint {to_sql(c)} is not supported by deltamerge.{_check_hint(c)}"
            )
    return StructField(node.name, DataType.fromDDL(kind.sql(dialect=DIALECT) + collation), nullable, metadata)


def _refuse_table_constraint(node: exp.Expression) -> None:
    """A table constraint in CREATE TABLE's column list (``CONSTRAINT c CHECK (...)``, ``PRIMARY
    KEY (...)``, ...): Delta stores none of them, and one dropped silently would let rows through
    that the user meant to refuse."""
    raise UnsupportedOperationError(
        f"Table constraint {to_sql(node)} is not supported in CREATE TABLE by Delta tables."
        + _check_hint(node)
    )


def _check_hint(node: exp.Expression) -> str:
    """How a CHECK constraint is declared on a Delta table instead."""
    if node.find(exp.CheckColumnConstraint) is None:
        return ""
    return (
        " Add a CHECK constraint with ALTER TABLE ... ADD CONSTRAINT name CHECK (condition) after "
        "creating the table, or with the table property 'delta.constraints.<name>' = '<condition>'."
    )


def _column_path(node: exp.Expression) -> str:
    """A (possibly nested) column of CLUSTER BY as one name, odd parts in backticks."""
    from deltamerge.clustering_ddl import shown

    return shown([p.name for p in node.parts]) if isinstance(node, exp.Column) else to_sql(node)


def create_statement(spark: SparkSession, text: str, head: str) -> DataFrame:
    """Run ``CREATE [OR REPLACE] TABLE`` / ``REPLACE TABLE`` / ``CREATE TABLE IF NOT EXISTS`` (``head``
    is the statement's opening words), with columns, ``AS SELECT`` or ``LIKE``."""
    from deltamerge.builders import create_table

    words = head.upper().split()
    mode = "createOrReplace" if "OR" in words else "replace" if words[0] == "REPLACE" else "create"
    if mode == "replace":
        text = re.sub(r"^\s*REPLACE\s+TABLE", "CREATE OR REPLACE TABLE", text, count=1, flags=re.IGNORECASE)
    statement = parse_statement(text)
    if not isinstance(statement, exp.Create) or str(statement.args.get("kind", "")).upper() != "TABLE":
        raise ParseError("Expected CREATE TABLE ... USING delta.")
    if statement.args.get("exists"):
        mode = "createIfNotExists"
    target = statement.this
    schema = None
    if isinstance(target, exp.Schema):
        for c in target.expressions:
            if not isinstance(c, exp.ColumnDef):
                _refuse_table_constraint(c)
        schema = StructType([_column(c) for c in target.expressions])
        target = target.this
    location = partition_by = comment = cluster_by = like = None
    using_delta = False
    props: dict[str, str] = {}
    for p in (statement.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if isinstance(p, exp.LikeProperty):
            like = p.this
        elif isinstance(p, exp.LocationProperty):
            location = p.this.name
        elif isinstance(p, exp.PartitionedByProperty):
            partition_by = [c.name for c in p.this.expressions]
        elif isinstance(p, exp.ClusterProperty):
            cluster_by = [_column_path(c) for c in p.expressions]
        elif isinstance(p, exp.SchemaCommentProperty):
            comment = p.this.name
        elif isinstance(p, exp.FileFormatProperty):
            using_delta = p.name.lower() == "delta"
        elif type(p) is exp.Property:
            key = p.this.name if isinstance(p.this, exp.Literal) else to_sql(p.this)
            value = p.args["value"]
            props[key] = value.name if isinstance(value, exp.Literal) else to_sql(value).lower()
        else:
            raise UnsupportedOperationError(f"{to_sql(p)} is not supported by deltamerge's CREATE TABLE.")
    name = None
    if path_of(target) is not None:
        location = location or path_of(target)
    else:
        name = ".".join(p.name for p in target.parts)
    query = statement.args.get("expression")
    data = sql_with_delta_tables(spark, query.sql(dialect=DIALECT)) if query is not None else None
    if data is not None and schema is not None and schema.fields:
        raise ParseError("CREATE TABLE ... AS SELECT cannot list columns; the query defines them.")
    if like is not None:
        source = _like_source(spark, like, using_delta)
        schema, partition_by, comment = source.schema, source.partition_by, source.comment
        cluster_by = source.cluster_by if cluster_by is None else cluster_by
        props = {**source.properties, **props}  # the statement's own properties win
    create_table(
        spark,
        mode,
        name=name,
        location=location,
        schema=schema,
        partition_by=partition_by or [],
        properties=props,
        comment=comment,
        data=data,
        cluster_by=cluster_by,
    )
    return empty_frame(spark)


def _like_source(spark: SparkSession, like: exp.Table, using_delta: bool):  # type: ignore[no-untyped-def]
    """What CREATE TABLE ... LIKE copies from ``like`` (builders/like.py)."""
    from deltamerge.builders import like as like_source

    root = delta_source(like)
    if root is not None:
        return like_source.from_delta(root)
    return like_source.from_session(spark, ".".join(p.name for p in like.parts), using_delta)
