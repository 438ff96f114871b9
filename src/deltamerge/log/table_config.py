"""The ``delta.*`` table properties a user may set: their spelling and their valid values.

Delta checks the properties a user gives (CREATE TABLE, ALTER TABLE SET TBLPROPERTIES, writer
options, CLONE overrides) before anything is committed: keys are matched case-insensitively and
stored in their canonical spelling, values must parse, and an unknown ``delta.*`` key is refused
(``DELTA_UNKNOWN_CONFIGURATION``) unless ``spark.databricks.delta.allowArbitraryProperties.enabled``
is set, because a misspelt property would otherwise be silently ignored. Properties already in a
table's log are never checked again: tables written by other engines carry keys of their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from deltamerge.config import SESSION_PREFIX, parse_bytes, parse_interval_ms
from deltamerge.errors import AnalysisError, InvalidArgumentError
from deltamerge.log import column_mapping

ALLOW_ARBITRARY_KEY = SESSION_PREFIX + "allowArbitraryProperties.enabled"
_INTERVAL_HELP = (
    "needs to be provided as a calendar interval such as '2 weeks'. Months and years are not "
    "accepted. You may specify '365 days' for a year instead."
)
_INT = re.compile(r"[+-]?\d+")
_NAME_PART = re.compile(r"`(?:[^`]|``)*`|[A-Za-z0-9_]+")


def _boolean(value: str) -> str:
    # Scala's String.toBoolean: "true" or "false" in any case, nothing else.
    if value.lower() not in ("true", "false"):
        raise ValueError("needs to be a boolean.")
    return value.lower()  # stored lower-case: delta-rs parses booleans case-sensitively


def _integer(low: int, help_text: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not _INT.fullmatch(value) or int(value) < low:
            raise ValueError(help_text)
        return value

    return check


def _interval(value: str) -> str:
    try:
        if parse_interval_ms(value) < 0:
            raise ValueError
    except ValueError:
        raise ValueError(_INTERVAL_HELP) from None
    return value


def _one_of(*allowed: str, case_sensitive: bool = False) -> Callable[[str], str]:
    def check(value: str) -> str:
        if (value if case_sensitive else value.lower()) not in allowed:
            raise ValueError(f"can be one of the following: {', '.join(allowed)}.")
        return value

    return check


def _serializable(value: str) -> str:
    if value not in ("Serializable", "WriteSerializable", "SnapshotIsolation"):
        raise InvalidArgumentError(
            f"invalid isolation level '{value}'",
            error_class="DELTA_INVALID_ISOLATION_LEVEL",
            sql_state="25000",
        )
    if value != "Serializable":
        raise ValueError("must be Serializable")
    return value


def _column_list(value: str) -> str:
    """A comma-separated list of (dotted, optionally backquoted) column names."""
    for item in value.split(","):
        rest = item.strip()
        while True:
            m = _NAME_PART.match(rest)
            if m is None:
                raise ValueError(
                    "is a comma-separated list of column names: letters, digits and underscores, or "
                    "any name in backquotes (`a b`.c); nested fields are joined with dots."
                )
            rest = rest[m.end() :].lstrip()
            if not rest:
                break
            if not rest.startswith("."):
                raise ValueError("is a comma-separated list of column names; `quote` special ones.")
            rest = rest[1:].lstrip()
    return value


def _formats(value: str) -> str:
    names = [] if not value else value.split(",")
    if len(set(names)) != len(names) or not set(names) <= {"iceberg", "hudi"}:
        raise ValueError("Must be a comma-separated list of formats from the list: {hudi,iceberg}.")
    return value


def _json_map(value: str) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError("needs to be a JSON object of strings.")
    return value


def _mapping_mode(value: str) -> str:
    column_mapping.mode_of({column_mapping.MODE: value})  # DELTA_MODE_NOT_SUPPORTED
    return value


def _any(value: str) -> str:
    return value


def _bytes(value: str) -> str:
    try:
        if parse_bytes(value) <= 0:
            raise ValueError
    except ValueError:
        raise ValueError("needs to be a positive size in bytes, such as 134217728 or 128mb.") from None
    return value


@dataclass(frozen=True)
class TableConfig:
    """One property: its canonical key and the check of its value (returns the value to store)."""

    key: str
    check: Callable[[str], str]
    user_configurable: bool = True


_INTERVALS = (
    "logRetentionDuration",
    "sampleRetentionDuration",
    "checkpointRetentionDuration",
    "deletedFileRetentionDuration",
    "dropFeatureTruncateHistory.retentionDuration",
    "setTransactionRetentionDuration",
)
_BOOLEANS = (
    "ignoreProtocolDefaults",
    "enableExpiredLogCleanup",
    "enableFullRetentionRollback",
    "randomizeFilePrefixes",
    "appendOnly",
    "enableDeletionVectors",
    "enableVariantShredding",
    "autoOptimize",
    "autoOptimize.optimizeWrite",
    "compatibility.symlinkFormatManifest.enabled",
    "checkpoint.writeStatsAsJson",
    "checkpoint.writeStatsAsStruct",
    "enableChangeDataCapture",
    "enableChangeDataFeed",
    "enableRowTracking",
    "rowTrackingSuspended",
    "enableIcebergCompatV1",
    "enableIcebergCompatV2",
    "enableIcebergCompatV3",
    "universalFormat.iceberg.atomicConversion.supported",
    "castIcebergTimeType",
    "ignoreIcebergBucketPartition",
    "enableTypeWidening",
    "enableInCommitTimestamps",
    "enableMaterializePartitionColumnsFeature",
    "writePartitionColumnsToParquet",
)
_OTHERS: dict[str, Callable[[str], str]] = {
    # Protocol versions are checked where the protocol is built (log/protocol.py).
    "minReaderVersion": _any,
    "minWriterVersion": _any,
    "checkpointInterval": _integer(1, "needs to be a positive integer."),
    "randomPrefixLength": _integer(1, "needs to be greater than 0."),
    "autoOptimize.autoCompact": _one_of("true", "false"),
    "parquet.format.version": _any,
    "dataSkippingNumIndexedCols": _integer(-1, "needs to be larger than or equal to -1."),
    "dataSkippingStatsColumns": _column_list,
    "dataSkippingStringPrefixLength": _integer(0, "needs to be greater or equal to zero."),
    "columnMapping.mode": _mapping_mode,
    "isolationLevel": _serializable,
    "checkpointPolicy": _one_of("classic", "v2", case_sensitive=True),
    "universalFormat.enabledFormats": _formats,
    "redirectReaderWriter-preview": _any,
    "redirectWriterOnly-preview": _any,
    "coordinatedCommits.commitCoordinator-preview": _any,
    "coordinatedCommits.commitCoordinatorConf-preview": _json_map,
    "coordinatedCommits.tableConf-preview": _json_map,
    "inCommitTimestampEnablementVersion": _integer(-(2**63), "needs to be a number."),
    "inCommitTimestampEnablementTimestamp": _integer(-(2**63), "needs to be a number."),
    "requireCheckpointProtectionBeforeVersion": _integer(0, "needs to be greater or equal to zero."),
    # Databricks' file-size target, which deltamerge's writes honour (OSS Delta does not know it).
    "targetFileSize": _bytes,
}

KNOWN: dict[str, TableConfig] = {
    **{k.lower(): TableConfig("delta." + k, _interval) for k in _INTERVALS},
    **{k.lower(): TableConfig("delta." + k, _boolean) for k in _BOOLEANS},
    **{k.lower(): TableConfig("delta." + k, c) for k, c in _OTHERS.items()},
    "columnmapping.maxcolumnid": TableConfig(
        "delta.columnMapping.maxColumnId", _any, user_configurable=False
    ),
}


def _open_ended(lowered: str) -> bool:
    # CHECK constraints and table features have open-ended key sets.
    return lowered.startswith(("delta.constraints.", "delta.feature."))


def canonical_key(key: str) -> str:
    """``key`` in the spelling Delta stores (``delta.appendonly`` -> ``delta.appendOnly``)."""
    lowered = key.lower()
    config = KNOWN.get(lowered[len("delta.") :]) if lowered.startswith("delta.") else None
    return config.key if config is not None else key


def validate(props: Mapping[str, str], *, allow_arbitrary: bool = False) -> dict[str, str]:
    """``props`` as Delta stores them: known ``delta.*`` keys in their canonical spelling with their
    values checked (and booleans lower-cased); other keys unchanged.

    Raises ``DELTA_UNKNOWN_CONFIGURATION`` for an unknown ``delta.*`` key (unless
    ``allow_arbitrary``), ``DELTA_CANNOT_MODIFY_TABLE_PROPERTY`` for a key only Delta sets, and
    ``DELTA_INVALID_CONFIGURATION_VALUE`` for a value that does not parse.
    """
    out: dict[str, str] = {}
    for key, raw in props.items():
        value = str(raw)
        lowered = key.lower()
        if not lowered.startswith("delta.") or _open_ended(lowered):
            out[key] = value
            continue
        config = KNOWN.get(lowered[len("delta.") :])
        if config is None:
            # UniForm's settings are open-ended too, apart from the ones listed above.
            if not allow_arbitrary and not lowered.startswith("delta.universalformat."):
                raise AnalysisError(
                    f"Unknown configuration was specified: {key}. Check its spelling against Delta's "
                    f"table properties; to disable this check, set {ALLOW_ARBITRARY_KEY}=true in the "
                    "Spark session configuration.",
                    error_class="DELTA_UNKNOWN_CONFIGURATION",
                    sql_state="F0000",
                )
            out[key] = value
            continue
        if not config.user_configurable:
            raise AnalysisError(
                f"The Delta table configuration {config.key} cannot be specified by the user: Delta "
                "maintains it itself.",
                error_class="DELTA_CANNOT_MODIFY_TABLE_PROPERTY",
                sql_state="42939",
            )
        try:
            out[config.key] = config.check(value)
        except ValueError as e:
            if isinstance(e, InvalidArgumentError):
                raise
            raise InvalidArgumentError(
                f"{value} is not a valid value for {config.key}: {config.key} {e}",
                error_class="DELTA_INVALID_CONFIGURATION_VALUE",
            ) from None
    _check_retentions(out)
    return out


def _check_retentions(props: Mapping[str, str]) -> None:
    """Delta's rule that the log outlives removed files: ``delta.logRetentionDuration`` (default 30
    days) must be at least ``delta.deletedFileRetentionDuration`` (default 1 week), checked on the
    properties given when either is among them."""
    log_key, files_key = "delta.logRetentionDuration", "delta.deletedFileRetentionDuration"
    if log_key not in props and files_key not in props:
        return
    log_text = props.get(log_key, "interval 30 days")
    files_text = props.get(files_key, "interval 1 week")
    if parse_interval_ms(log_text) >= parse_interval_ms(files_text):
        return
    if log_key in props:
        msg = f"{log_key}({log_text}) needs to be greater than or equal to {files_key}({files_text})."
    else:
        msg = f"{files_key}({files_text}) needs to be less than or equal to {log_key}({log_text})."
    raise InvalidArgumentError(
        f"The table property {msg} Raise {log_key} or lower {files_key}.",
        error_class="DELTA_INVALID_CONFIGURATION_VALUE",
    )


def session_defaults(settings: Mapping[str, str], *, allow_arbitrary: bool = False) -> dict[str, str]:
    """New tables' properties from Delta's session defaults
    (``spark.databricks.delta.properties.defaults.<key>`` -> ``delta.<key>``; ``...defaults.feature.<name>``
    -> ``delta.feature.<name>``). As in Delta, a default that names no known property is ignored
    (unless arbitrary properties are allowed) and a known one must have a valid value."""
    prefix = SESSION_PREFIX + "properties.defaults."
    wanted: dict[str, str] = {}
    for key, value in settings.items():
        if not key.startswith(prefix):
            continue
        name = "delta." + key[len(prefix) :]
        lowered = name.lower()
        if allow_arbitrary or _open_ended(lowered) or lowered[len("delta.") :] in KNOWN:
            wanted[name] = str(value)
    return validate(wanted, allow_arbitrary=allow_arbitrary)
