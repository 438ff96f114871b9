"""Racing writers: put-if-absent gives exactly one winner per version, and every commit lands."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest
from txntest_helpers import create_table, merge, new_add

from deltamerge.log import filenames
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction


def _blind_appends(root: str, writer: int, count: int, shared_log: bool = False) -> list[tuple[int, str]]:
    out = []
    for i in range(count):
        log = DeltaLog.for_table(root) if shared_log else DeltaLog(root)
        txn = OptimisticTransaction(log)
        version = txn.commit([new_add("a", name=f"w{writer}-{i}")], Operation("WRITE", {"writer": writer}))
        out.append((version, f"w{writer}-{i}"))
    return out


def _check_log(root: str, expected_names: set[str], initial_versions: int = 1) -> None:
    log = DeltaLog(root)
    snap = log.snapshot()
    assert snap.version == initial_versions - 1 + len(expected_names)
    txn_ids = []
    for v in range(initial_versions, snap.version + 1):
        lines = [json.loads(x) for x in log.store.read(filenames.commit_name(v)).splitlines()]
        infos = [x["commitInfo"] for x in lines if "commitInfo" in x]
        assert len(infos) == 1  # exactly one writer's payload per version
        txn_ids.append(infos[0]["txnId"])
    assert len(set(txn_ids)) == len(txn_ids)
    names = {f.path.split("/")[-1].removesuffix(".parquet") for f in snap.files}
    assert names == expected_names
    assert not [n for n in log.store.list_from("") if n.startswith(".")]


@pytest.mark.parametrize("shared_log", [False, True])
def test_threads_racing_blind_appends(tmp_path: Path, shared_log: bool) -> None:
    root = str(tmp_path / "t")
    create_table(root, {"delta.checkpointInterval": "5"})  # checkpoints are written while others commit
    writers, per_writer = 6, 5
    results: list[list[tuple[int, str]]] = [[] for _ in range(writers)]
    barrier = threading.Barrier(writers)

    def run(w: int) -> None:
        barrier.wait()
        results[w] = _blind_appends(root, w, per_writer, shared_log)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = sorted(v for r in results for v, _ in r)
    assert versions == list(range(1, writers * per_writer + 1))  # contiguous, each won exactly once
    _check_log(root, {name for r in results for _, name in r})
    assert Path(root, "_delta_log", filenames.checkpoint_name(30)).exists()


def _process_main(root: str, writer: int, count: int, queue) -> None:  # pragma: no cover - child process
    queue.put(_blind_appends(root, writer, count))


def test_processes_racing_blind_appends(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(root, w, 4, queue)) for w in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    versions = sorted(v for r in results for v, _ in r)
    assert versions == list(range(1, 17))
    _check_log(root, {name for r in results for _, name in r})


def test_dml_on_disjoint_partitions_all_commit(tmp_path: Path) -> None:
    parts = ["a", "b", "c", "d"]
    root = str(tmp_path / "t")
    create_table(root, {"delta.isolationLevel": "Serializable"}, files=tuple(new_add(p) for p in parts))
    txns = [OptimisticTransaction(DeltaLog(root)) for _ in parts]
    staged = [merge(txn, p) for txn, p in zip(txns, parts, strict=True)]
    barrier = threading.Barrier(len(parts))
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            txns[i].commit(*staged[i])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(parts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(t.committed_version or 0 for t in txns) == [1, 2, 3, 4]
    assert len(DeltaLog(root).snapshot().files) == len(parts)


def test_commits_racing_with_checkpoints(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root, {"delta.checkpointInterval": "1000"})
    stop = threading.Event()
    checkpoint_errors: list[BaseException] = []

    def checkpointer() -> None:
        log = DeltaLog(root)
        while not stop.is_set():
            try:
                log.checkpoint(log.update())
            except BaseException as e:  # pragma: no cover - reported below
                checkpoint_errors.append(e)
                return

    t = threading.Thread(target=checkpointer)
    t.start()
    try:
        names = {name for _, name in _blind_appends(root, 0, 25)}
    finally:
        stop.set()
        t.join()
    assert checkpoint_errors == []
    _check_log(root, names)
    # Whatever checkpoint is newest, a fresh reader reconstructs the same state.
    assert {f.path for f in DeltaLog(root).snapshot().files} == {f"p=a/{n}.parquet" for n in names}
