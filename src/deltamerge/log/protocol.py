"""Protocol versions and table features: what deltamerge can read and write (protocol.md §1).

A feature listed in a protocol is only *supported*; some only matter once *active* (for example
``columnMapping`` with ``delta.columnMapping.mode=none`` changes nothing). For those we refuse only
when the table actually uses them, which is what lets us read, say, delta-rs DV tables that list a
spurious ``variantType``. Everything else we do not implement is refused outright, because a writer
that ignores a writer feature corrupts the table for every other engine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from deltamerge.config import TableProperties, parse_bool
from deltamerge.errors import UnsupportedFeatureError
from deltamerge.log.actions import Metadata, Protocol

# --- feature names (PROTOCOL.md "Valid Feature Names in Table Features") -------------------------
APPEND_ONLY = "appendOnly"
INVARIANTS = "invariants"
CHECK_CONSTRAINTS = "checkConstraints"
CHANGE_DATA_FEED = "changeDataFeed"
GENERATED_COLUMNS = "generatedColumns"
COLUMN_MAPPING = "columnMapping"
IDENTITY_COLUMNS = "identityColumns"
DELETION_VECTORS = "deletionVectors"
ROW_TRACKING = "rowTracking"
TIMESTAMP_NTZ = "timestampNtz"
DOMAIN_METADATA = "domainMetadata"
V2_CHECKPOINT = "v2Checkpoint"
ICEBERG_COMPAT_V1 = "icebergCompatV1"
ICEBERG_COMPAT_V2 = "icebergCompatV2"
CLUSTERING = "clustering"
VACUUM_PROTOCOL_CHECK = "vacuumProtocolCheck"
TYPE_WIDENING = "typeWidening"
TYPE_WIDENING_PREVIEW = "typeWidening-preview"
IN_COMMIT_TIMESTAMP = "inCommitTimestamp"
VARIANT_TYPE = "variantType"
VARIANT_TYPE_PREVIEW = "variantType-preview"
VARIANT_SHREDDING_PREVIEW = "variantShredding-preview"
CATALOG_MANAGED = "catalogManaged"
ALLOW_COLUMN_DEFAULTS = "allowColumnDefaults"
CHECKPOINT_PROTECTION = "checkpointProtection"
COLLATIONS = "collations"
COLLATIONS_PREVIEW = "collations-preview"

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

#: Features whose writer requirements deltamerge implements.
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        APPEND_ONLY,
        INVARIANTS,
        CHECK_CONSTRAINTS,
        CHANGE_DATA_FEED,
        DELETION_VECTORS,
        TIMESTAMP_NTZ,
        VACUUM_PROTOCOL_CHECK,
        DOMAIN_METADATA,  # carried through unchanged; domains of refused features are refused with them
        GENERATED_COLUMNS,
        IDENTITY_COLUMNS,
        COLUMN_MAPPING,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        IN_COMMIT_TIMESTAMP,
        ROW_TRACKING,
        # Readers take V2 checkpoints (UUID-named, sidecars); a table with the feature may also
        # use classic single-file checkpoints, the only kind deltamerge writes.
        V2_CHECKPOINT,
        # delta-spark's: metadata cleanup must truncate up to delta.requireCheckpointProtection-
        # BeforeVersion in one go; deltamerge never cleans up such a table (txn/transaction.py).
        CHECKPOINT_PROTECTION,
        # Unshredded variant columns: Spark writes them as Parquet structs of (value, metadata)
        # binaries, as the protocol asks; they get a nullCount and no min/max statistics.
        VARIANT_TYPE,
        VARIANT_TYPE_PREVIEW,
        # Defaults fill the columns an INSERT (SQL, MERGE) leaves out; see column_defaults.py.
        ALLOW_COLUMN_DEFAULTS,
        CLUSTERING,  # written without clustering: new files are unclustered (log/clustering.py)
        # Writers keep each column's collation in its schema metadata (Spark's schema JSON does)
        # and may store UTF-8 binary statistics for collated columns, which is all deltamerge
        # writes; its data skipping never compares a collated column's binary statistics.
        COLLATIONS,
        COLLATIONS_PREVIEW,
    }
)
#: Reader features deltamerge can read.
SUPPORTED_READER_FEATURES = frozenset(
    {
        COLUMN_MAPPING,
        DELETION_VECTORS,
        TIMESTAMP_NTZ,
        V2_CHECKPOINT,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        VACUUM_PROTOCOL_CHECK,
        VARIANT_TYPE,
        VARIANT_TYPE_PREVIEW,
    }
)
#: Reader+writer features (listed in both lists of a (3,7) protocol).
READER_WRITER_FEATURES = frozenset(
    {
        COLUMN_MAPPING,
        DELETION_VECTORS,
        TIMESTAMP_NTZ,
        V2_CHECKPOINT,
        VACUUM_PROTOCOL_CHECK,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        VARIANT_TYPE,
        VARIANT_TYPE_PREVIEW,
        VARIANT_SHREDDING_PREVIEW,
        CATALOG_MANAGED,
    }
)

#: Features implied by each legacy writer version (cumulative).
LEGACY_WRITER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({APPEND_ONLY, INVARIANTS}),
    3: frozenset({APPEND_ONLY, INVARIANTS, CHECK_CONSTRAINTS}),
    4: frozenset({APPEND_ONLY, INVARIANTS, CHECK_CONSTRAINTS, CHANGE_DATA_FEED, GENERATED_COLUMNS}),
    5: frozenset(
        {APPEND_ONLY, INVARIANTS, CHECK_CONSTRAINTS, CHANGE_DATA_FEED, GENERATED_COLUMNS, COLUMN_MAPPING}
    ),
    6: frozenset(
        {
            APPEND_ONLY,
            INVARIANTS,
            CHECK_CONSTRAINTS,
            CHANGE_DATA_FEED,
            GENERATED_COLUMNS,
            COLUMN_MAPPING,
            IDENTITY_COLUMNS,
        }
    ),
}
LEGACY_READER_FEATURES: dict[int, frozenset[str]] = {1: frozenset(), 2: frozenset({COLUMN_MAPPING})}

# Minimal legacy writer version per legacy feature, used to pick the smallest legacy protocol.
LEGACY_WRITER_VERSION_OF = {
    APPEND_ONLY: 2,
    INVARIANTS: 2,
    CHECK_CONSTRAINTS: 3,
    CHANGE_DATA_FEED: 4,
    GENERATED_COLUMNS: 4,
    COLUMN_MAPPING: 5,
    IDENTITY_COLUMNS: 6,
}


# --- "is the feature in use" probes ----------------------------------------------------------------


def _fields(schema: Any) -> Iterable[dict[str, Any]]:
    """Every struct field in a schema, nested ones included."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "struct":
            for f in schema.get("fields", []):
                yield f
                yield from _fields(f.get("type"))
        elif kind == "array":
            yield from _fields(schema.get("elementType"))
        elif kind == "map":
            yield from _fields(schema.get("keyType"))
            yield from _fields(schema.get("valueType"))


