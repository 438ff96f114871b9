"""Generated merges through deltamerge, compared with the reference oracle (Delta semantics) and
with delta-rs on the same inputs.

Each example writes a fresh one-file target table, runs the merge through SQL or the builder
(drawn), and compares final rows, the returned counters and the history row metrics with
``oracle.run_case`` (which the delta-rs and DuckDB differential tests validate). Where delta-rs
succeeds too, its final rows and counters must equal deltamerge's.
"""

from __future__ import annotations

import itertools
import os

import pytest
from harness import (
    EngineOutcome,
    apply_builder,
    compare_outcome,
    ddl,
    describe,
    merge_condition,
    normalize_error,
    render_sql_merge,
    run_deltars,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import merge_cases

import oracle

EXAMPLES = int(os.environ.get("MERGE_PROPERTY_EXAMPLES", "200"))
ROW_METRICS = (
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numTargetRowsCopied",
    "numOutputRows",
)
_COUNTER = itertools.count()


def _run_deltamerge(spark, case, root: str, via_sql: bool) -> EngineOutcome:
    import deltamerge
    from deltamerge import DeltaTable

    path = os.path.join(root, f"t{next(_COUNTER)}")
    target = spark.createDataFrame(list(case.target_rows), ddl(case.target_schema)).coalesce(1)
    deltamerge.write(target, path)
    deltamerge.register_table(spark, "target", path)
    source = spark.createDataFrame(list(case.source_rows), ddl(case.source_schema))
    source.createOrReplaceTempView("source")
    try:
        if via_sql:
            result = deltamerge.sql(spark, render_sql_merge(case))
        else:
            builder = (
                DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), merge_condition(case))
            )
            result = apply_builder(builder, case).execute()
        counters = tuple(int(v) for v in result.collect()[0])
    except Exception as exc:  # compared as a normalised error class
        return EngineOutcome(error=normalize_error(exc), raw_error=f"{type(exc).__name__}: {exc}")
    table = DeltaTable.forPath(spark, path)
    rows = [r.asDict() for r in table.toDF().collect()]
    metrics = {k: int(v) for k, v in table.history(1).collect()[0]["operationMetrics"].items()}
    return EngineOutcome(rows=rows, counters=counters, metrics=metrics)  # type: ignore[arg-type]


@pytest.mark.spark
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(case=merge_cases(interleave=True), via_sql=st.booleans())
def test_deltamerge_matches_oracle_and_deltars(spark, tmp_path_factory, case, via_sql):
    root = str(tmp_path_factory.mktemp("diff"))
    expected = oracle.run_case(case)
    if expected.error is not None and expected.error not in (oracle.MULTIPLE_MATCH,):
        return  # grammar errors are covered by the conformance and analysis tests
    actual = _run_deltamerge(spark, case, root, via_sql)
    problems = compare_outcome(
        case, expected, actual, metric_keys=[k for k in ROW_METRICS if k in actual.metrics]
    )
    assert not problems, describe(case) + f"\nvia {'SQL' if via_sql else 'builder'}\n" + "\n".join(problems)

    if actual.error is None:
        peer = run_deltars(case, os.path.join(root, "deltars"))
        if peer.error is None:
            assert oracle.rows_multiset(peer.rows, case.target_columns) == oracle.rows_multiset(
                actual.rows, case.target_columns
            ), describe(case)
            assert peer.counters == actual.counters, describe(case)
