"""deltamerge <-> delta-rs (the ``deltalake`` package): each engine reads and writes the other's tables.

* A table deltamerge writes (hard partition values, typed partitions, 13 commits with an overwrite,
  so a checkpoint exists) is read by delta-rs with the same rows, version, partition values and
  history; delta-rs then appends and merges into it, and deltamerge reads the result.
* Tables delta-rs writes (partitioned, checkpointed, after MERGE / UPDATE / DELETE, CDF on) are
  read by deltamerge at every version; deltamerge appends to them and delta-rs reads the result.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from interop_helpers import (
    SPECIAL,
    UTC,
    arrow_table,
    deltamerge_rows,
    deltars_add_actions,
    deltars_rows,
    log_actions,
    norm,
    rows,
    spark_df,
)

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog

deltalake = pytest.importorskip("deltalake")
pytestmark = [pytest.mark.compat, pytest.mark.spark]

PARTS = ["s", "n", "d"]


def _typed_partition_values(pv: dict[str, str | None]) -> dict[str, object]:
    """Our log's serialized partition values, typed the way delta-rs reports them."""
    s = pv["s"]
    return {
        "s": None if s in (None, "") else s,
        "n": None if pv["n"] is None else int(pv["n"]),
        "d": None if pv["d"] is None else dt.date.fromisoformat(pv["d"]),
    }


@pytest.fixture(scope="module")
def ours(spark, tmp_path_factory):
    """A deltamerge table with 13 commits (v0 create, appends, v10 overwrite, appends) and the
    expected rows per version."""
    root = str(tmp_path_factory.mktemp("interop") / "ours")
    expected: dict[int, list[dict]] = {}
    current = rows(range(9))  # every SPECIAL value once, "" and None included
    assert deltamerge.write(spark_df(spark, current), root, partition_by=PARTS) == 0
    expected[0] = list(current)
    for v in range(1, 13):
        batch = rows(range(10 * v, 10 * v + 3), SPECIAL[v % 3 :: 3])
        if v == 10:
            assert deltamerge.write(spark_df(spark, batch), root, mode="overwrite") == v
            current = list(batch)
        else:
            assert deltamerge.write(spark_df(spark, batch), root, mode="append") == v
            current = current + batch
        expected[v] = list(current)
    return root, expected


# --- delta-rs reads what deltamerge wrote ------------------------------------------------------------


def test_deltars_reads_our_table(ours) -> None:
    root, expected = ours
    assert os.path.exists(os.path.join(root, "_delta_log", f"{10:020d}.checkpoint.parquet"))
    assert os.path.exists(os.path.join(root, "_delta_log", "_last_checkpoint"))
    table = deltalake.DeltaTable(root)
    assert table.version() == 12
    assert deltars_rows(table) == norm(expected[12])
    assert table.metadata().partition_columns == PARTS


def test_deltars_partition_values_match_our_log(ours) -> None:
    root, expected = ours
    snap = DeltaLog.for_table(root).update()
    ours_by_path = {f.path: _typed_partition_values(dict(f.partition_values)) for f in snap.files}
    theirs = {
        a["path"]: {c: a[f"partition.{c}"] for c in PARTS}
        for a in deltars_add_actions(deltalake.DeltaTable(root))
    }
    assert theirs == ours_by_path
    # ... and they are the values of the rows (the "" and None strings are both null).
    by_row = {(r["s"] or None, r["n"], r["d"]) for r in expected[12]}
    assert {(p["s"], p["n"], p["d"]) for p in theirs.values()} == by_row
    # Every add.path, decoded once, is a file on disk.
    for path in theirs:
        assert os.path.isfile(os.path.join(root, unquote(path))), path


