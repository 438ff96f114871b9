"""Checkpoints: our writer round-trips, every checkpoint form is read, the hint is only a hint."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtest_helpers import RawTable, add, dv, remove

from deltamerge.errors import LogCorruptedError
from deltamerge.log import filenames
from deltamerge.log.actions import (
    DeletionVectorDescriptor,
    DomainMetadata,
    Protocol,
    SetTransaction,
)
from deltamerge.log.checkpoint import (
    CHECKPOINT_SCHEMA,
    checkpoint_rows,
    encode_checkpoint,
    read_last_checkpoint,
    write_checkpoint,
)
from deltamerge.log.snapshot import Snapshot

NOW = int(time.time() * 1000)


def _rich_table(table: RawTable, versions: int = 12) -> None:
    """A log exercising every action kind checkpoints must carry."""
    d1 = DeletionVectorDescriptor("u", "AAAAAAAAAAAAAAAAAAAA", 36, 2, offset=1, max_row_index=9)
    table.create(
        add("p=a/f0", stats='{"numRecords":10,"minValues":{"id":1}}'),
        add("p=__HIVE_DEFAULT_PARTITION__/fnull", p=None),
        protocol=Protocol(
            3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "domainMetadata", "invariants")
        ),
        configuration={"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "100"},
    )
    table.commit(
        1, [remove("p=a/f0"), replace(add("p=a/f0", deletion_vector=d1), tags={"INSERTION_TIME": "1"})]
    )
    table.commit(2, [SetTransaction("app", 7, last_updated=NOW), DomainMetadata("user.domain", '{"k":1}')])
    table.commit(3, [remove("p=__HIVE_DEFAULT_PARTITION__/fnull", ts=1)])  # expired tombstone
    table.commit(4, [DomainMetadata("gone", "{}"), SetTransaction("app2", 1)])
    table.commit(5, [DomainMetadata("gone", "{}", removed=True)])
    for v in range(6, versions):
        table.commit(v, [add(f"p=b/f{v}", p="b", stats=f'{{"numRecords":{v}}}'), remove(f"p=b/f{v - 1}")])


def _normalized(files) -> list:
    return sorted((replace(f, data_change=False) for f in files), key=lambda f: f.key)


def _assert_same_state(got: Snapshot, expected: Snapshot) -> None:
    assert got.version == expected.version
    assert got.protocol == expected.protocol
    assert got.metadata == expected.metadata
    assert _normalized(got.files) == _normalized(expected.files)
    assert dict(got.app_versions) == dict(expected.app_versions)
    assert dict(got.domains) == dict(expected.domains)


def _delete_commits_through(table: RawTable, version: int) -> None:
    for v in range(version + 1):
        table.store.delete(filenames.commit_name(v))


def test_round_trip_through_our_checkpoint(table: RawTable) -> None:
    _rich_table(table)
    log = table.log()
    expected = log.snapshot()
    log.checkpoint(expected)
    _delete_commits_through(table, expected.version - 1)
    got = table.log().snapshot()
    assert got.checkpoint_version == expected.version
    _assert_same_state(got, expected)
    # Unexpired tombstones survive (as dataChange=false), the expired one is dropped.
    assert {t.key for t in got.tombstones} == {
        t.key for t in expected.tombstones if t.deletion_timestamp != 1
    }
    assert all(not t.data_change for t in got.tombstones)
    assert got.app_versions == {"app": 7, "app2": 1} and got.transactions["app"].last_updated == NOW
    assert set(got.domains) == {"user.domain"}
    assert (
        next(f for f in got.files if f.deletion_vector).deletion_vector == expected.files[0].deletion_vector
    )
    assert next(f for f in got.files if f.tags).tags == {"INSERTION_TIME": "1"}
    assert next(f for f in got.files if f.partition_values["p"] != "a").stats is not None


def test_checkpoint_then_commits_after_it(table: RawTable) -> None:
    _rich_table(table, versions=8)
    log = table.log()
    log.checkpoint(log.snapshot())
    table.commit(8, [add("p=c/x", p="c")])
    table.commit(9, [remove("p=c/x")])
    expected = table.log().snapshot()
    _delete_commits_through(table, 7)
    got = table.log().snapshot()
    assert got.checkpoint_version == 7 and got.version == 9
    _assert_same_state(got, expected)


def test_checkpoint_layout_matches_delta_spark(table: RawTable) -> None:
    _rich_table(table, versions=7)
    log = table.log()
    snap = log.snapshot()
    log.checkpoint(snap)
    name = filenames.checkpoint_name(snap.version)
    pf = pq.ParquetFile(table.store.path(name))
    assert pf.schema_arrow.names == ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    schema_text = str(pf.schema)
    assert (
        "repeated group field_id=-1 key_value" in schema_text
        and "repeated group field_id=-1 list" in schema_text
    )
    assert "required binary field_id=-1 path" not in schema_text  # everything optional
    rows = pf.read().to_pylist()
    for row in rows:  # exactly one action per row
        assert sum(v is not None for v in row.values()) == 1
    assert all(r["add"]["dataChange"] is False for r in rows if r["add"])
    assert all(isinstance(r["add"]["stats"], (str, type(None))) for r in rows if r["add"])
    assert not any(r["domainMetadata"] and r["domainMetadata"]["removed"] for r in rows)
    hint = json.loads(table.store.read(filenames.LAST_CHECKPOINT))
    assert hint == {
        "version": snap.version,
        "size": len(rows),
        "sizeInBytes": os.path.getsize(table.store.path(name)),
        "numOfAddFiles": snap.num_files,
    }


def test_tombstone_retention_property(table: RawTable) -> None:
    table.create(add("a"), add("b"), configuration={"delta.deletedFileRetentionDuration": "interval 1 days"})
    table.commit(1, [remove("a", ts=NOW - 2 * 86_400_000), remove("b", ts=NOW - 3_600_000)])
    log = table.log()
    log.checkpoint(log.snapshot())
    _delete_commits_through(table, 0)
    assert [t.path for t in table.log().snapshot().tombstones] == ["b"]


def test_last_checkpoint_never_moves_backwards(table: RawTable) -> None:
    _rich_table(table, versions=8)
    log = table.log()
    log.checkpoint(log.snapshot(7))
    log.checkpoint(log.snapshot(3))
    assert read_last_checkpoint(table.store).version == 7  # type: ignore[union-attr]
    assert table.store.exists(filenames.checkpoint_name(3))


# --- the _last_checkpoint hint --------------------------------------------------------------------


@pytest.fixture
def checkpointed(table: RawTable) -> RawTable:
    _rich_table(table, versions=12)
    log = table.log()
    log.checkpoint(log.snapshot(10))
    return table


def test_hint_missing(checkpointed: RawTable) -> None:
    checkpointed.store.delete(filenames.LAST_CHECKPOINT)
    _delete_commits_through(checkpointed, 9)
    snap = checkpointed.log().snapshot()
    assert (snap.version, snap.checkpoint_version) == (11, 10)


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"size": 3}', b'{"version": "x"}', b"[1]"])
def test_hint_corrupt(checkpointed: RawTable, content: bytes) -> None:
    checkpointed.store.write(filenames.LAST_CHECKPOINT, content)
    _delete_commits_through(checkpointed, 9)
    snap = checkpointed.log().snapshot()
    assert (snap.version, snap.checkpoint_version) == (11, 10)


def test_hint_stale(checkpointed: RawTable) -> None:
    log = checkpointed.log()
    log.checkpoint(log.snapshot(5))  # hint is not moved back to 5 by the writer ...
    checkpointed.store.write(filenames.LAST_CHECKPOINT, b'{"version":5,"size":1}')  # ... so force it
    _delete_commits_through(checkpointed, 9)
    snap = checkpointed.log().snapshot()
    assert (snap.version, snap.checkpoint_version) == (11, 10)


def test_hint_points_to_missing_checkpoint(checkpointed: RawTable) -> None:
    expected = checkpointed.log().snapshot()
    checkpointed.store.delete(filenames.checkpoint_name(10))
    snap = checkpointed.log().snapshot()  # falls back to a full listing and replays every commit
    assert snap.checkpoint_version is None
    _assert_same_state(snap, expected)


def test_hint_beyond_end_of_log(checkpointed: RawTable) -> None:
    checkpointed.store.write(filenames.LAST_CHECKPOINT, b'{"version":99,"size":1}')
    assert checkpointed.log().snapshot().version == 11


def test_missing_checkpoint_and_commits_is_an_error(checkpointed: RawTable) -> None:
    _delete_commits_through(checkpointed, 9)
    checkpointed.store.delete(filenames.checkpoint_name(10))
    with pytest.raises(LogCorruptedError, match="no checkpoint"):
        checkpointed.log().snapshot()


def test_time_travel_before_earliest_checkpoint_after_cleanup(checkpointed: RawTable) -> None:
    from deltamerge.errors import VersionNotFoundError

    _delete_commits_through(checkpointed, 9)
    log = checkpointed.log()
    assert log.snapshot(10).checkpoint_version == 10
    with pytest.raises(VersionNotFoundError, match="earliest version that can be reconstructed is 10"):
        log.snapshot(4)


def test_corrupt_checkpoint_falls_back_to_commits(checkpointed: RawTable) -> None:
    expected = checkpointed.log().snapshot()
    checkpointed.store.write(filenames.checkpoint_name(10), b"PAR1 garbage")
    snap = checkpointed.log().snapshot()
    assert snap.checkpoint_version is None
    _assert_same_state(snap, expected)
    _delete_commits_through(checkpointed, 9)
    with pytest.raises(
        LogCorruptedError, match=r"checkpoint file _delta_log/00000000000000000010\.checkpoint\.parquet"
    ):
        checkpointed.log().snapshot()


# --- other checkpoint forms ---------------------------------------------------------------------


def _rows_of(snap: Snapshot) -> list[dict]:
    return checkpoint_rows(
        snap.protocol,
        snap.metadata,
        snap.transactions.values(),
        snap.domains.values(),
        snap.files,
        snap.tombstones,
    )


def test_multipart_checkpoint(table: RawTable) -> None:
    _rich_table(table, versions=10)
    expected = table.log().snapshot()
    rows = _rows_of(expected)
    names = filenames.multipart_checkpoint_names(9, 3)
    for i, name in enumerate(names):
        table.store.write(name, encode_checkpoint(rows[i::3]))
    _delete_commits_through(table, 8)
    snap = table.log().snapshot()
    assert snap.checkpoint_version == 9
    _assert_same_state(snap, expected)


def test_incomplete_multipart_checkpoint_is_ignored(table: RawTable) -> None:
    _rich_table(table, versions=10)
    expected = table.log().snapshot()
    rows = _rows_of(expected)
    table.store.write(filenames.multipart_checkpoint_names(9, 2)[0], encode_checkpoint(rows[::2]))
    snap = table.log().snapshot()
    assert snap.checkpoint_version is None
    _assert_same_state(snap, expected)
    _delete_commits_through(table, 8)
    with pytest.raises(LogCorruptedError):
        table.log().snapshot()


UUID = "80a083e8-7026-4e79-81be-64bd76c43a11"


def _sidecar(table: RawTable, snap: Snapshot, name: str) -> dict:
    file_rows = [r for r in _rows_of(snap) if "add" in r or "remove" in r]
    data = encode_checkpoint(file_rows)
    table.store.write(f"{filenames.SIDECAR_DIR}/{name}", data)
    return {"path": name, "sizeInBytes": len(data), "modificationTime": NOW}


def test_v2_json_checkpoint_with_sidecar(table: RawTable) -> None:
    _rich_table(table, versions=10)
    expected = table.log().snapshot()
    sidecar = _sidecar(table, expected, "016ae953-37a9-438e-8683-9a9a4a79a395.parquet")
    lines = [
        {"checkpointMetadata": {"version": 9}},
        {"protocol": expected.protocol.to_json()},
        {"metaData": expected.metadata.to_json()},
        *({"txn": t.to_json()} for t in expected.transactions.values()),
        *({"domainMetadata": d.to_json()} for d in expected.domains.values()),
        {"sidecar": sidecar},
    ]
    name = filenames.v2_checkpoint_name(9, UUID, "json")
    table.store.write(name, "\n".join(json.dumps(x) for x in lines).encode())
    _delete_commits_through(table, 8)
    snap = table.log().snapshot()
    assert snap.checkpoint_version == 9
    _assert_same_state(snap, expected)


def test_v2_parquet_checkpoint_with_sidecar_and_missing_sidecar(table: RawTable) -> None:
    _rich_table(table, versions=10)
    expected = table.log().snapshot()
    sidecar = _sidecar(table, expected, "side%201.parquet")  # URI-encoded sidecar path
    table.store.write(
        f"{filenames.SIDECAR_DIR}/side 1.parquet",
        table.store.read(f"{filenames.SIDECAR_DIR}/side%201.parquet"),
    )
    non_file_rows = [r for r in _rows_of(expected) if "add" not in r and "remove" not in r]
    base = pa.Table.from_pylist([*non_file_rows, {}], schema=CHECKPOINT_SCHEMA)
    sidecar_type = pa.struct(
        [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]
    )
    column = pa.array([None] * len(non_file_rows) + [sidecar], type=sidecar_type)
    name = filenames.v2_checkpoint_name(9, UUID, "parquet")
    sink = pa.BufferOutputStream()
    pq.write_table(base.append_column("sidecar", column), sink)
    table.store.write(name, sink.getvalue().to_pybytes())
    _delete_commits_through(table, 8)
    snap = table.log().snapshot()
    _assert_same_state(snap, expected)
    table.store.delete(f"{filenames.SIDECAR_DIR}/side 1.parquet")
    with pytest.raises(LogCorruptedError, match="sidecar"):
        table.log().snapshot()


def test_reads_required_fields_missing_columns_and_parsed_stats(table: RawTable) -> None:
    """A delta-rs-like checkpoint: not-null fields, no txn/domainMetadata columns, stats only as struct."""
    table.create()
    table.commit(1, [add("x")])
    md = table.log().snapshot().metadata
    req = pa.string()
    pmap = pa.map_(pa.string(), pa.string())
    schema = pa.schema(
        [
            pa.field(
                "add",
                pa.struct(
                    [
                        pa.field("path", req, nullable=False),
                        pa.field("partitionValues", pmap, nullable=False),
                        pa.field("size", pa.int64(), nullable=False),
                        pa.field("modificationTime", pa.int64(), nullable=False),
                        pa.field("dataChange", pa.bool_(), nullable=False),
                        pa.field("stats", pa.string()),
                        pa.field("partitionValues_parsed", pa.struct([("p", pa.string())])),
                        pa.field(
                            "stats_parsed",
                            pa.struct(
                                [
                                    ("numRecords", pa.int64()),
                                    (
                                        "minValues",
                                        pa.struct([("id", pa.int64()), ("d", pa.decimal128(5, 2))]),
                                    ),
                                    ("maxValues", pa.struct([("ts", pa.timestamp("us", tz="UTC"))])),
                                ]
                            ),
                        ),
                    ]
                ),
            ),
            pa.field(
                "protocol",
                pa.struct(
                    [
                        pa.field("minReaderVersion", pa.int32(), nullable=False),
                        pa.field("minWriterVersion", pa.int32(), nullable=False),
                        pa.field("readerFeatures", pa.list_(pa.string())),
                        pa.field("writerFeatures", pa.list_(pa.string())),
                    ]
                ),
            ),
            pa.field(
                "metaData",
                pa.struct(
                    [
                        pa.field("id", req, nullable=False),
                        pa.field("schemaString", req, nullable=False),
                        pa.field("partitionColumns", pa.list_(pa.string()), nullable=False),
                        pa.field("configuration", pmap, nullable=False),
                        pa.field("format", pa.struct([("provider", pa.string()), ("options", pmap)])),
                        pa.field("createdTime", pa.int64()),
                    ]
                ),
            ),
        ]
    )
    import datetime as dt
    from decimal import Decimal

    rows = [
        {
            "add": {
                "path": "x",
                "partitionValues": [("p", "a")],
                "size": 100,
                "modificationTime": 1,
                "dataChange": True,
                "stats": None,
                "partitionValues_parsed": {"p": "a"},
                "stats_parsed": {
                    "numRecords": 3,
                    "minValues": {"id": 1, "d": Decimal("1.10")},
                    "maxValues": {"ts": dt.datetime(2024, 1, 1, 0, 0, 0, 999000, tzinfo=dt.timezone.utc)},
                },
            }
        },
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": md.id,
                "schemaString": md.schema_string,
                "partitionColumns": ["p"],
                "configuration": [],
                "format": {"provider": "parquet", "options": []},
                "createdTime": 1,
            }
        },
    ]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    table.store.write(filenames.checkpoint_name(1), sink.getvalue().to_pybytes())
    _delete_commits_through(table, 0)
    snap = table.log().snapshot()
    assert snap.checkpoint_version == 1 and snap.metadata.configuration == {}
    (f,) = snap.files
    assert f.partition_values == {"p": "a"} and "partitionValues_parsed" not in f.to_json()
    assert json.loads(f.stats or "") == {
        "numRecords": 3,
        "minValues": {"id": 1, "d": 1.10},
        "maxValues": {"ts": "2024-01-01T00:00:00.999Z"},
    }
    assert f.stats is not None and '"d":1.10' in f.stats  # decimals keep their digits
    assert snap.protocol == Protocol(1, 2)


def test_write_checkpoint_directly(table: RawTable) -> None:
    table.create(add("a"))
    snap = table.log().snapshot()
    info = write_checkpoint(table.store, snap, now_ms=NOW)
    assert (info.version, info.size, info.num_of_add_files) == (0, 3, 1)
    assert dv().unique_id == "uvBn[lx{q8@P<9BNH/isA@1"
