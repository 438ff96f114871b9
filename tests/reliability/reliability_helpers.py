"""Shared by the reliability tests and their writer processes (``reliability_worker.py``).

The workload is designed so that the serial replay of the committed operations is computable:

- every row is ``(id, w, op, val, p)``: ``w`` is the writer, ``op`` the operation number that wrote it;
- appends insert rows with ids unique to ``(writer, op)`` (:func:`append_rows`);
- merges upsert/delete ids of a small per-partition *pool* (so merges collide), with
  ``ON t.p = '<p>' AND t.id = s.id``: a matched ``D`` row is deleted, a matched ``U`` row updated,
  an unmatched ``U`` row inserted;
- log-layer deletes rewrite one live file without some of its rows and record the ids they
  deleted in ``commitInfo.userMetadata``;
- delta-rs writers (``r<i>``, the ``deltalake`` package, another engine on the same log) merge as
  the Spark writers do, append, and run ``DELETE ... WHERE p = '<p>' AND id % 5 = <k>``, saying
  which operation they are in ``commitInfo.userMetadata``; the replay deletes what that predicate
  holds at the commit's place in the serial order.

The content of every append and merge is a pure function of ``(seed, writer, op)``
(:func:`plan_op`), so the replay needs only to know which operation each version committed: log
and delta-rs writers say so in ``userMetadata``, Spark merges in their ``txn`` action
(idempotent-write app id), Spark appends in the ``w``/``op`` columns of the rows they added
(:func:`identify_versions`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import urllib.parse
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltamerge.log import filenames
from deltamerge.log.actions import AddFile, CommitInfo, Metadata, SetTransaction
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "w", "type": "string", "nullable": True, "metadata": {}},
        {"name": "op", "type": "long", "nullable": True, "metadata": {}},
        {"name": "val", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}
DDL = "id long, w string, op long, val long, p string"
DATA_SCHEMA = pa.schema([("id", pa.int64()), ("w", pa.string()), ("op", pa.int64()), ("val", pa.int64())])
POOL = 24  # pool ids per partition that merges upsert and delete
DELETE_MODULUS = 5  # delta-rs deletes take the ids of one residue class of a partition
APP_ID_PREFIX = "dm-reliability-"

Row = tuple[int, str, int, int, str]  # id, w, op, val, p


def soak_int(name: str, default: int) -> int:
    """An integer soak setting from the environment (``make soak``)."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


# --- ids and operation plans ---------------------------------------------------------------------------


def pool_id(part: str, k: int) -> int:
    """The ``k``-th pool id of partition ``part`` (unique across partitions)."""
    return (zlib.crc32(part.encode()) % 1_000_000) * 1_000 + k


def writer_code(w: str) -> int:
    """A number per writer name (``s0``, ``l3``, ``r1``...), part of the ids its appends insert."""
    return {"s": 100, "l": 500, "r": 900}[w[0]] + int(w[1:])


def append_rows(w: str, op: int, part: str, n: int, rng: random.Random) -> list[Row]:
    """Rows with ids nobody else ever writes."""
    base = 10**12 + writer_code(w) * 10**8 + op * 100
    return [(base + k, w, op, rng.randint(0, 10**6), part) for k in range(n)]


@dataclass(frozen=True)
class OpPlan:
    """What one operation does (deterministic from ``(seed, writer, op)``)."""

    w: str
    op: int
    kind: str  # "merge" | "append" | "delete" | "delete_where"
    table: int  # index into the scenario's tables
    part: str
    rows: tuple[Row, ...] = ()
    merge_kinds: tuple[str, ...] = ()  # "U" / "D" per row of a merge
    residue: int = 0  # delete_where: the rows of ``part`` with ``id % DELETE_MODULUS == residue``

    @property
    def predicate(self) -> str:
        """A ``delete_where``'s predicate (SQL)."""
        return f"p = '{self.part}' AND id % {DELETE_MODULUS} = {self.residue}"

    def to_json(self) -> dict[str, Any]:
        return {"w": self.w, "op": self.op, "kind": self.kind, "table": self.table, "part": self.part}


