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


#: Recorded for ``whenNotMatchedBySource().updateAll()``, which the MERGE refuses when it runs.
_NMBS_UPDATE_ALL = "notMatchedBySourceUpdateAll"


class DeltaMergeIntoWriter:
    """``MergeIntoWriter`` (Spark 4) over a deltamerge table: clauses in call order, then ``merge()``."""

    def __init__(self, source: Any, table: str, condition: Any, *, path: str | None, name: str | None):
        self._source = source
        self._table = table
        self._condition = condition
        self._path = path
        self._name = name
        # (DeltaMergeBuilder method, clause condition, its keyword arguments), in call order.
        self._clauses: list[tuple[str, Any, dict[str, Any]]] = []
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

    def merge(self) -> None:
        """Run the MERGE (one Delta commit)."""
        from deltamerge.table import DeltaTable

        spark = self._source.sparkSession
        if self._name is not None:
            table = DeltaTable.forName(spark, self._name)
        else:
            table = DeltaTable.forPath(spark, str(self._path))
        builder = table.merge(self._source, self._condition)
        for method, condition, kwargs in self._clauses:
            if method == _NMBS_UPDATE_ALL:
                raise AnalysisError(
                    "WHEN NOT MATCHED BY SOURCE cannot UPDATE SET *: there is no source row to take the "
                    "values from. Use update({...}) with target columns or literals, or delete().",
                    error_class="DELTA_MERGE_UNRESOLVED_EXPRESSION",
                )
            builder = getattr(builder, method)(condition, **kwargs)
        if self._evolve:
            builder = builder.withSchemaEvolution()
        builder.execute()

    class _When:
        """One ``when...(condition)``: its action method records the clause on the writer."""

        def __init__(self, writer: DeltaMergeIntoWriter, condition: Any):
            self._writer, self._condition = writer, condition

        def _then(self, method: str, **kwargs: Any) -> DeltaMergeIntoWriter:
            self._writer._clauses.append((method, self._condition, kwargs))
            return self._writer

    class WhenMatched(_When):
        """``whenMatched(...)``: then ``updateAll()``, ``update({col: Column})`` or ``delete()``."""

        def updateAll(self) -> DeltaMergeIntoWriter:
            """UPDATE SET * for the matched rows."""
            return self._then("whenMatchedUpdateAll")

        def update(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """UPDATE SET col = value for the matched rows."""
            return self._then("whenMatchedUpdate", set=dict(assignments))

        def delete(self) -> DeltaMergeIntoWriter:
            """DELETE the matched rows."""
            return self._then("whenMatchedDelete")

    class WhenNotMatched(_When):
        """``whenNotMatched(...)``: then ``insertAll()`` or ``insert({col: Column})``."""

        def insertAll(self) -> DeltaMergeIntoWriter:
            """INSERT * of the unmatched source rows."""
            return self._then("whenNotMatchedInsertAll")

        def insert(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """INSERT (cols) VALUES (...) of the unmatched source rows."""
            return self._then("whenNotMatchedInsert", values=dict(assignments))

    class WhenNotMatchedBySource(_When):
        """``whenNotMatchedBySource(...)``: then ``update({col: Column})`` or ``delete()``."""

        def updateAll(self) -> DeltaMergeIntoWriter:
            """Refused when the MERGE runs: an unmatched target row has no source values."""
            return self._then(_NMBS_UPDATE_ALL)

        def update(self, assignments: dict[str, Any]) -> DeltaMergeIntoWriter:
            """UPDATE SET col = value for the target rows no source row matches."""
            return self._then("whenNotMatchedBySourceUpdate", set=dict(assignments))

        def delete(self) -> DeltaMergeIntoWriter:
            """DELETE the target rows no source row matches."""
            return self._then("whenNotMatchedBySourceDelete")


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
