"""Spark 4's DataFrame MERGE API for deltamerge tables: ``source.mergeInto(table, condition)``.

``df.mergeInto("target", F.expr("target.id = s.id")).whenMatched().updateAll()
.whenNotMatched().insertAll().merge()`` builds Spark's ``MergeIntoWriter``, which needs a catalog
table. After ``deltamerge.configure(spark)``, a target that is a deltamerge table (a registered
name, or ``delta.`/path```) gets this writer instead: the same methods, run by deltamerge's MERGE
(through ``DeltaTable.merge``), so the semantics, metrics and errors are Delta's. The target is
known by its table name in conditions, as in Spark; other targets go to Spark's own writer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltamerge.errors import AnalysisError

__all__ = ["DeltaMergeIntoWriter", "wrap_merge_into"]


class DeltaMergeIntoWriter:
    """``MergeIntoWriter`` (Spark 4) over a deltamerge table: clauses in call order, then ``merge()``."""

    def __init__(self, source: Any, table: str, condition: Any, *, path: str | None, name: str | None):
        self._source = source
        self._table = table
        self._condition = condition
        self._path = path
        self._name = name
        self._clauses: list[tuple[str, Any, str, dict[str, Any] | None]] = []
        self._evolve = False

    def whenMatched(self, condition: Any = None) -> DeltaMergeIntoWriter.WhenMatched:
        """Actions for target rows matched by a source row (and ``condition``)."""
        return DeltaMergeIntoWriter.WhenMatched(self, condition)

    def whenNotMatched(self, condition: Any = None) -> DeltaMergeIntoWriter.WhenNotMatched:
        """Actions for source rows that match no target row (and ``condition``)."""
        return DeltaMergeIntoWriter.WhenNotMatched(self, condition)

    def whenNotMatchedBySource(self, condition: Any = None) -> DeltaMergeIntoWriter.WhenNotMatchedBySource:
        """Actions for target rows that no source row matches (and ``condition``)."""
        return DeltaMergeIntoWriter.WhenNotMatchedBySource(self, condition)

    def withSchemaEvolution(self) -> DeltaMergeIntoWriter:
        """Let the MERGE add the source's new columns to the table."""
        self._evolve = True
        return self

    def _add(self, kind: str, condition: Any, action: str, assignments: dict[str, Any] | None = None) -> Any:
        self._clauses.append((kind, condition, action, assignments))
        return self

    def merge(self) -> None:
        """Run the MERGE (one Delta commit)."""
        from deltamerge.table import DeltaTable

        spark = self._source.sparkSession
        if self._name is not None:
            table = DeltaTable.forName(spark, self._name)
        else:
            table = DeltaTable.forPath(spark, str(self._path))
        builder = table.merge(self._source, self._condition)
        for kind, condition, action, assignments in self._clauses:
            if kind == "matched":
                if action == "updateAll":
                    builder = builder.whenMatchedUpdateAll(condition)
                elif action == "update":
                    builder = builder.whenMatchedUpdate(condition, set=assignments)
                else:
                    builder = builder.whenMatchedDelete(condition)
            elif kind == "notMatched":
                if action == "insertAll":
                    builder = builder.whenNotMatchedInsertAll(condition)
                else:
                    builder = builder.whenNotMatchedInsert(condition, values=assignments)
            elif action == "updateAll":
                raise AnalysisError(
                    "WHEN NOT MATCHED BY SOURCE cannot UPDATE SET *: there is no source row to take the "
                    "values from. Use update({...}) with target columns or literals, or delete().",
                    error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
                )
            elif action == "update":
                builder = builder.whenNotMatchedBySourceUpdate(condition, set=assignments)
            else:
                builder = builder.whenNotMatchedBySourceDelete(condition)
        if self._evolve:
            builder = builder.withSchemaEvolution()
        builder.execute()

    class WhenMatched:
        """``whenMatched(...)``: then ``updateAll()``, ``update({col: Column})`` or ``delete()``."""

        def __init__(self, writer: DeltaMergeIntoWriter, condition: Any):
            self._writer, self._condition = writer, condition

        def updateAll(self) -> DeltaMergeIntoWriter:
            """UPDATE SET * for the matched rows."""
            return self._writer._add("matched", self._condition, "updateAll")  # type: ignore[no-any-return]

        def update(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """UPDATE SET col = value for the matched rows."""
            return self._writer._add("matched", self._condition, "update", dict(assignments))  # type: ignore[no-any-return]

        def delete(self) -> DeltaMergeIntoWriter:
            """DELETE the matched rows."""
            return self._writer._add("matched", self._condition, "delete")  # type: ignore[no-any-return]

    class WhenNotMatched:
        """``whenNotMatched(...)``: then ``insertAll()`` or ``insert({col: Column})``."""

        def __init__(self, writer: DeltaMergeIntoWriter, condition: Any):
            self._writer, self._condition = writer, condition

        def insertAll(self) -> DeltaMergeIntoWriter:
            """INSERT * of the unmatched source rows."""
            return self._writer._add("notMatched", self._condition, "insertAll")  # type: ignore[no-any-return]

        def insert(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """INSERT (cols) VALUES (...) of the unmatched source rows."""
            return self._writer._add("notMatched", self._condition, "insert", dict(assignments))  # type: ignore[no-any-return]

    class WhenNotMatchedBySource:
        """``whenNotMatchedBySource(...)``: then ``update({col: Column})`` or ``delete()``."""

        def __init__(self, writer: DeltaMergeIntoWriter, condition: Any):
            self._writer, self._condition = writer, condition

        def updateAll(self) -> DeltaMergeIntoWriter:
            """Refused when the MERGE runs: an unmatched target row has no source values."""
            return self._writer._add("notMatchedBySource", self._condition, "updateAll")  # type: ignore[no-any-return]

        def update(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """UPDATE SET col = value for the target rows no source row matches."""
            return self._writer._add("notMatchedBySource", self._condition, "update", dict(assignments))  # type: ignore[no-any-return]

        def delete(self) -> DeltaMergeIntoWriter:
            """DELETE the target rows no source row matches."""
            return self._writer._add("notMatchedBySource", self._condition, "delete")  # type: ignore[no-any-return]


def wrap_merge_into(original: Callable[..., Any]) -> Callable[..., Any]:
    """``DataFrame.mergeInto``: deltamerge's writer for deltamerge tables, Spark's otherwise."""

    @functools.wraps(original)
    def mergeInto(self: Any, table: str, condition: Any) -> Any:
        from deltamerge.configure.state import deltamerge_table

        target = deltamerge_table(table)
        if target is None:
            return original(self, table, condition)
        path, name = target
        return DeltaMergeIntoWriter(self, table, condition, path=path, name=name)

    return mergeInto
