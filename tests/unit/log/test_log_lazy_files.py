"""Lazily built snapshot files (checkpoint ``add`` rows kept as Arrow) equal eager replay exactly."""

from __future__ import annotations

import pickle
import random
import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from logtest_helpers import RawTable, add, dv, remove

from deltamerge.errors import LogCorruptedError
from deltamerge.log import filenames
from deltamerge.log.actions import AddFile, DeletionVectorDescriptor, Protocol, SetTransaction
from deltamerge.log.checkpoint import (
    CHECKPOINT_SCHEMA,
    checkpoint_rows,
    encode_checkpoint,
    read_checkpoint,
    read_checkpoint_lazy,
)
from deltamerge.log.filestate import ActiveFiles, CheckpointAdds
from deltamerge.log.replay import LogReplay, list_log, read_commit
from deltamerge.log.snapshot import Snapshot


def _eager(table: RawTable, version: int) -> LogReplay:
    """The pre-lazy replay: every checkpoint row applied as an action, then the commits."""
    listing = list_log(table.store, 0)
    ref = next((c for c in listing.checkpoints if c.version <= version), None)
    state = LogReplay()
    begin = 0
    if ref is not None:
        state.apply(read_checkpoint(table.store, ref))
        begin = ref.version + 1
    for v in range(begin, version + 1):
        state.apply(read_commit(table.store, v))
    return state


def _assert_matches_eager(table: RawTable, snap: Snapshot) -> None:
    state = _eager(table, snap.version)
    expected = tuple(state.files.values())
    # Count and size come from Arrow, before any AddFile is built.
    assert snap.num_files == len(expected)
    assert snap.size_in_bytes == sum(f.size for f in expected)
    assert snap.files == expected  # same files, same order
    assert [f.to_json() for f in snap.files] == [f.to_json() for f in expected]
    assert snap.tombstones == tuple(state.tombstones.values())


def _write_checkpoint_rows(table: RawTable, version: int, rows: list[dict]) -> None:
    table.store.write(filenames.checkpoint_name(version), encode_checkpoint(rows))


def _rows(snap: Snapshot) -> list[dict]:
    return checkpoint_rows(
        snap.protocol,
        snap.metadata,
        snap.transactions.values(),
        snap.domains.values(),
        snap.files,
        snap.tombstones,
    )


NOW = int(time.time() * 1000)
D1 = DeletionVectorDescriptor("u", "AAAAAAAAAAAAAAAAAAAA", 36, 2, offset=1, max_row_index=9)
D2 = DeletionVectorDescriptor("i", "inline-bytes", 10, 1)


def test_checkpoint_then_removes_dvs_partitions_and_readds(table: RawTable) -> None:
    table.create(
        add("p=a/f0", stats='{"numRecords":10}'),
        add("p=b/f1", p="b"),
        add("p=null/f2", p=None),
        replace(add("p=a/f3"), tags={"INSERTION_TIME": "1", "k": "v"}),
        add("p=a/f4", size=7),
    )
    table.commit(1, [remove("p=a/f0"), add("p=a/f0", deletion_vector=D1)])
    table.commit(2, [add("p=a/f5", deletion_vector=D2), SetTransaction("app", 3)])
    log = table.log()
    log.checkpoint(log.snapshot())
    # After the checkpoint: remove with the wrong DV key (no effect), replace a DV, re-add, remove.
    table.commit(3, [remove("p=a/f0")])
    table.commit(4, [remove("p=a/f0", deletion_vector=D1), add("p=a/f0", deletion_vector=D2)])
    table.commit(5, [remove("p=b/f1", ts=5), add("p=a/f3", stats='{"numRecords":3}'), add("p=a/new")])
    table.commit(6, [add("p=a/new", size=1), remove("p=a/f5", deletion_vector=D2)])
    table.commit(7, [add("p=b/f1", p="b")])  # revived: leaves the tombstones
    for v in range(2, 8):
        snap = table.log().snapshot(v)
        assert snap.checkpoint_version == (2 if v >= 2 else None)
        _assert_matches_eager(table, snap)
    snap = table.log().snapshot()
    # The checkpoint rows stayed Arrow: the add (f0, D1) and the tombstone (f0, no DV) are different keys.
    assert snap.active_files._base is not None and snap.active_tombstones._base is not None
    keys = [f.key for f in snap.files]
    assert keys[-3:] == [("p=a/f3", None), ("p=a/new", None), ("p=b/f1", None)]
    assert ("p=a/f0", D2.unique_id) in keys and ("p=a/f0", D1.unique_id) not in keys
    pv = {f.path: f.partition_values for f in snap.files}
    assert pv["p=null/f2"] == {"p": None} and pv["p=b/f1"] == {"p": "b"}


