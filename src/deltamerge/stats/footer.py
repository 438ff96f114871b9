"""Delta's ``stats`` JSON from Parquet footers (written with each ``add``), and the footer check of
REORG ... APPLY (PURGE) for columns a file holds that the table no longer has."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq

from deltamerge.config import TableProperties
from deltamerge.stats.schema import (
    FLOAT_TYPES,
    INTEGRAL_TYPES,
    MINMAX_TYPES,
    StatsLeaf,
    decimal_scale,
    stats_columns,
)
from deltamerge.stats.values import (
    DECIMAL_CONTEXT,
    EPOCH_DATE_ORDINAL,
    UTC,
    format_timestamp,
    truncate_max_string,
    truncate_min_string,
)


def _arrow_leaves(t: pa.DataType, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], pa.DataType]]:
    """Each leaf column of an Arrow type: (path as name parts, type)."""
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            f = t.field(i)
            yield from _arrow_leaves(f.type, (*path, f.name))
    elif pa.types.is_map(t):
        yield from _arrow_leaves(t.key_type, (*path, "key"))
        yield from _arrow_leaves(t.item_type, (*path, "value"))
    elif isinstance(t, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)) or (
        hasattr(pa, "ListViewType") and isinstance(t, (pa.ListViewType, pa.LargeListViewType))
    ):
        yield from _arrow_leaves(t.value_type, (*path, "element"))
    elif isinstance(t, pa.ExtensionType) and not pa.types.is_dictionary(t):
        yield from _arrow_leaves(t.storage_type, path)
    else:
        yield path, t


def _arrow_leaf_paths(t: pa.DataType, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    return (p for p, _ in _arrow_leaves(t, path))


def _parquet_leaf_paths(md: pq.FileMetaData) -> list[tuple[str, ...]]:
    """Each Parquet column's path as name parts (robust to dots inside names)."""
    try:
        arrow_schema = md.schema.to_arrow_schema()
        paths = [p for f in arrow_schema for p in _arrow_leaf_paths(f.type, (f.name,))]
    except (pa.ArrowException, NotImplementedError):
        paths = []
    if len(paths) != md.num_columns:
        paths = [tuple(md.schema.column(i).path.split(".")) for i in range(md.num_columns)]
    return paths


def _delta_leaves(t: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each leaf of a Delta schema type: (path named as ``_arrow_leaves`` names a file's columns,
    Delta type)."""
    kind = t.get("type") if isinstance(t, Mapping) else None
    if kind == "struct":
        for f in t.get("fields", ()):
            yield from _delta_leaves(f["type"], (*path, str(f["name"])))
    elif kind == "array":
        yield from _delta_leaves(t["elementType"], (*path, "element"))
    elif kind == "map":
        yield from _delta_leaves(t["keyType"], (*path, "key"))
        yield from _delta_leaves(t["valueType"], (*path, "value"))
    else:
        yield path, t


def _delta_leaf_paths(t: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    return (p for p, _ in _delta_leaves(t, path))


def column_paths(physical_schema: Mapping[str, Any]) -> frozenset[tuple[str, ...]]:
    """Every column path of a Delta (physical) schema, lower-cased, for ``file_has_extra_columns``."""
    known: set[tuple[str, ...]] = set()
    for leaf in _delta_leaf_paths(physical_schema, ()):
        lowered = tuple(p.lower() for p in leaf)
        known.update(lowered[:i] for i in range(1, len(lowered) + 1))
    return frozenset(known)


def file_has_extra_columns(file_path: str, known: frozenset[tuple[str, ...]]) -> bool:
    """Whether the Parquet file holds a column (at any depth) outside ``known`` (``column_paths``),
    as a dropped column's data stays in the files (Delta's ``fileHasExtraColumns``; case-insensitive).
    Only the footer is read."""
    paths = _parquet_leaf_paths(pq.read_metadata(file_path))
    return any(tuple(p.lower() for p in path) not in known for path in paths)


_ARROW_OF = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
}


def _holds(delta_type: Any, arrow_type: pa.DataType) -> bool:
    """Whether a file column of ``arrow_type`` is stored as the table's ``delta_type``."""
    if not isinstance(delta_type, str):
        return True
    if delta_type in _ARROW_OF:
        return bool(arrow_type == _ARROW_OF[delta_type])
    if delta_type.startswith("decimal("):
        precision, scale = (int(x) for x in delta_type[len("decimal(") : -1].split(","))
        return pa.types.is_decimal(arrow_type) and (arrow_type.precision, arrow_type.scale) == (
            precision,
            scale,
        )
    if delta_type == "timestamp_ntz":
        return pa.types.is_timestamp(arrow_type) and arrow_type.tz is None
    return True


