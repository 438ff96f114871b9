"""Deletion vector codec: byte compatibility with Delta (protocol.md §5)."""

from __future__ import annotations

import itertools
import json
import os
import struct
import uuid
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from deltamerge.deletion_vectors import (
    NATIVE_MAGIC,
    deserialize_bitmap,
    dv_file_path,
    inline_descriptor,
    read_dv,
    serialize_bitmap,
    write_dv_file,
    z85_decode,
    z85_encode,
)
from deltamerge.errors import InvalidArgumentError, LogCorruptedError
from deltamerge.log.actions import DeletionVectorDescriptor

# protocol.md §5.4: the DV file of delta-rs tests/data/table-with-dv-small, written by delta-spark.
EXAMPLE_FILE_HEX = (
    "01"  # version
    "00000024"  # size = 36, big-endian
    "d1d33964"  # magic 1681511377, little-endian
    "0100000000000000"  # numBuckets = 1
    "00000000"  # key = 0
    "3a300000010000000000010010000000"  # cookie 12346, n=1, (key 0, card-1 = 1), offset 16
    "00000900"  # rows 0 and 9
    "2a671846"  # CRC-32 of the 36 bitmap bytes, big-endian
)
EXAMPLE_DESCRIPTOR = {
    "storageType": "u",
    "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
    "offset": 1,
    "sizeInBytes": 36,
    "cardinality": 2,
}
EXAMPLE_UUID = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")

INLINE_CORRECT = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
INLINE_STALE = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
INLINE_ROWS = [3, 4, 7, 11, 18, 29]


# --- Z85 -------------------------------------------------------------------------------------------


def test_z85_uuid_of_worked_example() -> None:
    assert z85_encode(EXAMPLE_UUID.bytes) == "vBn[lx{q8@P<9BNH/isA"
    assert z85_decode("vBn[lx{q8@P<9BNH/isA", 16) == EXAMPLE_UUID.bytes


def test_z85_known_vector() -> None:
    # The ZeroMQ RFC 32 test vector (Delta's alphabet is the same).
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(data) == "HelloWorld"
    assert z85_decode("HelloWorld") == data


@given(st.binary(max_size=64))
def test_z85_round_trip_with_padding(data: bytes) -> None:
    encoded = z85_encode(data)
    assert len(encoded) == 5 * ((len(data) + 3) // 4)
    assert z85_decode(encoded, len(data)) == data


def test_z85_rejects_garbage() -> None:
    with pytest.raises(LogCorruptedError):
        z85_decode("abcd")
    with pytest.raises(LogCorruptedError):
        z85_decode("abc\\d")
    with pytest.raises(LogCorruptedError):
        z85_decode("#####")  # > 2**32
    with pytest.raises(LogCorruptedError):
        z85_decode("00000", 5)


# --- bitmaps ---------------------------------------------------------------------------------------


def test_serialize_matches_worked_example_payload() -> None:
    payload = bytes.fromhex(EXAMPLE_FILE_HEX)[5:-4]
    assert serialize_bitmap([0, 9]) == payload
    assert serialize_bitmap(BitMap64([9, 0])) == payload
    assert list(deserialize_bitmap(payload)) == [0, 9]


def test_inline_correct_example() -> None:
    desc = inline_descriptor(INLINE_ROWS)
    assert desc.storage_type == "i"
    assert desc.path_or_inline_dv == INLINE_CORRECT
    assert desc.size_in_bytes == 44
    assert desc.cardinality == 6
    assert desc.offset is None
    assert desc.to_json() == {
        "storageType": "i",
        "pathOrInlineDv": INLINE_CORRECT,
        "sizeInBytes": 44,
        "cardinality": 6,
    }
    assert list(read_dv("/nonexistent", desc)) == INLINE_ROWS


def test_inline_stale_spec_example_native_big_endian_header() -> None:
    payload = z85_decode(INLINE_STALE, 40)
    assert list(deserialize_bitmap(payload)) == INLINE_ROWS


def test_native_little_endian_format() -> None:
    low0 = BitMap([1, 5, 70000]).serialize()
    low2 = BitMap([7]).serialize()
    payload = struct.pack("<ii", NATIVE_MAGIC, 3)
    for blob in (low0, BitMap().serialize(), low2):
        payload += struct.pack("<i", len(blob)) + blob
    assert list(deserialize_bitmap(payload)) == [1, 5, 70000, (2 << 32) | 7]


def test_deserialize_errors() -> None:
    with pytest.raises(LogCorruptedError, match="too short"):
        deserialize_bitmap(b"\x01")
    with pytest.raises(LogCorruptedError, match="unknown magic"):
        deserialize_bitmap(b"\x00\x00\x00\x00\x00")
    with pytest.raises(LogCorruptedError):
        deserialize_bitmap(struct.pack("<i", 1681511377) + b"\x05\x00")
    with pytest.raises(LogCorruptedError):
        deserialize_bitmap(struct.pack("<ii", NATIVE_MAGIC, 1) + struct.pack("<i", 100))


def test_high_bucket_layout_and_round_trip() -> None:
    rows = [0, 5, (1 << 32) + 1, (3 << 32) + 65536, (1 << 40) + 12345]
    payload = serialize_bitmap(rows)
    assert payload[:4] == bytes.fromhex("d1d33964")
    (num_buckets,) = struct.unpack_from("<Q", payload, 4)
    assert num_buckets == 4  # sparse keys: 0, 1, 3, 256
    (first_key,) = struct.unpack_from("<I", payload, 12)
    assert first_key == 0
    assert list(deserialize_bitmap(payload)) == rows


def test_sparse_and_dense_buckets_decode_like_delta_spark_writes_them() -> None:
    # delta-spark writes every bucket from 0 up to the highest, empty ones included.
    empty = BitMap().serialize()
    high = BitMap([42]).serialize()
    payload = struct.pack("<iQ", 1681511377, 3)
    payload += struct.pack("<I", 0) + empty + struct.pack("<I", 1) + empty + struct.pack("<I", 2) + high
    assert list(deserialize_bitmap(payload)) == [(2 << 32) | 42]


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=(1 << 40)), max_size=200), st.booleans())
def test_round_trip_property(rows: set[int], run_optimize: bool) -> None:
    bm = BitMap64(rows)
    if run_optimize:
        bm.run_optimize()
    assert set(deserialize_bitmap(serialize_bitmap(bm))) == rows
    desc = inline_descriptor(bm)
    assert set(read_dv("/nonexistent", desc)) == rows
    assert desc.cardinality == len(rows)


