"""Delta's checks of user-given table properties (log/table_config.py): spelling, values, unknown keys."""

from __future__ import annotations

import pytest

from deltamerge.errors import AnalysisError, DeltaMergeError, InvalidArgumentError
from deltamerge.log.table_config import canonical_key, session_defaults, validate


def test_known_keys_take_their_canonical_spelling_and_booleans_lower_case():
    given = {
        "delta.APPENDONLY": "TRUE",
        "Delta.enableChangeDataFeed": "False",
        "delta.checkpointinterval": "5",
        "delta.logretentionduration": "interval 60 days",
        "delta.columnmapping.MODE": "Name",
        "comment": "anything goes outside delta.*",
        "delta.feature.deletionVectors": "supported",
        "delta.constraints.positive": "id > 0",
        "delta.universalFormat.anything": "x",
    }
    assert validate(given) == {
        "delta.appendOnly": "true",
        "delta.enableChangeDataFeed": "false",
        "delta.checkpointInterval": "5",
        "delta.logRetentionDuration": "interval 60 days",
        "delta.columnMapping.mode": "Name",
        "comment": "anything goes outside delta.*",
        "delta.feature.deletionVectors": "supported",
        "delta.constraints.positive": "id > 0",
        "delta.universalFormat.anything": "x",
    }
    assert canonical_key("delta.enablechangedatafeed") == "delta.enableChangeDataFeed"
    assert canonical_key("delta.someday") == "delta.someday" and canonical_key("x.y") == "x.y"


def test_unknown_delta_keys_are_refused_unless_arbitrary_properties_are_allowed():
    with pytest.raises(
        AnalysisError, match=r"DELTA_UNKNOWN_CONFIGURATION.*delta\.enableChangeDataFeeed"
    ) as e:
        validate({"delta.enableChangeDataFeeed": "true"})
    assert e.value.sql_state == "F0000" and "allowArbitraryProperties.enabled" in str(e.value)
    assert validate({"delta.enableChangeDataFeeed": "true"}, allow_arbitrary=True) == {
        "delta.enableChangeDataFeeed": "true"
    }
    # deltamerge honours Databricks' file-size target, so it is not unknown here
    assert validate({"delta.targetFileSize": "64mb"}) == {"delta.targetFileSize": "64mb"}


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("delta.appendOnly", "yes", "needs to be a boolean"),
        ("delta.enableDeletionVectors", "1", "needs to be a boolean"),
        ("delta.checkpointInterval", "0", "positive integer"),
        ("delta.checkpointInterval", "ten", "positive integer"),
        ("delta.dataSkippingNumIndexedCols", "-2", "larger than or equal to -1"),
        ("delta.dataSkippingStringPrefixLength", "-1", "greater or equal to zero"),
        ("delta.deletedFileRetentionDuration", "interval 1 month", "Months and years are not accepted"),
        ("delta.logRetentionDuration", "forever", "calendar interval"),
        ("delta.setTransactionRetentionDuration", "interval -1 days", "calendar interval"),
        ("delta.isolationLevel", "WriteSerializable", "must be Serializable"),
        ("delta.checkpointPolicy", "v3", "classic, v2"),
        ("delta.autoOptimize.autoCompact", "always", "true, false"),
        ("delta.universalFormat.enabledFormats", "iceberg,iceberg", "hudi,iceberg"),
        ("delta.dataSkippingStatsColumns", "a, b-c", "column names"),
        ("delta.dataSkippingStatsColumns", "a..b", "column names"),
        ("delta.targetFileSize", "big", "size in bytes"),
        ("delta.coordinatedCommits.tableConf-preview", "[1]", "JSON object"),
    ],
)
def test_invalid_values_name_the_property_and_what_it_needs(key, value, message):
    with pytest.raises(InvalidArgumentError, match="DELTA_INVALID_CONFIGURATION_VALUE") as e:
        validate({key: value})
    assert key in str(e.value) and message in str(e.value)


def test_values_that_parse():
    ok = {
        "delta.dataSkippingStatsColumns": "a, b.c, `d.e`.f, `x``y`",
        "delta.deletedFileRetentionDuration": "2 weeks",
        "delta.isolationLevel": "Serializable",
        "delta.universalFormat.enabledFormats": "iceberg,hudi",
        "delta.dataSkippingNumIndexedCols": "-1",
        "delta.checkpointPolicy": "v2",
        "delta.autoOptimize.autoCompact": "TRUE",
    }
    assert validate(ok) == ok


def test_special_cases_have_delta_error_classes():
    with pytest.raises(DeltaMergeError, match="DELTA_INVALID_ISOLATION_LEVEL"):
        validate({"delta.isolationLevel": "Chaotic"})
    with pytest.raises(DeltaMergeError, match="DELTA_MODE_NOT_SUPPORTED"):
        validate({"delta.columnMapping.mode": "position"})
    with pytest.raises(AnalysisError, match="DELTA_CANNOT_MODIFY_TABLE_PROPERTY") as e:
        validate({"delta.columnMapping.maxColumnId": "7"})
    assert e.value.sql_state == "42939"


def test_log_retention_must_cover_deleted_file_retention():
    validate({"delta.logRetentionDuration": "interval 7 days"})  # equal to the files' default: fine
    with pytest.raises(
        InvalidArgumentError, match=r"delta\.logRetentionDuration\(interval 1 day\) needs to be"
    ):
        validate({"delta.logRetentionDuration": "interval 1 day"})
    with pytest.raises(
        InvalidArgumentError, match=r"delta\.deletedFileRetentionDuration\(interval 60 days\)"
    ):
        validate({"delta.deletedFileRetentionDuration": "interval 60 days"})
    validate(
        {"delta.deletedFileRetentionDuration": "interval 60 days", "delta.logRetentionDuration": "90 days"}
    )


def test_session_defaults_ignore_names_delta_does_not_know():
    prefix = "spark.databricks.delta.properties.defaults."
    settings = {
        prefix + "enableChangeDataFeed": "TRUE",
        prefix + "noSuchProperty": "1",
        prefix + "feature.deletionVectors": "supported",
        "spark.sql.shuffle.partitions": "2",
    }
    assert session_defaults(settings) == {
        "delta.enableChangeDataFeed": "true",
        "delta.feature.deletionVectors": "supported",
    }
    assert session_defaults(settings, allow_arbitrary=True)["delta.noSuchProperty"] == "1"
    with pytest.raises(InvalidArgumentError, match="needs to be a boolean"):
        session_defaults({prefix + "appendOnly": "perhaps"})
