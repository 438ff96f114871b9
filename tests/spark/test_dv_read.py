"""Deletion vectors are honoured by every read (scan, deltamerge.read, DeltaTable.toDF, time travel).

DV tables are built by hand: a table written by ``deltamerge.write``, its protocol upgraded by setting
``delta.enableDeletionVectors``, then remove+add pairs carrying DVs made with our codec (protocol.md §5.5).
delta-rs reads the same tables, which checks our DV bytes and log entries as well as our reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import pytest
from pyroaring import BitMap64
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.deletion_vectors import inline_descriptor, read_dv, write_dv_file
from deltamerge.log.actions import AddFile
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark import dv_filter
from deltamerge.spark.scan import (
    FILE_COL,
    ROW_INDEX_COL,
    absolute_file_path,
    scan,
    spark_file_uri,
)
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction


def filter_row_positions(df, positions, *, keep):  # type: ignore[no-untyped-def]
    return dv_filter.filter_row_positions(df, positions, keep=keep, file_col=FILE_COL, row_col=ROW_INDEX_COL)


pytestmark = pytest.mark.spark


# --- helpers ---------------------------------------------------------------------------------------


def enable_dvs(path: str) -> int:
    """Set ``delta.enableDeletionVectors=true`` (upgrades the protocol to (3,7) with the feature)."""
    txn = OptimisticTransaction(DeltaLog.for_table(path))
    meta = txn.metadata
    assert meta is not None
    conf = {**meta.configuration, "delta.enableDeletionVectors": "true"}
    txn.update_metadata(replace(meta, configuration=conf))
    return txn.commit([], Operation("SET TBLPROPERTIES", {"properties": conf}))


def _loose_stats(stats: str | None) -> str | None:
    if stats is None:
        return None
    parsed = json.loads(stats)
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))


def delete_positions(
    path: str,
    rows_by_file: Callable[[AddFile], Iterable[int]],
    *,
    inline: bool = False,
    undelete: Mapping[str, Iterable[int]] | None = None,
) -> int:
    """Commit DV-only changes: for each file, DV := (old DV ∪ rows) − undelete rows.

    ``rows_by_file`` maps an AddFile to the physical row indexes it should delete (files not listed
    are untouched). Writes one new DV file for all changed files, or inline DVs.
    """
    log = DeltaLog.for_table(path)
    snap = log.update()
    changes: list[tuple[AddFile, BitMap64]] = []
    for f in snap.files:
        rows = list(rows_by_file(f))
        back = list((undelete or {}).get(f.path, ()))
        if not rows and not back:
            continue
        old = read_dv(snap.table_root, f.deletion_vector) if f.deletion_vector else BitMap64()
        new = (old | BitMap64(rows)) - BitMap64(back)
        if new != old:
            changes.append((f, new))
    if inline:
        descriptors = [inline_descriptor(bm) for _, bm in changes]
    else:
        descriptors = write_dv_file(snap.table_root, [bm for _, bm in changes])
    now = int(time.time() * 1000)
    actions: list = []
    for (f, bm), desc in zip(changes, descriptors, strict=True):
        actions.append(f.remove(now))
        new_dv = desc if len(bm) else None
        actions.append(replace(f, deletion_vector=new_dv, stats=_loose_stats(f.stats), data_change=True))
    txn = OptimisticTransaction(log, snap)
    txn.add_read_files([f for f, _ in changes])
    return txn.commit(actions, Operation("DELETE", {"predicate": "[]"}))


def ids(df) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(r[0] for r in df.select("id").collect())


def deltars_ids(path: str, version: int | None = None) -> list[int]:
    import pyarrow as pa
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    # delta-rs's pyarrow-dataset path refuses DV tables; its DataFusion scan honours DVs.
    table = RsTable(path, version=version)
    result = pa.table(QueryBuilder().register("t", table).execute("SELECT id FROM t"))
    return sorted(result.column("id").to_pylist())


# --- tests ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_table(spark, tmp_path_factory):
    """One 70,000-row file (row index == id) with a DV deleting positions below and above 2^16."""
    path = str(tmp_path_factory.mktemp("dv") / "big")
    deltamerge.write(spark.range(70_000).coalesce(1).withColumn("v", F.col("id") * 2), path)
    enable_dvs(path)
    deleted = [0, 5, 6, 7, 65_535, 65_536, 65_537, 69_999, *range(1_000, 1_100)]
    v = delete_positions(path, lambda f: deleted)
    return path, v, set(deleted)


def _edges(df):  # type: ignore[no-untyped-def]
    """Ids near the DV'd positions of the big table, plus (count, sum) of all ids."""
    near = F.when((F.col("id") < 1_200) | (F.col("id") > 65_000), F.col("id"))
    agg = df.agg(F.collect_list(near), F.count("id"), F.sum("id")).collect()[0]
    return sorted(agg[0]), (agg[1], agg[2])


