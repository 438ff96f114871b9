"""Protocol gating (what we refuse to read or write) and protocol computation for new/changed tables."""

from __future__ import annotations

import json

import pytest

from deltamerge.errors import UnsupportedFeatureError
from deltamerge.log.actions import Metadata, Protocol
from deltamerge.log.protocol import (
    check_can_read,
    check_can_write,
    check_column_defaults_allowed,
    protocol_for,
    supported_feature_names,
    upgrade,
)

PLAIN = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}


def _schema(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


def _field(name: str, type_: object, metadata: dict | None = None) -> dict:
    return {"name": name, "type": type_, "nullable": True, "metadata": metadata or {}}


def _md(configuration: dict | None = None, schema: dict = PLAIN) -> Metadata:
    return Metadata(id="x", schema_string=json.dumps(schema), configuration=dict(configuration or {}))


def _features(reader: list[str] | None, writer: list[str]) -> Protocol:
    if reader is None:
        return Protocol(1, 7, None, tuple(writer))
    return Protocol(3, 7, tuple(reader), tuple(writer))


# --- reading --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 1),
        Protocol(1, 2),
        Protocol(1, 7, None, ("appendOnly", "rowTracking", "domainMetadata")),  # writer-only features
        _features(["deletionVectors"], ["deletionVectors"]),
        _features(["timestampNtz", "v2Checkpoint", "typeWidening", "vacuumProtocolCheck"], ["timestampNtz"]),
        _features(["deletionVectors", "variantType"], ["deletionVectors", "variantType"]),  # delta-rs, unused
        Protocol(2, 5),  # column mapping supported but mode none
        _features(["columnMapping"], ["columnMapping"]),
    ],
)
def test_readable(protocol: Protocol) -> None:
    check_can_read(protocol, _md())


@pytest.mark.parametrize(
    ("protocol", "mode"),
    [(Protocol(2, 5), "name"), (_features(["columnMapping"], ["columnMapping"]), "id")],
)
def test_column_mapping_in_use_is_readable_and_writable(protocol: Protocol, mode: str) -> None:
    check_can_read(protocol, _md({"delta.columnMapping.mode": mode}))
    check_can_write(protocol, _md({"delta.columnMapping.mode": mode}))


@pytest.mark.parametrize(
    ("protocol", "metadata", "feature"),
    [
        (Protocol(4, 7), _md(), "reader version 4"),
        (  # shredded variants: Parquet files deltamerge's reader does not reassemble
            _features(*[["variantType", "variantShredding-preview"]] * 2),
            _md(schema=_schema(_field("v", "variant"))),
            "variantShredding-preview",
        ),
        (_features(["catalogManaged"], ["catalogManaged"]), _md(), "catalogManaged"),
        (_features(["someFutureFeature"], ["someFutureFeature"]), _md(), "someFutureFeature"),
    ],
)
def test_unreadable(protocol: Protocol, metadata: Metadata, feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature) as exc:
        check_can_read(protocol, metadata)
    assert "deltamerge" in exc.value.message


# --- writing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 2),
        Protocol(1, 3),
        Protocol(1, 4),
        Protocol(2, 5),
        Protocol(1, 6),
        _features(["deletionVectors"], ["appendOnly", "invariants", "deletionVectors"]),
        _features(["timestampNtz"], ["timestampNtz", "changeDataFeed", "checkConstraints"]),
        _features(
            ["typeWidening", "vacuumProtocolCheck"], ["typeWidening", "vacuumProtocolCheck", "domainMetadata"]
        ),
        _features(["typeWidening-preview"], ["typeWidening-preview"]),
        Protocol(1, 7, None, ("inCommitTimestamp",)),  # supported but not enabled
        Protocol(1, 7, None, ("generatedColumns", "identityColumns", "allowColumnDefaults")),  # unused
    ],
)
def test_writable(protocol: Protocol) -> None:
    check_can_write(protocol, _md())


