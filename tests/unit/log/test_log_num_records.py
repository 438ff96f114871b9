"""``stats.numRecords`` read from the front of the statistics text when it leads them (how every
writer writes it), else from the parsed JSON: both ways must agree on any statistics text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from deltamerge.log.actions import _stats_num_records

_names = st.sampled_from(["id", "numRecords", "v", "numRecords "])
_values = st.one_of(st.integers(-5, 10**12), st.sampled_from(["numRecords", '"numRecords"', "x"]), st.none())
_columns = st.dictionaries(_names, _values, max_size=3)


@st.composite
def _stats(draw):  # type: ignore[no-untyped-def]
    items: list[tuple[str, object]] = []
    if draw(st.booleans()):
        items.append(("numRecords", draw(st.one_of(st.integers(0, 10**15), st.floats(0, 10**6).map(float)))))
    keys = st.sampled_from(["minValues", "maxValues", "nullCount", "tightBounds"])
    for key in draw(st.lists(keys, unique=True)):
        items.append((key, draw(_columns)))
    if draw(st.booleans()):
        draw(st.randoms()).shuffle(items)
    if items and draw(st.booleans()):
        items.append(("numRecords", draw(st.integers(0, 99))))  # a duplicate key: the last one wins
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    body = (sep[0]).join(f"{json.dumps(k)}{sep[1]}{json.dumps(v)}" for k, v in items)
    return "{" + body + "}"


def _parsed(text: str) -> int | None:
    n = json.loads(text).get("numRecords")
    return None if n is None else int(n)


@settings(max_examples=400, deadline=None)
@given(_stats())
def test_leading_count_agrees_with_the_parsed_statistics(text: str) -> None:
    assert _stats_num_records(text) == _parsed(text)


def test_usual_shapes() -> None:
    assert _stats_num_records('{"numRecords":250,"minValues":{"id":0},"maxValues":{"id":249}}') == 250
    assert _stats_num_records('{"numRecords": 7}') == 7
    assert _stats_num_records('{"minValues":{"numRecords":1},"numRecords":3}') == 3
    assert _stats_num_records('{"numRecords":3,"minValues":{"numRecords":1}}') == 3
    assert _stats_num_records('{"minValues":{"numRecords":1}}') is None
    assert _stats_num_records(None) is None and _stats_num_records("") is None
