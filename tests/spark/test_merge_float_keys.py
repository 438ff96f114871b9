"""Floating-point join keys: NaN equals NaN and -0.0 equals 0.0 in Spark's joins, so a MERGE on
them matches exactly as Delta's (one full outer join) does, in every execution deltamerge picks.

The source is literal rows, whose constraints (``k <=> NaN OR k <=> 0.0 ...``) Spark turns into
filters on the target side; a cached relation's batch statistics leave NaN out, so a filter reaching
one dropped the NaN rows (the NaN source row was then inserted beside the updated target row)."""

from __future__ import annotations

import pytest
from test_merge_pruning import _settings

import deltamerge
from deltamerge import DeltaTable
from merge_variants import VARIANTS

TARGET = (
    "SELECT * FROM VALUES (double('NaN'), 1), (1.0D, 2), (-0.0D, 3), (CAST(NULL AS DOUBLE), 4), "
    "(7.0D, 5) AS t(k, v)"
)
# SELECT ... UNION ALL (not VALUES, a local relation without constraints): Spark derives
# ``k <=> NaN OR k <=> 0.0 ...`` from it.
SOURCE = (
    "SELECT double('NaN') AS k, 10 AS v UNION ALL SELECT 0.0D, 30 UNION ALL SELECT 5.0D, 50 "
    "UNION ALL SELECT 7.0D, 70"
)


def _key(row):  # NaN and None sort (NaN is not equal to itself in Python)
    k, v = row
    return ("null" if k is None else "nan" if k != k else f"{k:+020.3f}", v)


def _rows(spark, path):
    return sorted(((r.k, r.v) for r in deltamerge.read(spark, path).collect()), key=_key)


def _target(spark, path, *, dv, files, cdf=False):
    df = spark.sql(TARGET).repartition(files, "v") if files > 1 else spark.sql(TARGET).coalesce(1)
    conf = {"delta.enableDeletionVectors": str(dv).lower(), "delta.enableChangeDataFeed": str(cdf).lower()}
    deltamerge.write(df, path, configuration=conf)


def _upsert(spark, path, variant, *, update_all=False):
    """``t.k = s.k``: UPDATE SET v (or *, which writes like the INSERT), INSERT *."""
    with _settings(spark, VARIANTS[variant]):
        builder = DeltaTable.forPath(spark, path).alias("t").merge(spark.sql(SOURCE).alias("s"), "t.k = s.k")
        builder = (
            builder.whenMatchedUpdateAll() if update_all else builder.whenMatchedUpdate(set={"v": "s.v"})
        )
        return builder.whenNotMatchedInsertAll().execute()


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_nan_and_negative_zero_keys_upsert(spark, tmp_path, variant, dv):
    path = str(tmp_path / "t")
    _target(spark, path, dv=dv, files=5)  # some files untouched: copy-on-write takes the two jobs
    result = _upsert(spark, path, variant)
    # NaN, -0.0 (= 0.0) and 7.0 match; 5.0 is inserted; 1.0 and the null key stay.
    assert tuple(result.first()) == (4, 3, 0, 1)
    rows = _rows(spark, path)
    assert sorted(v for _, v in rows) == [2, 4, 10, 30, 50, 70]
    by_v = {v: k for k, v in rows}
    assert by_v[10] != by_v[10]  # the NaN row was updated in place, not inserted a second time
    assert by_v[30] == 0.0 and str(by_v[30]) == "-0.0"  # only v was set: the key stays -0.0
    assert by_v[4] is None


