"""Idempotent writes (Delta's ``txnAppId`` / ``txnVersion``) and writer options, shared by the
DataFrame writers and MERGE."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from deltamerge.config import SessionConf
from deltamerge.errors import InvalidArgumentError

ConfSource = Mapping[str, str] | Callable[[str], "str | None"]


def writer_option(options: Mapping[str, str] | None, name: str) -> str | None:
    """A DataFrame writer option by name, matched case-insensitively as Spark's options are."""
    wanted = name.lower()
    return next((v for k, v in (options or {}).items() if k.lower() == wanted), None)


def writer_flag(options: Mapping[str, str] | None, name: str, default: bool = False) -> bool:
    """A ``true``/``false`` DataFrame writer option (``DELTA_ILLEGAL_OPTION`` for anything else)."""
    value = writer_option(options, name)
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(
            f"Invalid value '{value}' for option '{name}', must be 'true' or 'false'.",
            error_class="DELTA_ILLEGAL_OPTION",
        )
    return text == "true"


def rearranges_only(options: Mapping[str, str] | None) -> bool:
    """Whether a write declares it only rearranges data already in the table (Delta's writer
    option ``dataChange=false``): its files are committed with ``dataChange: false``, which
    streaming and change-feed readers skip, and it may not change the table's metadata."""
    return not writer_flag(options, "dataChange", default=True)


def data_change_false_error(attempted: str) -> InvalidArgumentError:
    """Delta's ``DELTA_DATA_CHANGE_FALSE``: a ``dataChange=false`` write that would change metadata."""
    return InvalidArgumentError(
        f"Cannot change table metadata because the 'dataChange' option is set to false. Attempted "
        f"operation: '{attempted}'. Write without dataChange=false to change the table's metadata.",
        error_class="DELTA_DATA_CHANGE_FALSE",
        sql_state="0AKDE",
    )


def idempotency(conf: ConfSource, options: Mapping[str, str] | None = None) -> tuple[str, int, bool] | None:
    """(app id, version, from the session settings) of an idempotent write, or None.

    Delta's rule: the writer options ``txnAppId`` and ``txnVersion`` together, else the session
    settings ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` together; one without the
    other is ``DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS``.
    """
    app, version_text = writer_option(options, "txnAppId"), writer_option(options, "txnVersion")
    if (app is None) != (version_text is None):
        raise InvalidArgumentError(
            "Invalid options for idempotent DataFrame writes: both txnVersion and txnAppId must be "
            "specified for idempotent DataFrame writes.",
            error_class="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS.MISSING_DATAFRAME_WRITE_OPTIONS",
        )
    if app is not None and version_text is not None:
        try:
            version = int(str(version_text).strip())
        except ValueError:
            version = -1
        if version < 0:
            raise InvalidArgumentError(
                f"Invalid value '{version_text}' for option 'txnVersion', must be a non-negative integer.",
                error_class="DELTA_ILLEGAL_OPTION",
            )
        return str(app), version, False
    get = conf if callable(conf) else conf.get
    app = get(SessionConf.TXN_APP_ID.key) or None
    raw_version = get(SessionConf.TXN_VERSION.key)
    if (app is None) != (raw_version is None or str(raw_version).strip() == ""):
        raise InvalidArgumentError(
            "Invalid options for idempotent Delta writes: both spark.databricks.delta.write.txnAppId and "
            "spark.databricks.delta.write.txnVersion must be specified for idempotent Delta writes.",
            error_class="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS.MISSING_SESSION_CONFS",
        )
    if app is None:
        return None
    version = SessionConf.TXN_VERSION.get(get)
    return (app, version, True) if version >= 0 else None
