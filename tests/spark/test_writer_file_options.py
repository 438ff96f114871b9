"""The Parquet writer options Delta hands on from a DataFrame write (``compression``,
``maxRecordsPerFile``), and the session's codec for every other write (MERGE included)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


def _files(path: str) -> list[pq.FileMetaData]:
    return [
        pq.read_metadata(p) for p in sorted(Path(path).rglob("*.parquet")) if "_change_data" not in str(p)
    ]


def _codecs(path: str) -> set[str]:
    return {md.row_group(0).column(0).compression for md in _files(path)}


def test_compression_and_max_records_per_file_options(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = dspark.range(100).selectExpr("id", "CAST(id % 2 AS STRING) AS p").coalesce(1)
    data.write.format("delta").partitionBy("p").options(compression="zstd", maxRecordsPerFile="20").save(path)
    assert _codecs(path) == {"ZSTD"}
    assert sorted(md.num_rows for md in _files(path)) == [10, 10, 20, 20, 20, 20]
    # replaceWhere runs on the MERGE machinery: the options reach its files too.
    replacement = dspark.range(30).selectExpr("id + 1000 AS id", "'0' AS p").coalesce(1)
    replacement.write.format("delta").mode("overwrite").options(
        replaceWhere="p = '0'", compression="gzip", MAXRECORDSPERFILE="7"
    ).save(path)
    live = [f.path for f in DeltaLog.for_table(path).update().files if f.path.startswith("p=0/")]
    new = [pq.read_metadata(Path(path) / f) for f in live]
    assert sorted(md.num_rows for md in new) == [2, 7, 7, 7, 7]
    assert {md.row_group(0).column(0).compression for md in new} == {"GZIP"}
    assert deltamerge.read(dspark, path).where("p = '0'").count() == 30


def test_the_session_codec_applies_to_writes_and_merges(dspark, spark_conf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spark_conf({"spark.sql.parquet.compression.codec": "zstd"})
    path = str(tmp_path / "t")
    deltamerge.write(dspark.range(10).selectExpr("id", "id AS v"), path)
    source = dspark.range(5, 15).selectExpr("id", "id * 10 AS v")
    DeltaTable.forPath(dspark, path).alias("t").merge(
        source.alias("s"), "t.id = s.id"
    ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert _codecs(path) == {"ZSTD"}
    assert deltamerge.read(dspark, path).count() == 15