def plan_op(seed: int, w: str, op: int, n_tables: int, own: str | None = None) -> OpPlan:
    """The operation ``op`` of writer ``w``.

    Spark writers (``s<i>``) merge (60%) into their own partition ``m<i>`` or the shared ``sh``, or
    append into ``a<i>`` or ``sh``. Log writers (``l<i>``) append (60%) or delete in ``l<i>`` or ``sh``.
    delta-rs writers (``r<i>``) merge (40%), append (30%) or delete by predicate in ``r<i>`` or ``sh``.
    ``own`` overrides the writer's own partition suffix (crash tests restart writers under new names).
    """
    rng = random.Random(f"{seed}/{w}/{op}")
    table = op % n_tables
    suffix = own if own is not None else w[1:]
    shared = rng.random() < 0.5
    if w.startswith("r"):
        part = "sh" if shared else f"r{suffix}"
        draw = rng.random()
        if draw < 0.4:
            return _merge_plan(rng, w, op, table, part)
        if draw < 0.7:
            return OpPlan(w, op, "append", table, part, tuple(append_rows(w, op, part, 3, rng)))
        return OpPlan(w, op, "delete_where", table, part, residue=rng.randrange(DELETE_MODULUS))
    if w.startswith("s"):
        if rng.random() < 0.6:
            return _merge_plan(rng, w, op, table, "sh" if shared else f"m{suffix}")
        part = "sh" if shared else f"a{suffix}"
        return OpPlan(w, op, "append", table, part, tuple(append_rows(w, op, part, 5, rng)))
    part = "sh" if shared else f"l{suffix}"
    if rng.random() < 0.6:
        return OpPlan(w, op, "append", table, part, tuple(append_rows(w, op, part, 3, rng)))
    return OpPlan(w, op, "delete", table, part)


def _merge_plan(rng: random.Random, w: str, op: int, table: int, part: str) -> OpPlan:
    """Six pool ids of ``part``, each deleted (30%) or upserted."""
    ks = rng.sample(range(POOL), 6)
    kinds = tuple("D" if rng.random() < 0.3 else "U" for _ in ks)
    rows = tuple((pool_id(part, k), w, op, rng.randint(0, 10**6), part) for k in ks)
    return OpPlan(w, op, "merge", table, part, rows, kinds)


# --- tables --------------------------------------------------------------------------------------------


def initial_rows(parts: Iterable[str]) -> list[Row]:
    """Version 0: the pool ids of every merged partition, so the first merges update rows."""
    return [(pool_id(p, k), "init", 0, k, p) for p in parts for k in range(0, POOL, 2)]


def write_data_file(root: str, part: str, rows: list[Row]) -> AddFile:
    """Write ``rows`` (all in ``part``) as one Parquet data file; its AddFile with stats."""
    from deltamerge.stats import stats_from_parquet_metadata

    rel = f"p={part}/part-{uuid.uuid4().hex}.snappy.parquet"
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "w": pa.array([r[1] for r in rows], pa.string()),
            "op": pa.array([r[2] for r in rows], pa.int64()),
            "val": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
    pq.write_table(table, path, compression="snappy")
    st = os.stat(path)
    stats = stats_from_parquet_metadata(pq.read_metadata(path), SCHEMA, ["p"], {})
    return AddFile(
        rel, {"p": part}, size=st.st_size, modification_time=st.st_mtime_ns // 1_000_000, stats=stats
    )


def create_table(root: str, configuration: dict[str, str], rows: list[Row]) -> None:
    """Version 0 of a table partitioned by ``p``, holding ``rows`` (one file per partition)."""
    by_part: dict[str, list[Row]] = {}
    for r in rows:
        by_part.setdefault(r[4], []).append(r)
    adds = [write_data_file(root, p, rs) for p, rs in sorted(by_part.items())]
    txn = OptimisticTransaction(DeltaLog(root))
    txn.update_metadata(
        Metadata(
            id="", schema_string=json.dumps(SCHEMA), partition_columns=("p",), configuration=configuration
        )
    )
    txn.commit(
        adds, Operation("CREATE TABLE", {"partitionBy": ["p"]}), user_metadata=json.dumps({"w": "init"})
    )


