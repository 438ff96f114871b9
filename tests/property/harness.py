"""Differential-testing harness for MERGE: renders a :class:`oracle.MergeCase` for the various
engines, runs delta-rs / DuckDB, and compares engine outcomes with the reference oracle.

Plugging in another engine (e.g. deltamerge) takes a few lines::

    from harness import (render_sql_merge, render_builder_calls, apply_builder, target_arrow,
                         source_arrow, EngineOutcome, compare_outcome, normalize_error)
    import oracle

    expected = oracle.run_case(case)                       # Delta semantics
    # SQL path: create table `target` from target_arrow(case), temp view `source` from
    # source_arrow(case), then spark.sql(render_sql_merge(case)).
    # Builder path: apply_builder(dt.alias("t").merge(src.alias("s"), merge_condition(case)), case)
    outcome = EngineOutcome(rows=..., counters=(affected, updated, deleted, inserted),
                            metrics=<history operationMetrics as ints>)   # or error=MULTIPLE_MATCH
    problems = compare_outcome(case, expected, outcome)
    assert not problems, describe(case) + "\n" + "\n".join(problems)

Nothing here imports deltamerge.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/ for oracle

import oracle
from oracle import (
    MATCHED,
    MULTIPLE_MATCH,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    Clause,
    MergeCase,
    MergeResult,
    render,
)

#: ``MERGE_PROPERTY_RANDOM=1``: fresh examples (pick the seed with ``--hypothesis-seed=N``) instead of
#: the fixed, reproducible sequence CI runs.
RANDOM = os.environ.get("MERGE_PROPERTY_RANDOM", "") not in ("", "0")


def spark_examples(examples: int) -> settings:
    """Hypothesis settings of a property test that runs Spark: ``examples`` examples, no deadline
    and no health checks (a Spark example takes seconds), the fixed sequence unless ``RANDOM``,
    no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not RANDOM,
        database=None,
    )


ARROW_TYPES = {"int": pa.int32(), "string": pa.string()}
SQL_TYPES = {"int": "INT", "string": "STRING"}
DUCKDB_TYPES = {"int": "INTEGER", "string": "VARCHAR"}


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def arrow_schema(schema: Sequence[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(name, ARROW_TYPES[typ], nullable=True) for name, typ in schema])


def target_arrow(case: MergeCase) -> pa.Table:
    return pa.Table.from_pylist(case.target_dicts(), schema=arrow_schema(case.target_schema))


def source_arrow(case: MergeCase) -> pa.Table:
    return pa.Table.from_pylist(case.source_dicts(), schema=arrow_schema(case.source_schema))


def ddl(schema: Sequence[tuple[str, str]]) -> str:
    """Spark DDL string, e.g. ``key INT, value INT, tag STRING``."""
    return ", ".join(f"{name} {SQL_TYPES[typ]}" for name, typ in schema)


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def merge_condition(case: MergeCase, dialect: str = "spark") -> str:
    return render(case.on, dialect)


def _render_clause_sql(c: Clause, dialect: str) -> str:
    head = {
        MATCHED: "WHEN MATCHED",
        NOT_MATCHED: "WHEN NOT MATCHED",
        NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE",
    }[c.kind]
    if c.condition is not None:
        head += f" AND {render(c.condition, dialect)}"
    if c.action == "delete":
        body = "DELETE"
    elif c.action == "update_all":
        body = "UPDATE SET *"
    elif c.action == "insert_all":
        body = "INSERT *"
    elif c.action == "update":
        body = "UPDATE SET " + ", ".join(f"{col} = {render(e, dialect)}" for col, e in c.assignments)
    else:  # insert
        cols = ", ".join(col for col, _ in c.assignments)
        vals = ", ".join(render(e, dialect) for _, e in c.assignments)
        body = f"INSERT ({cols}) VALUES ({vals})"
    return f"{head} THEN {body}"


def render_sql_merge(
    case: MergeCase,
    target: str = "target",
    source: str = "source",
    dialect: str = "spark",
) -> str:
    """``MERGE INTO target t USING source s ON ... WHEN ...`` (clauses grouped MATCHED, NOT
    MATCHED, NOT MATCHED BY SOURCE, declaration order kept within each kind).  ``dialect`` may
    also be ``"duckdb"`` (the same statement shape is valid DuckDB 1.4+/2.0 syntax)."""
    parts = [f"MERGE INTO {target} t USING {source} s ON {merge_condition(case, dialect)}"]
    parts += [_render_clause_sql(c, dialect) for c in case.ordered_clauses()]
    return " ".join(parts)


