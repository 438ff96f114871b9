"""``merge/key_numbers.py``: string join keys as numbers for dynamic file pruning. A file can be
pruned only if no key it may hold maps inside its ``[number(min), number(max)]``: the map must never
reverse the byte order, and a max that may be a cut prefix must bound every string starting with it."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import StringType

from deltamerge.log.actions import AddFile
from deltamerge.merge import key_numbers
from deltamerge.merge.pruning import _file_ranges

# Few distinct characters (ASCII, 2-, 3- and 4-byte UTF-8, NUL, the tie-breakers) make shared
# prefixes, equal windows and every byte-order corner likely.
ALPHABET = st.sampled_from(["", "\x00", "a", "b", "z", "\x7f", "é", "ÿ", "€", "\uffff", "😀", "\U0010ffff"])
TEXT = st.lists(ALPHABET, max_size=12).map("".join)


def _b(text: str) -> bytes:
    return text.encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(a=TEXT, b=TEXT, prefix=TEXT)
def test_the_numbers_keep_the_byte_order(a: str, b: str, prefix: str) -> None:
    p = _b(prefix)
    if _b(a) > _b(b):
        a, b = b, a
    assert key_numbers.number(a, p) <= key_numbers.number(b, p)
    assert key_numbers.BELOW <= key_numbers.number(a, p) <= key_numbers.ABOVE


@settings(max_examples=400, deadline=None)
@given(head=TEXT, cut=TEXT, rest=TEXT)
def test_a_cut_max_bounds_every_string_it_starts(head: str, cut: str, rest: str) -> None:
    """Statistics' strings all start with the shared prefix; so does every value between them."""
    prefix = _b(head)
    top = head + cut
    assert key_numbers.number(top + rest, prefix) <= key_numbers.number(top, prefix, ceiling=True)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=6))
def test_shared_prefix_is_every_texts_prefix(texts: list[str]) -> None:
    p = key_numbers.shared_prefix(texts)
    assert all(_b(t).startswith(p) for t in texts)
    longer = [_b(t)[: len(p) + 1] for t in texts]
    assert len(set(longer)) > 1 or any(len(x) == len(p) for x in longer)  # the longest such prefix


def _add(i: int, stats: dict | None) -> AddFile:
    return AddFile(f"f{i}.parquet", {}, 1, 1, stats=None if stats is None else json.dumps(stats))


def test_file_ranges_of_a_string_column() -> None:
    long_max = "CUST-0042" + "9" * 30  # 39 characters: may be a cut prefix

    def stats(lo: str, hi: str, nulls: int) -> dict:
        return {"numRecords": 2, "minValues": {"k": lo}, "maxValues": {"k": hi}, "nullCount": {"k": nulls}}

    files = [
        _add(0, stats("CUST-0001", "CUST-0019", 0)),
        _add(1, stats("CUST-0020", long_max, 1)),
        _add(2, {"numRecords": 2, "nullCount": {"k": 2}}),  # only NULLs
        _add(3, None),  # no statistics
    ]
    files.append(_add(4, stats("CUST-0050", "CUST-0051\ud83d", 0)))  # a cut through a surrogate pair
    r0, r1, r2, r3, r4 = _file_ranges(files, "k", StringType())
    assert (r4.lo, r4.hi) == (None, None)  # kept: bounds unknown
    assert r0.prefix == b"CUST-00"
    number = key_numbers.number
    assert (r0.lo, r0.hi, r0.may_null) == (
        number("CUST-0001", b"CUST-00"),
        number("CUST-0019", b"CUST-00"),
        False,
    )
    assert r1.hi == number(long_max, b"CUST-00", ceiling=True) and r1.may_null
    assert number(long_max + "zzz", b"CUST-00") <= r1.hi
    assert (r2.lo, r2.hi) == (0, -1) and (r3.lo, r3.hi) == (None, None)
    # Keys before and after every file fall outside every range.
    assert number("CUST-", b"CUST-00") < r0.lo and number("CUST-1", b"CUST-00") > r1.hi