def test_column_defaults_need_the_feature() -> None:
    schema = _schema(_field("b", "integer", {"CURRENT_DEFAULT": "1", "EXISTS_DEFAULT": "1"}))
    check_column_defaults_allowed(Protocol(1, 7, None, ("allowColumnDefaults",)), schema)
    check_can_write(Protocol(1, 7, None, ("allowColumnDefaults",)), _md(schema=schema))
    check_column_defaults_allowed(Protocol(1, 2), PLAIN)
    with pytest.raises(UnsupportedFeatureError, match="WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"):
        check_column_defaults_allowed(Protocol(1, 2), schema)


@pytest.mark.parametrize("feature", ["variantType", "variantType-preview"])
def test_variant_columns_are_readable_and_writable(feature: str) -> None:
    metadata = _md(schema=_schema(_field("v", "variant")))
    check_can_read(_features([feature], [feature]), metadata)
    check_can_write(_features([feature], ["appendOnly", "invariants", feature]), metadata)


@pytest.mark.parametrize("protocol", [Protocol(1, 4), Protocol(1, 7, None, ("generatedColumns",))])
def test_generated_columns_in_use_are_writable(protocol: Protocol) -> None:
    check_can_write(protocol, _md(schema=GEN))


@pytest.mark.parametrize("protocol", [Protocol(1, 6), Protocol(1, 7, None, ("identityColumns",))])
def test_identity_columns_in_use_are_writable(protocol: Protocol) -> None:
    check_can_write(protocol, _md(schema=IDENT))


def test_in_commit_timestamps_are_writable() -> None:
    check_can_write(
        Protocol(1, 7, None, ("inCommitTimestamp",)), _md({"delta.enableInCommitTimestamps": "true"})
    )


GEN = _schema(_field("a", "long"), _field("b", "long", {"delta.generationExpression": "a + 1"}))
IDENT = _schema(_field("a", "long", {"delta.identity.start": 1, "delta.identity.step": 1}))


@pytest.mark.parametrize(
    ("protocol", "metadata", "feature"),
    [
        (Protocol(1, 8), _md(), "writer version 8"),
        (Protocol(1, 7, None, ("icebergCompatV1",)), _md(), "icebergCompatV1"),
        (Protocol(1, 7, None, ("icebergCompatV2",)), _md(), "icebergCompatV2"),
        (_features(["catalogManaged"], ["catalogManaged"]), _md(), "catalogManaged"),
        (
            _features(["deletionVectors"], ["deletionVectors", "unknownWriterThing"]),
            _md(),
            "unknownWriterThing",
        ),
    ],
)
def test_unwritable(protocol: Protocol, metadata: Metadata, feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature) as exc:
        check_can_write(protocol, metadata)
    assert exc.value.error_class in ("DELTA_UNSUPPORTED_FEATURES_FOR_WRITE", "DELTA_INVALID_PROTOCOL_VERSION")


def test_readable_but_not_writable_reports_write() -> None:
    # icebergCompatV2 (writer-only): reading is fine, writing is refused with the write error class.
    p = Protocol(1, 7, None, ("icebergCompatV2",))
    check_can_read(p, _md())
    check_can_write(_features(["v2Checkpoint"], ["v2Checkpoint"]), _md())  # V2 checkpoints: both
    with pytest.raises(UnsupportedFeatureError) as exc:
        check_can_write(p, _md())
    assert exc.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"


def test_unreadable_uses_read_error_class() -> None:
    with pytest.raises(UnsupportedFeatureError) as exc:
        check_can_read(_features(["catalogManaged"], ["catalogManaged"]), _md())
    assert exc.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_READ"


# --- protocol_for ---------------------------------------------------------------------------------

NTZ = _schema(_field("t", "timestamp_ntz"))
NESTED_NTZ = _schema(_field("s", {"type": "array", "elementType": "timestamp_ntz", "containsNull": True}))