@pytest.mark.parametrize("cdf", [False, True], ids=["nocdf", "cdf"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_nan_keys_with_not_matched_by_source_in_sql(spark, tmp_path, dv, cdf):
    path = str(tmp_path / "t")
    _target(spark, path, dv=dv, files=5, cdf=cdf)
    deltamerge.register_table(spark, "float_keys_target", path)
    result = deltamerge.sql(
        spark,
        f"""MERGE INTO float_keys_target t USING ({SOURCE}) s ON t.k = s.k
        WHEN MATCHED AND s.v > 20 THEN DELETE
        WHEN MATCHED THEN UPDATE SET v = s.v
        WHEN NOT MATCHED THEN INSERT *
        WHEN NOT MATCHED BY SOURCE AND t.k IS NULL THEN DELETE""",
    )
    # NaN updated; -0.0 and 7.0 deleted; 5.0 inserted; the null target row deleted; 1.0 left
    # alone.
    assert tuple(result.first()) == (5, 1, 3, 1)
    rows = _rows(spark, path)
    assert sorted(v for _, v in rows) == [2, 10, 50]
    nan = {v: k for k, v in rows}[10]
    assert nan != nan
    if cdf:
        changes = deltamerge.read_changes(spark, path, starting_version=1).collect()
        assert sorted((r._change_type, r.v) for r in changes) == [
            ("delete", 3), ("delete", 4), ("delete", 5), ("insert", 50),
            ("update_postimage", 10), ("update_preimage", 1),
        ]  # fmt: skip


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_nan_keys_insert_only(spark, tmp_path, dv):
    path = str(tmp_path / "t")
    _target(spark, path, dv=dv, files=5)
    result = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(spark.sql(SOURCE).alias("s"), "t.k = s.k")
        .whenNotMatchedInsertAll()
        .execute()
    )  # fmt: skip
    assert tuple(result.first()) == (1, 0, 0, 1)  # 5.0: NaN, 0.0 and 7.0 match
    assert sorted(v for _, v in _rows(spark, path)) == [1, 2, 3, 4, 5, 50]


def _arrow_target(spark, path, *, dv):
    """One row group whose statistics leave NaN out (arrow-rs writes min 1.0, max 8.0)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    keys = [float("nan"), 1.0, 2.0, 7.0, 8.0]
    write_deltalake(
        path, pa.table({"k": pa.array(keys, pa.float64()), "v": pa.array([1, 2, 3, 4, 5], pa.int32())})
    )
    if dv:
        deltamerge.sql(
            spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableDeletionVectors = true)"
        )


@pytest.mark.sampled(stride=2)
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_nan_keys_in_row_groups_whose_statistics_leave_nan_out(spark, tmp_path, variant, dv):
    """Spark pushes ``k <=> NaN`` into the Parquet scan, and a row group whose max is 8.0 looks
    free of NaN: the NaN target row must still match."""
    path = str(tmp_path / "t")
    _arrow_target(spark, path, dv=dv)
    result = _upsert(spark, path, variant)
    assert tuple(result.first()) == (4, 2, 0, 2)  # NaN and 7.0 match
    rows = _rows(spark, path)
    assert sorted(v for _, v in rows) == [2, 3, 5, 10, 30, 50, 70]
    nan = {v: k for k, v in rows}[10]
    assert nan != nan


@pytest.mark.parametrize("variant", ["default", "two-job", "delta-shaped"])
def test_nan_partition_keys(spark, tmp_path, variant):
    path = str(tmp_path / "t")
    df = spark.sql(TARGET).selectExpr("k AS p", "v")
    deltamerge.write(df, path, partition_by=["p"])
    source = spark.sql(SOURCE).selectExpr("k AS p", "v")
    with _settings(spark, VARIANTS[variant]):
        result = (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(source.alias("s"), "t.p = s.p")
            .whenMatchedUpdate(set={"v": "s.v"})
            .whenNotMatchedInsertAll()
            .execute()
        )  # fmt: skip
    assert tuple(result.first()) == (4, 3, 0, 1)
    rows = sorted(((r.p, r.v) for r in deltamerge.read(spark, path).collect()), key=_key)
    assert sorted(v for _, v in rows) == [2, 4, 10, 30, 50, 70]


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_nan_keys_in_row_groups_whose_statistics_leave_nan_out_uniform_upsert(spark, tmp_path, dv):
    """UPDATE SET * / INSERT *: merge/uniform_upsert.py finds the matched pairs in its own job."""
    path = str(tmp_path / "t")
    _arrow_target(spark, path, dv=dv)
    assert tuple(_upsert(spark, path, "default", update_all=True).first()) == (4, 2, 0, 2)
    rows = _rows(spark, path)
    assert sorted(v for _, v in rows) == [2, 3, 5, 10, 30, 50, 70]
    nan = {v: k for k, v in rows}[10]
    assert nan != nan