def _type_names(schema: Any) -> Iterable[str]:
    if isinstance(schema, str):
        yield schema
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "struct":
            for f in schema.get("fields", []):
                yield from _type_names(f.get("type"))
        elif kind == "array":
            yield from _type_names(schema.get("elementType"))
        elif kind == "map":
            yield from _type_names(schema.get("keyType"))
            yield from _type_names(schema.get("valueType"))


#: The field-metadata key holding the collations of a field's strings (and of its arrays' and maps'
#: strings), by path: ``{"name": "spark.UTF8_LCASE"}``.
COLLATIONS_KEY = "__COLLATIONS"


def _collated(value: Any) -> bool:
    # Writers leave the default collation out; an explicit one (any version) is no collation.
    name = str(value).split(".")
    return not (len(name) >= 2 and name[0].lower() == "spark" and name[1].upper() == "UTF8_BINARY")


def has_collated_strings(schema: Any) -> bool:
    """Whether any string of the schema (nested ones included) has a non-default collation."""
    return any(
        _collated(v)
        for f in _fields(schema)
        for v in ((f.get("metadata") or {}).get(COLLATIONS_KEY) or {}).values()
    )


def _has_field_metadata(schema: Any, predicate: Callable[[str], bool]) -> bool:
    return any(predicate(k) for f in _fields(schema) for k in (f.get("metadata") or {}))


