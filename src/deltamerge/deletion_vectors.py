"""Deletion vector codec, byte-compatible with Delta (protocol.md §5).

Three layers:

* **Z85** as Delta's ``Codec`` uses it: 4-byte big-endian blocks, zero padding, decoded output cut to the
  known size. Used for inline DVs (``storageType="i"``) and for the UUID part of ``"u"`` paths.
* **Serialized bitmap** ("RoaringBitmapArray portable" format): little-endian magic ``1681511377``
  followed by the 64-bit Roaring portable serialization, which is exactly ``pyroaring.BitMap64.serialize()``.
  The legacy "native" format (magic ``1681511376``) is accepted when reading, never written.
* **DV file**: version byte ``1``, then per DV a big-endian ``i32`` size, the serialized bitmap, and a
  big-endian ``u32`` CRC-32 of the bitmap bytes. A descriptor's ``offset`` points at its size field.

Only local file systems are supported (``table_root`` is a path or a ``file:`` URI).
"""

from __future__ import annotations

import os
import secrets
import string
import struct
import uuid
import zlib
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlparse

from pyroaring import BitMap, BitMap64

from deltamerge.errors import InvalidArgumentError, LogCorruptedError
from deltamerge.log.actions import DeletionVectorDescriptor

__all__ = [
    "NATIVE_MAGIC",
    "PORTABLE_MAGIC",
    "deserialize_bitmap",
    "dv_file_path",
    "inline_descriptor",
    "read_dv",
    "serialize_bitmap",
    "write_dv_file",
    "z85_decode",
    "z85_encode",
]

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
DV_FILE_FORMAT_VERSION = 1
#: The largest row index a RoaringBitmapArray can hold (bucket keys must be < 2**31).
MAX_ROW_INDEX = (1 << 63) - 1

_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85_ALPHABET)}
_UUID_Z85_LEN = 20


# --- Z85 ------------------------------------------------------------------------------------------