def test_deltars_time_travel_and_history(ours) -> None:
    root, expected = ours
    for v in (0, 5, 9, 10, 11):
        assert deltars_rows(root, version=v) == norm(expected[v]), v
    history = deltalake.DeltaTable(root).history()
    assert [h["version"] for h in history] == list(range(12, -1, -1))
    assert all(h["operation"] == "WRITE" for h in history)
    modes = {h["version"]: h["operationParameters"]["mode"] for h in history}
    assert modes[0] == "ErrorIfExists" and modes[10] == "Overwrite" and modes[12] == "Append"


def test_deltars_reads_our_checkpoint_alone(spark, ours, tmp_path: Path) -> None:
    root, expected = ours
    copy = str(tmp_path / "copy")
    shutil.copytree(root, copy)
    for v in range(11):  # only the checkpoint (v10) and commits 11, 12 are left
        os.remove(os.path.join(copy, "_delta_log", f"{v:020d}.json"))
    assert deltars_rows(copy) == norm(expected[12])
    assert deltamerge_rows(spark, copy) == norm(expected[12])


def test_deltamerge_reads_own_table_at_every_version(spark, ours) -> None:
    root, expected = ours
    for v in (0, 9, 10, 12):
        assert deltamerge_rows(spark, root, version=v) == norm(expected[v]), v