def test_count_and_size_do_not_build_files(table: RawTable) -> None:
    table.create(*(add(f"f{i}", size=i) for i in range(20)))
    log = table.log()
    log.checkpoint(log.snapshot())
    table.commit(1, [remove("f3"), add("g", size=1000)])
    snap = table.log().snapshot()
    assert snap.num_files == 20 and snap.size_in_bytes == sum(range(20)) - 3 + 1000
    assert snap.active_files._files is None
    assert len(snap.files) == 20 and snap.active_files._files is not None


def test_extending_a_cached_snapshot_shares_checkpoint_files(table: RawTable) -> None:
    table.create(add("a"), add("b"))
    log = table.log()
    log.checkpoint(log.snapshot())
    log = table.log()
    first = log.update()
    built = first.files
    table.commit(1, [remove("a"), add("c")])
    second = log.update()
    assert second.version == 1 and [f.path for f in second.files] == ["b", "c"]
    assert second.files[0] is built[1]  # the AddFile objects are built once per checkpoint
    assert [f.path for f in first.files] == ["a", "b"]  # the older snapshot is unchanged
    _assert_matches_eager(table, second)


PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
METADATA = RawTable("/nonexistent").metadata()


def _add_row(path: str, size: int = 1, dv_: DeletionVectorDescriptor | None = None) -> dict:
    f = replace(add(path, size=size), deletion_vector=dv_)
    return checkpoint_rows(PROTOCOL, METADATA, [], [], [f], [])[-1]


def _head_rows() -> list[dict]:
    return checkpoint_rows(PROTOCOL, METADATA, [], [], [], [])


def _create_for_handwritten(table: RawTable) -> None:
    table.create(protocol=PROTOCOL)


def test_duplicate_keys_in_a_checkpoint_last_row_wins(table: RawTable) -> None:
    _create_for_handwritten(table)
    rows = [
        _add_row("x", 1),
        *_head_rows(),
        _add_row("y", 2),
        _add_row("x", 3),  # same key again: replaces the first, takes this position
        _add_row("x", 4, D1),  # same path, other DV: a different file
        _add_row("z", 5),
    ]
    _write_checkpoint_rows(table, 1, rows)
    snap = table.log().snapshot()
    assert snap.checkpoint_version == 1
    assert [(f.path, f.size) for f in snap.files] == [("y", 2), ("x", 3), ("x", 4), ("z", 5)]
    _assert_matches_eager(table, snap)
    table.commit(2, [remove("x", deletion_vector=D1)])
    snap = table.log().snapshot()
    assert [(f.path, f.size) for f in snap.files] == [("y", 2), ("x", 3), ("z", 5)]
    _assert_matches_eager(table, snap)


def test_add_and_remove_of_one_path_in_a_checkpoint_replays_in_row_order(table: RawTable) -> None:
    _create_for_handwritten(table)
    tomb = {"remove": {"path": "x", "deletionTimestamp": 5, "dataChange": False}}
    tomb_y = {"remove": {"path": "y", "dataChange": False}}
    rows = [*_head_rows(), _add_row("x", 1), tomb, _add_row("y", 2), tomb_y, _add_row("y", 3)]
    _write_checkpoint_rows(table, 1, rows)
    ref = list_log(table.store, 0).checkpoints[0]
    lazy = read_checkpoint_lazy(table.store, ref)
    assert lazy.adds is None and lazy.removes is None  # eager, row order kept
    assert any(isinstance(a, AddFile) for a in lazy.actions)
    snap = table.log().snapshot()
    assert [(f.path, f.size) for f in snap.files] == [("y", 3)]
    assert [t.path for t in snap.tombstones] == ["x"]
    _assert_matches_eager(table, snap)