@pytest.mark.parametrize(
    ("configuration", "schema", "expected"),
    [
        ({}, PLAIN, Protocol(1, 2)),
        ({"delta.appendOnly": "true"}, PLAIN, Protocol(1, 2)),
        ({"delta.constraints.positive": "a > 0"}, PLAIN, Protocol(1, 3)),
        ({"delta.enableChangeDataFeed": "true"}, PLAIN, Protocol(1, 4)),
        ({"delta.enableChangeDataFeed": "false"}, PLAIN, Protocol(1, 2)),
        (
            {"delta.enableDeletionVectors": "true"},
            PLAIN,
            Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")),
        ),
        (
            {
                "delta.enableDeletionVectors": "true",
                "delta.enableChangeDataFeed": "true",
                "delta.constraints.c": "a>0",
            },
            PLAIN,
            Protocol(
                3,
                7,
                ("deletionVectors",),
                ("appendOnly", "changeDataFeed", "checkConstraints", "deletionVectors", "invariants"),
            ),
        ),
        ({}, NTZ, Protocol(3, 7, ("timestampNtz",), ("appendOnly", "invariants", "timestampNtz"))),
        (
            {},
            _schema(_field("s", {"type": "array", "elementType": "variant", "containsNull": True})),
            Protocol(3, 7, ("variantType",), ("appendOnly", "invariants", "variantType")),
        ),
        ({}, NESTED_NTZ, Protocol(3, 7, ("timestampNtz",), ("appendOnly", "invariants", "timestampNtz"))),
        (
            {"delta.enableTypeWidening": "true"},
            PLAIN,
            Protocol(3, 7, ("typeWidening",), ("appendOnly", "invariants", "typeWidening")),
        ),
    ],
)
def test_protocol_for(configuration: dict, schema: dict, expected: Protocol) -> None:
    got = protocol_for(configuration, schema)
    assert got == expected
    check_can_write(got, _md(configuration, schema))


def test_protocol_for_accepts_schema_string() -> None:
    assert protocol_for({}, json.dumps(NTZ)).min_reader_version == 3


def test_every_reader_feature_is_a_writer_feature() -> None:
    p = protocol_for({"delta.enableDeletionVectors": "true", "delta.enableTypeWidening": "true"}, NTZ)
    assert set(p.reader_features or ()) <= set(p.writer_features or ())


# --- upgrade --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "configuration", "schema", "expected"),
    [
        (Protocol(1, 2), {}, PLAIN, None),
        (Protocol(1, 4), {"delta.enableChangeDataFeed": "true"}, PLAIN, None),
        (Protocol(1, 2), {"delta.enableChangeDataFeed": "true"}, PLAIN, Protocol(1, 4)),
        (Protocol(1, 2), {"delta.constraints.c": "a > 0"}, PLAIN, Protocol(1, 3)),
        (Protocol(1, 1), {"delta.appendOnly": "true"}, PLAIN, Protocol(1, 2)),
        (
            Protocol(1, 2),
            {"delta.enableDeletionVectors": "true"},
            PLAIN,
            Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")),
        ),
        # Implied legacy features are carried over when moving to table features (protocol.md §1.3).
        (
            Protocol(1, 4),
            {"delta.enableDeletionVectors": "true"},
            PLAIN,
            Protocol(
                3,
                7,
                ("deletionVectors",),
                (
                    "appendOnly",
                    "changeDataFeed",
                    "checkConstraints",
                    "deletionVectors",
                    "generatedColumns",
                    "invariants",
                ),
            ),
        ),
        (
            Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")),
            {"delta.enableChangeDataFeed": "true"},
            PLAIN,
            Protocol(
                3, 7, ("deletionVectors",), ("appendOnly", "changeDataFeed", "deletionVectors", "invariants")
            ),
        ),
        (
            Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")),
            {"delta.enableDeletionVectors": "true"},
            NTZ,
            Protocol(
                3,
                7,
                ("deletionVectors", "timestampNtz"),
                ("appendOnly", "deletionVectors", "invariants", "timestampNtz"),
            ),
        ),
        (
            Protocol(1, 7, None, ("appendOnly", "invariants")),
            {"delta.enableChangeDataFeed": "true"},
            PLAIN,
            Protocol(1, 7, None, ("appendOnly", "changeDataFeed", "invariants")),
        ),
        (
            Protocol(2, 5),
            {"delta.enableDeletionVectors": "true"},
            PLAIN,
            Protocol(
                3,
                7,
                ("columnMapping", "deletionVectors"),
                (
                    "appendOnly",
                    "changeDataFeed",
                    "checkConstraints",
                    "columnMapping",
                    "deletionVectors",
                    "generatedColumns",
                    "invariants",
                ),
            ),
        ),
    ],
)
def test_upgrade(old: Protocol, configuration: dict, schema: dict, expected: Protocol | None) -> None:
    assert upgrade(old, configuration, schema) == expected


