"""deltamerge's errors are the PySpark exception types delta-spark's reach Python as, so code written
for delta-spark catches them: AnalysisException, ParseException, IllegalArgumentException,
UnsupportedOperationException, and delta.exceptions' conflict names (deltamerge.exceptions)."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException, IllegalArgumentException, ParseException, PySparkException
from pyspark.errors.exceptions.base import UnsupportedOperationException

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

pytestmark = pytest.mark.spark


def test_delta_spark_exception_types(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(3).selectExpr("id", "id AS v"), path, configuration={"delta.appendOnly": "true"}
    )
    table = DeltaTable.forPath(spark, path)
    source = spark.range(2).selectExpr("id", "id AS v")
    with pytest.raises(AnalysisException) as info:
        table.alias("t").merge(source.alias("s"), "t.id = s.nope").whenMatchedDelete().execute()
    assert info.value.getCondition() == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    assert str(info.value).startswith("[DELTA_MERGE_UNRESOLVED_EXPRESSION] ")
    with pytest.raises(ParseException):
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` t USING (SELECT 1 AS id) s ON t.id = = s.id WHEN MATCHED THEN DELETE",
        )
    with pytest.raises(UnsupportedOperationException) as unsupported:
        table.delete("id = 1")
    assert unsupported.value.getCondition() == "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    assert unsupported.value.getSqlState() == "42809"
    with pytest.raises(IllegalArgumentException):
        deltamerge.write(spark.range(1), path, mode="append", options={"dataChange": "maybe"})
    other = str(tmp_path / "u")
    deltamerge.write(spark.range(3).selectExpr("id", "id AS v"), other)
    doubled = spark.createDataFrame([(1, 1), (1, 2)], "id long, v long")
    with pytest.raises(UnsupportedOperationException, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW"):
        DeltaTable.forPath(spark, other).alias("t").merge(
            doubled.alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().execute()


def test_commit_conflicts_under_delta_spark_names(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from deltamerge.exceptions import ConcurrentAppendException, DeltaConcurrentModificationException

    path = str(tmp_path / "t")
    deltamerge.write(spark.range(3), path)
    txn = OptimisticTransaction(DeltaLog.for_table(path))
    txn.mark_read_whole_table()
    removed = txn.snapshot.files[0].remove(0)  # type: ignore[union-attr]
    # A concurrent insert that read the table (not a blind append, which WriteSerializable ignores).
    DeltaTable.forPath(spark, path).alias("t").merge(
        spark.range(3, 5).alias("s"), "t.id = s.id"
    ).whenNotMatchedInsertAll().execute()
    with pytest.raises(ConcurrentAppendException) as info:
        txn.commit([removed], Operation("DELETE", {"predicate": ["true"]}))
    assert isinstance(info.value, DeltaConcurrentModificationException)
    assert isinstance(info.value, PySparkException)
    assert info.value.getCondition() == "DELTA_CONCURRENT_APPEND"
