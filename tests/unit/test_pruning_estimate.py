"""``merge/pruning.py``'s expected matches per candidate file: the source keys in a file's key range
(each bucket's rows spread evenly over the bucket's own range) by two bisections per file, against
the sum over every overlapping bucket it replaced."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from deltamerge.log.actions import AddFile
from deltamerge.merge.pruning import _expected_matches, _FileRange, _source_keys_between

LONG = (1 << 63) - 1


def _summed(buckets: list[tuple[int, int, int]], lo: int, hi: int) -> float:
    keys = 0.0
    for b_lo, b_hi, count in buckets:
        overlap = min(b_hi, hi) - max(b_lo, lo) + 1
        if overlap > 0:
            keys += count * overlap / (b_hi - b_lo + 1)
    return keys


def _bucket(draw_lo: int, width: int, count: int) -> tuple[int, int, int]:
    return (draw_lo, min(LONG, draw_lo + width), count)


buckets_st = st.lists(
    st.builds(
        _bucket,
        st.integers(-(1 << 63), LONG),
        st.one_of(st.integers(0, 100), st.integers(0, 1 << 62)),
        st.integers(1, 10**6),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(buckets_st, st.lists(st.tuples(st.integers(-(1 << 63), LONG), st.integers(0, 1 << 63)), min_size=1))
def test_keys_between_agrees_with_the_sum_over_buckets(buckets, ranges) -> None:
    between = _source_keys_between(buckets)
    total = sum(c for _, _, c in buckets)
    for lo, width in ranges:
        hi = min(LONG, lo + width)
        want = _summed(buckets, lo, hi)
        got = between(lo, hi)
        assert abs(got - want) <= 1e-6 * max(1.0, total), (lo, hi, got, want)


def test_a_dense_bucket_leaves_nothing_behind_for_a_sparse_one() -> None:
    """A million keys on one value, then two keys 2^62 values apart: a file between them expects
    (almost) none, not the float residue of the dense bucket's rate times the sparse range."""
    buckets = [(0, 0, 10**6), (1, 1 << 62, 2)]
    between = _source_keys_between(buckets)
    assert between(0, 0) == 10**6
    assert abs(between(1 << 40, (1 << 40) + 1000)) < 1e-9
    assert abs(between(1, 1 << 62) - 2) < 1e-9


def test_expected_matches_takes_the_fewest_over_files() -> None:
    def f(lo: int, hi: int, n: int) -> _FileRange:
        stats = json.dumps({"numRecords": n})
        return _FileRange(AddFile(f"f{lo}", {}, 1, 0, stats=stats), lo, hi, False)

    buckets = [(0, 99, 100), (1000, 1999, 10)]
    files = [f(0, 99, 100), f(1000, 1999, 1000), f(0, 1999, 2000)]
    assert _expected_matches(files, buckets) == 10.0
    # A file of 10 rows over 1,000 values: 10 keys in its range, 1% of which it is expected to hold.
    assert _expected_matches([f(1000, 1999, 10)], buckets) == 0.1
