"""Expired log cleanup (log/cleanup.py, Delta's MetadataCleanup) and its post-commit hook."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from deltamerge.errors import VersionNotFoundError
from deltamerge.log import filenames
from deltamerge.log.cleanup import DAY_MS, cutoff_ms, delete_expired_logs, expired_log_files
from deltamerge.log.snapshot import DeltaLog
from deltamerge.log.store import LocalLogStore
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "txn"))
from txntest_helpers import create_table, new_add

NOW = int(time.time() * 1000)
OLD = NOW - 40 * DAY_MS
CUTOFF = cutoff_ms(NOW, 30 * DAY_MS)


def _log_dir(tmp_path: Path, files: dict[str, int], last_checkpoint: int | None) -> LocalLogStore:
    """A log directory holding ``files`` (name -> mtime in ms); the content is irrelevant."""
    log = tmp_path / "_delta_log"
    log.mkdir()
    for name, mtime in files.items():
        (log / name).write_text("x")
        os.utime(log / name, ns=(mtime * 1_000_000, mtime * 1_000_000))
    if last_checkpoint is not None:
        (log / filenames.LAST_CHECKPOINT).write_text(json.dumps({"version": last_checkpoint, "size": 1}))
    return LocalLogStore(str(tmp_path))


def _commits(versions: range, base: int) -> dict[str, int]:
    # Each version written 10 ms after the one before (identical times would all be "adjusted").
    return {filenames.commit_name(v): base + 10 * v for v in versions}


def _checkpoint(version: int, base: int) -> dict[str, int]:
    return {filenames.checkpoint_name(version): base + 10 * version + 5}


def test_cutoff_is_truncated_to_a_utc_day() -> None:
    assert cutoff_ms(10 * DAY_MS + 5, DAY_MS) == 9 * DAY_MS
    assert cutoff_ms(10 * DAY_MS, DAY_MS) == 9 * DAY_MS


def test_runs_before_a_checkpoint_are_deleted_whole_when_their_last_file_expired(tmp_path: Path) -> None:
    files = {**_commits(range(15), OLD), **_commits(range(15, 26), NOW)}
    files.update({**_checkpoint(10, OLD), **_checkpoint(20, NOW), "00000000000000000003.crc": OLD + 31})
    store = _log_dir(tmp_path, files, last_checkpoint=20)
    # 0..9 (and 3's checksum) end before checkpoint 10 and expired; 10..19 end with 19, which has not.
    assert expired_log_files(store, CUTOFF) == sorted(
        [filenames.commit_name(v) for v in range(10)] + ["00000000000000000003.crc"]
    )


def test_the_newest_checkpoint_and_what_follows_are_kept(tmp_path: Path) -> None:
    files = {
        **_commits(range(26), OLD),
        **_checkpoint(10, OLD),
        **_checkpoint(20, OLD),
    }
    store = _log_dir(tmp_path, files, last_checkpoint=20)
    expected = [filenames.commit_name(v) for v in range(10)] + [filenames.checkpoint_name(10)]
    expected += [filenames.commit_name(v) for v in range(10, 20)]
    assert expired_log_files(store, CUTOFF) == sorted(expected)
    # Without the _last_checkpoint hint nothing is deleted.
    (tmp_path / "_delta_log" / filenames.LAST_CHECKPOINT).unlink()
    assert expired_log_files(store, CUTOFF) == []


def test_a_later_version_is_never_older_than_an_earlier_one(tmp_path: Path) -> None:
    # Commit 9 looks old, but commit 8 is recent: 9 counts as 8's time plus 1 ms (Delta's rule).
    files = {**_commits(range(12), OLD), filenames.commit_name(8): NOW, **_checkpoint(10, OLD)}
    store = _log_dir(tmp_path, files, last_checkpoint=10)
    assert expired_log_files(store, CUTOFF) == []


def test_multi_part_checkpoint_is_a_boundary_once_complete(tmp_path: Path) -> None:
    files = {**_commits(range(8), OLD), **dict.fromkeys(filenames.multipart_checkpoint_names(5, 2), OLD + 55)}
    store = _log_dir(tmp_path, files, last_checkpoint=5)
    assert expired_log_files(store, CUTOFF) == [filenames.commit_name(v) for v in range(5)]
    missing_part = {**_commits(range(8), OLD), filenames.multipart_checkpoint_names(5, 2)[0]: OLD + 55}
    other = tmp_path / "other"
    other.mkdir()
    assert expired_log_files(_log_dir(other, missing_part, last_checkpoint=5), CUTOFF) == []


def _v2_checkpoint(store: LocalLogStore, version: int, sidecars: list[str], mtime: int) -> None:
    lines = [{"checkpointMetadata": {"version": version}}] + [
        {"sidecar": {"path": name, "sizeInBytes": 1, "modificationTime": mtime}} for name in sidecars
    ]
    name = filenames.v2_checkpoint_name(version, f"00000000-0000-0000-0000-{version:012d}", "json")
    store.write(name, "\n".join(json.dumps(x) for x in lines).encode())
    os.utime(store.path(name), ns=(mtime * 1_000_000, mtime * 1_000_000))


def test_unreferenced_old_sidecars_go_when_a_checkpoint_goes(tmp_path: Path) -> None:
    files = {**_commits(range(26), OLD)}
    store = _log_dir(tmp_path, files, last_checkpoint=20)
    _v2_checkpoint(store, 10, ["a.parquet"], OLD + 105)
    _v2_checkpoint(store, 20, ["b%20c.parquet"], OLD + 205)  # URI-encoded, as in the log
    for name, mtime in [
        ("a.parquet", OLD),
        ("b c.parquet", OLD),
        ("stray.parquet", OLD),
        ("new.parquet", NOW),
    ]:
        store.write(f"{filenames.SIDECAR_DIR}/{name}", b"x")
        os.utime(store.path(f"{filenames.SIDECAR_DIR}/{name}"), ns=(mtime * 1_000_000, mtime * 1_000_000))
    deleted = delete_expired_logs(store, 30 * DAY_MS, NOW)
    # Checkpoint 10 and what precedes it go; then its sidecar and the stray one. The newest
    # checkpoint's sidecar stays, and so does a sidecar too young to judge (a checkpoint in progress).
    assert f"{filenames.SIDECAR_DIR}/a.parquet" in deleted
    assert sorted(store.list_dir(filenames.SIDECAR_DIR)) == ["b c.parquet", "new.parquet"]
    assert not store.exists(filenames.v2_checkpoint_name(10, "00000000-0000-0000-0000-000000000010", "json"))


def _age(root: str, days: int) -> None:
    """Date every log file ``days`` back, 10 ms apart in name (= version) order."""
    base = (NOW - days * DAY_MS) * 1_000_000
    for i, p in enumerate(sorted((Path(root) / "_delta_log").iterdir())):
        then = base + i * 10_000_000
        os.utime(p, ns=(then, then))


@pytest.mark.parametrize("enabled", [True, False, "protected"])
def test_checkpointing_commit_deletes_expired_logs(tmp_path: Path, enabled: bool | str) -> None:
    root = str(tmp_path / "t")
    conf = {"delta.checkpointInterval": "3", "delta.enableExpiredLogCleanup": str(enabled is True).lower()}
    if enabled == "protected":  # delta-spark's checkpointProtection: writable, never cleaned up
        conf = {"delta.checkpointInterval": "3", "delta.feature.checkpointProtection": "supported"}
        enabled = False
    log = create_table(root, conf, files=(new_add("a"),))
    for _ in range(6):  # versions 1..6, checkpoints at 3 and 6
        OptimisticTransaction(log).commit([new_add("b")], Operation("WRITE"))
    _age(root, 40)
    for _ in range(3):  # versions 7..9: the checkpoint at 9 cleans up
        OptimisticTransaction(log).commit([new_add("c")], Operation("WRITE"))
    names = sorted(p.name for p in (Path(root) / "_delta_log").iterdir() if not p.name.startswith("_"))
    fresh = DeltaLog(root)
    assert len(fresh.update().files) == 10
    if not enabled:
        assert filenames.commit_name(0) in names
        return
    # The newest checkpoint at or before the cutoff (6) starts the table: 0..5 and checkpoint 3 went.
    assert names[0] == filenames.checkpoint_name(6)
    assert [n for n in names if n.endswith(".json")] == [filenames.commit_name(v) for v in range(6, 10)]
    with pytest.raises(VersionNotFoundError):
        fresh.snapshot(2)
    assert len(fresh.snapshot(7).files) == 8

    import deltalake  # the other engine reads what is left

    assert deltalake.DeltaTable(root).version() == 9
    assert len(deltalake.DeltaTable(root).file_uris()) == 10
    # The hint is only a hint: listing finds the first checkpoint left.
    (Path(root) / "_delta_log" / filenames.LAST_CHECKPOINT).unlink()
    assert len(DeltaLog(root).update().files) == 10