@settings(max_examples=300, deadline=None)
@given(
    a=st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**25), max_value=10**25),
    b=st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**25), max_value=10**25),
)
def test_decimal_numbers_keep_the_order_and_saturate(a, b) -> None:
    from decimal import Decimal

    from pyspark.sql.types import DecimalType

    t = DecimalType(38, 3)
    if a > b:
        a, b = b, a
    na, nb = key_numbers.of_value(a, t), key_numbers.of_value(str(b), t)  # JSON numbers or text
    assert na is not None and nb is not None and na <= nb
    assert key_numbers.LONG_MIN <= na <= key_numbers.LONG_MAX
    if abs(a) < Decimal(2**62):
        assert na == int(a.to_integral_value(rounding="ROUND_FLOOR"))


_MICROS = st.integers(min_value=-62135596800000000, max_value=253402300799999999)  # years 1..9999


@settings(max_examples=400, deadline=None)
@given(a=_MICROS, b=_MICROS, zone=st.sampled_from([None, "UTC", "Asia/Kolkata", "America/New_York"]))
def test_timestamp_statistics_bound_the_values_they_were_cut_from(a: int, b: int, zone: str | None) -> None:
    """A file's timestamp statistics are its min and max cut to the millisecond (with the writer's
    offset for TIMESTAMP, none for TIMESTAMP_NTZ): the min's number is at most every value's, the max's
    (plus the cut's 999 µs) at least, and a value's number is its microseconds."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    from pyspark.sql.types import TimestampNTZType, TimestampType

    from deltamerge.stats.values import format_timestamp

    lo, hi = min(a, b), max(a, b)
    t = TimestampNTZType() if zone is None else TimestampType()
    tz = None if zone is None else ZoneInfo(zone) if zone != "UTC" else dt.UTC
    raw_lo, raw_hi = format_timestamp(lo, tz), format_timestamp(hi, tz)
    if raw_lo is None or raw_hi is None:
        return  # not renderable: the writer leaves no statistic
    n_lo, n_hi = key_numbers.statistic(raw_lo, t), key_numbers.statistic(raw_hi, t, is_max=True)
    assert n_lo is not None and n_hi is not None
    assert n_lo <= lo <= hi <= n_hi and n_hi - hi < 1000 and lo - n_lo < 1000
    assert key_numbers.of_value(raw_lo, t) is None  # no exact number: statistics and partitions differ


def test_both_summaries_guess_density_only_for_keys_whose_numbers_count_rows() -> None:
    """``pruned_summary`` (the job's summary and the one from a source's statistics) estimates the
    matches per file only where a key's numbers count values: integers, dates, whole decimals of a
    data column. The statistics path estimated them for partition, fractional-decimal and timestamp
    keys too, which the job's path had always refused."""
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, TimestampType

    from deltamerge.merge.pruning import pruned_summary

    def add(path: str, parts: dict[str, str | None], lo: object, hi: object) -> AddFile:
        stats = json.dumps(
            {"numRecords": 10, "minValues": {"k": lo}, "maxValues": {"k": hi}, "nullCount": {"k": 0}}
        )
        return AddFile(
            path=path, partition_values=parts, size=1, modification_time=0, data_change=True, stats=stats
        )

    def expected(t, files) -> float | None:  # type: ignore[no-untyped-def]
        field = StructField("k", t)
        ranges = _file_ranges(files, "k", t)
        return pruned_summary(
            files, ranges, field, False, [(0, 100, 50)], False, True, 50
        ).min_expected_matches

    data = [add("a", {}, 0, 49), add("b", {}, 50, 99)]
    assert expected(LongType(), data) is not None and expected(DecimalType(38, 0), data) is not None
    assert expected(DecimalType(10, 2), data) is None
    assert expected(StringType(), [add("a", {}, "a", "m"), add("b", {}, "n", "z")]) is None
    stamps = [add("a", {}, "1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.049Z")] * 2
    assert expected(TimestampType(), stamps) is None
    assert expected(LongType(), [add("a", {"k": "1"}, None, None), add("b", {"k": "2"}, None, None)]) is None