def _schema_of(metadata: Metadata | None) -> dict[str, Any]:
    if metadata is None:
        return {"type": "struct", "fields": []}
    try:
        return json.loads(metadata.schema_string)  # type: ignore[no-any-return]
    except ValueError:
        return {"type": "struct", "fields": []}


def _conf_true(configuration: Mapping[str, str], key: str) -> bool:
    try:
        return parse_bool(configuration.get(key, "false"))
    except ValueError:
        return False


def _column_mapping_active(configuration: Mapping[str, str], schema: Any) -> bool:
    return configuration.get("delta.columnMapping.mode", "none").strip().lower() != "none"


def _uses_type(schema: Any, name: str) -> bool:
    return name in set(_type_names(schema))


# Feature -> "the table actually uses it"; listed-but-unused features of this map are harmless.
_ACTIVE_PROBES: dict[str, Callable[[Mapping[str, str], Any], bool]] = {
    COLUMN_MAPPING: _column_mapping_active,
    GENERATED_COLUMNS: lambda conf, schema: _has_field_metadata(
        schema, lambda k: k == "delta.generationExpression"
    ),
    IDENTITY_COLUMNS: lambda conf, schema: _has_field_metadata(
        schema, lambda k: k.startswith("delta.identity.")
    ),
    VARIANT_TYPE: lambda conf, schema: _uses_type(schema, "variant"),
    VARIANT_TYPE_PREVIEW: lambda conf, schema: _uses_type(schema, "variant"),
    VARIANT_SHREDDING_PREVIEW: lambda conf, schema: _uses_type(schema, "variant"),
    IN_COMMIT_TIMESTAMP: lambda conf, schema: _conf_true(conf, "delta.enableInCommitTimestamps"),
    ALLOW_COLUMN_DEFAULTS: lambda conf, schema: _has_field_metadata(schema, lambda k: k == "CURRENT_DEFAULT"),
}

def _refuse(feature: str, for_write: bool, extra: str = "") -> UnsupportedFeatureError:
    action = "write to" if for_write else "read"
    reason = f"The table feature '{feature}' is not supported by deltamerge"
    return UnsupportedFeatureError(
        f"Unable to {action} this table because it requires the table feature '{feature}'{extra}. "
        f"{reason}. Use delta-spark or delta-rs for this table, or drop the feature with "
        f"`ALTER TABLE ... DROP FEATURE {feature}` if the engine that created it supports that.",
        error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
        if for_write
        else "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
    )


def _check_versions(protocol: Protocol, for_write: bool) -> None:
    reader_ok = 1 <= protocol.min_reader_version <= MAX_READER_VERSION
    writer_ok = not for_write or 1 <= protocol.min_writer_version <= MAX_WRITER_VERSION
    if not (reader_ok and writer_ok):  # Delta's InvalidProtocolVersionException
        raise UnsupportedFeatureError(
            f"Unsupported Delta protocol version: the table requires reader version "
            f"{protocol.min_reader_version} and writer version {protocol.min_writer_version}, but "
            f"deltamerge supports reader versions 1 to {MAX_READER_VERSION} and writer versions 1 to "
            f"{MAX_WRITER_VERSION}. Use a newer Delta engine for this table.",
            error_class="DELTA_INVALID_PROTOCOL_VERSION",
            sql_state="KD004",
        )