def file_has_narrower_types(file_path: str, physical_schema: Mapping[str, Any]) -> bool:
    """Whether the Parquet file stores a column in another type than the table's (written before
    the column's type was widened); ``physical_schema`` names columns as the files do. Only the
    footer is read."""
    expected = dict(_delta_leaves(physical_schema, ()))
    arrow_schema = pq.read_schema(file_path)
    for f in arrow_schema:
        for path, t in _arrow_leaves(f.type, (f.name,)):
            want = expected.get(path)
            if want is not None and not _holds(want, t):
                return True
    return False


def _column_indexes(
    leaf: StatsLeaf, parquet_paths: Sequence[tuple[str, ...]], exact_length: bool
) -> list[int]:
    target = leaf.physical_path
    n = len(target)

    def match(fold: bool) -> list[int]:
        want = tuple(p.lower() for p in target) if fold else target
        out = []
        for i, p in enumerate(parquet_paths):
            if (len(p) == n) if exact_length else (len(p) > n):
                head = tuple(x.lower() for x in p[:n]) if fold else p[:n]
                if head == want:
                    out.append(i)
        return out

    return match(False) or match(True)


def _typed_stat(s: Any, which: str, logical: Mapping[str, Any], delta_type: Any) -> Any:
    """A footer min/max as the Python value of the Delta type (int days, epoch µs, Decimal...), or None."""
    kind = logical.get("Type")
    if delta_type in ("date", "timestamp", "timestamp_ntz"):
        raw = getattr(s, which + "_raw")
        value = None
    elif kind == "Decimal" and s.physical_type in ("INT32", "INT64"):
        # The unscaled integer (scaled below): pyarrow before 19 cannot convert these to Decimal.
        raw = None
        value = getattr(s, which + "_raw")
    else:
        raw = None
        value = getattr(s, which)
    if delta_type in INTEGRAL_TYPES:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if delta_type in FLOAT_TYPES:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return None
    scale = decimal_scale(delta_type)
    if scale is not None:
        if isinstance(value, Decimal):
            d = value
        elif isinstance(value, int) and kind == "Decimal":
            d = Decimal(value).scaleb(-int(logical.get("scale", 0)), context=DECIMAL_CONTEXT)
        elif isinstance(value, int) and not isinstance(value, bool):
            d = Decimal(value)
        else:
            return None
        q = d.quantize(Decimal(1).scaleb(-scale), context=DECIMAL_CONTEXT) if d.is_finite() else None
        return q if q is not None and q == d else None
    if delta_type == "date":
        return raw if kind == "Date" and isinstance(raw, int) else None
    if delta_type in ("timestamp", "timestamp_ntz"):
        if kind != "Timestamp" or not isinstance(raw, int):
            return None
        unit = logical.get("timeUnit")
        if unit == "milliseconds":
            return raw * 1000
        if unit == "microseconds":
            return raw
        if unit == "nanoseconds":
            return raw // 1000
        return None
    if delta_type == "string":
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return value if isinstance(value, str) else None
    return None


@dataclass
class _Agg:
    min: Any = None
    max: Any = None
    minmax_ok: bool = True
    null_count: int | None = 0


def _aggregate_column(md: pq.FileMetaData, col: int, delta_type: Any, want_minmax: bool) -> _Agg:
    agg = _Agg()
    for rg in range(md.num_row_groups):
        rg_md = md.row_group(rg)
        if rg_md.num_rows == 0:
            continue
        chunk = rg_md.column(col)
        s = chunk.statistics
        if s is None:
            agg.minmax_ok = False
            agg.null_count = None
            continue
        if s.has_null_count and agg.null_count is not None:
            agg.null_count += s.null_count
        else:
            agg.null_count = None
        if not want_minmax or not agg.minmax_ok:
            continue
        if not s.has_min_max:
            if not (s.has_null_count and s.num_values == 0):
                agg.minmax_ok = False
            continue
        try:
            logical = json.loads(s.logical_type.to_json()) if s.logical_type is not None else {}
            lo = _typed_stat(s, "min", logical, delta_type)
            hi = _typed_stat(s, "max", logical, delta_type)
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            lo = hi = None
        if lo is None or hi is None:
            agg.minmax_ok = False
            continue
        agg.min = lo if agg.min is None else min(agg.min, lo)
        agg.max = hi if agg.max is None else max(agg.max, hi)
    return agg


def column_extremes(md: pq.FileMetaData, path: tuple[str, ...], delta_type: str) -> tuple[Any, Any] | None:
    """(min, max) over every row group of the top-level or nested leaf ``path`` (names in the file),
    as Python values of ``delta_type``; ``(None, None)`` when the file lacks the column or holds only
    NULLs in it; None when a row group with values has no usable statistics."""
    cols = _column_indexes(StatsLeaf(path, path, delta_type), _parquet_leaf_paths(md), exact_length=True)
    if len(cols) != 1:
        return None, None
    agg = _aggregate_column(md, cols[0], delta_type, True)
    return (agg.min, agg.max) if agg.minmax_ok else None