def test_non_contiguous_add_rows_and_multipart(table: RawTable) -> None:
    table.create(
        *(
            add(f"f{i}", size=i, deletion_vector=D1 if i % 3 == 0 else None, stats=f'{{"numRecords":{i}}}')
            for i in range(12)
        )
    )
    table.commit(1, [remove("f1", ts=1), remove("f2", ts=2), SetTransaction("app", 1)])
    expected = table.log().snapshot()
    rows = _rows(expected)
    random.Random(4).shuffle(rows)  # adds, removes, txn and metadata interleaved
    names = filenames.multipart_checkpoint_names(1, 3)
    for i, name in enumerate(names):
        table.store.write(name, encode_checkpoint(rows[i::3]))
    table.commit(2, [remove("f0", deletion_vector=D1), add("f5", size=50)])
    snap = table.log().snapshot()
    base = snap.active_files._base
    assert snap.checkpoint_version == 1 and base is not None
    assert "stats" not in base.rows.type.names  # read from the parts only when the files are built
    _assert_matches_eager(table, snap)
    assert sorted(f.path for f in snap.files) == sorted(f"f{i}" for i in range(12) if i not in (0, 1, 2))
    assert all(f.stats == f'{{"numRecords":{f.path[1:]}}}' for f in snap.files if f.path != "f5")


def test_random_logs_match_eager_replay(table: RawTable) -> None:
    rnd = random.Random(11)
    dvs: list[DeletionVectorDescriptor | None] = [None, D1, D2, dv("CCCCCCCCCCCCCCCCCCCC")]
    table.create()
    log = table.log()
    live: dict[tuple[str, str | None], AddFile] = {}
    for v in range(1, 40):
        actions = []
        for _ in range(rnd.randint(1, 6)):
            path = f"p=a/f{rnd.randint(0, 9)}"
            d = rnd.choice(dvs)
            if live and rnd.random() < 0.4:
                victim = rnd.choice(list(live.values()))
                actions.append(victim.remove(NOW + v))  # kept by checkpoints (within retention)
                live.pop(victim.key, None)
            else:
                f = replace(add(path, size=rnd.randint(1, 100), p=rnd.choice(["a", None])), deletion_vector=d)
                actions.append(f)
                live[f.key] = f
        table.commit(v, actions)
        if rnd.random() < 0.2:
            log.checkpoint(log.update())
    lazy_tombstones = 0
    for v in range(40):
        snap = table.log().snapshot(v)
        _assert_matches_eager(table, snap)
        lazy_tombstones += snap.active_tombstones._base is not None
    assert lazy_tombstones > 10
    # And through the incremental path of one DeltaLog.
    log = table.log()
    snap = log.snapshot()
    table.commit(40, [add("p=a/f1", size=3), remove("p=a/f2")])
    _assert_matches_eager(table, log.update())
    assert snap.version == 39


def test_active_files_equality_and_empty(table: RawTable) -> None:
    rows = pa.array(
        [{"path": "a", "size": 1}, {"path": "b", "size": None}],
        pa.struct([("path", pa.string()), ("size", pa.int64())]),
    )
    base = CheckpointAdds(rows)
    full = ActiveFiles(base, frozenset(), ())
    assert len(full) == 2 and full.size_in_bytes == 1
    assert [f.size for f in full.files] == [1, 0]
    shadowed = ActiveFiles(base, frozenset({("a", None), ("zz", None)}), ())
    assert len(shadowed) == 1 and [f.path for f in shadowed] == ["b"] and shadowed.size_in_bytes == 0
    assert ActiveFiles(None, frozenset(), full.files[1:]) == shadowed
    assert ActiveFiles(None, frozenset(), ()).files == ()
    empty = CheckpointAdds(rows.slice(0, 0))
    assert len(ActiveFiles(empty, frozenset({("a", None)}), ())) == 0