def reader_features(protocol: Protocol) -> frozenset[str]:
    """Reader features the protocol requires (explicit at reader 3, implied below)."""
    if protocol.min_reader_version >= 3:
        return frozenset(protocol.reader_features or ())
    return LEGACY_READER_FEATURES.get(protocol.min_reader_version, frozenset())


def supported_feature_names(protocol: Protocol) -> list[str]:
    """The features a protocol supports, explicitly listed or implied by its legacy versions, as
    DESCRIBE DETAIL's ``tableFeatures`` lists them (Delta's implicitlySupportedFeatures: a legacy
    feature whose reader and writer versions the protocol reaches; none once it lists features)."""
    features = set(writer_features(protocol) | reader_features(protocol))
    if protocol.min_writer_version < 7 and protocol.min_reader_version < 2:
        features.discard(COLUMN_MAPPING)  # writer version 5 alone does not imply it
    return sorted(features)


def writer_features(protocol: Protocol) -> frozenset[str]:
    """Writer features the protocol requires (explicit at writer 7, implied below)."""
    if protocol.min_writer_version >= 7:
        return frozenset(protocol.writer_features or ())
    return LEGACY_WRITER_FEATURES.get(min(protocol.min_writer_version, 6), frozenset())


def check_column_defaults_allowed(protocol: Protocol, schema: Any) -> None:
    """Delta only keeps a column DEFAULT when the table supports ``allowColumnDefaults``, which
    must be asked for explicitly (it is never added implicitly)."""
    if not _ACTIVE_PROBES[ALLOW_COLUMN_DEFAULTS]({}, schema):
        return
    if ALLOW_COLUMN_DEFAULTS in writer_features(protocol):
        return
    raise UnsupportedFeatureError(
        "Failed to execute the command because it assigned a column DEFAULT value, but the "
        "corresponding table feature was not enabled. Please retry the command again after executing "
        "ALTER TABLE tableName SET TBLPROPERTIES('delta.feature.allowColumnDefaults' = 'supported').",
        error_class="WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED",
    )