def _put(target: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for p in path[:-1]:
        target = target.setdefault(p, {})
    target[path[-1]] = value


class _Json:
    """A JSON fragment written verbatim (numbers with scale, Spark-formatted values)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _dump(obj: Any) -> str:
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_dump(str(k))}:{_dump(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, _Json):
        return obj.text
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _render(value: Any, delta_type: Any, tz: dt.tzinfo, prefix_length: int, is_max: bool) -> _Json | None:
    if delta_type in INTEGRAL_TYPES:
        return _Json(str(int(value)))
    if delta_type in FLOAT_TYPES:
        return _Json(repr(float(value)))
    scale = decimal_scale(delta_type)
    if scale is not None:
        return _Json(format(value, "f"))
    if delta_type == "date":
        try:
            return _Json(json.dumps(dt.date.fromordinal(value + EPOCH_DATE_ORDINAL).isoformat()))
        except (ValueError, OverflowError):
            return None
    if delta_type in ("timestamp", "timestamp_ntz"):
        text = format_timestamp(value, tz if delta_type == "timestamp" else None)
        return None if text is None else _Json(json.dumps(text))
    if delta_type == "string":
        s = truncate_max_string(value, prefix_length) if is_max else truncate_min_string(value, prefix_length)
        return None if s is None else _Json(json.dumps(s, ensure_ascii=False))
    return None


def _has_minmax(delta_type: Any) -> bool:
    return isinstance(delta_type, str) and (
        delta_type in MINMAX_TYPES or decimal_scale(delta_type) is not None
    )


def stats_from_parquet_metadata(
    md: pq.FileMetaData,
    schema: dict,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    *,
    tight_bounds: bool | None = None,
    session_tz: str = "UTC",
    nan_free: bool = False,
) -> str:
    """Delta's ``stats`` JSON for one data file, from its Parquet footer's row-group statistics.

    ``schema`` is the table schema (Spark StructType JSON). ``tightBounds`` is written only when
    ``tight_bounds`` is not None. ``session_tz`` is the zone timestamp stats are rendered in.
    ``nan_free=True`` asserts float/double columns hold no NaN, which allows writing their max.
    """
    tz: dt.tzinfo = UTC if session_tz.upper() in ("UTC", "Z", "GMT") else ZoneInfo(session_tz)
    prefix_length = TableProperties.STRING_PREFIX_LENGTH.get(configuration)
    parquet_paths = _parquet_leaf_paths(md)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for leaf in stats_columns(schema, partition_columns, configuration):
        if leaf.type == "variant":
            # A variant is a Parquet group of (value, metadata); ``metadata`` is required in it
            # (shredded or not), so its leaf is NULL exactly when the variant is. No min/max.
            meta = StatsLeaf(leaf.logical_path, (*leaf.physical_path, "metadata"), "binary")
            cols = _column_indexes(meta, parquet_paths, exact_length=True)
            if len(cols) == 1:
                agg = _aggregate_column(md, cols[0], "binary", False)
                if agg.null_count is not None:
                    _put(nulls, leaf.physical_path, _Json(str(agg.null_count)))
            continue
        nested = not isinstance(leaf.type, str)
        cols = _column_indexes(leaf, parquet_paths, exact_length=not nested)
        if not cols or (not nested and len(cols) != 1):
            continue
        want_minmax = _has_minmax(leaf.type)
        aggs = [_aggregate_column(md, c, leaf.type, want_minmax) for c in cols]
        if nested:
            # Leaf-level null counts also count empty collections and null elements: only 0 is conclusive.
            if all(a.null_count == 0 for a in aggs):
                _put(nulls, leaf.physical_path, _Json("0"))
            continue
        agg = aggs[0]
        if agg.null_count is not None:
            _put(nulls, leaf.physical_path, _Json(str(agg.null_count)))
        if not want_minmax or not agg.minmax_ok or agg.min is None:
            continue
        lo = _render(agg.min, leaf.type, tz, prefix_length, is_max=False)
        hi = None
        if not (leaf.type in FLOAT_TYPES and not nan_free):
            hi = _render(agg.max, leaf.type, tz, prefix_length, is_max=True)
        if lo is not None:
            _put(mins, leaf.physical_path, lo)
        if hi is not None:
            _put(maxs, leaf.physical_path, hi)
    num_records = sum(md.row_group(i).num_rows for i in range(md.num_row_groups))
    out: dict[str, Any] = {"numRecords": _Json(str(num_records))}
    if mins:
        out["minValues"] = mins
    if maxs:
        out["maxValues"] = maxs
    if nulls:
        out["nullCount"] = nulls
    if tight_bounds is not None:
        out["tightBounds"] = bool(tight_bounds)
    return _dump(out)
