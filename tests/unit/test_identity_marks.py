"""High-water marks of identity columns (``deltamerge.identity.with_high_water_marks``)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from deltamerge.identity import HIGH_WATER_MARK, identity_of, with_high_water_marks


def _schema(start: int, step: int, mark: int | None = None) -> StructType:
    md = {
        "delta.identity.start": start,
        "delta.identity.step": step,
        "delta.identity.allowExplicitInsert": False,
    }
    if mark is not None:
        md[HIGH_WATER_MARK] = mark
    return StructType([StructField("id", LongType(), True, md), StructField("v", LongType())])


@pytest.mark.parametrize(
    ("start", "step", "mark", "seen", "expected"),
    [
        (1, 1, None, (5, 1), 5),
        (1, 10, None, (25, 1), 31),  # rounded up onto the grid start + k * step
        (1, 10, 41, (25, 1), None),  # below the mark: no change
        (1, 10, 41, (None, None), None),  # nothing written
        (-10, -5, None, (-12, -40), -40),
        (-10, -5, None, (-12, -41), -45),
        (-10, -5, -50, (-12, -41), None),
        (100, 1, None, (7, 5), None),  # explicit values before the start do not move the mark
    ],
)
def test_marks(start, step, mark, seen, expected) -> None:
    out = with_high_water_marks(_schema(start, step, mark), {"id": seen})
    if expected is None:
        assert out is None
    else:
        assert out is not None and out.fields[0].metadata[HIGH_WATER_MARK] == expected
        ident = identity_of(out.fields[0])
        assert ident is not None and ident.base == expected + step


def test_base_without_mark() -> None:
    ident = identity_of(_schema(7, 3).fields[0])
    assert ident is not None and ident.base == 7 and not ident.allow_explicit_insert