@pytest.mark.parametrize("with_stats_column", [True, False])
def test_checkpoint_without_optional_add_fields(table: RawTable, with_stats_column: bool) -> None:
    """A minimal add struct (only required fields) still takes the Arrow path."""
    table.create()
    md = table.log().snapshot().metadata
    fields = [
        ("path", pa.string()),
        ("partitionValues", pa.map_(pa.string(), pa.string())),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
    ]
    if with_stats_column:
        fields.append(("stats", pa.string()))
    add_type = pa.struct(fields)
    head = pa.Table.from_pylist(
        [*checkpoint_rows(table.log().snapshot().protocol, md, [], [], [], []), {}, {}, {}],
        schema=CHECKPOINT_SCHEMA,
    ).drop_columns(["add"])
    adds = pa.array(
        [None, None]
        + [
            {"path": f"f{i}", "partitionValues": [("p", "a")], "size": i, "modificationTime": 1}
            | {"dataChange": False}
            for i in range(3)
        ],
        add_type,
    )
    data = head.append_column("add", adds)
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink)
    table.store.write(filenames.checkpoint_name(1), sink.getvalue().to_pybytes())
    snap = table.log().snapshot()
    assert snap.checkpoint_version == 1 and snap.active_files._base is not None
    assert [(f.path, f.partition_values, f.size, f.data_change) for f in snap.files] == [
        (f"f{i}", {"p": "a"}, i, False) for i in range(3)
    ]
    _assert_matches_eager(table, snap)


def test_arrow_file_set_pickles(table: RawTable) -> None:
    table.create(add("a"), add("b", deletion_vector=D1))
    log = table.log()
    log.checkpoint(log.snapshot())
    table.commit(1, [remove("a")])
    snap = table.log().snapshot()
    assert snap.active_files._base is not None
    snap.files  # noqa: B018  (built files are not pickled, the Arrow rows are)
    copy = pickle.loads(pickle.dumps(snap.active_files))
    assert copy.files == snap.files and len(copy) == 1


def test_unreadable_deferred_stats_is_log_corrupted(table: RawTable) -> None:
    table.create(add("a", stats='{"numRecords":1}'))
    log = table.log()
    log.checkpoint(log.snapshot())
    snap = table.log().snapshot()
    base = snap.active_files._base
    assert base is not None and len(base._deferred) == 1
    base._deferred[0].data = b"not parquet"  # type: ignore[attr-defined]
    assert snap.num_files == 1  # count and size do not need the statistics
    with pytest.raises(LogCorruptedError, match="statistics of the checkpoint"):
        snap.files  # noqa: B018


def test_checkpoint_tombstones_replaced_in_place_revived_and_removed_again(table: RawTable) -> None:
    table.create(*(add(f"f{i}") for i in range(8)))
    table.commit(1, [remove(f"f{i}", ts=NOW + i) for i in range(6)])
    log = table.log()
    log.checkpoint(log.snapshot())
    tombs = table.log().snapshot().active_tombstones
    assert tombs._base is not None and tombs._files is None
    table.commit(2, [remove("f1", ts=NOW + 100)])  # replaces the tombstone in place
    table.commit(3, [add("f2"), add("f3")])  # revives: drops the tombstones
    table.commit(4, [remove("f3", ts=NOW + 200), remove("f6", ts=NOW + 300)])  # removed again: appended
    table.commit(5, [remove("f1", ts=NOW + 400), add("f0")])
    for v in range(1, 6):
        _assert_matches_eager(table, table.log().snapshot(v))
    snap = table.log().snapshot()
    assert [(t.path, t.deletion_timestamp - NOW) for t in snap.tombstones] == [
        ("f1", 400),
        ("f4", 4),
        ("f5", 5),
        ("f3", 200),
        ("f6", 300),
    ]


def test_duplicate_tombstones_in_a_checkpoint_keep_the_first_position(table: RawTable) -> None:
    _create_for_handwritten(table)

    def tomb(path: str, ts: int) -> dict:
        return {"remove": {"path": path, "deletionTimestamp": ts, "dataChange": False}}

    rows = [tomb("a", 1), *_head_rows(), tomb("b", 2), tomb("a", 3), _add_row("c", 1), tomb("d", 4)]
    _write_checkpoint_rows(table, 1, rows)
    lazy = read_checkpoint_lazy(table.store, list_log(table.store, 0).checkpoints[0])
    assert lazy.adds is not None and lazy.removes is not None
    snap = table.log().snapshot()
    assert [(t.path, t.deletion_timestamp) for t in snap.tombstones] == [("a", 3), ("b", 2), ("d", 4)]
    _assert_matches_eager(table, snap)
