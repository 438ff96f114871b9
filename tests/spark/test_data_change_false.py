"""The writer option ``dataChange=false`` (Delta's rearrangeOnly: the "compact files" recipe) and
``spark.databricks.delta.replaceWhere.dataColumns.enabled=false``, as Delta's WriteIntoDelta.

A rearranging write commits its files with ``dataChange: false`` (the change data feed and
streaming readers skip them), records no change data, and may not create the table, change its
schema or partitioning, or replace rows by a predicate on data columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deltamerge.errors import DeltaMergeError
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


def _commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def _file_actions(path: str, version: int) -> list[tuple[str, bool]]:
    return sorted(
        (k, a[k]["dataChange"]) for a in _commit(path, version) for k in a if k in ("add", "remove")
    )


def _data_files(path: str) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*.parquet"))


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_compacting_a_partition_rearranges_without_changing_data(dspark, tmp_path: Path, dv: bool) -> None:
    path = str(tmp_path / "t")
    props = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(dv).lower()}
    df = dspark.range(60).selectExpr("id", "CAST(id % 3 AS STRING) AS p").repartition(4)
    df.write.format("delta").partitionBy("p").options(**props).save(path)
    before = _rows(dspark, path)
    small = len([a for a in _commit(path, 0) if "add" in a and a["add"]["partitionValues"]["p"] == "0"])
    assert small > 1
    (
        dspark.read.format("delta")
        .load(path)
        .where("p = '0'")
        .repartition(1)
        .write.format("delta")
        .mode("overwrite")
        .option("dataChange", "false")
        .option("replaceWhere", "p = '0'")
        .save(path)
    )
    assert _file_actions(path, 1) == sorted([("add", False)] + [("remove", False)] * small)
    assert _rows(dspark, path) == before
    assert not os.path.exists(os.path.join(path, "_change_data"))
    changes = (
        dspark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
    )
    assert changes.count() == 0
    # The whole table, rewritten into one file: again no change.
    dspark.read.format("delta").load(path).repartition(1).write.format("delta").mode("overwrite").option(
        "dataChange", "false"
    ).save(path)
    assert {dc for _, dc in _file_actions(path, 2)} == {False}
    assert _rows(dspark, path) == before
    assert changes.count() == 0
    import pyarrow as pa
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    other = pa.table(QueryBuilder().register("t", RsTable(path)).execute("SELECT id, p FROM t").read_all())
    assert sorted((r["id"], r["p"]) for r in other.to_pylist()) == before


def test_an_append_with_data_change_false_marks_its_files(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dspark.range(3).write.format("delta").save(path)
    dspark.range(3, 5).write.format("delta").mode("append").option("dataChange", "false").save(path)
    assert _file_actions(path, 1) == [("add", False)] * len(_file_actions(path, 1))
    assert [r[0] for r in _rows(dspark, path)] == [0, 1, 2, 3, 4]


def test_what_a_rearranging_write_may_not_do(dspark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")

    def write(df, **options):  # type: ignore[no-untyped-def]
        mode = options.pop("mode", "overwrite")
        df.write.format("delta").mode(mode).options(dataChange="false", **options).save(path)

    data = dspark.range(4).selectExpr("id", "CAST(id % 2 AS STRING) AS p")
    with pytest.raises(DeltaMergeError, match="Attempted operation: 'Create a Delta table'") as info:
        write(data)
    assert info.value.error_class == "DELTA_DATA_CHANGE_FALSE"
    assert not os.path.exists(path)
    data.write.format("delta").partitionBy("p").save(path)
    files = _data_files(path)
    wider = data.selectExpr("*", "id * 2 AS w")
    cases = [
        (wider, {"mergeSchema": "true"}, "DELTA_DATA_CHANGE_FALSE", "Change the Delta table schema"),
        (wider, {"mergeSchema": "true", "replaceWhere": "p = '0'"}, "DELTA_DATA_CHANGE_FALSE", "Change the"),
        (wider, {"mergeSchema": "true", "mode": "append"}, "DELTA_DATA_CHANGE_FALSE", "Change the"),
        (wider, {"overwriteSchema": "true"}, "DELTA_DATA_CHANGE_FALSE", "Overwrite the Delta table schema"),
        (data, {"overwriteSchema": "true"}, "DELTA_DATA_CHANGE_FALSE", "change the partition schema"),
        (
            data,
            {"replaceWhere": "p = '0' AND id > 1"},
            "DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET",
            "id > 1",
        ),
        (data, {"dataChange": "maybe"}, "DELTA_ILLEGAL_OPTION", "dataChange"),
    ]
    for df, options, error_class, text in cases:
        with pytest.raises(DeltaMergeError, match=text) as info:
            if "dataChange" in options:
                df.write.format("delta").mode("append").options(**options).save(path)
            else:
                write(df, **options)
        assert info.value.error_class == error_class, options
    assert DeltaLog.for_table(path).update().version == 0
    assert _data_files(path) == files
    # The same overwrite schema, partitioning and columns: allowed.
    data.repartition(1).write.format("delta").mode("overwrite").partitionBy("p").options(
        dataChange="false", overwriteSchema="true"
    ).save(path)
    assert {dc for _, dc in _file_actions(path, 1)} == {False}


def test_replace_where_on_partition_columns_only_when_data_columns_are_off(
    dspark, spark_conf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    data = dspark.range(6).selectExpr("id", "CAST(id % 2 AS STRING) AS p")
    data.write.format("delta").partitionBy("p").save(path)
    spark_conf(
        {
            "spark.databricks.delta.replaceWhere.dataColumns.enabled": "false",
            "spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false",
        }
    )

    def replace(df, predicate: str) -> None:  # type: ignore[no-untyped-def]
        df.write.format("delta").mode("overwrite").option("replaceWhere", predicate).save(path)

    with pytest.raises(DeltaMergeError, match=r"non-partition column 'id'.*\[p\]") as info:
        replace(data.where("id > 3"), "id > 3")
    assert info.value.error_class == "DELTA_NON_PARTITION_COLUMN_REFERENCE"
    # Rows outside the predicate's partitions are refused even with the constraint check off.
    with pytest.raises(DeltaMergeError) as info:
        replace(data, "p = '0'")
    assert info.value.error_class == "DELTA_REPLACE_WHERE_MISMATCH"
    assert DeltaLog.for_table(path).update().version == 0
    replace(dspark.createDataFrame([(10, "0")], "id bigint, p string"), "p = '0'")
    assert _rows(dspark, path) == [(1, "1"), (3, "1"), (5, "1"), (10, "0")]
    # A new table checks the predicate against the partitioning it is created with.
    with pytest.raises(DeltaMergeError, match="DELTA_NON_PARTITION_COLUMN_REFERENCE"):
        data.write.format("delta").mode("overwrite").partitionBy("p").option("replaceWhere", "id > 1").save(
            str(tmp_path / "new")
        )