def file_path(root: str, add_path: str) -> str:
    """Local path of an ``add.path`` (URI-decoded once)."""
    return os.path.join(root, urllib.parse.unquote(add_path))


def read_file_rows(root: str, add: AddFile) -> list[Row]:
    """The rows of one data file, partition value from the log."""
    t = pq.read_table(file_path(root, add.path), columns=["id", "w", "op", "val"]).to_pydict()
    part = add.partition_values.get("p")
    return [(i, w, o, v, part) for i, w, o, v in zip(t["id"], t["w"], t["op"], t["val"], strict=True)]  # type: ignore[misc]


def table_rows(root: str, version: int | None = None) -> list[Row]:
    """Every row of the table (fresh log read; no cache), sorted."""
    snap = DeltaLog(root).snapshot(version)
    out: list[Row] = []
    for f in snap.files:
        out += read_file_rows(root, f)
    return sorted(out)


# --- operations through the log layer ------------------------------------------------------------------


def log_append(root: str, plan: OpPlan) -> int:
    """A blind append through :class:`OptimisticTransaction` (files written first, then the commit)."""
    add = write_data_file(root, plan.part, list(plan.rows))
    txn = OptimisticTransaction(DeltaLog.for_table(root))
    try:
        return txn.commit(
            [add],
            Operation("WRITE", {"mode": "Append", "partitionBy": ["p"]}),
            user_metadata=json.dumps({**plan.to_json(), "ids": []}),
        )
    except BaseException:
        os.remove(file_path(root, add.path))
        raise


