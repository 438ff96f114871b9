"""Identity columns (Delta's ``IdentityColumn``): ``GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY``.

A BIGINT column whose field metadata holds ``delta.identity.start`` and ``delta.identity.step``
gets a value from the writer for every new row that does not provide one: an append that leaves
the column out, a MERGE INSERT that does not list it. Values are unique and move in the direction
of the step; like Delta's, they are not contiguous.

How the values are made, Spark-natively and as Delta's ``GenerateIdentityValues`` does: row ``i``
of partition ``p`` gets ``base + step * (p + P * i)``, where ``base`` is one step past the
column's high-water mark (``delta.identity.highWaterMark``, or the start when there is none) and
``P`` bounds the number of partitions: the rows are coalesced to at most ``P`` partitions
(``spark.sql.shuffle.partitions``) first, which Delta does not need because it reads the task's
partition count. ``i`` is ``monotonically_increasing_id()`` without its partition bits.
The write observes the extreme value it wrote; the commit records the new high-water mark in the
column's metadata (a metadata update, so two writers that generate values concurrently conflict
instead of handing out the same values).

``GENERATED ALWAYS`` columns refuse explicit values (``delta.identity.allowExplicitInsert`` false);
``BY DEFAULT`` columns keep them (a row given NULL gets a generated value). No clause may UPDATE an
identity column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from deltamerge.errors import AnalysisError, DeltaMergeError, UnsupportedOperationError
from deltamerge.generated import generation_expression
from deltamerge.spark.types import quote_name

START = "delta.identity.start"
STEP = "delta.identity.step"
HIGH_WATER_MARK = "delta.identity.highWaterMark"
ALLOW_EXPLICIT_INSERT = "delta.identity.allowExplicitInsert"


@dataclass(frozen=True)
class IdentityGenerator:
    """delta-spark's ``IdentityGenerator``: ``addColumn(..., generatedAlwaysAs=IdentityGenerator())``
    (or ``generatedByDefaultAs=``) makes an identity column."""

    start: int = 1
    step: int = 1


@dataclass(frozen=True)
class Identity:
    """One identity column's settings."""

    name: str
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit_insert: bool

    @property
    def base(self) -> int:
        """The first value the next write may hand out."""
        return self.start if self.high_water_mark is None else self.high_water_mark + self.step


