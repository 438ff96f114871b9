"""Snapshot load of a long log: 10k commits adding 100k (fake, tiny) files, a checkpoint every 10.

The log is generated with deltamerge's log layer: commit files are ``serialize_commit`` of real
``AddFile``/``CommitInfo`` actions, checkpoints are Parquet files in the layout of
``deltamerge.log.checkpoint.CHECKPOINT_SCHEMA`` (built column-wise with Arrow, as writing 1,000
growing checkpoints row by row would take longer than the benchmark), plus ``_last_checkpoint``.
No data file exists: a snapshot load never opens one.

Timed cold, in this process, alternating: ``DeltaLog(path).update()`` (a new DeltaLog each time,
so no cached snapshot) against ``deltalake.DeltaTable(path)`` (and, separately, with the file
list materialised: ``DeltaTable(path).get_add_actions()``, which our snapshot always holds).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from deltamerge.log import filenames
from deltamerge.log.actions import AddFile, CommitInfo, Metadata, Protocol, serialize_commit
from deltamerge.log.checkpoint import CHECKPOINT_SCHEMA
from deltamerge.log.store import LocalLogStore

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    ],
}
T0 = 1_700_000_000_000


def _stats(i: int) -> str:
    return (
        f'{{"numRecords":{1000},"minValues":{{"id":{i * 1000},"value":{i * 0.5},"name":"a{i:08d}"}},'
        f'"maxValues":{{"id":{i * 1000 + 999},"value":{i * 0.5 + 10.0},"name":"z{i:08d}"}},'
        f'"nullCount":{{"id":0,"value":0,"name":0}}}}'
    )


def _path(i: int) -> str:
    return f"part-{i:06d}-{uuid.UUID(int=i)!s}-c000.snappy.parquet"


def generate(path: str, commits: int = 10_000, files_per_commit: int = 10, checkpoint_interval: int = 10) -> None:
    meta = {"commits": commits, "files_per_commit": files_per_commit, "interval": checkpoint_interval, "v": 1}
    marker = os.path.join(path, "_bench_meta.json")
    try:
        with open(marker) as f:
            if json.load(f) == meta:
                return
    except (OSError, ValueError):
        pass
    shutil.rmtree(path, ignore_errors=True)
    store = LocalLogStore(path)
    os.makedirs(store.log_dir, exist_ok=True)
    protocol = Protocol(1, 2)
    metadata = Metadata(
        id=str(uuid.UUID(int=7)), schema_string=json.dumps(SCHEMA), configuration={}, created_time=T0
    )
    n_total = commits * files_per_commit
    paths = [_path(i) for i in range(n_total)]
    stats = [_stats(i) for i in range(n_total)]
    # Column-wise add structs for the checkpoints (sliced per checkpoint).
    add_type = CHECKPOINT_SCHEMA.field("add").type
    mtimes = pa.array([T0 + (i // files_per_commit) * 1000 for i in range(n_total)], pa.int64())
    add_arrays = pa.StructArray.from_arrays(
        [
            pa.array(paths, pa.string()),
            pa.array([[] for _ in range(n_total)], add_type.field("partitionValues").type),
            pa.array([4096 + i % 1000 for i in range(n_total)], pa.int64()),
            mtimes,
            pa.array([False] * n_total, pa.bool_()),
            pa.nulls(n_total, add_type.field("tags").type),
            pa.nulls(n_total, add_type.field("deletionVector").type),
            pa.nulls(n_total, pa.int64()),
            pa.nulls(n_total, pa.int64()),
            pa.nulls(n_total, pa.string()),
            pa.array(stats, pa.string()),
        ],
        fields=list(add_type),
    )
    head = pa.Table.from_pylist(
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": metadata.id,
                    "format": {"provider": "parquet", "options": []},
                    "schemaString": metadata.schema_string,
                    "partitionColumns": [],
                    "configuration": [],
                    "createdTime": T0,
                }
            },
        ],
        schema=CHECKPOINT_SCHEMA,
    )
    for v in range(commits):
        adds = [
            AddFile(
                path=paths[i],
                partition_values={},
                size=4096 + i % 1000,
                modification_time=T0 + v * 1000,
                data_change=True,
                stats=stats[i],
            )
            for i in range(v * files_per_commit, (v + 1) * files_per_commit)
        ]
        info = CommitInfo({"timestamp": T0 + v * 1000, "operation": "WRITE", "operationParameters": {"mode": "Append"}})
        actions = [info, *([protocol, metadata] if v == 0 else []), *adds]
        name = filenames.commit_name(v)
        with open(store.path(name), "wb") as f:
            f.write(serialize_commit(actions))
        t = T0 + v * 1000 + 500
        os.utime(store.path(name), ns=(t * 1_000_000, t * 1_000_000))
        if v > 0 and v % checkpoint_interval == 0:
            n = (v + 1) * files_per_commit
            cols = {}
            for field in CHECKPOINT_SCHEMA:
                if field.name == "add":
                    cols[field.name] = add_arrays.slice(0, n)
                else:
                    cols[field.name] = pa.nulls(n, field.type)
            body = pa.Table.from_pydict(cols, schema=CHECKPOINT_SCHEMA)
            table = pa.concat_tables([head, body])
            pq.write_table(table, store.path(filenames.checkpoint_name(v)), compression="snappy")
            last = {"version": v, "size": table.num_rows, "numOfAddFiles": n}
            with open(store.path(filenames.LAST_CHECKPOINT), "w") as f:
                json.dump(last, f)
    with open(marker, "w") as f:
        json.dump(meta, f)


def time_loads(path: str, reps: int = 5) -> dict:
    """Cold load times (seconds), alternating the engines."""
    from deltalake import DeltaTable

    from deltamerge.log.snapshot import DeltaLog

    dm: list[float] = []
    rs: list[float] = []
    rs_files: list[float] = []
    n_dm = n_rs = 0
    # One untimed warm-up each (imports, page cache), then alternate.
    DeltaLog(path).update()
    DeltaTable(path).get_add_actions()
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        snap = DeltaLog(path).update()
        dm.append(time.perf_counter() - t0)
        n_dm = len(snap.files)
        del snap
        gc.collect()
        t0 = time.perf_counter()
        dt = DeltaTable(path)
        rs.append(time.perf_counter() - t0)
        del dt
        gc.collect()
        t0 = time.perf_counter()
        dt = DeltaTable(path)
        n_rs = dt.get_add_actions().num_rows
        rs_files.append(time.perf_counter() - t0)
        del dt
    return {"deltamerge": dm, "delta_rs": rs, "delta_rs_with_files": rs_files, "files_dm": n_dm, "files_rs": n_rs}