def render_builder_calls(case: MergeCase) -> list[tuple[str, dict[str, Any]]]:
    """delta-spark ``DeltaMergeBuilder`` calls in clause declaration order, with Spark-SQL string
    conditions / values, e.g. ``("whenMatchedUpdate", {"condition": "(s.value > 1)",
    "set": {"value": "s.value"}})``.  ``condition`` is omitted for unconditional clauses.  The
    merge itself is ``dt.alias("t").merge(src.alias("s"), merge_condition(case))``."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for c in case.clauses:
        kw: dict[str, Any] = {}
        if c.condition is not None:
            kw["condition"] = render(c.condition, "spark")
        assigns = {col: render(e, "spark") for col, e in c.assignments}
        if c.kind == MATCHED:
            if c.action == "update":
                calls.append(("whenMatchedUpdate", {**kw, "set": assigns}))
            elif c.action == "update_all":
                calls.append(("whenMatchedUpdateAll", kw))
            else:
                calls.append(("whenMatchedDelete", kw))
        elif c.kind == NOT_MATCHED:
            if c.action == "insert":
                calls.append(("whenNotMatchedInsert", {**kw, "values": assigns}))
            else:
                calls.append(("whenNotMatchedInsertAll", kw))
        elif c.action == "update":
            calls.append(("whenNotMatchedBySourceUpdate", {**kw, "set": assigns}))
        else:
            calls.append(("whenNotMatchedBySourceDelete", kw))
    return calls


def apply_builder(builder: Any, case: MergeCase) -> Any:
    """Apply :func:`render_builder_calls` to a delta-spark-style merge builder (duck-typed);
    returns the final builder (call ``.execute()`` on it)."""
    for name, kwargs in render_builder_calls(case):
        builder = getattr(builder, name)(**kwargs)
    return builder


def deltars_calls(case: MergeCase) -> list[tuple[str, dict[str, Any]]]:
    """delta-rs ``TableMerger`` calls (DataFusion SQL strings), clause declaration order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for c in case.clauses:
        kw: dict[str, Any] = {}
        if c.condition is not None:
            kw["predicate"] = render(c.condition, "datafusion")
        assigns = {col: render(e, "datafusion") for col, e in c.assignments}
        name = {
            (MATCHED, "update"): "when_matched_update",
            (MATCHED, "update_all"): "when_matched_update_all",
            (MATCHED, "delete"): "when_matched_delete",
            (NOT_MATCHED, "insert"): "when_not_matched_insert",
            (NOT_MATCHED, "insert_all"): "when_not_matched_insert_all",
            (NOT_MATCHED_BY_SOURCE, "update"): "when_not_matched_by_source_update",
            (NOT_MATCHED_BY_SOURCE, "delete"): "when_not_matched_by_source_delete",
        }[(c.kind, c.action)]
        if c.action in ("update", "insert"):
            kw["updates"] = assigns
        calls.append((name, kw))
    return calls


