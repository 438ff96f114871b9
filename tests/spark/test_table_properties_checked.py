"""User-given table properties are checked as Delta checks them, on every way in (SQL CREATE and
ALTER, the table builder, writer options, deltamerge.write, CLONE, session defaults), before
anything is written; known keys are stored in Delta's spelling, so they take effect."""

from __future__ import annotations

import os

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError
from deltamerge.io import snapshot_for

pytestmark = pytest.mark.spark

DEFAULTS = "spark.databricks.delta.properties.defaults."
ALLOW = "spark.databricks.delta.allowArbitraryProperties.enabled"


def _sql(spark, text):
    return deltamerge.sql(spark, text)


@pytest.fixture
def dspark(spark):
    deltamerge.configure(spark)  # format("delta")
    yield spark
    deltamerge.unconfigure()


def _listing(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_misspelt_properties_are_refused_everywhere_and_nothing_is_written(dspark, tmp_path):
    spark = dspark
    path = str(tmp_path / "t")
    df = spark.range(3)
    create = f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.appendOnlyy' = '1')"
    builder = DeltaTable.create(spark).location(path).addColumn("id", "bigint")
    attempts = [
        lambda: _sql(spark, create),
        lambda: builder.property("delta.enableCDF", "true").execute(),
        lambda: df.write.format("delta").option("delta.enableDeletionVector", "true").save(path),
        lambda: deltamerge.write(df, path, configuration={"delta.checkpointIntervall": "5"}),
    ]  # fmt: skip
    for attempt in attempts:
        with pytest.raises(DeltaMergeError, match="DELTA_UNKNOWN_CONFIGURATION") as e:
            attempt()
        assert ALLOW in str(e.value)
        assert not os.path.exists(path)

    deltamerge.write(df, path)
    before = _listing(path)
    with pytest.raises(DeltaMergeError, match="DELTA_UNKNOWN_CONFIGURATION"):
        _sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetention' = '1 day')")
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_CONFIGURATION_VALUE"):
        _sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '0')")
    with pytest.raises(DeltaMergeError, match="DELTA_CANNOT_MODIFY_TABLE_PROPERTY"):
        _sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.maxColumnId' = '9')")
    with pytest.raises(DeltaMergeError, match="DELTA_UNKNOWN_CONFIGURATION"):
        DeltaTable.forPath(spark, path).clone(
            str(tmp_path / "c"), isShallow=True, properties={"delta.nope": "1"}
        )
    with pytest.raises(DeltaMergeError, match="DELTA_UNKNOWN_CONFIGURATION"):
        df.write.format("delta").mode("append").option("delta.nope", "1").save(path)
    assert _listing(path) == before and not os.path.exists(tmp_path / "c")


def test_known_properties_are_stored_in_deltas_spelling_and_take_effect(spark, tmp_path):
    path = str(tmp_path / "t")
    _sql(
        spark,
        f"""CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta
            TBLPROPERTIES ('delta.enablechangedatafeed' = 'TRUE', 'DELTA.APPENDONLY' = 'false')""",
    )
    conf = snapshot_for(path).metadata.configuration
    assert conf["delta.enableChangeDataFeed"] == "true" and conf["delta.appendOnly"] == "false"
    deltamerge.write(spark.createDataFrame([(1, "a")], "id bigint, v string"), path, mode="append")
    changes = deltamerge.read_changes(spark, path, starting_version=1).collect()
    assert [(r["id"], r["_change_type"]) for r in changes] == [(1, "insert")]  # CDF is on

    _sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.appendonly' = 'TRUE')")
    assert snapshot_for(path).metadata.configuration["delta.appendOnly"] == "true"
    with pytest.raises(DeltaMergeError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY"):
        _sql(spark, f"DELETE FROM delta.`{path}` WHERE id = 1")
    _sql(spark, f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('delta.APPENDONLY')")
    assert "delta.appendOnly" not in snapshot_for(path).metadata.configuration


def test_session_defaults_and_the_escape_hatch(spark, tmp_path):
    spark.conf.set(DEFAULTS + "enableChangeDataFeed", "true")
    spark.conf.set(DEFAULTS + "noSuchThing", "1")  # Delta copies only the defaults it knows
    try:
        deltamerge.write(spark.range(1), str(tmp_path / "a"))
    finally:
        spark.conf.unset(DEFAULTS + "enableChangeDataFeed")
        spark.conf.unset(DEFAULTS + "noSuchThing")
    conf = snapshot_for(str(tmp_path / "a")).metadata.configuration
    assert conf.get("delta.enableChangeDataFeed") == "true" and "delta.noSuchThing" not in conf

    spark.conf.set(ALLOW, "true")
    try:
        deltamerge.write(spark.range(1), str(tmp_path / "b"), configuration={"delta.fromAnotherEngine": "x"})
    finally:
        spark.conf.unset(ALLOW)
    assert snapshot_for(str(tmp_path / "b")).metadata.configuration["delta.fromAnotherEngine"] == "x"
    # a property already in the log is never checked again: the table stays writable
    deltamerge.write(spark.range(1, 2), str(tmp_path / "b"), mode="append")
    assert deltamerge.read(spark, str(tmp_path / "b")).count() == 2


def test_all_settings_read_in_a_few_round_trips_equal_spark_conf_get_all(spark):
    """``all_settings`` (session defaults of new tables) reads the keys and values joined in one
    string each; a value holding the separator falls back to PySpark's walk of the map."""
    from deltamerge.spark.session import all_settings
    from py4j_trips import round_trips

    spark.conf.set(DEFAULTS + "appendOnly", "true")
    try:
        with round_trips() as trips:
            got = all_settings(spark)
        assert got == {str(k): str(v) for k, v in spark.conf.getAll.items()}
        assert got[DEFAULTS + "appendOnly"] == "true" and len(trips) <= 8 < len(got)
        spark.conf.set("deltamerge.test.odd", "a\u0000b -> c")
        assert all_settings(spark)["deltamerge.test.odd"] == "a\u0000b -> c"
    finally:
        spark.conf.unset(DEFAULTS + "appendOnly")
        spark.conf.unset("deltamerge.test.odd")


def test_stats_columns_are_checked_against_the_schema(spark, tmp_path):
    path = str(tmp_path / "t")
    columns = "id INT, s STRUCT<x: INT, b: BOOLEAN>, p STRING"
    create = f"CREATE TABLE delta.`{path}` ({columns}) USING delta PARTITIONED BY (p)"
    with pytest.raises(DeltaMergeError, match="DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN"):
        _sql(spark, create + " TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 'id, p')")
    assert not os.path.exists(path)
    _sql(spark, create + " TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 's')")
    with pytest.raises(DeltaMergeError, match="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"):
        _sql(
            spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 'ids')"
        )
    _sql(
        spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 'id, s.x')"
    )
    assert snapshot_for(path).metadata.configuration["delta.dataSkippingStatsColumns"] == "id, s.x"