def test_dense_runs_round_trip() -> None:
    bm = BitMap64(range(100_000))
    bm.update(range((5 << 32), (5 << 32) + 5000, 2))
    bm.run_optimize()
    assert deserialize_bitmap(serialize_bitmap(bm)) == bm


def test_rejects_row_index_out_of_range() -> None:
    with pytest.raises(InvalidArgumentError):
        serialize_bitmap([1 << 63])


# --- files -----------------------------------------------------------------------------------------


def test_read_worked_example_file(tmp_path: object) -> None:
    root = str(tmp_path)
    desc = DeletionVectorDescriptor.from_json(EXAMPLE_DESCRIPTOR)
    path = dv_file_path(root, desc)
    assert path == os.path.join(root, f"deletion_vector_{EXAMPLE_UUID}.bin")
    with open(path, "wb") as fh:
        fh.write(bytes.fromhex(EXAMPLE_FILE_HEX))
    assert list(read_dv(root, desc)) == [0, 9]
    assert list(read_dv("file://" + root, desc)) == [0, 9]


def test_write_reproduces_worked_example_bytes(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path)
    monkeypatch.setattr(uuid, "uuid4", lambda: EXAMPLE_UUID)
    (desc,) = write_dv_file(root, [BitMap64([0, 9])])
    assert desc.to_json() == EXAMPLE_DESCRIPTOR
    with open(dv_file_path(root, desc), "rb") as fh:
        assert fh.read().hex() == EXAMPLE_FILE_HEX
    # never overwrite an existing DV file
    with pytest.raises(FileExistsError):
        write_dv_file(root, [BitMap64([1])])


def test_write_many_dvs_in_one_file(tmp_path: object) -> None:
    root = str(tmp_path)
    sets = [BitMap64([1, 2, 3]), BitMap64(), BitMap64([(1 << 33) + 7, 4]), BitMap64(range(0, 50_000, 3))]
    descs = write_dv_file(root, sets)
    assert len({d.path_or_inline_dv for d in descs}) == 1
    assert descs[0].offset == 1
    for prev, nxt in itertools.pairwise(descs):
        assert prev.offset is not None and nxt.offset == prev.offset + 4 + prev.size_in_bytes + 4
    for desc, bm in zip(descs, sets, strict=True):
        assert desc.cardinality == len(bm)
        assert read_dv(root, desc) == bm
        # a reader in another process sees the same thing through the JSON round trip
        again = DeletionVectorDescriptor.from_json(json.loads(json.dumps(desc.to_json())))
        assert read_dv(root, again) == bm
    assert write_dv_file(root, []) == []


def test_random_prefix(tmp_path: object) -> None:
    root = str(tmp_path)
    (desc,) = write_dv_file(root, [[1, 2]], random_prefix_length=3)
    assert len(desc.path_or_inline_dv) == 23
    prefix = desc.path_or_inline_dv[:3]
    path = dv_file_path(root, desc)
    assert os.path.dirname(path) == os.path.join(root, prefix)
    assert list(read_dv(root, desc)) == [1, 2]


def test_kernel_relative_and_absolute_paths() -> None:
    # delta-kernel-rs test descriptors
    rel = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=4)
    assert dv_file_path("/t", rel) == "/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    absolute = DeletionVectorDescriptor(
        "p", "file:/t/x%20y/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", 40, 6, offset=4
    )
    assert dv_file_path("/t", absolute) == "/t/x y/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    with pytest.raises(InvalidArgumentError):
        dv_file_path("/t", DeletionVectorDescriptor("p", "s3://b/t/x.bin", 40, 6, offset=4))
    with pytest.raises(InvalidArgumentError):
        dv_file_path("/t", DeletionVectorDescriptor("i", INLINE_CORRECT, 44, 6))