def _expected_edges(live: set[int]):  # type: ignore[no-untyped-def]
    return sorted(i for i in live if i < 1_200 or i > 65_000), (len(live), sum(live))


def test_dv_rows_are_hidden_by_read_todf_and_deltars(spark, big_table):
    path, version, deleted = big_table
    live = set(range(70_000)) - deleted
    expected = _expected_edges(live)
    assert _edges(deltamerge.read(spark, path)) == expected
    assert _edges(DeltaTable.forPath(spark, path).toDF()) == expected
    assert deltars_ids(path) == sorted(live)
    # Time travel: before the DV commit every row is live.
    assert deltamerge.read(spark, path, version=version - 1).count() == 70_000
    assert _edges(deltamerge.read(spark, path, version=version)) == expected


def test_dv_written_by_us_is_valid_protocol(big_table):
    path, version, deleted = big_table
    snap = DeltaLog.for_table(path).snapshot(version)
    assert snap.protocol.min_reader_version == 3 and snap.protocol.min_writer_version == 7
    assert "deletionVectors" in (snap.protocol.reader_features or ())
    assert "deletionVectors" in (snap.protocol.writer_features or ())
    (f,) = snap.files
    assert f.deletion_vector is not None and f.deletion_vector.cardinality == len(deleted)
    stats = json.loads(f.stats or "{}")
    assert stats["numRecords"] == 70_000 and stats["tightBounds"] is False


def test_physical_rows_and_row_index(spark, big_table):
    path, version, deleted = big_table
    snap = DeltaLog.for_table(path).snapshot(version)
    args = (spark, snap.table_root, snap.metadata.schema, snap.partition_columns, snap.files)
    physical = scan(*args, with_row_index=True, apply_deletion_vectors=False)
    assert physical.count() == 70_000
    live = scan(*args, with_row_index=True, with_file=True)
    # The row index stays the physical position (== id in this single-file table) after filtering.
    agg = live.agg(F.count("id"), F.sum((F.col("id") != F.col(ROW_INDEX_COL)).cast("int"))).collect()[0]
    assert (agg[0], agg[1]) == (70_000 - len(deleted), 0)


@pytest.mark.parametrize("strategy", ["predicate", "join"])
def test_both_filter_strategies(spark, big_table, monkeypatch, strategy):
    path, version, deleted = big_table
    if strategy == "join":
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_FILES", 0)
    else:
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_RANGES", 10_000)
    df = deltamerge.read(spark, path)
    plan = df._jdf.queryExecution().optimizedPlan().toString() if hasattr(df, "_jdf") else ""
    assert ("Join" in plan) == (strategy == "join") or not plan
    assert _edges(df) == _expected_edges(set(range(70_000)) - deleted)
    # Keep-mode (used by the CDF reader) selects exactly the positions.
    snap = DeltaLog.for_table(path).snapshot(version - 1)
    physical = scan(
        spark, snap.table_root, snap.metadata.schema, (), snap.files, with_file=True, with_row_index=True
    )
    uri = spark_file_uri(absolute_file_path(snap.table_root, snap.files[0].path))
    kept = filter_row_positions(physical, {uri: BitMap64(deleted)}, keep=True)
    assert ids(kept) == sorted(deleted)