def describe(case: MergeCase) -> str:
    lines = [
        f"target ({ddl(case.target_schema)}): {list(case.target_rows)}",
        f"source ({ddl(case.source_schema)}): {list(case.source_rows)}",
        f"spark sql: {render_sql_merge(case)}",
    ]
    if case.target_file_ids is not None:
        lines.insert(1, f"target file ids: {list(case.target_file_ids)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Outcomes and comparison
# --------------------------------------------------------------------------------------------


@dataclass
class EngineOutcome:
    """What an engine did.  ``error`` is a normalised error class (e.g. ``oracle.MULTIPLE_MATCH``)
    or ``"OTHER"`` with ``raw_error`` holding the message; ``counters`` is (affected, updated,
    deleted, inserted) or None if the engine does not report them; ``metrics`` uses the Delta
    history key names (``numTargetRowsCopied`` ...), only the keys present are compared."""

    rows: list[dict[str, Any]] | None = None
    counters: tuple[int, int, int, int] | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    raw_error: str | None = None


_ERROR_PATTERNS = (
    # Delta / deltamerge: "Cannot perform Merge as multiple source rows matched and attempted to
    # modify the same\ntarget row ..."
    ("multiple source rows matched", MULTIPLE_MATCH),
    ("DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE", MULTIPLE_MATCH),
    # delta-rs 1.6: "MERGE matched a target row with multiple source rows that satisfy
    # duplicate relevant WHEN MATCHED clauses (file: ..., row ordinal in file: N)"
    ("matched a target row with multiple source rows", MULTIPLE_MATCH),
    # DuckDB: "MERGE INTO command cannot affect the same target row more than once. ..."
    ("cannot affect the same target row more than once", MULTIPLE_MATCH),
    # grammar errors (Delta API and Spark parser texts; most specific first)
    ("only the last NOT MATCHED BY SOURCE clause can omit", oracle.NON_LAST_OMIT[NOT_MATCHED_BY_SOURCE]),
    ("only the last NOT MATCHED", oracle.NON_LAST_OMIT[NOT_MATCHED]),
    ("only the last MATCHED clause can omit", oracle.NON_LAST_OMIT[MATCHED]),
    ("must be at least one WHEN clause", oracle.MISSING_WHEN),
)


def normalize_error(exc: BaseException | str) -> str:
    msg = str(exc)
    low = msg.lower()
    for needle, cls in _ERROR_PATTERNS:
        if needle.lower() in low:
            return cls
    return "OTHER"


def compare_outcome(
    case: MergeCase,
    expected: MergeResult,
    actual: EngineOutcome,
    *,
    metric_keys: Sequence[str] | None = None,
    metric_overrides: Mapping[str, int] | None = None,
) -> list[str]:
    """Differences between the oracle result and an engine outcome (empty list = agreement).

    * A layout-dependent multiple-match error (see ``oracle``) accepts either the error or the
      ``expected.unchecked`` outcome.
    * ``metric_keys``: which ``actual.metrics`` keys to compare (default: all keys present in
      ``actual.metrics`` that the oracle reports).  ``metric_overrides`` replaces expected
      metric values (e.g. ``numTargetRowsCopied`` for an engine with another file-rewrite
      policy); ``numOutputRows`` is recomputed from the (overridden) inserted/updated/copied.
    """
    if expected.error is not None and expected.error_layout_dependent and actual.error is None:
        assert expected.unchecked is not None
        expected = expected.unchecked
    problems: list[str] = []
    if expected.error is not None or actual.error is not None:
        if expected.error != actual.error:
            problems.append(f"error: expected {expected.error}, got {actual.error} ({actual.raw_error})")
        return problems
    cols = case.target_columns
    assert actual.rows is not None and expected.rows is not None
    exp_rows, act_rows = expected.row_multiset(cols), oracle.rows_multiset(actual.rows, cols)
    if exp_rows != act_rows:
        problems.append(
            "rows differ:\n  missing: "
            + repr(sorted((exp_rows - act_rows).elements(), key=repr))
            + "\n  unexpected: "
            + repr(sorted((act_rows - exp_rows).elements(), key=repr))
        )
    if actual.counters is not None and tuple(actual.counters) != expected.counters:
        problems.append(
            f"counters (affected, updated, deleted, inserted): expected {expected.counters}, "
            f"got {tuple(actual.counters)}"
        )
    exp_metrics = dict(expected.metrics)
    if metric_overrides:
        exp_metrics.update(metric_overrides)
        exp_metrics["numOutputRows"] = (
            exp_metrics["numTargetRowsInserted"]
            + exp_metrics["numTargetRowsUpdated"]
            + exp_metrics["numTargetRowsCopied"]
        )
    keys = metric_keys if metric_keys is not None else [k for k in actual.metrics if k in exp_metrics]
    for k in keys:
        if actual.metrics.get(k) != exp_metrics.get(k):
            problems.append(f"metric {k}: expected {exp_metrics.get(k)}, got {actual.metrics.get(k)}")
    return problems


# --------------------------------------------------------------------------------------------
# delta-rs
# --------------------------------------------------------------------------------------------

DELTARS_METRIC_KEYS = {
    "num_source_rows": "numSourceRows",
    "num_target_rows_inserted": "numTargetRowsInserted",
    "num_target_rows_updated": "numTargetRowsUpdated",
    "num_target_rows_deleted": "numTargetRowsDeleted",
    "num_target_rows_copied": "numTargetRowsCopied",
    "num_output_rows": "numOutputRows",
}


def run_deltars(case: MergeCase, path: str) -> EngineOutcome:
    """Write the target with ``write_deltalake`` (one data file), merge the source with delta-rs,
    read the table back.  ``path`` must be a fresh directory (it is created)."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, target_arrow(case))
    merger = DeltaTable(path).merge(
        source=source_arrow(case),
        predicate=merge_condition(case, "datafusion"),
        source_alias="s",
        target_alias="t",
    )
    for name, kwargs in deltars_calls(case):
        merger = getattr(merger, name)(**kwargs)
    try:
        raw = merger.execute()
    except Exception as exc:  # delta-rs raises DeltaError (a generic Exception subclass)
        return EngineOutcome(error=normalize_error(exc), raw_error=f"{type(exc).__name__}: {exc}")
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    metrics = {DELTARS_METRIC_KEYS[k]: int(v) for k, v in raw.items() if k in DELTARS_METRIC_KEYS}
    ins, upd, dele = (
        metrics["numTargetRowsInserted"],
        metrics["numTargetRowsUpdated"],
        metrics["numTargetRowsDeleted"],
    )
    metrics["numTargetFilesAdded"] = int(raw.get("num_target_files_added", 0))
    metrics["numTargetFilesRemoved"] = int(raw.get("num_target_files_removed", 0))
    return EngineOutcome(rows=rows, counters=(ins + upd + dele, upd, dele, ins), metrics=metrics)


# --------------------------------------------------------------------------------------------
# DuckDB
# --------------------------------------------------------------------------------------------


def run_duckdb(case: MergeCase, con: Any = None) -> EngineOutcome:
    """Run the MERGE in an in-memory DuckDB (tables ``target``/``source``).  Per-action counters
    come from ``RETURNING merge_action``."""
    import duckdb

    own = con is None
    if own:
        con = duckdb.connect()
    try:
        for name, schema, table in (
            ("target", case.target_schema, target_arrow(case)),
            ("source", case.source_schema, source_arrow(case)),
        ):
            cols = ", ".join(f"{c} {DUCKDB_TYPES[t]}" for c, t in schema)
            con.execute(f"DROP TABLE IF EXISTS {name}")
            con.execute(f"CREATE TABLE {name} ({cols})")
            con.register("_arrow_in", table)
            con.execute(f"INSERT INTO {name} SELECT * FROM _arrow_in")
            con.unregister("_arrow_in")
        sql = render_sql_merge(case, dialect="duckdb") + " RETURNING merge_action"
        try:
            actions = [r[0] for r in con.execute(sql).fetchall()]
        except Exception as exc:
            return EngineOutcome(error=normalize_error(exc), raw_error=f"{type(exc).__name__}: {exc}")
        names = case.target_columns
        rows = [
            dict(zip(names, r, strict=False))
            for r in con.execute(f"SELECT {', '.join(names)} FROM target").fetchall()
        ]
    finally:
        if own:
            con.close()
    upd, dele, ins = actions.count("UPDATE"), actions.count("DELETE"), actions.count("INSERT")
    return EngineOutcome(rows=rows, counters=(upd + dele + ins, upd, dele, ins))


# --------------------------------------------------------------------------------------------
# Small helpers for tests
# --------------------------------------------------------------------------------------------


def case_from_rows(
    target_rows: Sequence[Mapping[str, Any] | Sequence[Any]],
    source_rows: Sequence[Mapping[str, Any] | Sequence[Any]],
    on: oracle.Expr,
    clauses: Sequence[Clause],
    schema: Sequence[tuple[str, str]] = (("key", "int"), ("value", "int")),
    source_schema: Sequence[tuple[str, str]] | None = None,
    target_file_ids: Sequence[int] | None = None,
) -> MergeCase:
    sschema = tuple(source_schema) if source_schema is not None else tuple(schema)

    def tup(r: Mapping[str, Any] | Sequence[Any], sch: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        if isinstance(r, Mapping):
            return tuple(r.get(c) for c, _ in sch)
        return tuple(r)

    return MergeCase(
        target_schema=tuple(schema),
        source_schema=sschema,
        target_rows=tuple(tup(r, schema) for r in target_rows),
        source_rows=tuple(tup(r, sschema) for r in source_rows),
        on=on,
        clauses=tuple(clauses),
        target_file_ids=tuple(target_file_ids) if target_file_ids is not None else None,
    )


Runner = Callable[[MergeCase], EngineOutcome]