def _number(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def identity_of(f: StructField) -> Identity | None:
    """The column's identity settings, or None for an ordinary column."""
    md = f.metadata or {}
    start, step = _number(md.get(START)), _number(md.get(STEP))
    if start is None or step is None:
        return None
    explicit = md.get(ALLOW_EXPLICIT_INSERT, False)
    if isinstance(explicit, str):
        explicit = explicit.strip().lower() == "true"
    return Identity(f.name, start, step, _number(md.get(HIGH_WATER_MARK)), bool(explicit))


def identity_columns(schema: StructType) -> list[tuple[int, Identity]]:
    """(position, settings) of each identity column (top-level only)."""
    out = []
    for i, f in enumerate(schema.fields):
        ident = identity_of(f)
        if ident is not None:
            out.append((i, ident))
    return out


def column_metadata(generator: IdentityGenerator, *, always: bool) -> dict[str, Any]:
    """Field metadata of a new identity column."""
    if type(generator.start) is not int or type(generator.step) is not int:
        raise TypeError("IdentityGenerator start and step must be int.")
    return {START: generator.start, STEP: generator.step, ALLOW_EXPLICIT_INSERT: not always}


def generation_sql(ident: Identity, partitions: int) -> str:
    """SQL for a fresh value of the column in a DataFrame of at most ``partitions`` partitions
    (nondeterministic: evaluate it once per row)."""
    row = "(monotonically_increasing_id() - shiftleft(CAST(spark_partition_id() AS BIGINT), 33))"
    return f"CAST({ident.base} + ({ident.step}) * (spark_partition_id() + {partitions} * {row}) AS BIGINT)"


def validate(schema: StructType, partition_columns: Sequence[str]) -> None:
    """Delta's checks of a new table's identity columns."""
    parts = {p.lower() for p in partition_columns}
    for j, ident in identity_columns(schema):
        f = schema.fields[j]
        if not isinstance(f.dataType, LongType):
            raise UnsupportedOperationError(
                f"DataType {f.dataType.simpleString().upper()} is not supported for IDENTITY columns. "
                "Declare the column BIGINT.",
                error_class="DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE",
                sql_state="428H2",
            )
        if ident.step == 0:
            raise AnalysisError(
                "IDENTITY column step cannot be 0.",
                error_class="DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP",
                sql_state="42611",
            )
        if ident.name.lower() in parts:
            raise AnalysisError(
                f"PARTITIONED BY IDENTITY column {ident.name} is not supported.",
                error_class="DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED",
                sql_state="42601",
            )
        if generation_expression(f) is not None:
            raise AnalysisError(
                "IDENTITY column cannot be specified with a generated column expression.",
                error_class="DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION",
                sql_state="42613",
            )


def explicit_insert_error(name: str) -> AnalysisError:
    """A value given for a GENERATED ALWAYS identity column."""
    return AnalysisError(
        f"Providing values for GENERATED ALWAYS AS IDENTITY column {name} is not supported. "
        "Leave the column out and a value is generated.",
        error_class="DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED",
        sql_state="42808",
    )


def update_error(name: str) -> AnalysisError:
    """An UPDATE that assigns an identity column."""
    return AnalysisError(
        f"UPDATE on IDENTITY column {name} is not supported.",
        error_class="DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED",
        sql_state="42808",
    )


def fill(df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` (the table's columns, maybe more) with a generated value in each identity column of
    ``schema`` where it is NULL. Other columns pass through unchanged."""
    return fill_named(df, {ident.name: ident for _, ident in identity_columns(schema)})


def fill_named(df: DataFrame, idents: dict[str, Identity]) -> DataFrame:
    """``df`` with a generated value where the column named as a key of ``idents`` is NULL."""
    if not idents:
        return df
    from deltamerge.spark.session import conf_getter

    partitions = max(1, int(conf_getter(df.sparkSession)("spark.sql.shuffle.partitions") or 200))
    df = df.coalesce(partitions)  # the values' formula needs a bound on the partition index
    cols: list[Column] = []
    for name in df.columns:
        ident = idents.get(name)
        if ident is not None:
            generated = F.expr(generation_sql(ident, partitions))
            cols.append(F.coalesce(F.col(quote_name(name)), generated).alias(name))
        else:
            cols.append(F.col(quote_name(name)))
    return df.select(*cols)


def observed(
    df: DataFrame, schema: StructType, rows: Column | None = None
) -> tuple[DataFrame, Observation | None]:
    """``df`` with the max and min of each identity column observed when it is written (over the
    ``rows`` where that is true, when given)."""
    idents = identity_columns(schema)
    if not idents:
        return df, None
    import threading
    import time

    obs = Observation(f"identity_{time.monotonic_ns()}_{threading.get_ident()}")
    aggs = []
    for _, ident in idents:
        value = F.col(quote_name(ident.name))
        if rows is not None:
            value = F.when(rows, value)
        aggs += [F.max(value).alias(f"max_{ident.name}"), F.min(value).alias(f"min_{ident.name}")]
    return df.observe(obs, *aggs), obs


def stored_names(schema: StructType, physical: Mapping[str, str]) -> dict[str, str]:
    """Identity column name -> its name in the data files (``physical``: column mapping's names)."""
    return {ident.name: physical.get(ident.name, ident.name) for _, ident in identity_columns(schema)}


def extremes(
    obs: Observation | None, written: Sequence[str] = (), names_in_files: Mapping[str, str] | None = None
) -> dict[str, tuple[int | None, int | None]]:
    """(max, min) per identity column name from an observation of ``observed``.

    When Spark delivers no values (Spark 4.0's Connect server drops the metrics of a DataFrame
    analysed before it runs) they are read from the Parquet footers of the ``written`` files (paths),
    where ``names_in_files`` maps a column to its name in the files (column mapping); the high-water
    mark must never be left behind the values written."""
    if obs is None:
        return {}
    from deltamerge.spark.session import observed_values

    values = observed_values(obs)
    names = {k[4:] for k in values if k.startswith("max_")}
    if not names and written:
        return _footer_extremes(written, names_in_files or {})
    return {n: (_number(values.get(f"max_{n}")), _number(values.get(f"min_{n}"))) for n in names}


def _footer_extremes(
    paths: Sequence[str], names_in_files: Mapping[str, str]
) -> dict[str, tuple[int | None, int | None]]:
    import pyarrow.parquet as pq

    from deltamerge.stats.footer import column_extremes

    footers = [(path, pq.read_metadata(path)) for path in paths]
    out: dict[str, tuple[int | None, int | None]] = {}
    for name, stored in names_in_files.items():
        lows: list[int] = []
        highs: list[int] = []
        for path, md in footers:
            found = column_extremes(md, (stored,), "long")
            if found is None:
                raise DeltaMergeError(
                    f"The identity column {name} written to {path} has no Parquet statistics to "
                    "move its high-water mark by; the write is not committed."
                )
            low, high = found
            if low is not None and high is not None:  # else only NULLs, or no such column
                lows.append(int(low))
                highs.append(int(high))
        out[name] = (max(highs) if highs else None, min(lows) if lows else None)
    return out


def with_high_water_marks(
    schema: StructType, seen: dict[str, tuple[int | None, int | None]]
) -> StructType | None:
    """The schema with each identity column's high-water mark moved past the values written, or
    None when no mark moves. A mark stays on the column's grid (start + k * step)."""
    changed = False
    fields = []
    for f in schema.fields:
        ident = identity_of(f)
        extreme = seen.get(f.name)
        if ident is None or extreme is None:
            fields.append(f)
            continue
        value = extreme[0] if ident.step > 0 else extreme[1]
        if value is None:
            fields.append(f)
            continue
        k = -((value - ident.start) // -ident.step)  # ceil((value - start) / step), on the grid
        mark = ident.start + k * ident.step
        old = ident.high_water_mark
        if (ident.step > 0 and mark < ident.start) or (ident.step < 0 and mark > ident.start):
            fields.append(f)  # only values before the start: nothing generated moves the mark
            continue
        if old is not None and ((ident.step > 0 and mark <= old) or (ident.step < 0 and mark >= old)):
            fields.append(f)
            continue
        md = dict(f.metadata or {})
        md[HIGH_WATER_MARK] = mark
        fields.append(StructField(f.name, f.dataType, f.nullable, md))
        changed = True
    return StructType(fields) if changed else None