def test_partitioned_inline_dvs_mixed_with_plain_files(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(30).select("id", (F.col("id") % 3).cast("string").alias("p"), F.col("id").alias("v"))
    deltamerge.write(df.coalesce(1), path, partition_by="p")
    enable_dvs(path)
    # Partition p=k holds ids k, k+3, ...: row index i <-> id 3*i + k. DV only on p=0 and p=1.
    rows = {"0": [0, 2, 9], "1": [4]}
    v1 = delete_positions(path, lambda f: rows.get(f.partition_values["p"] or "", []), inline=True)
    snap = DeltaLog.for_table(path).snapshot(v1)
    assert sorted(f.deletion_vector.storage_type for f in snap.files if f.deletion_vector) == ["i", "i"]
    gone = {3 * i + int(p) for p, rs in rows.items() for i in rs}
    expected = sorted(set(range(30)) - gone)
    assert ids(deltamerge.read(spark, path)) == expected
    assert deltars_ids(path) == expected
    # Partition values stay right for rows of DV files and plain files alike.
    out = deltamerge.read(spark, path)
    assert out.filter((F.col("id") % 3).cast("string") != F.col("p")).count() == 0
    # A second DV commit on top of an on-disk DV (union with the old DV), then undelete one row.
    v2 = delete_positions(path, lambda f: [1] if f.partition_values["p"] == "0" else [])
    v3 = delete_positions(path, lambda f: [], undelete={f.path: [9] for f in snap.files})
    gone2 = gone | {3}
    assert ids(deltamerge.read(spark, path, version=v2)) == sorted(set(range(30)) - gone2)
    gone3 = gone2 - {27}
    assert ids(deltamerge.read(spark, path, version=v3)) == sorted(set(range(30)) - gone3)
    assert deltars_ids(path) == sorted(set(range(30)) - gone3)
    assert deltars_ids(path, version=v1) == expected


def test_dv_with_empty_files_list_and_no_dv_files(spark, tmp_path):
    path = str(tmp_path / "t")
    deltamerge.write(spark.range(5), path)
    snap = DeltaLog.for_table(path).update()
    empty = scan(spark, snap.table_root, snap.metadata.schema, (), [], with_row_index=True)
    assert empty.count() == 0 and ROW_INDEX_COL in empty.columns
    plain = scan(spark, snap.table_root, snap.metadata.schema, (), snap.files)
    assert "Join" not in plain._jdf.queryExecution().optimizedPlan().toString()


@pytest.mark.sampled
@pytest.mark.parametrize("strategy", ["predicate", "predicate-escaped-literals", "join"])
def test_deleted_positions_under_a_root_with_quotes_and_backslashes(
    spark, tmp_path, monkeypatch, spark_conf, strategy
):
    """The position filter names each file by its URI: a root with quotes, a backslash and a
    backtick must reach Spark intact (the predicate is SQL text, also under the parser's
    escapedStringLiterals; the join a DataFrame)."""
    if strategy == "join":
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_FILES", 0)
    if strategy == "predicate-escaped-literals":
        spark_conf({"spark.sql.parser.escapedStringLiterals": "true"})
    path = str(tmp_path / 'o\'ne \\ `two` "x"')
    df = spark.range(40, numPartitions=4).select("id", (F.col("id") % 2).cast("string").alias("p"))
    deltamerge.write(df, path, partition_by="p", configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, path).delete("id % 5 = 0 OR id = 7")
    snap = DeltaLog.for_table(path).update()
    assert any(f.deletion_vector is not None for f in snap.files)
    expected = [i for i in range(40) if i % 5 != 0 and i != 7]
    assert ids(deltamerge.read(spark, path)) == expected
    assert ids(DeltaTable.forPath(spark, path).toDF().filter("p = '1'")) == [i for i in expected if i % 2]


def test_words_of_a_bitmap():
    """Each block of 64 positions holding one is a word with a bit per position (bit 63 makes the
    word negative as a signed long)."""
    import random

    rng = random.Random(49)
    positions = {0, 1, 63, 64, 127, 128, 4095, (1 << 40) + 5, (1 << 40) + 63}
    positions |= {rng.randrange(1 << 20) for _ in range(500)} | set(range(10_000, 10_300))
    blocks, words = dv_filter._words(BitMap64(positions))
    assert blocks.tolist() == sorted({p >> 6 for p in positions})
    pairs = zip(blocks.tolist(), words.tolist(), strict=True)
    decoded = {b * 64 + i for b, w in pairs for i in range(64) if (w >> i) & 1}
    assert decoded == positions
    assert int(words[blocks.tolist().index(0)]) == (1 | 2 | 1 << 63) - (1 << 64)


@pytest.mark.parametrize("broadcast", [True, False])
def test_word_join_matches_the_predicate_over_several_files(spark, tmp_path, monkeypatch, broadcast):
    """The join strategy (words per block of 64 rows) drops and keeps the same rows as the
    predicate, across files with dense, sparse and no deleted positions, broadcast or shuffled."""
    import random

    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3_000, numPartitions=3), path)
    snap = DeltaLog.for_table(path).update()
    physical = scan(
        spark, snap.table_root, snap.metadata.schema, (), snap.files, with_file=True, with_row_index=True
    )
    uris = [spark_file_uri(absolute_file_path(snap.table_root, f.path)) for f in snap.files]
    rng = random.Random(7)
    masks = {
        uris[0]: BitMap64(p for p in range(1_000) if rng.random() < 0.6),  # dense
        uris[1]: BitMap64([0, 63, 64, 999, 500]),  # sparse, block edges
    }
    if not broadcast:
        monkeypatch.setattr(dv_filter, "BROADCAST_MAX_WORDS", 0)
    by_position = physical.select(FILE_COL, ROW_INDEX_COL, "id")

    def rows(df):  # type: ignore[no-untyped-def]
        return sorted(r["id"] for r in df.select("id").collect())

    expected = {}
    for keep in (False, True):
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_SINGLES", 10**9)
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_RANGES", 10**9)
        expected[keep] = rows(filter_row_positions(by_position, masks, keep=keep))
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_FILES", 0)
        joined = filter_row_positions(by_position, masks, keep=keep)
        assert "Join" in joined._jdf.queryExecution().optimizedPlan().toString()
        assert joined.columns == by_position.columns
        assert rows(joined) == expected[keep]
        monkeypatch.setattr(dv_filter, "PREDICATE_MAX_FILES", 16)
    assert len(expected[True]) == sum(len(b) for b in masks.values())
    assert len(expected[False]) + len(expected[True]) == 3_000
