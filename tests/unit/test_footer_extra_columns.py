"""REORG PURGE's footer check: a file holds a column the table no longer has."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from deltamerge.stats.footer import column_paths, file_has_extra_columns

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "S",
            "type": {
                "type": "struct",
                "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}],
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "elementType": {
                    "type": "struct",
                    "fields": [{"name": "x", "type": "integer", "nullable": True, "metadata": {}}],
                },
                "containsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "m",
            "type": {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
            "nullable": True,
            "metadata": {},
        },
    ],
}


def _file(tmp_path, name: str, table: pa.Table) -> str:
    path = str(tmp_path / name)
    pq.write_table(table, path)
    return path


def _table(s_fields: dict, item_fields: dict, extra: dict | None = None) -> pa.Table:
    cols = {
        "id": pa.array([1], pa.int64()),
        "s": pa.array([s_fields]),  # case differs from the schema's "S": still the same column
        "items": pa.array([[item_fields]]),
        "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        **(extra or {}),
    }
    return pa.table(cols)


def test_same_columns_are_not_extra(tmp_path) -> None:
    known = column_paths(SCHEMA)
    assert not file_has_extra_columns(_file(tmp_path, "same.parquet", _table({"a": 1}, {"x": 1})), known)
    # A file may lack columns added later: nothing extra.
    assert not file_has_extra_columns(_file(tmp_path, "fewer.parquet", pa.table({"id": [1]})), known)


def test_dropped_columns_at_any_depth_are_extra(tmp_path) -> None:
    known = column_paths(SCHEMA)
    top = _table({"a": 1}, {"x": 1}, {"email": pa.array(["e"])})
    nested = _table({"a": 1, "b": "dropped"}, {"x": 1})
    in_array = _table({"a": 1}, {"x": 1, "y": 2})
    for name, table in [("top", top), ("nested", nested), ("in_array", in_array)]:
        assert file_has_extra_columns(_file(tmp_path, f"{name}.parquet", table), known), name