def test_deltars_appends_and_merges_into_our_table(spark, ours, tmp_path: Path) -> None:
    root, expected = ours
    copy = str(tmp_path / "copy")
    shutil.copytree(root, copy)
    current = list(expected[12])

    extra = rows(range(200, 204))
    deltalake.write_deltalake(copy, arrow_table(extra), mode="append")
    current += extra
    assert deltamerge_rows(spark, copy) == norm(current)

    # MERGE: update two existing rows (one in the null partition), insert a new one.
    source = [dict(r, v="merged") for r in current if r["id"] in (200, 102, 112)] + rows([300], ["日本:x"])
    assert [r["s"] for r in source[:3]] == [None, "", "a b"]  # null, empty and plain partitions
    table = deltalake.DeltaTable(copy)
    (
        table.merge(arrow_table(source), "t.id = src.id", source_alias="src", target_alias="t")
        .when_matched_update(updates={"v": "src.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    by_id = {r["id"]: r for r in current}
    for r in source:
        by_id[r["id"]] = r if r["id"] not in by_id else dict(by_id[r["id"]], v=r["v"])
    current = list(by_id.values())
    assert deltalake.DeltaTable(copy).version() == 14
    assert deltamerge_rows(spark, copy) == norm(current)
    assert deltamerge_rows(spark, copy, version=13) == norm(expected[12] + extra)

    # Our history shows their commits; our next append builds on them and they read it.
    ops = [r.operation for r in DeltaTable.forPath(spark, copy).history(2).collect()]
    assert ops == ["MERGE", "WRITE"]
    more = rows(range(400, 403))
    assert deltamerge.write(spark_df(spark, more), copy, mode="append") == 15
    current += more
    assert deltars_rows(copy) == norm(current)
    assert deltamerge_rows(spark, copy) == norm(current)


# --- typed partitions: timestamp and decimal -------------------------------------------------------

TS_VALUES = [
    dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(2024, 11, 3, 8, 30, tzinfo=UTC),  # 01:30 PDT: ambiguous in America/Los_Angeles
    dt.datetime(2024, 11, 3, 9, 30, tzinfo=UTC),  # 01:30 PST
    None,
]


def _typed_rows() -> list[dict]:
    out = []
    for i, ts in enumerate(TS_VALUES):
        out.append(
            {
                "id": i,
                "ts": ts,
                "amt": decimal.Decimal("0.50") if i % 2 else decimal.Decimal("1234.05"),
                "flag": i % 2 == 0,
                "v": f"v{i}",
            }
        )
    return out


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_timestamp_and_decimal_partitions(spark, tmp_path: Path, zone: str) -> None:
    root = str(tmp_path / "typed")
    data = _typed_rows()
    ddl = "id long, ts timestamp, amt decimal(10,2), flag boolean, v string"
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        df = spark.createDataFrame([tuple(r.values()) for r in data], ddl).repartition(len(data), "id")
        deltamerge.write(df, root, partition_by=["ts", "amt", "flag"])
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    adds = [a["add"] for a in log_actions(root, 0) if "add" in a]
    # Protocol §6.4: UTC ISO-8601 with microseconds and 'Z', whatever the session zone.
    serialized = {a["partitionValues"]["ts"] for a in adds}
    want = {None if t is None else t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for t in TS_VALUES}
    assert serialized == want
    assert {a["partitionValues"]["amt"] for a in adds} == {"0.50", "1234.05"}
    table = deltalake.DeltaTable(root)
    assert deltars_rows(table) == norm(data)
    by_path = {a["path"]: a for a in adds}
    for a in deltars_add_actions(table):
        pv = by_path[a["path"]]["partitionValues"]
        got_ts = a["partition.ts"]
        iso = None if got_ts is None else got_ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert iso == pv["ts"]
        assert a["partition.amt"] == decimal.Decimal(pv["amt"])
        assert a["partition.flag"] == (pv["flag"] == "true")


def test_deltamerge_reads_timestamp_partitions(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "typed")
    data = _typed_rows()
    ddl = "id long, ts timestamp, amt decimal(10,2), flag boolean, v string"
    deltamerge.write(
        spark.createDataFrame([tuple(r.values()) for r in data], ddl), root, partition_by=["ts", "amt"]
    )
    assert deltamerge_rows(spark, root) == norm(data)
    # delta-rs writes zone-less partition timestamps ("2024-01-01 12:00:00.123456", UTC).
    theirs = str(tmp_path / "theirs")
    typed = pa.Table.from_pylist(
        data,
        schema=pa.schema(
            [
                ("id", pa.int64()),
                ("ts", pa.timestamp("us", tz="UTC")),
                ("amt", pa.decimal128(10, 2)),
                ("flag", pa.bool_()),
                ("v", pa.string()),
            ]
        ),
    )
    deltalake.write_deltalake(theirs, typed, partition_by=["ts", "amt"])
    assert deltamerge_rows(spark, theirs) == norm(data)


# --- deltamerge reads what delta-rs wrote -----------------------------------------------------------


def _deltars_history_table(root: str, configuration: dict[str, str] | None = None) -> list[list[dict]]:
    """A delta-rs table: create, appends, checkpoint, UPDATE, DELETE, MERGE. Returns rows per version."""
    states: list[list[dict]] = []
    current = rows(range(6))
    deltalake.write_deltalake(root, arrow_table(current), partition_by=PARTS, configuration=configuration)
    states.append(list(current))
    for v in (1, 2):
        batch = rows(range(10 * v, 10 * v + 3), SPECIAL[v::2])
        deltalake.write_deltalake(root, arrow_table(batch), mode="append")
        current = current + batch
        states.append(list(current))
    table = deltalake.DeltaTable(root)
    table.create_checkpoint()
    table.update(updates={"v": "'updated'"}, predicate="n = 1")
    current = [dict(r, v="updated") if r["n"] == 1 else r for r in current]
    states.append(list(current))
    table.delete("s = 'us/east' OR s IS NULL")
    current = [r for r in current if r["s"] not in ("us/east", None)]
    states.append(list(current))
    source = [dict(current[0], v="merged"), *rows([99], ["a}b"])]
    (
        table.merge(arrow_table(source), "t.id = src.id", source_alias="src", target_alias="t")
        .when_matched_update(updates={"v": "src.v"})
        .when_not_matched_insert_all()
        .execute()
    )
    current = [dict(r, v="merged") if r["id"] == source[0]["id"] else r for r in current] + source[1:]
    states.append(list(current))
    return states


@pytest.mark.parametrize("cdf", [False, True], ids=["plain", "cdf"])
def test_deltamerge_reads_deltars_table_at_every_version(spark, tmp_path: Path, cdf: bool) -> None:
    root = str(tmp_path / "theirs")
    conf = {"delta.enableChangeDataFeed": "true"} if cdf else None
    states = _deltars_history_table(root, conf)
    assert os.path.exists(os.path.join(root, "_delta_log", f"{2:020d}.checkpoint.parquet"))
    if cdf:
        assert any("cdc" in a for v in (3, 4, 5) for a in log_actions(root, v))
        assert os.path.isdir(os.path.join(root, "_change_data"))
    for v, state in enumerate(states):
        assert deltars_rows(root, version=v) == norm(state), v
        assert deltamerge_rows(spark, root, version=v) == norm(state), v
    assert deltamerge_rows(spark, root) == norm(states[-1])
    detail = DeltaTable.forPath(spark, root).detail().collect()[0]
    assert detail.partitionColumns == PARTS
    assert detail.numFiles == len(deltalake.DeltaTable(root).file_uris())


def test_deltamerge_reads_deltars_checkpoint_alone(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "theirs")
    states = _deltars_history_table(root)
    for v in range(3):
        os.remove(os.path.join(root, "_delta_log", f"{v:020d}.json"))
    assert deltamerge_rows(spark, root) == norm(states[-1])
    assert deltamerge_rows(spark, root, version=2) == norm(states[2])


def test_deltamerge_appends_to_deltars_table(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "theirs")
    states = _deltars_history_table(root, {"delta.enableChangeDataFeed": "true"})
    current = list(states[-1])
    more = rows(range(500, 505))
    version = deltamerge.write(spark_df(spark, more), root, mode="append")
    assert version == len(states)
    current += more
    table = deltalake.DeltaTable(root)
    assert table.version() == version
    assert deltars_rows(table) == norm(current)
    assert deltamerge_rows(spark, root) == norm(current)
    # delta-rs keeps writing on top of our commit, and checkpoints it.
    deltalake.write_deltalake(root, arrow_table(rows([600])), mode="append")
    table = deltalake.DeltaTable(root)
    table.create_checkpoint()
    current += rows([600])
    assert deltamerge_rows(spark, root) == norm(current)
    assert deltars_rows(root) == norm(current)


def test_in_commit_timestamps_merge_and_deltars_reads(spark, tmp_path: Path) -> None:
    """A table with in-commit timestamps: MERGE stamps each commit, delta-rs reads rows and history,
    and time travel by timestamp resolves by the in-commit timestamps, not the files' times."""
    root = str(tmp_path / "ict")
    ict = {"delta.enableInCommitTimestamps": "true"}
    deltamerge.write(spark_df(spark, rows(range(6))), root, configuration=ict)
    source = spark_df(spark, rows(range(4, 9)))
    (
        DeltaTable.forPath(spark, root).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll()
        .execute()
    )  # fmt: skip
    log = DeltaLog.for_table(root)
    stamps = [log.read_commit(v)[0].in_commit_timestamp for v in (0, 1)]
    assert stamps[0] is not None and stamps[1] is not None and stamps[1] > stamps[0]
    # Copying the table changes the files' times; the in-commit timestamps stay.
    for v in (0, 1):
        os.utime(os.path.join(root, "_delta_log", f"{v:020d}.json"), (1, 1))
    history = DeltaTable.forPath(spark, root).history().orderBy("version").collect()
    assert [int(h.timestamp.timestamp() * 1000) for h in history] == stamps
    assert [h.operation for h in history] == ["WRITE", "MERGE"]
    assert DeltaLog.for_table(root).version_at_timestamp(stamps[1] - 1) == 0
    table = deltalake.DeltaTable(root)
    assert table.version() == 1
    assert deltars_rows(table) == norm(rows(range(4)) + rows(range(4, 9)))
    assert [h.get("inCommitTimestamp") for h in table.history()[::-1]] == stamps