def test_requested_versions_raise_the_protocol_and_leave_the_properties() -> None:
    from deltamerge.log.protocol import at_least, requested_versions

    rest, reader, writer = requested_versions(
        {"delta.minReaderVersion": "2", "delta.minWriterVersion": "5", "delta.columnMapping.mode": "name"}
    )
    assert rest == {"delta.columnMapping.mode": "name"} and (reader, writer) == (2, 5)
    assert at_least(Protocol(1, 2), reader, writer) == Protocol(2, 5)
    assert at_least(Protocol(2, 5), 1, 4) == Protocol(2, 5)  # never lowered
    raised = at_least(Protocol(2, 5), 1, 7)
    assert (raised.min_reader_version, raised.min_writer_version) == (2, 7)
    assert "columnMapping" in (raised.writer_features or ())
    features = at_least(_features(["deletionVectors"], ["deletionVectors"]), 3, 7)
    assert features == _features(["deletionVectors"], ["deletionVectors"])
    with pytest.raises(UnsupportedFeatureError, match="DELTA_INVALID_PROTOCOL_VERSION"):
        at_least(Protocol(1, 2), 1, 8)
    with pytest.raises(UnsupportedFeatureError, match="DELTA_INVALID_PROTOCOL_VERSION"):
        requested_versions({"delta.minWriterVersion": "five"})


def test_requested_features_are_taken_out_of_the_properties() -> None:
    from deltamerge.log.protocol import requested_features

    rest, features = requested_features(
        {"delta.feature.DeletionVectors": "Supported", "delta.feature.timestampNtz": "enabled", "a": "1"}
    )
    assert rest == {"a": "1"} and features == {"deletionVectors", "timestampNtz"}
    with pytest.raises(UnsupportedFeatureError, match="DELTA_UNSUPPORTED_FEATURE_STATUS"):
        requested_features({"delta.feature.deletionVectors": "disabled"})
    with pytest.raises(UnsupportedFeatureError, match="DELTA_UNSUPPORTED_FEATURES_IN_CONFIG") as e:
        requested_features({"delta.feature.noSuchFeature": "supported"})
    assert "delta.feature.noSuchFeature" in str(e.value)
    # A feature deltamerge cannot write would bind every later write: refused before any commit.
    with pytest.raises(UnsupportedFeatureError, match="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"):
        requested_features({"delta.feature.icebergCompatV2": "supported"})


