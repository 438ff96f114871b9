"""Generated sequences of writes on one table, checked step by step against a model.

The single-merge differential tests (``test_deltamerge_differential.py``) start every example from
a fresh one-file table. Here one table lives through 3-6 steps: MERGEs drawn like theirs (through
SQL or the builder, each of deltamerge's executions), an upsert with schema evolution (its source
has a column ``extra`` more; through ``MERGE WITH SCHEMA EVOLUTION``, ``withSchemaEvolution()`` or
``schema.autoMerge.enabled``; later merges' sources have it too), DELETE and UPDATE by predicate
(an UPDATE of the partition column moves rows between partitions), appends, compaction, REORG ...
APPLY (PURGE) and RESTORE to an earlier version (its schema too). So merges meet what earlier
steps left: deletion vectors on files that already have one, files written by a merge, statistics
of rewritten files, files without the evolved column, checkpoints (``delta.checkpointInterval``
2), partitions holding NULL (``__HIVE_DEFAULT_PARTITION__``) and, in some tables, column mapping.
Half the examples run compiled (Spark's code generation, as in production).

After every step:

* the table's columns and rows equal the model's (a merge's model is ``oracle.run_case`` on the
  model's rows);
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
from harness import apply_builder, ddl, merge_condition, normalize_error, render_sql_merge, spark_examples
from hypothesis import event, given
from hypothesis import strategies as st
from strategies import SCHEMA, merge_cases, rows

import oracle
from merge_variants import VARIANTS
from spark_settings import COMPILED, session_conf

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("SEQUENCE_EXAMPLES", "3"))
AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
# The table's columns once a merge with schema evolution added one.
SCHEMA4 = (*SCHEMA, ("extra", "int"))
Schema = tuple[tuple[str, str], ...]
ROW_METRICS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
_COUNTER = itertools.count()


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


_extras = st.lists(st.sampled_from((None, 0, 1, 7)), min_size=6, max_size=6)


@st.composite
def steps(draw: st.DrawFn) -> tuple[Any, ...]:
    kinds = ["merge"] * 6 + ["evolve", "delete", "update", "append", "optimize", "purge", "restore"]
    kind = draw(st.sampled_from(kinds))
    if kind == "merge":
        case = draw(merge_cases(max_target_rows=0, interleave=True))
        how = draw(st.sampled_from(["SQL", "builder"]))
        return ("merge", case, how, draw(_variants), tuple(draw(_extras)))
    if kind == "evolve":  # an upsert whose source has a column more (its keys unique)
        unique = {r[0]: r for r in draw(rows(5))}
        source = tuple((*r, x) for r, x in zip(unique.values(), draw(_extras), strict=False))
        return ("evolve", source, draw(st.sampled_from(["SQL", "builder", "session setting"])))
    if kind == "delete":
        return ("delete", draw(_predicates))
    if kind == "update":
        return ("update", draw(_predicates), draw(st.sampled_from(sorted(UPDATES))))
    if kind == "append":
        return ("append", tuple(draw(rows(4))))
    if kind == "restore":
        return ("restore", draw(st.integers(0, 5)))  # taken modulo the versions there are
    return (kind,)


def _rows_of(df: Any, schema: Schema) -> Counter:
    return Counter(tuple(r[c] for c, _ in schema) for r in df.collect())


def _project(rows: Counter, schema: Schema, to: Schema) -> Counter:
    """``rows`` of ``schema`` as rows of ``to`` (a column ``schema`` lacks is NULL)."""
    names = [c for c, _ in schema]
    return Counter(tuple(r[names.index(c)] if c in names else None for c, _ in to) for r in rows.elements())


def _changes(spark: Any, path: str, version: int, schema: Schema) -> dict[str, Counter]:
    import deltamerge

    out: dict[str, Counter] = {
        k: Counter() for k in ("insert", "delete", "update_preimage", "update_postimage")
    }
    for r in deltamerge.read_changes(spark, path, version, version).collect():
        out[r["_change_type"]][tuple(r[c] for c, _ in schema)] += 1
    return out


def _check_changes(before: Counter, after: Counter, changes: dict[str, Counter], what: str) -> None:
    out = changes["delete"] + changes["update_preimage"]
    assert not out - before, f"{what}: the change feed removes rows the table did not hold: {out - before}"
    replayed = before - out + changes["insert"] + changes["update_postimage"]
    assert replayed == after, f"{what}: the change feed replayed gives {replayed}, the table holds {after}"
    assert sum(changes["update_preimage"].values()) == sum(changes["update_postimage"].values()), what


def _merge(spark: Any, path: str, case: oracle.MergeCase, how: str, variant: str, *, evolve: bool) -> Any:
    """``how``: "SQL", "builder" or (with ``evolve``) "session setting": schema evolution by
    ``MERGE WITH SCHEMA EVOLUTION``, ``withSchemaEvolution()`` or ``schema.autoMerge.enabled``."""
    import deltamerge
    from deltamerge import DeltaTable

    source = spark.createDataFrame(list(case.source_rows), ddl(case.source_schema))
    source.createOrReplaceTempView("source")
    conf = dict(VARIANTS[variant])
    if evolve and how == "session setting":
        conf[AUTO_MERGE] = "true"
    with session_conf(spark, conf):
        if how == "builder":
            builder = (
                DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), merge_condition(case))
            )
            return apply_builder(builder.withSchemaEvolution() if evolve else builder, case).execute()
        text = render_sql_merge(case)
        if evolve and how == "SQL":
            text = text.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO", 1)
        return deltamerge.sql(spark, text)


@pytest.mark.timeout(max(600, 30 * EXAMPLES))
@spark_examples(EXAMPLES)
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
    with session_conf(spark, COMPILED if compiled else {}):
        _check_sequence(spark, root, initial, files, dv, partitioned, column_mapping, plan)


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
    deltamerge.write(
        spark.createDataFrame(list(initial), ddl(SCHEMA)).repartition(files),
        path,
        partition_by=["tag"] if partitioned else None,
        configuration=conf,
    )
    deltamerge.register_table(spark, "target", path)
    schema, model = SCHEMA, Counter(initial)  # the table's columns (SCHEMA4 once evolved), rows
    versions = {0: (schema, model)}
    layout = f"dv={dv} partitioned={partitioned} column_mapping={column_mapping} files={files}"
    log = [f"table: {layout} rows={initial}"]
    table = DeltaTable.forPath(spark, path)

    for n, step in enumerate(plan):
        kind = step[0]
        before_version = table.history(1).collect()[0]["version"]
        new_schema = schema
        what = f"step {n} {step[0]}"
        if kind in ("merge", "evolve"):
            if kind == "merge":
                _, case, how, variant, extras = step
                if schema == SCHEMA4:  # the source has the evolved column too
                    source = tuple((*r, x) for r, x in zip(case.source_rows, extras, strict=False))
                    case = dataclasses.replace(
                        case, target_schema=SCHEMA4, source_schema=SCHEMA4, source_rows=source
                    )
            else:
                _, source, how = step
                variant, new_schema = "default", SCHEMA4
                case = oracle.MergeCase(
                    target_schema=SCHEMA4,
                    source_schema=SCHEMA4,
                    target_rows=(),
                    source_rows=source,
                    on=oracle.eq(oracle.t("key"), oracle.s("key")),
                    clauses=(oracle.matched_update_all(), oracle.not_matched_insert_all()),
                )
            target_rows = _project(model, schema, new_schema)
            case = dataclasses.replace(case, target_rows=tuple(target_rows.elements()))
            log.append(f"{what}: {how} {variant}: {render_sql_merge(case)}")
            expected = oracle.run_case(case)
            if expected.error is not None and expected.error != oracle.MULTIPLE_MATCH:
                continue  # grammar errors: the analysis tests cover them
            try:
                result = _merge(spark, path, case, how, variant, evolve=kind == "evolve")
                counters = tuple(int(v) for v in result.collect()[0])
                error = None
            except Exception as exc:  # compared as a normalised error class
                counters, error = None, normalize_error(exc)
            if expected.error_layout_dependent and error is None:
                expected = expected.unchecked  # type: ignore[assignment]
            context = "\n".join(log)
            assert error == expected.error, f"{context}\nexpected error {expected.error}, got {error}"
            if error is not None:
                assert table.history(1).collect()[0]["version"] == before_version, context
                assert _rows_of(table.toDF(), schema) == model, context
                continue
            assert counters == expected.counters, f"{context}\ncounters {counters} != {expected.counters}"
            new_model = Counter(tuple(r[c] for c, _ in new_schema) for r in expected.rows or [])
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
            new_model = Counter(change(r[:3]) + r[3:] if pred(r) else r for r in model.elements())
        elif kind == "append":
            log.append(f"{what}: APPEND {step[1]}")
            if not step[1]:
                continue
            appended = _project(Counter(step[1]), SCHEMA, schema)
            deltamerge.write(
                spark.createDataFrame(list(appended.elements()), ddl(schema)), path, mode="append"
            )
            new_model = model + appended
        elif kind == "restore":
            earlier = sorted(v for v in versions if v < before_version)  # Delta refuses the latest
            if not earlier:
                continue
            target_version = earlier[step[1] % len(earlier)]
            log.append(f"{what}: RESTORE TO VERSION {target_version}")
            table.restoreToVersion(target_version)
            new_schema, new_model = versions[target_version]
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
        assert [f.name for f in table.toDF().schema.fields] == [c for c, _ in new_schema], context
        assert _rows_of(table.toDF(), new_schema) == new_model, f"{context}\nexpected {new_model}"
        if version == before_version:
            assert new_model == model, f"{context}\nno commit, but the rows changed"
            continue
        assert version == before_version + 1, context
        # The change data feed is read with the new version's schema.
        changes = _changes(spark, path, version, new_schema)
        if kind in ("optimize", "purge"):
            assert not any(changes.values()), f"{context}\n{kind} recorded changes {changes}"
        else:
            _check_changes(_project(model, schema, new_schema), new_model, changes, context)
        if kind in ("merge", "evolve"):
            metrics = table.history(1).collect()[0]["operationMetrics"]
            for key in ROW_METRICS:
                assert int(metrics[key]) == expected.metrics[key], f"{context}\n{key}: {metrics[key]}"
        event(f"committed: {kind}")  # --hypothesis-show-statistics: what the examples exercised
        schema, model = new_schema, new_model
        versions[version] = (schema, model)

    context = "\n".join(log)
    for version, (schema_then, rows_then) in versions.items():
        assert _rows_of(deltamerge.read(spark, path, version=version), schema_then) == rows_then, (
            f"{context}\nversion {version}"
        )
    # QueryBuilder (DataFusion) applies deletion vectors; to_pyarrow_table refuses such tables.
    query = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
    names = [c for c, _ in schema]
    peer = pa.table(query.execute(f"SELECT {', '.join(names)} FROM t")).to_pylist()
    assert Counter(tuple(r[c] for c in names) for r in peer) == model, f"{context}\ndelta-rs"