def log_delete(root: str, plan: OpPlan, rng: random.Random) -> int | None:
    """DELETE some rows of one live file of ``plan.part``: remove it, add the rest as a new file.

    Records a read predicate on the partition and the file read, as a DELETE does. Returns None
    when the partition has no file.
    """
    txn = OptimisticTransaction(DeltaLog.for_table(root))
    assert txn.snapshot is not None
    files = sorted(
        (f for f in txn.snapshot.files if f.partition_values.get("p") == plan.part), key=lambda f: f.path
    )
    txn.add_read_predicate(lambda f: f.partition_values.get("p") == plan.part, f"p = '{plan.part}'")
    if not files:
        return None
    victim = rng.choice(files)
    txn.add_read_files([victim])
    rows = read_file_rows(root, victim)
    doomed = set(rng.sample([r[0] for r in rows], max(1, len(rows) // 2)))
    rest = [r for r in rows if r[0] not in doomed]
    actions: list[Any] = [victim.remove(int(time.time() * 1000))]
    new = write_data_file(root, plan.part, rest) if rest else None
    if new is not None:
        actions.append(new)
    try:
        return txn.commit(
            actions,
            Operation("DELETE", {"predicate": [f"p = '{plan.part}' AND id IN (...)"]}),
            user_metadata=json.dumps({**plan.to_json(), "ids": sorted(doomed)}),
        )
    except BaseException:
        if new is not None:
            os.remove(file_path(root, new.path))
        raise


# --- which operation each version committed ------------------------------------------------------------


@dataclass
class Committed:
    """One committed version and the operation it belongs to."""

    version: int
    w: str
    op: int
    kind: str
    read_version: int | None
    operation: str
    ids: tuple[int, ...] = ()  # log deletes: the ids deleted


def identify_versions(root: str, upto: int | None = None) -> list[Committed]:
    """Versions 1..``upto`` (default: latest) with the ``(writer, op)`` each committed, from the log alone."""
    log = DeltaLog(root)
    latest = log.latest_version() if upto is None else upto
    out: list[Committed] = []
    for v in range(1, latest + 1):
        actions = log.read_commit(v)
        info = next(a for a in actions if isinstance(a, CommitInfo))
        raw = info.raw
        read_version = raw.get("readVersion")
        if raw.get("userMetadata"):
            meta = json.loads(raw["userMetadata"])
            out.append(
                Committed(
                    v,
                    meta["w"],
                    meta["op"],
                    meta["kind"],
                    read_version,
                    info.operation or "",
                    tuple(meta["ids"]),
                )
            )
            continue
        if info.operation == "MERGE":
            txns = [
                a for a in actions if isinstance(a, SetTransaction) and a.app_id.startswith(APP_ID_PREFIX)
            ]
            assert len(txns) == 1, f"MERGE version {v} has no reliability txn action"
            out.append(
                Committed(
                    v, txns[0].app_id[len(APP_ID_PREFIX) :], txns[0].version, "merge", read_version, "MERGE"
                )
            )
            continue
        adds = [a for a in actions if isinstance(a, AddFile)]
        assert info.operation == "WRITE" and adds, f"version {v}: unexpected operation {info.operation}"
        tags = {(r[1], r[2]) for a in adds for r in read_file_rows(root, a)}
        assert len(tags) == 1, f"append version {v} holds rows of several operations: {tags}"
        w, op = tags.pop()
        out.append(Committed(v, w, op, "append", read_version, "WRITE"))
    return out


# --- the serial replay ---------------------------------------------------------------------------------


@dataclass
class Replay:
    """Expected table state after applying committed operations in version order."""

    rows: dict[int, Row] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def apply(self, c: Committed, plan: OpPlan) -> None:
        if c.kind == "append":
            for r in plan.rows:
                if r[0] in self.rows:
                    self.problems.append(f"v{c.version}: append of {c.w}/{c.op} re-inserts id {r[0]}")
                self.rows[r[0]] = r
        elif c.kind == "merge":
            for r, k in zip(plan.rows, plan.merge_kinds, strict=True):
                cur = self.rows.get(r[0])
                if cur is not None and k == "D":
                    del self.rows[r[0]]
                elif cur is not None:
                    self.rows[r[0]] = (r[0], r[1], r[2], r[3], cur[4])
                elif k == "U":
                    self.rows[r[0]] = r
        elif c.kind == "delete_where":
            for i, cur in list(self.rows.items()):
                if cur[4] == plan.part and i % DELETE_MODULUS == plan.residue:
                    del self.rows[i]
        elif c.kind == "delete":
            for i in c.ids:
                cur = self.rows.pop(i, None)
                if cur is None or cur[4] != plan.part:
                    self.problems.append(
                        f"v{c.version}: delete of {c.w}/{c.op} removed id {i}, which the serial order "
                        f"does not have in partition {plan.part} (lost update or resurrected row)"
                    )
        else:  # pragma: no cover
            raise AssertionError(c.kind)

    def sorted_rows(self) -> list[Row]:
        return sorted(self.rows.values())


def replay(
    root: str, seed: int, n_tables: int, own: dict[str, str] | None = None, upto: int | None = None
) -> tuple[Replay, list[Committed]]:
    """The serial replay of the committed versions of ``root`` (up to ``upto``) on top of version 0."""
    state = Replay({r[0]: r for r in table_rows(root, 0)})
    committed = identify_versions(root, upto)
    seen: set[tuple[str, int]] = set()
    for c in committed:
        if (c.w, c.op) in seen:
            state.problems.append(f"operation {c.w}/{c.op} committed twice (second at v{c.version})")
        seen.add((c.w, c.op))
        plan = plan_op(seed, c.w, c.op, n_tables, (own or {}).get(c.w))
        if c.kind != plan.kind:
            state.problems.append(f"v{c.version}: {c.w}/{c.op} committed a {c.kind}, planned a {plan.kind}")
            continue
        state.apply(c, plan)
    return state, committed


# --- journals ------------------------------------------------------------------------------------------


def read_journal(path: str) -> list[dict[str, Any]]:
    """Events a writer journaled (a torn last line from a killed writer is skipped)."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def check_log_files(root: str) -> list[str]:
    """Problems with the log: gaps, unparsable commits, several commitInfos, listed temp files."""
    log = DeltaLog(root)
    problems = []
    names = log.store.list_from("")
    versions = sorted(v for n in names if (v := filenames.commit_version(n)) is not None)
    if versions != list(range(len(versions))):
        problems.append(f"versions are not contiguous from 0: {versions[:5]}...{versions[-5:]}")
    for v in versions:
        infos = [a for a in log.read_commit(v) if isinstance(a, CommitInfo)]
        if len(infos) != 1:
            problems.append(f"version {v} has {len(infos)} commitInfo actions")
    return problems


def orphan_data_files(root: str) -> list[str]:
    """Parquet files under the table (not in ``_``/``.`` directories) that no commit ever added: files
    of writes that did not commit. (Files removed by a commit stay until VACUUM; they are not orphans.)
    delta-rs leaves the files of a commit that lost its race (for VACUUM to delete): files it wrote
    are not counted."""
    snap = DeltaLog(root).snapshot()
    live = {urllib.parse.unquote(f.path) for f in [*snap.files, *snap.tombstones]}
    out = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), root)
            if (
                n.endswith(".parquet")
                and rel not in live
                and not _written_by_delta_rs(os.path.join(root, rel))
            ):
                out.append(rel)
    return sorted(out)


def _written_by_delta_rs(path: str) -> bool:
    """Whether a Parquet file's footer names delta-rs (or its DataFusion / parquet-rs writers); a
    file a killed writer left half-written has no footer."""
    try:
        created_by = pq.read_metadata(path).created_by or ""
    except (OSError, pa.ArrowInvalid):
        return False
    return created_by.startswith(("delta-rs", "datafusion", "parquet-rs"))


# --- writer processes ----------------------------------------------------------------------------------

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reliability_worker.py")


@dataclass
class Worker:
    """A running writer process (its own session and process group) and its files."""

    name: str
    proc: Any
    config: dict[str, Any]
    out: str

    @property
    def journal(self) -> list[dict[str, Any]]:
        return read_journal(self.config["journal"])

    def ready(self) -> bool:
        return os.path.exists(self.config["ready"])

    def kill(self) -> None:
        """SIGKILL the writer's whole process group (its Python driver and its JVM)."""
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)

    def output_tail(self, n: int = 3000) -> str:
        try:
            with open(self.out, encoding="utf-8", errors="replace") as fh:
                return fh.read()[-n:]
        except OSError:
            return ""


def start_worker(workdir: str, name: str, env: dict[str, str] | None = None, **config: Any) -> Worker:
    """Start ``reliability_worker.py`` in a new process group with ``config``."""
    import subprocess
    import sys

    os.makedirs(workdir, exist_ok=True)
    config.setdefault("journal", os.path.join(workdir, f"{name}.journal"))
    config.setdefault("ready", os.path.join(workdir, f"{name}.ready"))
    cfg_path = os.path.join(workdir, f"{name}.json")
    with open(cfg_path, "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    out = os.path.join(workdir, f"{name}.out")
    full_env = {k: v for k, v in os.environ.items() if k != "DELTAMERGE_FAULT"}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, WORKER, cfg_path],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
    return Worker(name, proc, config, out)


def wait_ready(workers: list[Worker], timeout: float) -> None:
    """Wait until every writer is warmed up; fail with their output if one died or it takes too long."""
    end = time.time() + timeout
    while time.time() < end:
        for wk in workers:
            if wk.proc.poll() is not None and not wk.ready():
                raise AssertionError(
                    f"writer {wk.name} exited with {wk.proc.returncode}:\n{wk.output_tail()}"
                )
        if all(wk.ready() for wk in workers):
            return
        time.sleep(0.1)
    for wk in workers:
        wk.kill()
    raise AssertionError(
        f"writers not ready after {timeout}s: {[wk.name for wk in workers if not wk.ready()]}"
    )


def fixed_rows(w: str, part: str, seed: int) -> list[Row]:
    """The rows of the worker role ``append_once``."""
    return append_rows(w, 0, part, 3, random.Random(seed))
