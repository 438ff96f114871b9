"""Typed settings: parsers and the OPTIMIZE / Z-order settings' defaults."""

from __future__ import annotations

import pytest

from deltamerge.config import SessionConf, TableProperties, parse_bool, parse_bytes, parse_interval_ms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1073741824", 1 << 30),
        ("256m", 256 << 20),
        ("1g", 1 << 30),
        ("1GB", 1 << 30),
        ("64kb", 64 << 10),
        (" 100b ", 100),
        ("1.5m", 3 << 19),
        ("2t", 2 << 40),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "g", "12q", "abc", "1 gig"])
def test_parse_bytes_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_bytes(text)


def test_parsers() -> None:
    assert parse_bool(" TRUE ") and not parse_bool("false")
    assert parse_interval_ms("interval 2 days 3 hours") == 2 * 86_400_000 + 3 * 3_600_000


def test_optimize_settings_defaults_and_values() -> None:
    empty: dict[str, str] = {}
    assert SessionConf.OPTIMIZE_MAX_FILE_SIZE.get(empty) == 1 << 30
    assert SessionConf.OPTIMIZE_MIN_FILE_SIZE.get(empty) == 1 << 30
    assert SessionConf.OPTIMIZE_MAX_DELETED_ROWS_RATIO.get(empty) == 0.05
    assert SessionConf.ZORDER_STATS_CHECK.get(empty) is True
    assert SessionConf.MDC_RANGE_ID_MAX.get(empty) == 1000
    assert SessionConf.MDC_ADD_NOISE.get(empty) is True
    assert SessionConf.MDC_SORT_WITHIN_FILES.get(empty) is False
    conf = {
        "spark.databricks.delta.optimize.maxFileSize": "64m",
        "spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled": "False",
        "spark.databricks.io.skipping.mdc.rangeId.max": "16",
        "spark.databricks.io.skipping.mdc.addNoise": "false",
        "spark.databricks.io.skipping.mdc.sortWithinFiles": "TRUE",
    }
    assert SessionConf.OPTIMIZE_MAX_FILE_SIZE.get(conf.get) == 64 << 20
    assert SessionConf.ZORDER_STATS_CHECK.get(conf.get) is False
    assert SessionConf.MDC_RANGE_ID_MAX.get(conf) == 16
    assert SessionConf.MDC_ADD_NOISE.get(conf) is False
    assert SessionConf.MDC_SORT_WITHIN_FILES.get(conf) is True
    # A malformed value falls back to the default, as before.
    assert SessionConf.OPTIMIZE_MAX_FILE_SIZE.get({SessionConf.OPTIMIZE_MAX_FILE_SIZE.key: "big"}) == 1 << 30
    assert TableProperties.TARGET_FILE_SIZE.get({"delta.targetFileSize": "32mb"}) == 32 << 20


def test_idempotency_options_and_session_settings() -> None:
    from deltamerge.errors import InvalidArgumentError
    from deltamerge.txn.idempotency import idempotency

    assert idempotency({}, None) is None
    assert idempotency({}, {"TXNAPPID": "a", "txnVersion": "3"}) == ("a", 3, False)
    session = {"spark.databricks.delta.write.txnAppId": "s", "spark.databricks.delta.write.txnVersion": "7"}
    assert idempotency(session, None) == ("s", 7, True)
    assert idempotency(session.get, {"txnAppId": "a", "txnVersion": "1"}) == ("a", 1, False)  # options win
    for bad, error_class in [
        (({}, {"txnAppId": "a"}), "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS.MISSING_DATAFRAME_WRITE_OPTIONS"),
        (({}, {"txnAppId": "a", "txnVersion": "x"}), "DELTA_ILLEGAL_OPTION"),
        (({"spark.databricks.delta.write.txnVersion": "1"}, None),
         "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS.MISSING_SESSION_CONFS"),
    ]:  # fmt: skip
        with pytest.raises(InvalidArgumentError) as e:
            idempotency(*bad)
        assert e.value.error_class == error_class