@pytest.mark.parametrize(
    ("dv_path", "expected_uuid"),
    [
        # descriptors found in protocol_reference_logs.md (Databricks-written)
        ("vBn[lx{q8@P<9BNH/isA", "61d16c75-6994-46b7-a15b-8b538852e50e"),
        ("xXKMQm7kW?Gxtg1Fc8gx", None),
        (">[cU:b<XlcQr-qen5gRk", None),
    ],
)
def test_reference_log_dv_paths(dv_path: str, expected_uuid: str | None) -> None:
    desc = DeletionVectorDescriptor("u", dv_path, 34, 1, offset=1)
    path = dv_file_path("/tbl", desc)
    name = os.path.basename(path)
    assert name.startswith("deletion_vector_") and name.endswith(".bin")
    parsed = uuid.UUID(name[len("deletion_vector_") : -len(".bin")])
    assert z85_encode(parsed.bytes) == dv_path
    if expected_uuid:
        assert str(parsed) == expected_uuid


def _write_example(root: str) -> tuple[str, DeletionVectorDescriptor]:
    desc = DeletionVectorDescriptor.from_json(EXAMPLE_DESCRIPTOR)
    path = dv_file_path(root, desc)
    with open(path, "wb") as fh:
        fh.write(bytes.fromhex(EXAMPLE_FILE_HEX))
    return path, desc


def test_read_errors(tmp_path: object) -> None:
    root = str(tmp_path)
    desc = DeletionVectorDescriptor.from_json(EXAMPLE_DESCRIPTOR)
    with pytest.raises(LogCorruptedError, match="does not exist") as info:
        read_dv(root, desc)
    assert info.value.error_class == "DELTA_DELETION_VECTOR_FILE_NOT_FOUND"

    path, desc = _write_example(root)
    bad_size = DeletionVectorDescriptor("u", desc.path_or_inline_dv, 35, 2, offset=1)
    with pytest.raises(LogCorruptedError, match="sizeInBytes") as info:
        read_dv(root, bad_size)
    assert info.value.error_class == "DELTA_DELETION_VECTOR_SIZE_MISMATCH"

    bad_card = DeletionVectorDescriptor("u", desc.path_or_inline_dv, 36, 3, offset=1)
    with pytest.raises(LogCorruptedError) as info:
        read_dv(root, bad_card)
    assert info.value.error_class == "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH"

    data = bytearray(bytes.fromhex(EXAMPLE_FILE_HEX))
    data[-6] ^= 0x01  # flip a bit inside the bitmap
    with open(path, "wb") as fh:
        fh.write(bytes(data))
    with pytest.raises(LogCorruptedError, match="checksum") as info:
        read_dv(root, desc)
    assert info.value.error_class == "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH"

    with open(path, "wb") as fh:
        fh.write(bytes.fromhex(EXAMPLE_FILE_HEX)[:20])
    with pytest.raises(LogCorruptedError, match="truncated"):
        read_dv(root, desc)

    with open(path, "wb") as fh:
        fh.write(b"\x02" + bytes.fromhex(EXAMPLE_FILE_HEX)[1:])
    with pytest.raises(LogCorruptedError, match="version"):
        read_dv(root, desc)


def test_offset_absent_means_first_dv(tmp_path: object) -> None:
    root = str(tmp_path)
    _, desc = _write_example(root)
    no_offset = DeletionVectorDescriptor("u", desc.path_or_inline_dv, 36, 2)
    assert list(read_dv(root, no_offset)) == [0, 9]


def test_crc_is_of_bitmap_bytes() -> None:
    data = bytes.fromhex(EXAMPLE_FILE_HEX)
    assert zlib.crc32(data[5:-4]) == int.from_bytes(data[-4:], "big")


@pytest.mark.parametrize(
    "stats",
    [
        '{"numRecords":5,"minValues":{"id":1},"maxValues":{"id":9}}',
        '{"numRecords":5,"tightBounds":true}',
        '{"numRecords":5,"tightBounds":false}',
        '{"tightBounds":true,"numRecords":5}',
        '{"minValues":{"tightBounds":true},"numRecords":1}',
        '{"a":{"tightBounds":true}}',
        '{"nullCount":{"x":1,"tightBounds":true}}',
        "{}",
        ' {"numRecords": 3 , "tightBounds": true} ',
    ],
)
def test_stats_behind_a_deletion_vector_are_loose(stats: str) -> None:
    """A file re-added with a deletion vector keeps its statistics with top-level ``tightBounds``
    false, whatever the text's layout (a column named tightBounds is not the flag)."""
    from deltamerge.merge.dv import _loose_stats

    out = json.loads(_loose_stats(stats) or "")
    assert out.pop("tightBounds") is False
    original = json.loads(stats)
    original.pop("tightBounds", None)
    assert out == original
