"""A table with a data column named ``_metadata`` (what ``select("*", "_metadata")`` leaves in a
table fed from files): MERGE, UPDATE and DELETE still find each row's file and position, which
deltamerge reads from Spark's hidden ``_metadata`` column, and the data column keeps its values."""

from __future__ import annotations

import pytest

import deltamerge
from deltamerge import DeltaTable

FEATURES = {
    "cow": {},
    "dv": {"delta.enableDeletionVectors": "true"},
    "row_tracking": {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"},
}


def _rows(spark, path):
    return sorted((r.id, r.v, r._metadata.name) for r in deltamerge.read(spark, path).collect())


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("features", sorted(FEATURES))
def test_merge_update_delete_on_a_table_with_a_metadata_column(spark, tmp_path, features, partitioned):
    path = str(tmp_path / "t")
    target = spark.range(0, 12, numPartitions=3).selectExpr(
        "id", "id * 10 AS v", "named_struct('name', concat('f', id)) AS _metadata", "id % 2 AS p"
    )
    deltamerge.write(
        target, path, configuration=FEATURES[features], partition_by=["p"] if partitioned else None
    )
    source = spark.range(8, 16).selectExpr(
        "id", "id * 100 AS v", "named_struct('name', concat('s', id)) AS _metadata", "id % 2 AS p"
    )
    result = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate("s.id < 10", {"v": "s.v", "_metadata": "s._metadata"})
        .whenMatchedDelete()
        .whenNotMatchedInsertAll()
        .execute()
    )  # fmt: skip
    assert tuple(result.first()) == (8, 2, 2, 4)
    expected = [(i, i * 10, f"f{i}") for i in range(8)] + [(8, 800, "s8"), (9, 900, "s9")]
    expected += [(i, i * 100, f"s{i}") for i in range(12, 16)]
    assert _rows(spark, path) == sorted(expected)

    table = DeltaTable.forPath(spark, path)
    table.update("id = 3", {"v": "-1"})
    table.delete("_metadata.name = 'f5'")
    expected = [(3, -1, "f3") if r[0] == 3 else r for r in expected if r[0] != 5]
    assert _rows(spark, path) == sorted(expected)
