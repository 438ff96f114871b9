"""Measuring one run: wall time, peak memory (RSS of this Python process and of the Spark JVM, sampled
from /proc), bytes read and written by those processes (/proc/<pid>/io ``rchar``/``wchar``: every
read/write syscall, so table files, shuffle, spill and local checkpoints all count), and the files a
run added to a table directory."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


def _read_proc(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/{name}") as f:
        return f.read()


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (0 if it is gone)."""
    try:
        for line in _read_proc(pid, "status").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def io_bytes(pid: int) -> tuple[int, int]:
    """``(rchar, wchar)`` of ``pid``."""
    try:
        vals = dict(line.split(": ") for line in _read_proc(pid, "io").splitlines())
        return int(vals["rchar"]), int(vals["wchar"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def descendants(pid: int) -> list[int]:
    """All live descendant pids of ``pid`` (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = _read_proc(int(entry), "stat")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def jvm_pids() -> list[int]:
    """The JVM(s) started by this Python process (PySpark's gateway)."""
    out = []
    for p in descendants(os.getpid()):
        try:
            if "java" in _read_proc(p, "cmdline").split("\0")[0]:
                out.append(p)
        except OSError:
            continue
    return out


@dataclass
class RunStats:
    """One measured run."""

    seconds: float
    peak_rss_py: int
    peak_rss_jvm: int
    read_bytes: int  # rchar of python + JVM
    write_bytes: int  # wchar of python + JVM
    files_read: int | None = None  # table data files the engine read (logical)
    bytes_read: int | None = None  # their sizes
    files_written: int = 0  # files the run added under the table directory (data, DVs, log)
    bytes_written: int = 0
    data_files_written: int = 0  # .parquet data files only
    data_bytes_written: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def peak_rss(self) -> int:
        return self.peak_rss_py + self.peak_rss_jvm


class _Sampler:
    def __init__(self, pids: list[int], interval: float = 0.02) -> None:
        self.pids = pids
        self.interval = interval
        self.peaks = dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in self.pids:
                r = rss_bytes(p)
                if r > self.peaks[p]:
                    self.peaks[p] = r
            self._stop.wait(self.interval)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for p in self.pids:  # one last sample
            self.peaks[p] = max(self.peaks[p], rss_bytes(p))


def list_files(root: str) -> dict[str, int]:
    """Relative path -> size of every file below ``root`` (hidden staging dirs included)."""
    out: dict[str, int] = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            if n.endswith(".crc") or n == "_SUCCESS":
                continue  # Hadoop checksum and marker files of the floor's plain Spark write
            p = os.path.join(d, n)
            try:
                out[os.path.relpath(p, root)] = os.path.getsize(p)
            except OSError:
                pass
    return out


def measure(fn: Callable[[], Any], table_dir: str | None = None) -> tuple[RunStats, Any]:
    """Run ``fn`` once and measure it."""
    py = os.getpid()
    jvms = jvm_pids()
    pids = [py, *jvms]
    before_files = list_files(table_dir) if table_dir else {}
    io0 = [io_bytes(p) for p in pids]
    with _Sampler(pids) as sampler:
        t0 = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t0
    io1 = [io_bytes(p) for p in pids]
    stats = RunStats(
        seconds=seconds,
        peak_rss_py=sampler.peaks[py],
        peak_rss_jvm=sum(sampler.peaks[p] for p in jvms),
        read_bytes=sum(b[0] - a[0] for a, b in zip(io0, io1)),
        write_bytes=sum(b[1] - a[1] for a, b in zip(io0, io1)),
    )
    if table_dir:
        after = list_files(table_dir)
        new = {k: v for k, v in after.items() if k not in before_files}
        stats.files_written = len(new)
        stats.bytes_written = sum(new.values())
        data = {k: v for k, v in new.items() if k.endswith(".parquet") and not k.startswith("_delta_log")}
        stats.data_files_written = len(data)
        stats.data_bytes_written = sum(data.values())
    return stats, result


def median_run(runs: list[RunStats]) -> RunStats:
    """The run with the median wall time (its other numbers go with it); peaks are the max."""
    ordered = sorted(runs, key=lambda r: r.seconds)
    mid = ordered[len(ordered) // 2]
    return mid


def median(values: list[float]) -> float:
    return statistics.median(values)


@contextmanager
def load_note() -> Iterator[dict[str, float]]:
    """Load average before and after a block (other processes may share the machine)."""
    note: dict[str, float] = {"before": os.getloadavg()[0]}
    yield note
    note["after"] = os.getloadavg()[0]


def machine_info() -> dict[str, str]:
    """Machine and versions for the report."""
    import duckdb
    import pyarrow
    import pyspark

    import deltalake

    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except OSError:
        java = "?"
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout.split()
        if dirty:
            rev += " + uncommitted changes in " + ", ".join(x for x in dirty if x.startswith("src/"))
    except OSError:
        rev = "?"
    return {
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": java,
        "pyspark": pyspark.__version__,
        "deltalake (delta-rs)": deltalake.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb.__version__,
        "deltamerge commit": rev,
    }
