"""The MERGE statement as data: clauses, assignments and the whole spec (Delta's DeltaMergeInto).

Both entry points, the builder and SQL text, produce one frozen ``MergeSpec``. The grammar checks
Delta runs when it creates ``DeltaMergeInto`` live here too (``check_grammar``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from deltamerge.errors import AnalysisError
from deltamerge.predicates import to_sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ClauseKind(str, Enum):
    """Which rows a clause applies to."""

    MATCHED = "matched"
    NOT_MATCHED = "notMatched"  # NOT MATCHED [BY TARGET]: source rows with no target match
    NOT_MATCHED_BY_SOURCE = "notMatchedBySource"  # target rows with no source match


class ActionType(str, Enum):
    """What a clause does to the row."""

    UPDATE = "update"
    DELETE = "delete"
    INSERT = "insert"


@dataclass(frozen=True)
class Assignment:
    """``SET key = value`` or one ``INSERT (key) VALUES (value)`` pair; key parts are unresolved."""

    key: tuple[str, ...]
    value: exp.Expression

    @property
    def key_sql(self) -> str:
        """The key as it appears in SQL (back-ticked parts where needed)."""
        return ".".join(p if p.replace("_", "a").isalnum() else f"`{p}`" for p in self.key)


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause. ``assignments is None`` means ``UPDATE SET *`` / ``INSERT *``."""

    kind: ClauseKind
    action: ActionType
    condition: exp.Expression | None = None
    assignments: tuple[Assignment, ...] | None = ()

    @property
    def is_star(self) -> bool:
        """``UPDATE SET *`` or ``INSERT *``."""
        return self.assignments is None and self.action is not ActionType.DELETE

    def describe(self) -> dict[str, Any]:
        """The clause as Delta records it in ``operationParameters``."""
        out: dict[str, Any] = {}
        if self.condition is not None:
            out["predicate"] = to_sql(self.condition)
        out["actionType"] = self.action.value
        return out


#: ``MergeSpec.extras`` key: whether type widening was enabled when the builder's table object was
#: made (Delta's analysis-time snapshot); None or absent for SQL, which analyses as it runs.
WIDENING_AT_ANALYSIS = "type_widening_at_analysis"
#: ``MergeSpec.extras`` key: the setting that decides deletion vectors (a ``SessionConf`` member) for a
#: DELETE or UPDATE run as a MERGE; absent for a MERGE (``merge.deletionVectors.persistent``).
DV_SETTING = "deletion_vectors_setting"


@dataclass(frozen=True)
class MergeSpec:
    """Everything a MERGE says, before analysis."""

    source: DataFrame
    condition: exp.Expression
    clauses: tuple[MergeClause, ...]
    target_alias: str | None = None
    source_alias: str | None = None
    # The name a target with no alias of its own was opened by (``("spark_catalog", "db", "people")``):
    # its columns answer to every trailing part of it (``db.people.id``), as a catalog table's do.
    target_name: tuple[str, ...] = ()
    schema_evolution: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    def of_kind(self, kind: ClauseKind) -> list[MergeClause]:
        """Clauses of one kind, in statement order."""
        return [c for c in self.clauses if c.kind is kind]

    @property
    def matched(self) -> list[MergeClause]:
        """WHEN MATCHED clauses."""
        return self.of_kind(ClauseKind.MATCHED)

    @property
    def not_matched(self) -> list[MergeClause]:
        """WHEN NOT MATCHED [BY TARGET] clauses."""
        return self.of_kind(ClauseKind.NOT_MATCHED)

    @property
    def not_matched_by_source(self) -> list[MergeClause]:
        """WHEN NOT MATCHED BY SOURCE clauses."""
        return self.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE)


_NON_LAST = {
    ClauseKind.MATCHED: (
        "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        "When there are more than one MATCHED clauses in a MERGE statement, "
        "only the last MATCHED clause can omit the condition.",
    ),
    ClauseKind.NOT_MATCHED: (
        "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
        "When there are more than one NOT MATCHED clauses in a MERGE statement, "
        "only the last NOT MATCHED clause can omit the condition.",
    ),
    ClauseKind.NOT_MATCHED_BY_SOURCE: (
        "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
        "When there are more than one NOT MATCHED BY SOURCE clauses in a MERGE statement, "
        "only the last NOT MATCHED BY SOURCE clause can omit the condition.",
    ),
}


def check_grammar(clauses: tuple[MergeClause, ...] | list[MergeClause]) -> None:
    """Delta's ``DeltaMergeInto.apply`` checks: at least one clause; only the last of a kind may
    omit its condition."""
    if not clauses:
        raise AnalysisError(
            "There must be at least one WHEN clause in a MERGE statement.",
            error_class="DELTA_MERGE_MISSING_WHEN",
            sql_state="42601",
        )
    for kind, (error_class, message) in _NON_LAST.items():
        of_kind = [c for c in clauses if c.kind is kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise AnalysisError(message, error_class=error_class, sql_state="42601")