def type_widening_enabled(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Delta's ``TypeWidening.isEnabled``: the protocol supports the feature (or its preview) and
    ``delta.enableTypeWidening`` is true."""
    features = writer_features(protocol) | reader_features(protocol)
    supported = bool({TYPE_WIDENING, TYPE_WIDENING_PREVIEW} & features)
    return supported and str(configuration.get("delta.enableTypeWidening", "false")).strip().lower() == "true"


def _is_active(feature: str, configuration: Mapping[str, str], schema: Any) -> bool:
    probe = _ACTIVE_PROBES.get(feature)
    return True if probe is None else probe(configuration, schema)


def _check_features(
    features: Iterable[str], supported: frozenset[str], metadata: Metadata | None, write: bool
) -> None:
    configuration = metadata.configuration if metadata is not None else {}
    schema = _schema_of(metadata)
    for feature in sorted(features):
        if feature in supported:
            continue
        if feature in _ACTIVE_PROBES and not _is_active(feature, configuration, schema):
            continue
        raise _refuse(feature, for_write=write)


def check_can_read(protocol: Protocol, metadata: Metadata | None = None) -> None:
    """Raise :class:`UnsupportedFeatureError` if deltamerge cannot read a table with this protocol."""
    _check_versions(protocol, for_write=False)
    _check_features(reader_features(protocol), SUPPORTED_READER_FEATURES, metadata, write=False)


def check_can_write(protocol: Protocol, metadata: Metadata | None = None) -> None:
    """Raise :class:`UnsupportedFeatureError` if deltamerge must not write a table with this protocol.

    Writers must implement every reader feature too, so reader features are checked as well (and
    reported as write refusals).
    """
    _check_versions(protocol, for_write=True)
    features = writer_features(protocol) | reader_features(protocol)
    _check_features(features, SUPPORTED_WRITER_FEATURES, metadata, write=True)


# --- computing protocols ---------------------------------------------------------------------------


def required_features(configuration: Mapping[str, str], schema_json: Any) -> set[str]:
    """Features a table with these properties and this schema needs (beyond the (1,1) baseline)."""
    conf = dict(configuration)
    schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    needed: set[str] = set()
    if TableProperties.APPEND_ONLY.get(conf):
        needed.add(APPEND_ONLY)
    if _has_field_metadata(schema, lambda k: k == "delta.invariants"):
        needed.add(INVARIANTS)
    if any(k.startswith("delta.constraints.") for k in conf):
        needed.add(CHECK_CONSTRAINTS)
    if TableProperties.ENABLE_CDF.get(conf):
        needed.add(CHANGE_DATA_FEED)
    if TableProperties.ENABLE_DVS.get(conf):
        needed.add(DELETION_VECTORS)
    if TableProperties.ENABLE_TYPE_WIDENING.get(conf):
        needed.add(TYPE_WIDENING)
    if _conf_true(conf, "delta.enableInCommitTimestamps"):
        needed.add(IN_COMMIT_TIMESTAMP)
    if str(conf.get("delta.checkpointPolicy", "")).strip().lower() == "v2":
        needed.add(V2_CHECKPOINT)  # Delta turns the feature on with the policy
    if _conf_true(conf, "delta.enableRowTracking"):
        needed |= {ROW_TRACKING, DOMAIN_METADATA}
    if _column_mapping_active(conf, schema):
        needed.add(COLUMN_MAPPING)
    names = set(_type_names(schema))
    if "timestamp_ntz" in names:
        needed.add(TIMESTAMP_NTZ)
    if "variant" in names:
        needed.add(VARIANT_TYPE)
    if _ACTIVE_PROBES[GENERATED_COLUMNS](conf, schema):
        needed.add(GENERATED_COLUMNS)
    if _ACTIVE_PROBES[IDENTITY_COLUMNS](conf, schema):
        needed.add(IDENTITY_COLUMNS)
    if has_collated_strings(schema):
        needed |= {COLLATIONS, DOMAIN_METADATA}  # as Delta lists them (its collation-version domain)
    return needed


def _build(reader: int, writer: int, rfeatures: Iterable[str], wfeatures: Iterable[str]) -> Protocol:
    return Protocol(
        min_reader_version=reader,
        min_writer_version=writer,
        reader_features=tuple(sorted(set(rfeatures))) if reader >= 3 else None,
        writer_features=tuple(sorted(set(wfeatures))) if writer >= 7 else None,
    )


def _protocol_with(
    base_reader: set[str], base_writer: set[str], legacy_reader: int, legacy_writer: int
) -> Protocol:
    """Smallest protocol supporting the given features; legacy form whenever possible."""
    table_feature_only = {f for f in base_writer if f not in LEGACY_WRITER_VERSION_OF}
    if not table_feature_only and not (base_reader - {COLUMN_MAPPING}):
        writer = max([legacy_writer, 2, *(LEGACY_WRITER_VERSION_OF[f] for f in base_writer)])
        reader = max(legacy_reader, 2 if COLUMN_MAPPING in base_reader else 1)
        return _build(reader, writer, (), ())
    readers = set(base_reader)
    writers = set(base_writer) | readers
    reader = 3 if readers else max(legacy_reader, 1)
    return _build(reader, 7, readers, writers)


def protocol_for(configuration: Mapping[str, str], schema_json: Any) -> Protocol:
    """The minimal protocol for a new table with these properties and this schema.

    (1,2) by default; CHECK constraints give (1,3); change data feed (1,4); column mapping (2,5);
    deletion vectors, ``timestamp_ntz`` or type widening move to (3,7) with table features, always
    listing ``appendOnly`` and ``invariants`` (which every (1,2) table supports).
    """
    needed = required_features(configuration, schema_json)
    rfeatures = {f for f in needed if f in READER_WRITER_FEATURES}
    wfeatures = needed | {APPEND_ONLY, INVARIANTS}
    return _protocol_with(rfeatures, wfeatures, 1, 2)


def upgrade(old: Protocol, configuration: Mapping[str, str], schema_json: Any) -> Protocol | None:
    """The protocol an existing table needs after a property/schema change, or ``None`` if ``old`` suffices.

    When moving a legacy table to writer version 7, every feature the old versions implied is
    carried into the feature lists (protocol.md §1.3) so that nothing the table may rely on is lost.
    """
    needed = required_features(configuration, schema_json)
    have_w = writer_features(old)
    have_r = reader_features(old)
    if COLLATIONS_PREVIEW in have_w:
        # The preview serves: the stable feature would lock out the writers that know only it.
        needed.discard(COLLATIONS)
    need_r = {f for f in needed if f in READER_WRITER_FEATURES}
    if needed <= have_w | have_r and need_r <= have_r:
        return None
    all_w = set(have_w) | needed
    all_r = set(have_r) | need_r
    if old.min_writer_version < 7 and old.min_reader_version < 3:
        candidate = _protocol_with(all_r, all_w, old.min_reader_version, old.min_writer_version)
        if candidate.min_writer_version < 7:
            return candidate
    return _table_features_form(old, all_r, all_w)


def _table_features_form(old: Protocol, all_r: set[str], all_w: set[str]) -> Protocol:
    """``old`` moved to writer version 7 (and reader 3 when a reader feature needs it) listing
    ``all_r`` / ``all_w``."""
    # Make every feature the legacy versions implied explicit.
    if old.min_writer_version < 7:
        all_w |= LEGACY_WRITER_FEATURES.get(old.min_writer_version, frozenset())
    if old.min_reader_version < 3:
        all_r |= LEGACY_READER_FEATURES.get(old.min_reader_version, frozenset())
    # A legacy reader version 2 already covers columnMapping; anything else needs reader version 3.
    covered = {COLUMN_MAPPING} if old.min_reader_version == 2 else set()
    reader = 3 if (all_r - covered) else old.min_reader_version
    if reader >= 3:
        return _build(3, 7, all_r, all_w | all_r)
    return _build(reader, 7, (), all_w | all_r)


#: Table properties that ask for a protocol instead of being stored (Delta drops them too).
MIN_READER_PROPERTY = "delta.minReaderVersion"
MIN_WRITER_PROPERTY = "delta.minWriterVersion"
FEATURE_PROPERTY_PREFIX = "delta.feature."

#: Every feature name of the protocol (lower case -> the spelling the log uses).
KNOWN_FEATURES = {
    name.lower(): name
    for name in (
        APPEND_ONLY, INVARIANTS, CHECK_CONSTRAINTS, CHANGE_DATA_FEED, GENERATED_COLUMNS, COLUMN_MAPPING,
        IDENTITY_COLUMNS, DELETION_VECTORS, ROW_TRACKING, TIMESTAMP_NTZ, DOMAIN_METADATA, V2_CHECKPOINT,
        ICEBERG_COMPAT_V1, ICEBERG_COMPAT_V2, CLUSTERING, VACUUM_PROTOCOL_CHECK, TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW, IN_COMMIT_TIMESTAMP, VARIANT_TYPE, VARIANT_TYPE_PREVIEW,
        VARIANT_SHREDDING_PREVIEW, CATALOG_MANAGED, ALLOW_COLUMN_DEFAULTS, CHECKPOINT_PROTECTION,
        COLLATIONS, COLLATIONS_PREVIEW,
    )
}  # fmt: skip


def requested_features(configuration: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    """``configuration`` without its ``delta.feature.<name>`` properties, and the features they ask
    the protocol to support (Delta's ``getSupportedFeaturesFromTableConfigs``).

    The status must be ``supported`` (or the deprecated ``enabled``); names are case-insensitive.
    A feature deltamerge cannot write is refused here, before anything is committed: listing it
    would oblige every later write to honour it.
    """
    rest: dict[str, str] = {}
    features: set[str] = set()
    unknown: list[str] = []
    for key, value in configuration.items():
        if not key.lower().startswith(FEATURE_PROPERTY_PREFIX):
            rest[key] = value
            continue
        name = key[len(FEATURE_PROPERTY_PREFIX) :].lower()
        status = str(value).strip().lower()
        if status not in ("supported", "enabled"):
            raise UnsupportedFeatureError(
                f'Expecting the status for table feature {name} to be "supported", but got "{status}".',
                error_class="DELTA_UNSUPPORTED_FEATURE_STATUS",
            )
        feature = KNOWN_FEATURES.get(name)
        if feature is None:
            unknown.append(key)
            continue
        if feature not in SUPPORTED_WRITER_FEATURES:
            raise _refuse(feature, for_write=True)
        features.add(feature)
        if feature in (ROW_TRACKING, CLUSTERING):
            features.add(DOMAIN_METADATA)  # their state lives in metadata domains
    if unknown:
        raise UnsupportedFeatureError(
            "Table features configured in the following Spark configs or Delta table properties are "
            f"not recognized by this version of Delta Lake: {', '.join(unknown)}. Valid names: "
            f"{', '.join(sorted(KNOWN_FEATURES.values()))}.",
            error_class="DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
        )
    return rest, features


def with_features(old: Protocol, features: Iterable[str]) -> Protocol:
    """``old`` supporting ``features`` too. Explicitly added features put the protocol in
    table-features form (writer version 7; reader 3 for reader features), as Delta's
    ``ALTER TABLE ... SET TBLPROPERTIES ('delta.feature.<name>' = 'supported')`` does. Features
    ``old`` supports already, explicitly or through its legacy versions, change nothing."""
    wanted = set(features)
    have_w, have_r = writer_features(old), reader_features(old)
    need_r = wanted & READER_WRITER_FEATURES
    if wanted <= have_w | have_r and need_r <= have_r:  # supported already (legacy versions imply some)
        return old
    return _table_features_form(old, set(have_r) | need_r, set(have_w) | wanted)


def requested_versions(configuration: Mapping[str, str]) -> tuple[dict[str, str], int, int]:
    """``configuration`` without ``delta.minReaderVersion`` / ``delta.minWriterVersion``, and the
    versions they ask for (1 when absent)."""
    rest: dict[str, str] = {}
    wanted = {MIN_READER_PROPERTY.lower(): 1, MIN_WRITER_PROPERTY.lower(): 1}
    for k, v in configuration.items():
        if k.lower() not in wanted:
            rest[k] = v
            continue
        try:
            wanted[k.lower()] = int(str(v).strip())
        except ValueError:
            raise UnsupportedFeatureError(
                f"{k} must be a protocol version number, not '{v}'.",
                error_class="DELTA_INVALID_PROTOCOL_VERSION",
            ) from None
    return rest, wanted[MIN_READER_PROPERTY.lower()], wanted[MIN_WRITER_PROPERTY.lower()]


def at_least(protocol: Protocol, reader: int, writer: int) -> Protocol:
    """``protocol`` raised to at least the given versions (``delta.minReaderVersion`` and
    ``delta.minWriterVersion`` in table properties). Legacy versions imply their features, which
    deltamerge supports; reaching reader 3 or writer 7 lists the features the table had."""
    if reader > MAX_READER_VERSION or writer > MAX_WRITER_VERSION or reader < 1 or writer < 1:
        raise UnsupportedFeatureError(
            f"Protocol version ({reader}, {writer}) is not supported: deltamerge supports reader "
            f"versions 1 to {MAX_READER_VERSION} and writer versions 1 to {MAX_WRITER_VERSION}.",
            error_class="DELTA_INVALID_PROTOCOL_VERSION",
        )
    r = max(protocol.min_reader_version, reader)
    w = max(protocol.min_writer_version, writer)
    if (r, w) == (protocol.min_reader_version, protocol.min_writer_version):
        return protocol
    if r < 3 and w < 7:
        return _build(r, w, (), ())
    readers = set(reader_features(protocol))
    writers = set(writer_features(protocol)) | readers
    return _build(r, max(w, 7) if r >= 3 else w, readers, writers)
