"""Change data feed reads (``deltamerge.read_changes``) against delta-rs's ``load_cdf``.

(a) tables written by delta-rs with CDF on (its UPDATE/DELETE/MERGE write ``cdc`` files);
(b) deltamerge-written tables without cdc files (changes derived from add/remove);
(c) DV-only changes built by hand (rows in the new DV but not the old are deletes, and back).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

import pyarrow as pa
import pytest
from pyroaring import BitMap64
from pyspark.sql import functions as F

import deltamerge
from deltamerge.cdf_read import read_changes
from deltamerge.deletion_vectors import inline_descriptor, read_dv, write_dv_file
from deltamerge.errors import ChangeDataNotRecordedError, InvalidArgumentError, VersionNotFoundError
from deltamerge.log.actions import AddFile
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark

CDF = {"delta.enableChangeDataFeed": "true"}


def ours(spark, path: str, cols: list[str], **kw) -> Counter:  # type: ignore[no-untyped-def]
    df = read_changes(spark, path, **kw)
    assert df.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    return Counter(tuple(r) for r in df.select(*cols, "_change_type", "_commit_version").collect())


def theirs(path: str, cols: list[str], **kw) -> Counter:  # type: ignore[no-untyped-def]
    from deltalake import DeltaTable

    t = pa.table(DeltaTable(path).load_cdf(**kw))
    rows = zip(*[t.column(c).to_pylist() for c in [*cols, "_change_type", "_commit_version"]], strict=True)
    return Counter(tuple(r) for r in rows)


# --- (a) delta-rs tables with cdc files ------------------------------------------------------------


@pytest.fixture(scope="module")
def deltars_table(tmp_path_factory):
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path_factory.mktemp("cdf") / "rs")
    data = pa.table({"id": [1, 2, 3, 4, 5], "p": ["a", "a", "b", "b", None], "v": [10, 20, 30, 40, 50]})
    write_deltalake(path, data, partition_by=["p"], configuration=CDF)  # v0
    t = DeltaTable(path)
    t.update(updates={"v": "v + 1"}, predicate="id = 1")  # v1: cdc pre/post images
    t.delete("id = 3")  # v2: cdc delete
    src = pa.table({"id": [2, 6, 4], "v": [200, 600, -1]})
    (
        t.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"v": "s.v"}, predicate="s.v > 0")
        .when_matched_delete(predicate="s.v < 0")
        .when_not_matched_insert({"id": "s.id", "v": "s.v", "p": "'c'"})
        .execute()
    )  # v3: update + delete + insert in cdc files
    write_deltalake(path, pa.table({"id": [7], "p": ["a"], "v": [70]}), mode="append")  # v4: no cdc
    t = DeltaTable(path)
    t.delete("p = 'c'")  # v5: whole-file remove, no cdc file
    return path


def test_deltars_table_all_versions(spark, deltars_table):
    cols = ["id", "p", "v"]
    got = ours(spark, deltars_table, cols, starting_version=0)
    assert got == theirs(deltars_table, cols, starting_version=0)
    assert got[(3, "b", 30, "delete", 2)] == 1
    assert got[(2, "a", 200, "update_postimage", 3)] == 1
    assert got[(6, "c", 600, "delete", 5)] == 1  # derived from a remove without cdc
    assert got[(5, None, 50, "insert", 0)] == 1  # null partition value


def test_deltars_table_subranges_and_timestamps(spark, deltars_table):
    cols = ["id", "p", "v"]
    # End beyond the latest version is clamped (Delta's behaviour). One Spark job for all ranges.
    ranges = [(1, 1), (2, 3), (4, 99)]
    dfs = [
        read_changes(spark, deltars_table, s, e).withColumn("__range", F.lit(i))
        for i, (s, e) in enumerate(ranges)
    ]
    union = dfs[0].unionByName(dfs[1]).unionByName(dfs[2])
    got: dict[int, Counter] = {i: Counter() for i in range(len(ranges))}
    for r in union.select("__range", *cols, "_change_type", "_commit_version").collect():
        got[r[0]][tuple(r[1:])] += 1
    for i, (s, e) in enumerate(ranges):
        assert got[i] == theirs(deltars_table, cols, starting_version=s, ending_version=min(e, 5)), (s, e)
    # Commit timestamps: ours are the log's (file mtimes), delta-rs's commitInfo.timestamp; close.
    df = read_changes(spark, deltars_table, 0)
    pairs = df.select("_commit_version", F.unix_millis("_commit_timestamp")).distinct().collect()
    mine = {r[0]: r[1] for r in pairs}
    from deltalake import DeltaTable

    t = pa.table(DeltaTable(deltars_table).load_cdf(starting_version=0))
    rs_ts = t.column("_commit_timestamp").cast(pa.int64()).to_pylist()  # ms since the epoch
    rs = dict(zip(t.column("_commit_version").to_pylist(), rs_ts, strict=True))
    assert set(mine) == set(rs)
    for v, ts in mine.items():
        assert abs(ts - rs[v]) < 60_000, (v, ts, rs[v])
    assert [mine[v] for v in sorted(mine)] == sorted(mine.values())


# --- (b) deltamerge-written tables (no cdc files) --------------------------------------------------


@pytest.fixture(scope="module")
def our_table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cdf") / "ours")
    df = spark.createDataFrame([(1, "x"), (2, "y")], "id long, s string")
    deltamerge.write(df, path, configuration=CDF)  # v0
    deltamerge.write(spark.createDataFrame([(3, "z")], "id long, s string"), path, mode="append")  # v1
    deltamerge.write(spark.createDataFrame([(4, "w")], "id long, s string"), path, mode="append")  # v2
    deltamerge.write(spark.createDataFrame([(9, "o")], "id long, s string"), path, mode="overwrite")  # v3
    return path


def test_appends_and_overwrite_are_inserts_and_deletes(spark, our_table):
    got = ours(spark, our_table, ["id", "s"], starting_version=0)
    assert got == Counter(
        {
            (1, "x", "insert", 0): 1,
            (2, "y", "insert", 0): 1,
            (3, "z", "insert", 1): 1,
            (4, "w", "insert", 2): 1,
            (1, "x", "delete", 3): 1,
            (2, "y", "delete", 3): 1,
            (3, "z", "delete", 3): 1,
            (4, "w", "delete", 3): 1,
            (9, "o", "insert", 3): 1,
        }
    )
    # delta-rs reads the change feed of our table the same way.
    assert got == theirs(our_table, ["id", "s"], starting_version=0)
    df = read_changes(spark, our_table, 1, 2)
    assert df.schema["_commit_version"].dataType.simpleString() == "bigint"
    assert df.schema["_commit_timestamp"].dataType.simpleString() == "timestamp"
    assert sorted(r[0] for r in df.select("id").collect()) == [3, 4]


def test_timestamp_bounds(spark, our_table):
    log = DeltaLog.for_table(our_table)
    ts = {v: t for v, t, _ in log.commit_infos()}
    got = read_changes(spark, our_table, starting_timestamp=ts[1], ending_timestamp=ts[2])
    assert sorted(r[0] for r in got.select("_commit_version").distinct().collect()) == [1, 2]
    # Strings in the session time zone (UTC in tests) and datetimes work too.
    as_text = dt.datetime.fromtimestamp(ts[2] / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    got = read_changes(spark, our_table, starting_timestamp=as_text)
    assert sorted(r[0] for r in got.select("_commit_version").distinct().collect()) == [2, 3]
    start = dt.datetime.fromtimestamp(ts[0] / 1000, tz=dt.timezone.utc)
    assert read_changes(spark, our_table, starting_timestamp=start, ending_version=0).count() == 2
    # Both bounds between the same two commits: empty, not an error.
    if ts[2] - ts[1] > 1:
        assert (
            read_changes(spark, our_table, starting_timestamp=ts[1] + 1, ending_timestamp=ts[2] - 1).count()
            == 0
        )
    with pytest.raises(VersionNotFoundError) as err:
        read_changes(spark, our_table, starting_timestamp=ts[3] + 60_000)
    assert err.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"


def test_errors(spark, our_table, tmp_path):
    with pytest.raises(VersionNotFoundError) as err:
        read_changes(spark, our_table, 7)
    assert "Provide a version <= 3" in str(err.value)
    with pytest.raises(InvalidArgumentError) as err2:
        read_changes(spark, our_table, 2, 1)
    assert err2.value.error_class == "DELTA_INVALID_CDC_RANGE"
    with pytest.raises(InvalidArgumentError):
        read_changes(spark, our_table)
    plain = str(tmp_path / "plain")
    deltamerge.write(spark.range(2), plain)
    with pytest.raises(ChangeDataNotRecordedError) as err3:
        read_changes(spark, plain, 0)
    assert err3.value.error_class == "DELTA_MISSING_CHANGE_DATA"
    assert (
        "Error getting change data for range [0, 0] as change data was not recorded for version [0]"
        in str(err3.value)
    )
    # CDF switched off at version 1: a range starting at 0 fails at version 1.
    toggled = str(tmp_path / "toggled")
    deltamerge.write(spark.range(2), toggled, configuration=CDF)
    _set_properties(toggled, {"delta.enableChangeDataFeed": "false"})
    with pytest.raises(ChangeDataNotRecordedError, match=r"range \[0, 1\] .* version \[1\]"):
        read_changes(spark, toggled, 0)
    assert read_changes(spark, toggled, 0, 0).count() == 2


# --- (c) DV-only changes ---------------------------------------------------------------------------


def _set_properties(path: str, props: dict[str, str]) -> int:
    txn = OptimisticTransaction(DeltaLog.for_table(path))
    meta = txn.metadata
    assert meta is not None
    txn.update_metadata(replace(meta, configuration={**meta.configuration, **props}))
    return txn.commit([], Operation("SET TBLPROPERTIES", {"properties": props}))


def _set_dv(path: str, f: AddFile, rows: Iterable[int], *, inline: bool) -> int:
    """Commit remove(f) + add(f with DV = rows) (protocol.md §5.5)."""
    log = DeltaLog.for_table(path)
    snap = log.update()
    bm = BitMap64(rows)
    desc = inline_descriptor(bm) if inline else write_dv_file(snap.table_root, [bm])[0]
    stats = json.loads(f.stats or "{}")
    stats["tightBounds"] = False
    new = replace(f, deletion_vector=desc if len(bm) else None, stats=json.dumps(stats), data_change=True)
    txn = OptimisticTransaction(log, snap)
    return txn.commit([f.remove(int(time.time() * 1000)), new], Operation("DELETE", {"predicate": "[]"}))


def test_dv_only_changes(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(10).select("id", (F.col("id") * 10).alias("v")).coalesce(1)
    deltamerge.write(df, path, configuration={**CDF, "delta.enableDeletionVectors": "true"})  # v0
    log = DeltaLog.for_table(path)

    def current() -> AddFile:
        (f,) = log.update().files
        return f

    v1 = _set_dv(path, current(), [1, 3], inline=False)  # delete rows 1, 3
    v2 = _set_dv(path, current(), [1, 3, 5, 8], inline=True)  # delete 5, 8 (1, 3 already gone)
    v3 = _set_dv(path, current(), [1, 5, 8], inline=False)  # "restore" row 3
    assert read_dv(log.table_root, current().deletion_vector) == BitMap64([1, 5, 8])  # type: ignore[arg-type]
    # A whole-file remove of a DV'd file deletes only its live rows.
    txn = OptimisticTransaction(log)
    v4 = txn.commit([current().remove(int(time.time() * 1000))], Operation("DELETE", {"predicate": "[]"}))
    got = ours(spark, path, ["id", "v"], starting_version=1)
    live_at_v3 = [i for i in range(10) if i not in (1, 5, 8)]
    expected = Counter(
        {
            (1, 10, "delete", v1): 1,
            (3, 30, "delete", v1): 1,
            (5, 50, "delete", v2): 1,
            (8, 80, "delete", v2): 1,
            (3, 30, "insert", v3): 1,
            **{(i, i * 10, "delete", v4): 1 for i in live_at_v3},
        }
    )
    assert got == expected
    # delta-rs derives the same DV-only changes. (For v4 it reports the rows the removed file's DV
    # *masked* as deleted, where delta-spark's TahoeRemoveFileIndex reads the file's live rows, as we do.)
    rs = theirs(path, ["id", "v"], starting_version=1, ending_version=v3)
    assert rs == Counter({k: n for k, n in expected.items() if k[3] <= v3})
    # delta-rs agrees on what the table holds after each DV commit.
    from deltalake import DeltaTable, QueryBuilder

    for version, gone in [(v1, {1, 3}), (v2, {1, 3, 5, 8}), (v3, {1, 5, 8})]:
        table = DeltaTable(path, version=version)
        rows = pa.table(QueryBuilder().register("t", table).execute("SELECT id FROM t")).column("id")
        assert sorted(rows.to_pylist()) == [i for i in range(10) if i not in gone]
        assert read_changes(spark, path, 0, version).filter("_change_type = 'insert'").count() == 10 + (
            version == v3
        )
