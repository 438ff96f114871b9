"""Generated sequences of writes on one table, checked step by step against a model.

The single-merge differential tests (``test_deltamerge_differential.py``) start every example from
a fresh one-file table. Here one table lives through 3-6 steps: MERGEs drawn like theirs (through
SQL or the builder, each of deltamerge's executions), DELETE and UPDATE by predicate (an UPDATE
of the partition column moves rows between partitions), appends, compaction, REORG ... APPLY
(PURGE) and RESTORE to an earlier version. So merges meet
what earlier steps left: deletion vectors on files that already have one, files written by a
merge, statistics of rewritten files, checkpoints (``delta.checkpointInterval`` 2), partitions
holding NULL (``__HIVE_DEFAULT_PARTITION__``) and, in some tables, column mapping.

After every step:

* the table's rows equal the model's (a merge's model is ``oracle.run_case`` on the model's rows);
  a merge the oracle fails fails alike and commits nothing;
* a merge's result row and history row metrics equal the oracle's;
* the change data feed of the new version, applied to the previous rows (delete and
  pre-images out, inserts and post-images in), gives the new rows; compaction and purge record
  none.

At the end every version reads back (time travel) as the model had it, and delta-rs reads the
latest version as deltamerge does.

``SEQUENCE_EXAMPLES`` sets the example count (default 3; ``make test-full`` 25);
``MERGE_PROPERTY_RANDOM=1`` draws fresh examples, as in the other property tests.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from harness import apply_builder, ddl, merge_condition, normalize_error, render_sql_merge
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import SCHEMA, merge_cases, rows

import oracle
from merge_variants import VARIANTS

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("SEQUENCE_EXAMPLES", "3"))
RANDOM = os.environ.get("MERGE_PROPERTY_RANDOM", "") not in ("", "0")
CODEGEN = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
ROW_METRICS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
_COUNTER = itertools.count()

Row = tuple[Any, Any, Any]


def _is(v: Any, op: str, k: Any) -> bool:
    """SQL comparison that is TRUE (NULL is not)."""
    if v is None:
        return False
    return {"=": v == k, ">": v > k, "<": v < k}[op]


# DML predicates: SQL text and the rows it holds TRUE for (NULL never does).
PREDICATES: dict[str | None, Any] = {
    None: lambda r: True,
    "value > 2": lambda r: _is(r[1], ">", 2),
    "tag = 'a'": lambda r: _is(r[2], "=", "a"),
    "key IS NULL": lambda r: r[0] is None,
    "key = 1 OR value < 0": lambda r: _is(r[0], "=", 1) or _is(r[1], "<", 0),
    "NOT (key <=> 2)": lambda r: r[0] != 2,
}
# UPDATE assignments: SQL text and the new row.
UPDATES: dict[str, Any] = {
    "value + 1": ("value", lambda r: (r[0], None if r[1] is None else r[1] + 1, r[2])),
    "'c'": ("tag", lambda r: (r[0], r[1], "c")),
    "CAST(NULL AS STRING)": ("tag", lambda r: (r[0], r[1], None)),
}

_predicates = st.sampled_from(list(PREDICATES))
_variants = st.sampled_from(sorted(VARIANTS))


@st.composite
def steps(draw: st.DrawFn) -> tuple[Any, ...]:
    kind = draw(
        st.sampled_from(["merge"] * 6 + ["delete", "update", "append", "optimize", "purge", "restore"])
    )
    if kind == "merge":
        case = draw(merge_cases(max_target_rows=0, interleave=True))
        return ("merge", case, draw(st.booleans()), draw(_variants))
    if kind == "delete":
        return ("delete", draw(_predicates))
    if kind == "update":
        return ("update", draw(_predicates), draw(st.sampled_from(sorted(UPDATES))))
    if kind == "append":
        return ("append", tuple(draw(rows(4))))
    if kind == "restore":
        return ("restore", draw(st.integers(0, 5)))  # taken modulo the versions there are
    return (kind,)


def _rows_of(df: Any) -> Counter:
    return Counter((r["key"], r["value"], r["tag"]) for r in df.collect())


def _changes(spark: Any, path: str, version: int) -> dict[str, Counter]:
    import deltamerge

    out: dict[str, Counter] = {
        k: Counter() for k in ("insert", "delete", "update_preimage", "update_postimage")
    }
    for r in deltamerge.read_changes(spark, path, version, version).collect():
        out[r["_change_type"]][(r["key"], r["value"], r["tag"])] += 1
    return out


def _check_changes(before: Counter, after: Counter, changes: dict[str, Counter], what: str) -> None:
    out = changes["delete"] + changes["update_preimage"]
    assert not out - before, f"{what}: the change feed removes rows the table did not hold: {out - before}"
    replayed = before - out + changes["insert"] + changes["update_postimage"]
    assert replayed == after, f"{what}: the change feed replayed gives {replayed}, the table holds {after}"
    assert sum(changes["update_preimage"].values()) == sum(changes["update_postimage"].values()), what


def _merge(spark: Any, path: str, case: oracle.MergeCase, via_sql: bool, variant: str) -> Any:
    import deltamerge
    from deltamerge import DeltaTable

    source = spark.createDataFrame(list(case.source_rows), ddl(case.source_schema))
    source.createOrReplaceTempView("source")
    for key, value in VARIANTS[variant].items():
        spark.conf.set(key, value)
    try:
        if via_sql:
            return deltamerge.sql(spark, render_sql_merge(case))
        builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), merge_condition(case))
        return apply_builder(builder, case).execute()
    finally:
        for key in VARIANTS[variant]:
            spark.conf.unset(key)


@pytest.mark.timeout(max(600, 30 * EXAMPLES))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=not RANDOM,
    database=None,
)
@given(
    initial=rows(8),
    files=st.integers(1, 3),
    dv=st.booleans(),
    partitioned=st.sampled_from([False, False, True]),
    column_mapping=st.sampled_from([False, False, True]),
    plan=st.lists(steps(), min_size=3, max_size=6),
    compiled=st.booleans(),
)
def test_merge_sequences_match_the_model(
    spark, tmp_path_factory, initial, files, dv, partitioned, column_mapping, plan, compiled
):
    """Merges, DML, appends and compaction on one table, each step checked against the model, its
    change data feed and its history; every version by time travel and delta-rs at the end. Half
    the examples run with Spark's code generation, as production does (the test session
    interprets expressions: tests/spark_settings.py)."""
    root = str(tmp_path_factory.mktemp("seq"))
    before = {k: spark.conf.get(k, None) for k in CODEGEN}
    for k, v in CODEGEN.items() if compiled else ():
        spark.conf.set(k, v)
    try:
        _check_sequence(spark, root, initial, files, dv, partitioned, column_mapping, plan)
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _check_sequence(spark, root, initial, files, dv, partitioned, column_mapping, plan):  # type: ignore[no-untyped-def]
    import deltalake

    import deltamerge
    from deltamerge import DeltaTable

    path = os.path.join(root, f"t{next(_COUNTER)}")
    conf = {"delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "2"}
    if dv:
        conf["delta.enableDeletionVectors"] = "true"
    if column_mapping:
        conf["delta.columnMapping.mode"] = "name"
    schema = ddl(SCHEMA)
    deltamerge.write(
        spark.createDataFrame(list(initial), schema).repartition(files),
        path,
        partition_by=["tag"] if partitioned else None,
        configuration=conf,
    )
    deltamerge.register_table(spark, "target", path)
    model = Counter(initial)
    versions = {0: model}
    layout = f"dv={dv} partitioned={partitioned} column_mapping={column_mapping} files={files}"
    log = [f"table: {layout} rows={initial}"]
    table = DeltaTable.forPath(spark, path)

    for n, step in enumerate(plan):
        kind = step[0]
        before_version = table.history(1).collect()[0]["version"]
        what = f"step {n} {step[0]}"
        if kind == "merge":
            _, case, via_sql, variant = step
            case = dataclasses.replace(case, target_rows=tuple(model.elements()))
            log.append(f"{what}: {'SQL' if via_sql else 'builder'} {variant}: {render_sql_merge(case)}")
            expected = oracle.run_case(case)
            if expected.error is not None and expected.error != oracle.MULTIPLE_MATCH:
                continue  # grammar errors: the analysis tests cover them
            try:
                counters = tuple(int(v) for v in _merge(spark, path, case, via_sql, variant).collect()[0])
                error = None
            except Exception as exc:  # compared as a normalised error class
                counters, error = None, normalize_error(exc)
            if expected.error_layout_dependent and error is None:
                expected = expected.unchecked  # type: ignore[assignment]
            context = "\n".join(log)
            assert error == expected.error, f"{context}\nexpected error {expected.error}, got {error}"
            if error is not None:
                assert table.history(1).collect()[0]["version"] == before_version, context
                assert _rows_of(table.toDF()) == model, context
                continue
            assert counters == expected.counters, f"{context}\ncounters {counters} != {expected.counters}"
            new_model = Counter(tuple(r[c] for c in ("key", "value", "tag")) for r in expected.rows or [])
        elif kind == "delete":
            pred = PREDICATES[step[1]]
            log.append(f"{what}: DELETE WHERE {step[1]}")
            table.delete(step[1])
            new_model = Counter(r for r in model.elements() if not pred(r))
        elif kind == "update":
            pred = PREDICATES[step[1]]
            column, change = UPDATES[step[2]]
            log.append(f"{what}: UPDATE SET {column} = {step[2]} WHERE {step[1]}")
            table.update(step[1], {column: step[2]})
            new_model = Counter(change(r) if pred(r) else r for r in model.elements())
        elif kind == "append":
            log.append(f"{what}: APPEND {step[1]}")
            if not step[1]:
                continue
            deltamerge.write(spark.createDataFrame(list(step[1]), schema), path, mode="append")
            new_model = model + Counter(step[1])
        elif kind == "restore":
            earlier = sorted(v for v in versions if v < before_version)  # Delta refuses the latest
            if not earlier:
                continue
            target_version = earlier[step[1] % len(earlier)]
            log.append(f"{what}: RESTORE TO VERSION {target_version}")
            table.restoreToVersion(target_version)
            new_model = versions[target_version]
        elif kind == "purge":
            log.append(f"{what}: REORG APPLY (PURGE)")
            deltamerge.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
            new_model = model
        else:
            log.append(f"{what}: OPTIMIZE")
            table.optimize().executeCompaction()
            new_model = model
        context = "\n".join(log)
        version = table.history(1).collect()[0]["version"]
        assert _rows_of(table.toDF()) == new_model, f"{context}\nexpected {new_model}"
        if version == before_version:
            assert new_model == model, f"{context}\nno commit, but the rows changed"
            continue
        assert version == before_version + 1, context
        changes = _changes(spark, path, version)
        if kind in ("optimize", "purge"):
            assert not any(changes.values()), f"{context}\n{kind} recorded changes {changes}"
        else:
            _check_changes(model, new_model, changes, context)
        if kind == "merge":
            metrics = table.history(1).collect()[0]["operationMetrics"]
            for key in ROW_METRICS:
                assert int(metrics[key]) == expected.metrics[key], f"{context}\n{key}: {metrics[key]}"
        model = new_model
        versions[version] = model

    context = "\n".join(log)
    for version, rows_then in versions.items():
        assert _rows_of(deltamerge.read(spark, path, version=version)) == rows_then, (
            f"{context}\nversion {version}"
        )
    # QueryBuilder (DataFusion) applies deletion vectors; to_pyarrow_table refuses such tables.
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    peer = pa.table(query.execute("SELECT key, value, tag FROM t")).to_pylist()
    assert Counter((r["key"], r["value"], r["tag"]) for r in peer) == model, f"{context}\ndelta-rs"