def z85_encode(data: bytes) -> str:
    """Encode bytes as Delta's Z85: zero-pad to a multiple of 4, 5 characters per big-endian block."""
    padded = data + b"\x00" * (-len(data) % 4)
    out: list[str] = []
    for (value,) in struct.iter_unpack(">I", padded):
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85_ALPHABET[digit])
        out.extend(reversed(chunk))
    return "".join(out)


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Decode Delta's Z85; the result is cut to ``size`` bytes when given.

    Raises ``LogCorruptedError`` on characters outside the alphabet or a length not a multiple of 5.
    """
    if len(text) % 5:
        raise LogCorruptedError(f"Z85 text length {len(text)} is not a multiple of 5: {text!r}")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for ch in text[start : start + 5]:
            digit = _Z85_INDEX.get(ch)
            if digit is None:
                raise LogCorruptedError(f"invalid Z85 character {ch!r} in {text!r}")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise LogCorruptedError(
                f"invalid Z85 block {text[start : start + 5]!r} (value overflows 32 bits)"
            )
        out += struct.pack(">I", value)
    if size is not None:
        if size > len(out):
            raise LogCorruptedError(f"Z85 text decodes to {len(out)} bytes, fewer than the expected {size}")
        del out[size:]
    return bytes(out)


# --- serialized bitmaps ---------------------------------------------------------------------------


def _as_bitmap(rows: BitMap64 | Iterable[int]) -> BitMap64:
    bm = rows if isinstance(rows, BitMap64) else BitMap64(rows)
    if len(bm) and bm.max() > MAX_ROW_INDEX:
        raise InvalidArgumentError(f"row index {bm.max()} is above the largest DV row index {MAX_ROW_INDEX}")
    return bm


def serialize_bitmap(rows: BitMap64 | Iterable[int]) -> bytes:
    """Serialize row indexes as a Delta DV payload (portable RoaringBitmapArray, magic included)."""
    return struct.pack("<i", PORTABLE_MAGIC) + _as_bitmap(rows).serialize()


def _deserialize_native(data: bytes, order: str = "<") -> BitMap64:
    # magic | i32 count | count × (i32 size | 32-bit Roaring bitmap); index = high 32 bits. Header ints are
    # little-endian as delta-spark writes them; ``order=">"`` reads the stale protocol example's variant.
    if len(data) < 8:
        raise LogCorruptedError("native deletion vector payload is truncated (no bitmap count)")
    (count,) = struct.unpack_from(order + "i", data, 4)
    if count < 0:
        raise LogCorruptedError(f"native deletion vector has a negative bitmap count ({count})")
    pos = 8
    result = BitMap64()
    for high in range(count):
        if pos + 4 > len(data):
            raise LogCorruptedError("native deletion vector payload is truncated (bitmap size)")
        (size,) = struct.unpack_from(order + "i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise LogCorruptedError(f"native deletion vector bitmap {high} has an invalid size {size}")
        try:
            low = BitMap.deserialize(data[pos : pos + size])
        except Exception as exc:
            raise LogCorruptedError(f"native deletion vector bitmap {high} cannot be decoded: {exc}") from exc
        pos += size
        base = high << 32
        result.update(base | v for v in low)
    return result


def deserialize_bitmap(data: bytes) -> BitMap64:
    """Decode a DV payload (magic + bitmap) into a ``BitMap64``; both portable and legacy native format."""
    if len(data) < 4:
        raise LogCorruptedError(
            f"deletion vector payload of {len(data)} bytes is too short for a magic number"
        )
    (magic,) = struct.unpack_from("<i", data, 0)
    if magic == PORTABLE_MAGIC:
        try:
            bm = BitMap64.deserialize(bytes(data[4:]))
        except Exception as exc:
            raise LogCorruptedError(f"deletion vector bitmap cannot be decoded: {exc}") from exc
        return bm
    if magic == NATIVE_MAGIC:
        return _deserialize_native(bytes(data))
    if struct.unpack_from(">i", data, 0)[0] == NATIVE_MAGIC:
        # Native format with big-endian header fields: the stale "Inline" example of PROTOCOL.md.
        return _deserialize_native(bytes(data), ">")
    raise LogCorruptedError(
        f"deletion vector has an unknown magic number {magic} "
        f"(expected {PORTABLE_MAGIC} portable or {NATIVE_MAGIC} native)"
    )


# --- descriptors and files ------------------------------------------------------------------------


def inline_descriptor(bitmap: BitMap64 | Iterable[int]) -> DeletionVectorDescriptor:
    """An inline (``storageType="i"``) descriptor carrying the Z85 of the serialized bitmap."""
    bm = _as_bitmap(bitmap)
    payload = serialize_bitmap(bm)
    return DeletionVectorDescriptor(
        storage_type="i",
        path_or_inline_dv=z85_encode(payload),
        size_in_bytes=len(payload),
        cardinality=len(bm),
    )


def _local_root(table_root: str) -> str:
    if table_root.startswith("file:"):
        return unquote(urlparse(table_root).path)
    return table_root


def _uuid_from_dv_path(path_or_inline_dv: str) -> tuple[str, uuid.UUID]:
    if len(path_or_inline_dv) < _UUID_Z85_LEN:
        raise LogCorruptedError(f"deletion vector path {path_or_inline_dv!r} is shorter than a Z85 UUID")
    prefix = path_or_inline_dv[:-_UUID_Z85_LEN]
    raw = z85_decode(path_or_inline_dv[-_UUID_Z85_LEN:], 16)
    return prefix, uuid.UUID(bytes=raw)


def dv_relative_path(descriptor: DeletionVectorDescriptor) -> str:
    """Where a ``u`` (table-relative) DV file lives, relative to the table root."""
    prefix, dv_uuid = _uuid_from_dv_path(descriptor.path_or_inline_dv)
    name = f"deletion_vector_{dv_uuid}.bin"
    return f"{prefix}/{name}" if prefix else name


def dv_file_path(table_root: str, descriptor: DeletionVectorDescriptor) -> str:
    """The local file holding an on-disk DV (``u``: ``<root>/<prefix>/deletion_vector_<uuid>.bin``; ``p``)."""
    if descriptor.storage_type == "u":
        prefix, dv_uuid = _uuid_from_dv_path(descriptor.path_or_inline_dv)
        name = f"deletion_vector_{dv_uuid}.bin"
        root = _local_root(table_root)
        return os.path.join(root, prefix, name) if prefix else os.path.join(root, name)
    if descriptor.storage_type == "p":
        p = descriptor.path_or_inline_dv
        parsed = urlparse(p)
        if parsed.scheme in ("", "file"):
            return unquote(parsed.path) if parsed.scheme else unquote(p)
        raise InvalidArgumentError(f"deletion vector path {p!r} is not on the local file system")
    if descriptor.storage_type == "i":
        raise InvalidArgumentError("an inline deletion vector (storageType 'i') has no file")
    raise InvalidArgumentError(f"unsupported deletion vector storage type {descriptor.storage_type!r}")


def _random_prefix(length: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def write_dv_file(
    table_root: str,
    bitmaps: Sequence[BitMap64 | Iterable[int]],
    *,
    random_prefix_length: int = 0,
) -> list[DeletionVectorDescriptor]:
    """Write all ``bitmaps`` into one new ``deletion_vector_<uuid>.bin`` and return one descriptor each.

    The file is created exclusively (never overwritten). Descriptors are ``storageType="u"`` with
    ``offset`` at each DV's size field (the first is 1). ``random_prefix_length`` > 0 puts the file in a
    random sub-directory (``delta.randomizeFilePrefixes``). An empty ``bitmaps`` writes nothing.
    """
    if not bitmaps:
        return []
    prefix = _random_prefix(random_prefix_length) if random_prefix_length > 0 else ""
    dv_uuid = uuid.uuid4()
    encoded = prefix + z85_encode(dv_uuid.bytes)
    body = bytearray([DV_FILE_FORMAT_VERSION])
    descriptors: list[DeletionVectorDescriptor] = []
    for rows in bitmaps:
        bm = _as_bitmap(rows)
        payload = serialize_bitmap(bm)
        descriptors.append(
            DeletionVectorDescriptor(
                storage_type="u",
                path_or_inline_dv=encoded,
                size_in_bytes=len(payload),
                cardinality=len(bm),
                offset=len(body),
            )
        )
        body += struct.pack(">i", len(payload))
        body += payload
        body += struct.pack(">I", zlib.crc32(payload) & 0xFFFFFFFF)
    path = dv_file_path(table_root, descriptors[0])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "xb") as fh:
        fh.write(body)
    return descriptors


def _check_cardinality(bm: BitMap64, descriptor: DeletionVectorDescriptor, where: str) -> BitMap64:
    if len(bm) != descriptor.cardinality:
        raise LogCorruptedError(
            f"deletion vector {where} holds {len(bm)} rows but its descriptor says cardinality "
            f"{descriptor.cardinality}",
            error_class="DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH",
        )
    return bm


def read_dv(table_root: str, descriptor: DeletionVectorDescriptor) -> BitMap64:
    """Read and verify the rows a descriptor deletes (inline, ``u`` or ``p``).

    Checks the file version, the stored size against ``sizeInBytes``, the CRC-32 and the cardinality;
    raises ``LogCorruptedError`` with the Delta error class on any mismatch or a missing file.
    """
    if descriptor.storage_type == "i":
        payload = z85_decode(descriptor.path_or_inline_dv, descriptor.size_in_bytes)
        return _check_cardinality(deserialize_bitmap(payload), descriptor, "(inline)")
    path = dv_file_path(table_root, descriptor)
    offset = 1 if descriptor.offset is None else descriptor.offset
    stored_size, payload, crc = -1, b"", b""
    try:
        with open(path, "rb") as fh:
            version = fh.read(1)
            fh.seek(offset)
            head = fh.read(4)
            if len(head) == 4:
                (stored_size,) = struct.unpack(">i", head)
                payload = fh.read(max(stored_size, 0))
                crc = fh.read(4)
    except FileNotFoundError:
        raise LogCorruptedError(
            f"deletion vector file {path} does not exist (referenced by {descriptor.unique_id})",
            error_class="DELTA_DELETION_VECTOR_FILE_NOT_FOUND",
        ) from None
    if version != bytes([DV_FILE_FORMAT_VERSION]):
        raise LogCorruptedError(f"deletion vector file {path} has unsupported format version {version!r}")
    if len(head) != 4:
        raise LogCorruptedError(f"deletion vector file {path} ends before offset {offset} + 4")
    if stored_size != descriptor.size_in_bytes:
        raise LogCorruptedError(
            f"deletion vector at {path}@{offset} has size {stored_size} but its descriptor says "
            f"sizeInBytes {descriptor.size_in_bytes}",
            error_class="DELTA_DELETION_VECTOR_SIZE_MISMATCH",
        )
    if len(payload) != stored_size or len(crc) != 4:
        raise LogCorruptedError(f"deletion vector file {path} is truncated at offset {offset}")
    (expected_crc,) = struct.unpack(">I", crc)
    actual_crc = zlib.crc32(payload) & 0xFFFFFFFF
    if actual_crc != expected_crc:
        raise LogCorruptedError(
            f"deletion vector at {path}@{offset} fails its checksum "
            f"(stored {expected_crc:#010x}, computed {actual_crc:#010x})",
            error_class="DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH",
        )
    return _check_cardinality(deserialize_bitmap(payload), descriptor, f"at {path}@{offset}")
