"""Column-mapping schema comparison: which schema changes a change-data-feed read cannot span."""

from __future__ import annotations

from deltamerge.log import column_mapping

PHYS = column_mapping.PHYSICAL_NAME


def _field(name: str, phys: str | None, type_: object = "integer") -> dict:
    return {"name": name, "type": type_, "nullable": True, "metadata": {PHYS: phys} if phys else {}}


def _schema(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


def test_added_columns_are_compatible() -> None:
    old = _schema(_field("a", "col-1"))
    new = _schema(_field("a", "col-1"), _field("b", "col-2"))
    assert column_mapping.renamed_or_dropped(old, new) is None


def test_renames_and_drops_are_found_at_any_depth() -> None:
    inner = _schema(_field("x", "col-3"), _field("y", "col-4"))
    old = _schema(_field("a", "col-1"), _field("s", "col-2", inner))
    assert (
        column_mapping.renamed_or_dropped(old, _schema(_field("b", "col-1"), _field("s", "col-2", inner)))
        == "rename"
    )
    renamed_inner = _schema(_field("z", "col-3"), _field("y", "col-4"))
    assert (
        column_mapping.renamed_or_dropped(
            old, _schema(_field("a", "col-1"), _field("s", "col-2", renamed_inner))
        )
        == "rename"
    )
    assert column_mapping.renamed_or_dropped(old, _schema(_field("s", "col-2", inner))) == "drop"
    # A column dropped and added back under its name is a new column (a new physical name).
    assert (
        column_mapping.renamed_or_dropped(old, _schema(_field("a", "col-9"), _field("s", "col-2", inner)))
        == "drop"
    )


def test_an_upgrade_from_no_mapping_keeps_the_names() -> None:
    old = _schema(_field("a", None), _field("b", None))
    assert column_mapping.renamed_or_dropped(old, _schema(_field("a", "a"), _field("b", "b"))) is None
    assert column_mapping.renamed_or_dropped(old, _schema(_field("c", "a"), _field("b", "b"))) == "rename"
