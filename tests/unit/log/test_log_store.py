"""LocalLogStore: atomic put-if-absent, listing, overwrite."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from deltamerge.log.store import LocalLogStore, LogStore


def test_local_store_is_a_log_store(tmp_path: Path) -> None:
    assert isinstance(LocalLogStore(str(tmp_path)), LogStore)


def test_write_exclusive_creates_and_refuses_existing(tmp_path: Path) -> None:
    store = LocalLogStore(str(tmp_path))
    store.write_exclusive("00000000000000000000.json", b"first")
    with pytest.raises(FileExistsError):
        store.write_exclusive("00000000000000000000.json", b"second")
    assert store.read("00000000000000000000.json") == b"first"
    # No temp files are left behind, win or lose.
    assert os.listdir(tmp_path / "_delta_log") == ["00000000000000000000.json"]


def test_list_from_is_sorted_skips_hidden_and_tolerates_missing_dir(tmp_path: Path) -> None:
    store = LocalLogStore(str(tmp_path))
    assert store.list_from("") == []
    for name in ["00000000000000000002.json", "00000000000000000000.json", "_last_checkpoint"]:
        store.write(name, b"x")
    (tmp_path / "_delta_log" / ".00000000000000000003.json.abc.tmp").write_bytes(b"partial")
    (tmp_path / "_delta_log" / "_sidecars").mkdir()
    assert store.list_from("") == [
        "00000000000000000000.json",
        "00000000000000000002.json",
        "_last_checkpoint",
    ]
    assert store.list_from("00000000000000000001") == ["00000000000000000002.json", "_last_checkpoint"]


def test_write_overwrites_atomically_and_delete(tmp_path: Path) -> None:
    store = LocalLogStore(str(tmp_path))
    store.write("_last_checkpoint", b"1")
    store.write("_last_checkpoint", b"2")
    assert store.read("_last_checkpoint") == b"2"
    with pytest.raises(FileExistsError):
        store.write("_last_checkpoint", b"3", overwrite=False)
    store.delete("_last_checkpoint")
    store.delete("_last_checkpoint")  # missing is fine
    assert not store.exists("_last_checkpoint")
    with pytest.raises(FileNotFoundError):
        store.read("_last_checkpoint")


def test_mtime_in_milliseconds(tmp_path: Path) -> None:
    store = LocalLogStore(str(tmp_path))
    store.write_exclusive("x.json", b"{}")
    os.utime(store.path("x.json"), ns=(1_600_000_000_123_000_000, 1_600_000_000_123_000_000))
    assert store.mtime("x.json") == 1_600_000_000_123


def test_racing_exclusive_writers_exactly_one_wins(tmp_path: Path) -> None:
    store = LocalLogStore(str(tmp_path))
    n = 16
    barrier = threading.Barrier(n)
    wins: list[int] = []
    losses: list[int] = []

    def writer(i: int) -> None:
        barrier.wait()
        try:
            store.write_exclusive("00000000000000000001.json", f"writer {i}".encode() * 1000)
            wins.append(i)
        except FileExistsError:
            losses.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == n - 1
    assert store.read("00000000000000000001.json") == f"writer {wins[0]}".encode() * 1000
    assert store.list_from("") == ["00000000000000000001.json"]