@pytest.mark.parametrize(
    ("old", "features", "expected"),
    [
        # A writer feature on a legacy table: writer version 7 listing what (1,2) implied.
        (Protocol(1, 2), {"changeDataFeed"}, _features(None, ["appendOnly", "changeDataFeed", "invariants"])),
        # A reader-writer feature: (3,7) with the feature in both lists.
        (
            Protocol(1, 2),
            {"deletionVectors"},
            _features(["deletionVectors"], ["appendOnly", "deletionVectors", "invariants"]),
        ),
        # Legacy reader version 2 covers column mapping: the reader version stays.
        (
            Protocol(2, 5),
            {"columnMapping"},
            Protocol(2, 5),
        ),
        (
            Protocol(2, 5),
            {"identityColumns"},
            Protocol(
                2,
                7,
                None,
                (
                    "appendOnly",
                    "changeDataFeed",
                    "checkConstraints",
                    "columnMapping",
                    "generatedColumns",
                    "identityColumns",
                    "invariants",
                ),
            ),
        ),
        # Supported already, through the legacy versions or the lists: nothing changes.
        (Protocol(1, 4), {"changeDataFeed", "appendOnly"}, Protocol(1, 4)),
        (
            _features(["deletionVectors"], ["deletionVectors"]),
            {"deletionVectors"},
            _features(["deletionVectors"], ["deletionVectors"]),
        ),
        (
            _features(["deletionVectors"], ["deletionVectors"]),
            {"timestampNtz", "checkConstraints"},
            _features(
                ["deletionVectors", "timestampNtz"], ["checkConstraints", "deletionVectors", "timestampNtz"]
            ),
        ),
    ],
)
def test_with_features(old: Protocol, features: set[str], expected: Protocol) -> None:
    from deltamerge.log.protocol import with_features

    assert with_features(old, features) == expected


LCASE = _schema(_field("name", "string", {"__COLLATIONS": {"name": "spark.UTF8_LCASE"}}))
TAGS = _field(
    "tags",
    {"type": "array", "elementType": "string", "containsNull": True},
    {"__COLLATIONS": {"tags.element": "icu.UNICODE_CI"}},
)
NESTED_COLLATION = _schema(_field("s", {"type": "struct", "fields": [TAGS]}))


@pytest.mark.parametrize("schema", [LCASE, NESTED_COLLATION], ids=["top-level", "nested-array"])
def test_collated_strings_need_the_collations_feature(schema: dict) -> None:
    """As Delta (and the collations RFC): a collated string anywhere in the schema puts the table
    at writer version 7 with ``collations`` and ``domainMetadata``, and deltamerge writes it."""
    expected = Protocol(1, 7, None, ("appendOnly", "collations", "domainMetadata", "invariants"))
    assert protocol_for({}, schema) == expected
    check_can_write(expected, _md({}, schema))
    assert upgrade(Protocol(1, 2), {}, schema) == expected


def test_default_collation_is_no_collation() -> None:
    explicit = _schema(_field("name", "string", {"__COLLATIONS": {"name": "spark.UTF8_BINARY"}}))
    assert protocol_for({}, explicit) == Protocol(1, 2)


def test_the_preview_collations_feature_serves_and_is_kept() -> None:
    preview = Protocol(1, 7, None, ("appendOnly", "collations-preview", "domainMetadata", "invariants"))
    check_can_write(preview, _md({}, LCASE))
    assert upgrade(preview, {}, LCASE) is None


def test_supported_feature_names_as_describe_detail_lists_them():
    """Delta's implicitlySupportedFeatures: a legacy feature whose reader and writer versions the
    protocol reaches (columnMapping needs reader 2 too); a features protocol lists its own only."""
    assert supported_feature_names(Protocol(1, 1)) == []
    assert supported_feature_names(Protocol(1, 2)) == ["appendOnly", "invariants"]
    legacy_5 = ["appendOnly", "changeDataFeed", "checkConstraints", "generatedColumns", "invariants"]
    assert supported_feature_names(Protocol(1, 5)) == legacy_5
    assert supported_feature_names(Protocol(2, 5)) == sorted([*legacy_5, "columnMapping"])
    explicit = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "appendOnly"))
    assert supported_feature_names(explicit) == ["appendOnly", "deletionVectors"]
