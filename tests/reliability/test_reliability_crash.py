"""Crash safety: writers killed with SIGKILL mid-operation never damage the table.

Two kinds of kill:

- deterministic fault injection (``DELTAMERGE_FAULT=<point>``, see ``txn/faults.py``): a
  log-layer writer dies after writing its data file but before the commit, after the commit's temp
  file but before the link that publishes it, after the commit but before its checkpoint, and with a
  torn checkpoint at the final name; a Spark writer dies between writing its MERGE/append files and
  the commit;
- random kills: a Spark writer looping MERGEs and appends and log-layer writers looping appends
  and deletes, each killed (whole process group: Python driver and JVM) after a random delay.

After every crash: every version parses and the versions are contiguous, the latest version is
a committed one (no reader sees a partial commit or an orphan file: the rows read are exactly the
serial replay of the committed operations), every acknowledged commit is there, new writers
commit normally, and VACUUM (retentionHours=0, retention check disabled) removes the orphans.
A torn ``_last_checkpoint`` and a partial (truncated) checkpoint are survived.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from typing import Any

import pytest
import reliability_helpers as h

from deltamerge.errors import LogCorruptedError
from deltamerge.log import filenames
from deltamerge.log.checkpoint import read_checkpoint, read_last_checkpoint
from deltamerge.log.replay import CheckpointRef
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.faults import FAULT_POINTS

SEED = 7


def _vacuum(spark, root: str) -> list[str]:  # type: ignore[no-untyped-def]
    from deltamerge import DeltaTable

    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    spark.conf.set(key, "false")
    try:
        DeltaLog.clear_cache()
        return [os.path.relpath(r[0], root) for r in DeltaTable.forPath(spark, root).vacuum(0).collect()]
    finally:
        spark.conf.unset(key)


def _spark_rows(spark, root: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    import deltamerge

    DeltaLog.clear_cache()
    return sorted(
        tuple(r) for r in deltamerge.read(spark, root).select("id", "w", "op", "val", "p").collect()
    )


def _staging_dirs(root: str) -> list[str]:
    return [n for n in os.listdir(root) if n.startswith(".dm-staging-")]


def verify(root: str, own: dict[str, str], workers: list[h.Worker]) -> h.Replay:
    """Invariants after any crash: well-formed log, rows == serial replay, acknowledged commits kept."""
    assert h.check_log_files(root) == []
    # A writer may still be committing: compare everything at one version.
    version = DeltaLog(root).latest_version()
    state, committed = h.replay(root, SEED, 1, own, upto=version)
    assert state.problems == [], "\n".join(state.problems[:10])
    assert h.table_rows(root, version) == state.sorted_rows(), (
        "readers see rows the committed operations did not write"
    )
    in_log = {(c.w, c.op): c.version for c in committed}
    for wk in workers:
        for e in wk.journal:
            if e["ev"] == "done" and e["version"] is not None and e["version"] <= version:
                assert in_log.get((e["w"], e["op"])) == e["version"], f"acknowledged commit lost: {e}"
            assert e["ev"] != "error", f"writer {wk.name} failed: {e.get('trace')}"
    return state


# --- deterministic fault points ------------------------------------------------------------------------


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_fault_point_in_log_writer(tmp_path, spark, point: str) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "t")
    h.create_table(root, {"delta.checkpointInterval": "2"}, h.initial_rows(["sh"]))
    h.log_append(
        root, h.OpPlan("l1", 0, "append", 0, "sh", tuple(h.append_rows("l1", 0, "sh", 2, random.Random(1))))
    )
    before = h.table_rows(root)
    wk = h.start_worker(
        str(tmp_path / "w"),
        "l2",
        env={"DELTAMERGE_FAULT": point},
        role="append_once",
        w="l2",
        part="sh",
        tables=[root],
        seed=SEED,
    )
    assert wk.proc.wait(timeout=120) == -signal.SIGKILL, wk.output_tail()
    new_rows = sorted(h.fixed_rows("l2", "sh", SEED))
    log_dir = os.path.join(root, "_delta_log")
    DeltaLog.clear_cache()
    latest = DeltaLog(root).latest_version()
    if point in ("before_commit_write", "after_tmp_write_before_link"):
        assert latest == 1
        expected = before
        orphans = h.orphan_data_files(root)
        assert len(orphans) == 1, orphans  # the data file of the commit that never happened
        tmp = [n for n in os.listdir(log_dir) if n.startswith(".") and n.endswith(".tmp")]
        assert bool(tmp) == (point == "after_tmp_write_before_link"), tmp
    else:
        assert latest == 2
        expected = sorted(before + new_rows)
        assert h.orphan_data_files(root) == []
        ckpt = os.path.join(log_dir, filenames.checkpoint_name(2))
        if point == "before_checkpoint":
            assert not os.path.exists(ckpt)
        else:
            assert os.path.getsize(ckpt) > 0
            with pytest.raises(LogCorruptedError, match="cannot be read"):
                read_checkpoint(
                    DeltaLog(root).store, CheckpointRef(2, (filenames.checkpoint_name(2),), "classic")
                )
            hint = read_last_checkpoint(DeltaLog(root).store)
            assert hint is None or hint.version < 2  # the hint never points at the torn file
    assert h.check_log_files(root) == []
    assert h.table_rows(root) == expected
    assert _spark_rows(spark, root) == expected
    if point != "mid_checkpoint":  # delta-rs trusts a listed checkpoint; ours falls back past a torn one
        import deltalake

        rs = deltalake.DeltaTable(root).to_pyarrow_table().to_pydict()
        assert sorted(zip(rs["id"], rs["w"], rs["op"], rs["val"], rs["p"], strict=True)) == expected
    # Writers go on: two more commits (one of them due a checkpoint) after the crash.
    more = []
    for op in (1, 2):
        plan = h.OpPlan(
            "l3", op, "append", 0, "sh", tuple(h.append_rows("l3", op, "sh", 2, random.Random(op)))
        )
        h.log_append(root, plan)
        more += plan.rows
    expected = sorted(expected + more)
    DeltaLog.clear_cache()
    assert DeltaLog(root).latest_version() == latest + 2
    assert h.table_rows(root) == expected
    deleted = _vacuum(spark, root)
    assert h.orphan_data_files(root) == []
    assert len(deleted) == (1 if latest == 1 else 0), deleted
    assert _spark_rows(spark, root) == expected


# --- random kills --------------------------------------------------------------------------------------


def crash_campaign(workdir: str, spark, *, spark_cycles: int, max_delay: float) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Spark writers (first one fault-injected before its first commit, then killed at random) while
    log writers are killed at random; invariants checked after every kill."""
    root = os.path.join(workdir, "t")
    h.create_table(
        root,
        {"delta.checkpointInterval": "3", "delta.isolationLevel": "Serializable"},
        h.initial_rows(["sh", "m0"]),
    )
    rng = random.Random(SEED)
    own: dict[str, str] = {}
    workers: list[h.Worker] = []
    stats: Counter[str] = Counter()
    log_cycle = 0
    try:
        for cycle in range(spark_cycles + 1):
            name = f"s{cycle}"
            own[name] = "0"
            env = {"DELTAMERGE_FAULT": "before_commit_write"} if cycle == 0 else None
            sw = h.start_worker(
                workdir, name, env=env, role="spark", w=name, tables=[root], seed=SEED, own="0", app_retries=5
            )
            workers.append(sw)
            h.wait_ready([sw], timeout=300)
            kill_at = time.time() + (60 if cycle == 0 else rng.uniform(0.5, max_delay))
            while time.time() < kill_at and sw.proc.poll() is None:
                lname = f"l{log_cycle}"
                log_cycle += 1
                own[lname] = "0"
                lw = h.start_worker(
                    workdir, lname, role="log", w=lname, tables=[root], seed=SEED, own="0", pause=0.02
                )
                workers.append(lw)
                h.wait_ready([lw], timeout=120)
                deadline = time.time() + rng.uniform(0.05, 1.5)
                while time.time() < deadline and lw.proc.poll() is None:
                    time.sleep(0.02)
                lw.kill()
                stats["log_writer_kills"] += 1
                stats["log_writer_in_flight"] += _in_flight(lw)
                verify(root, own, workers)
            if cycle == 0:
                assert sw.proc.wait(timeout=300) == -signal.SIGKILL, sw.output_tail()
                stats["fault_injected"] += 1
                assert _in_flight(sw) == 1
                # The driver killed itself; its JVM notices the closed gateway and exits on its own.
                stats["jvm_outlived_driver"] += not _group_gone(sw.proc.pid, timeout=20)
            else:
                stats["spark_writer_kills"] += sw.proc.poll() is None
            sw.kill()
            stats["spark_in_flight"] += _in_flight(sw)
            stats["staging_dirs_left"] += len(_staging_dirs(root))
            stats["orphan_files_seen"] = max(stats["orphan_files_seen"], len(h.orphan_data_files(root)))
            verify(root, own, workers)
            assert _group_gone(sw.proc.pid, timeout=30), "the killed writer's JVM is still running"
    finally:
        for wk in workers:  # a failed check must not leave writers running
            if wk.proc.poll() is None:
                wk.kill()
    state = verify(root, own, workers)
    assert _spark_rows(spark, root) == state.sorted_rows()
    committed = h.identify_versions(root)  # before VACUUM deletes the removed files it reads
    orphans_before = h.orphan_data_files(root)
    deleted = _vacuum(spark, root)
    assert h.orphan_data_files(root) == []
    assert _staging_dirs(root) == []
    assert set(orphans_before) <= set(deleted)
    assert h.table_rows(root) == state.sorted_rows() == _spark_rows(spark, root)
    stats["versions"] = len(committed)
    stats["committed_by_kind"] = dict(Counter(c.kind for c in committed))  # type: ignore[assignment]
    stats["orphans_vacuumed"] = len(orphans_before)
    stats["rows"] = len(state.rows)
    stats["spark_cycles"] = spark_cycles + 1
    return dict(stats)


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are still running (zombies do not count)."""
    if not os.path.isdir("/proc"):
        return []
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(pid))
    return out


def _group_gone(pgid: int, timeout: float) -> bool:
    end = time.time() + timeout
    while _live_members(pgid):
        if time.time() > end:
            return False
        time.sleep(0.2)
    return True


def _in_flight(wk: h.Worker) -> int:
    """1 when the writer was killed inside an operation (last event a start)."""
    events = [e for e in wk.journal if e["ev"] in ("start", "done", "conflict", "skip", "error")]
    return int(bool(events) and events[-1]["ev"] == "start")


def test_random_kills(tmp_path, spark) -> None:  # type: ignore[no-untyped-def]
    # `make test` runs the fault-injected Spark writer (killed just before its commit write) under
    # randomly killed log writers; DELTAMERGE_CRASH_SPARK_CYCLES=1 (`make test-full`) adds a Spark
    # writer killed at a random moment, and `make soak` twenty of them.
    cycles = int(os.environ.get("DELTAMERGE_CRASH_SPARK_CYCLES", "0"))
    stats = crash_campaign(str(tmp_path), spark, spark_cycles=cycles, max_delay=10)
    print("\ncrash summary:", json.dumps(stats))
    assert stats["fault_injected"] == 1
    assert stats["log_writer_kills"] >= 1


@pytest.mark.soak
def test_soak_random_kills(tmp_path, spark) -> None:  # type: ignore[no-untyped-def]
    stats = crash_campaign(
        str(tmp_path), spark, spark_cycles=h.soak_int("DELTAMERGE_SOAK_KILLS", 20), max_delay=15
    )
    print("\nsoak crash summary:", json.dumps(stats))
    out = os.environ.get("DELTAMERGE_SOAK_REPORT")
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"crash": stats}) + "\n")
    assert stats["spark_in_flight"] >= 1


# --- torn _last_checkpoint, partial checkpoints --------------------------------------------------------


def _checkpointed_table(root: str, commits: int = 5) -> list[h.Row]:
    h.create_table(root, {"delta.checkpointInterval": "2"}, h.initial_rows(["sh"]))
    for op in range(commits):
        h.log_append(
            root,
            h.OpPlan("l1", op, "append", 0, "sh", tuple(h.append_rows("l1", op, "sh", 2, random.Random(op)))),
        )
    DeltaLog.clear_cache()
    return h.table_rows(root)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"version":4,"si',
        b"\x00\xff garbage",
        b'{"version": 99, "size": 3}',
        b'{"version": 3}',
        b'{"size": 1}',
        b"[]",
    ],
    ids=["empty", "truncated", "binary", "past-the-end", "no-checkpoint-there", "no-version", "wrong-shape"],
)
def test_torn_last_checkpoint_is_survived(tmp_path, spark, content: bytes) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "t")
    expected = _checkpointed_table(root)
    with open(os.path.join(root, "_delta_log", filenames.LAST_CHECKPOINT), "wb") as fh:
        fh.write(content)
    DeltaLog.clear_cache()
    assert DeltaLog(root).snapshot().version == 5
    assert h.table_rows(root) == expected
    assert _spark_rows(spark, root) == expected
    plan = h.OpPlan("l2", 0, "append", 0, "sh", tuple(h.append_rows("l2", 0, "sh", 1, random.Random(0))))
    assert h.log_append(root, plan) == 6  # writers go on, and checkpoint version 6
    DeltaLog.clear_cache()
    assert os.path.exists(os.path.join(root, "_delta_log", filenames.checkpoint_name(6)))
    snap = DeltaLog(root).snapshot()
    assert (snap.version, snap.checkpoint_version) == (6, 6)
    assert h.table_rows(root) == sorted(expected + list(plan.rows))


@pytest.mark.parametrize("cut", [0, 4, 100, -8], ids=["empty", "magic-only", "head", "no-footer"])
def test_partial_checkpoint_is_survived(tmp_path, spark, cut: int) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path / "t")
    expected = _checkpointed_table(root)
    name = os.path.join(root, "_delta_log", filenames.checkpoint_name(4))
    with open(name, "rb") as fh:
        data = fh.read()
    with open(name, "wb") as fh:  # _last_checkpoint still points at it
        fh.write(data[:cut])
    DeltaLog.clear_cache()
    assert read_last_checkpoint(DeltaLog(root).store).version == 4  # type: ignore[union-attr]
    snap = DeltaLog(root).snapshot()
    assert snap.version == 5 and snap.checkpoint_version in (2, None)
    assert h.table_rows(root) == expected
    assert _spark_rows(spark, root) == expected
    # Without the commits the older checkpoint needs, the error names the file and says what to do.
    for v in range(4):
        os.remove(os.path.join(root, "_delta_log", filenames.commit_name(v)))
    os.remove(os.path.join(root, "_delta_log", filenames.checkpoint_name(2)))
    DeltaLog.clear_cache()
    with pytest.raises(LogCorruptedError) as err:
        DeltaLog(root).snapshot()
    text = str(err.value)
    assert filenames.checkpoint_name(4) in text and "cannot be read" in text and "Delete it" in text
