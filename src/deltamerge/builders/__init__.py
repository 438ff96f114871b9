"""Table creation and maintenance: delta-spark's ``DeltaTableBuilder`` (CREATE / REPLACE TABLE),
``restoreToVersion`` / ``restoreToTimestamp`` (RESTORE) and ``DeltaOptimizeBuilder`` (OPTIMIZE).

Each is one optimistic transaction with Delta's operation name, parameters and metrics:
``creation`` (``create_table``), ``restoration`` (``restore``) and ``compaction`` (``optimize``).
"""

from __future__ import annotations

from deltamerge.builders.compaction import OPTIMIZE_SCHEMA, DeltaOptimizeBuilder, optimize
from deltamerge.builders.creation import DeltaTableBuilder, create_table, table_location
from deltamerge.builders.restoration import RESTORE_SCHEMA, restore

__all__ = [
    "OPTIMIZE_SCHEMA",
    "RESTORE_SCHEMA",
    "DeltaOptimizeBuilder",
    "DeltaTableBuilder",
    "create_table",
    "optimize",
    "restore",
    "table_location",
]
