"""String join keys as numbers that keep their order, for dynamic file pruning (``merge/pruning.py``).

The pruning machinery works on integers: the source keys' buckets of ``[min, max]`` and each
candidate file's ``[min, max]`` from its statistics. A string key (Spark's default collation:
byte-wise order of the UTF-8 text) maps to an integer by a window of its bytes: skip the prefix
every candidate's statistics share (``'CUST-000'`` of ``'CUST-0001234'``), read the next
``_WIDTH`` bytes big-endian, padded with zeros. The map never reverses the order (``a <= b`` gives
``n(a) <= n(b)``), so a file whose numbers miss every source key's number misses every key. A
string that does not start with the shared prefix falls below or above every file.

Statistics bound a string column loosely: a min may be cut short (still below every value), and
a max of at least ``MAYBE_CUT`` characters may be a cut prefix of the values (Delta appends a
tie-breaker; other writers may not), so a file's max maps to the largest number a string
starting with it can have (the window padded with 0xFF).
"""

from __future__ import annotations

from collections.abc import Sequence

_WIDTH = 7  # bytes: numbers below 2^56 leave BIGINT room for the "above" marker
ABOVE = 1 << (8 * _WIDTH)  # a string after every one with the prefix
BELOW = -1
#: A string max this long may be a cut prefix of the file's values (as ``skipping.compiler``).
MAYBE_CUT = 16


def shared_prefix(texts: Sequence[str]) -> bytes:
    """The longest byte prefix of the UTF-8 texts (empty without texts)."""
    if not texts:
        return b""
    encoded = [t.encode("utf-8") for t in texts]
    lo, hi = min(encoded), max(encoded)  # the common prefix of the extremes is everyone's
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def number(text: str, prefix: bytes, *, ceiling: bool = False) -> int:
    """``text``'s number after ``prefix``; with ``ceiling``, the largest number of a string that
    starts with ``text`` (for a max that may be cut)."""
    data = text.encode("utf-8")
    if not data.startswith(prefix):
        return BELOW if data < prefix else ABOVE
    window = data[len(prefix) : len(prefix) + _WIDTH]
    pad = b"\xff" if ceiling else b"\x00"
    return int.from_bytes(window + pad * (_WIDTH - len(window)), "big")


def number_sql(column: str, prefix: bytes) -> str:
    """Spark SQL of ``number(column, prefix)`` (NULL for NULL): on the upper-case hex text of the
    UTF-8 bytes, whose order is the bytes' order."""
    h = f"hex(encode({column}, 'UTF-8'))"
    p = prefix.hex().upper()
    start = len(p) + 1
    digits = 2 * _WIDTH
    return (
        f"CASE WHEN {column} IS NULL THEN NULL "
        f"WHEN startswith({h}, '{p}') "
        f"THEN CAST(conv(rpad(substr({h}, {start}, {digits}), {digits}, '0'), 16, 10) AS BIGINT) "
        f"WHEN {h} < '{p}' THEN {BELOW} ELSE {ABOVE} END"
    )
