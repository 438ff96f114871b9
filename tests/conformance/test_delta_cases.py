"""Delta Lake's own MERGE test cases (shared/conformance/cases.json), through SQL and the builder.

Conventions are those of delta_merge_spec.md §7: the target is a Delta table named ``target``, the
source a view (or Delta table) named ``source``; rows compare as multisets; error cases must leave
the target unchanged. ``derived`` values are checked too (they follow from Delta's code).
"""

from __future__ import annotations

import json
import math
import os
import re
import zlib
from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable

CASES_FILE = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "cases.json"
if not CASES_FILE.exists():  # CI clones main with shared/ beside it
    CASES_FILE = Path(os.environ.get("DELTAMERGE_SHARED", "../shared")) / "conformance" / "cases.json"
CASES = json.loads(CASES_FILE.read_text()) if CASES_FILE.exists() else []

ROW_METRICS = (
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsMatchedUpdated",
    "numTargetRowsNotMatchedBySourceUpdated",
    "numTargetRowsDeleted",
    "numTargetRowsMatchedDeleted",
    "numTargetRowsNotMatchedBySourceDeleted",
    "numTargetRowsCopied",
)

# Cases whose feature lands with a later issue: (case id, variant) -> reason. strict: a case that
# starts passing must be taken off this list.
PENDING: dict[tuple[str, str], str] = {}


def _variants(case: dict) -> list[tuple[str, dict]]:
    out = [("main", case)]
    if "variant_without_evolution" in case:
        v = dict(case)
        override = case["variant_without_evolution"]
        v["config"] = {**case.get("config", {}), **override.get("config", {})}
        for k in ("expected_rows", "expected_schema", "expected_error_substring", "expected_error_class"):
            v.pop(k, None)
        v.pop("derived", None)
        v.pop("expected_cdc_rows", None)
        v.update({k: val for k, val in override.items() if k != "config"})
        v["merge_sql"] = (
            re.sub(
                r"MERGE\s+WITH\s+SCHEMA\s+EVOLUTION\s+INTO", "MERGE INTO", case["merge_sql"] or "", flags=re.I
            )
            or None
        )
        if v.get("python_builder"):
            v["python_builder"] = v["python_builder"].replace(".withSchemaEvolution()", "")
        out.append(("noEvolution", v))
    return out


def _params():
    params = []
    for case in CASES:
        for variant, body in _variants(case):
            entries = []
            if body.get("merge_sql"):
                entries.append("sql")
            if body.get("python_builder"):
                entries.append("builder")
            # A case with both entries runs one of them (picked by a hash of its id) in `make test`;
            # the other is a sampled item (`make test-full` runs both).
            if len(entries) == 2 and zlib.crc32(case["id"].encode()) % 2:
                entries.reverse()
            for n, entry in enumerate(entries):
                marks = [pytest.mark.sampled] if n else []
                reason = PENDING.get((case["id"], variant)) or PENDING.get((case["id"], "*"))
                if reason:
                    marks.append(pytest.mark.xfail(reason=reason, strict=True))
                params.append(
                    pytest.param(
                        body, entry, id=f"{case['id']}-{case['name']}-{variant}-{entry}", marks=marks
                    )
                )
    return params


def _norm(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items() if v is not None))
    if hasattr(value, "asDict"):
        return _norm(value.asDict(recursive=True))
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _rows(df) -> list:
    return sorted((_norm(list(r)) for r in df.collect()), key=repr)


def _expected(rows) -> list:
    return sorted((_norm(list(r)) for r in rows), key=repr)


def _schema_pairs(schema) -> list[tuple[str, str]]:
    return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]


def _make_df(spark, rows, ddl, num_files=None):
    from pyspark.sql import functions as F

    data = [tuple(r) for r in rows] if rows is not None else []
    schema = spark.createDataFrame([], ddl).schema
    df = spark.createDataFrame(data, schema) if data else spark.createDataFrame([], schema)
    if num_files and data:
        n = len(data)
        idx = spark.createDataFrame([(*r, i) for i, r in enumerate(data)], f"{ddl}, __i INT")
        bucket = F.floor(F.col("__i") * num_files / n)
        df = idx.withColumn("__b", bucket).repartitionByRange(num_files, "__b").drop("__i", "__b")
    return df


def _exec_python_df(spark, code: str):
    from pyspark.sql import functions as F

    env = {"spark": spark, "F": F}
    statement = code.split("; df.write")[0].split("\n")[0].split("  #")[0]
    exec(statement, env)
    return env["df"]


def _column_mapped_params():
    """Every case once more on a column-mapped target (``name`` and ``id`` modes in turn), through
    its first entry: Delta runs its MERGE suites in both modes too (``...ColMapNameMode``). A
    sampled matrix: ``make test`` runs a fixed quarter of them, ``make test-full`` all."""
    params = []
    for i, case in enumerate(CASES):
        entry = "sql" if case.get("merge_sql") else "builder"
        mode = ("name", "id")[i % 2]
        body = {
            **case,
            "target_properties": {**(case.get("target_properties") or {}), "delta.columnMapping.mode": mode},
        }
        params.append(
            pytest.param(
                body,
                entry,
                id=f"{case['id']}-{case['name']}-columnMapping{mode.title()}-{entry}",
                marks=pytest.mark.sampled,
            )
        )
    return params


@pytest.mark.parametrize("case,entry", _params() + _column_mapped_params())
def test_case(spark, tmp_path, spark_conf, case, entry):
    target_path = str(tmp_path / "target")
    if case.get("target_create_python"):
        target_df = _exec_python_df(spark, case["target_create_python"])
    else:
        target_df = _make_df(spark, case["target_rows"], case["target_schema"], case.get("target_num_files"))
    deltamerge.write(
        target_df,
        target_path,
        partition_by=case.get("target_partition_by"),
        configuration=case.get("target_properties"),
    )
    deltamerge.register_table(spark, "target", target_path)

    if case.get("source_is_target"):
        pass
    elif case.get("source_create_python"):
        _exec_python_df(spark, case["source_create_python"]).createOrReplaceTempView("source")
    elif case.get("source_kind") == "delta_table":
        source_path = str(tmp_path / "source")
        deltamerge.write(_make_df(spark, case["source_rows"], case["source_schema"]), source_path)
        deltamerge.register_table(spark, "source", source_path)
    else:
        _make_df(spark, case["source_rows"], case["source_schema"]).createOrReplaceTempView("source")

    spark_conf(case.get("config", {}))
    dt = DeltaTable.forName(spark, "target")
    before_version = dt.version()
    before_rows = _rows(dt.toDF()) if case.get("expected_error_substring") else None

    def run():
        if entry == "sql":
            return deltamerge.sql(spark, case["merge_sql"])
        from pyspark.sql.functions import col, expr, lit

        src = spark.table("target" if case.get("source_is_target") else "source")
        env = {"dt": DeltaTable.forName(spark, "target"), "src": src, "expr": expr, "col": col, "lit": lit}
        return eval(case["python_builder"], env)

    try:
        if case.get("expected_error_substring"):
            with pytest.raises(Exception) as info:
                run()
            assert case["expected_error_substring"].lower() in str(info.value).lower(), str(info.value)
            assert dt.version() == before_version, "a failed merge must not commit"
            assert _rows(dt.toDF()) == before_rows, "a failed merge must leave the rows unchanged"
            return

        result = run()
        result_row = list(result.collect()[0])
        after = DeltaTable.forPath(spark, target_path)
        derived = case.get("derived") or {}
        assert _rows(after.toDF()) == _expected(case.get("expected_rows") or derived.get("expected_rows"))

        expected_schema = case.get("expected_schema") or derived.get("expected_schema")
        if expected_schema:
            assert _schema_pairs(after.toDF().schema) == _schema_pairs(
                spark.createDataFrame([], expected_schema).schema
            )
        expected_output = case.get("expected_output_row") or derived.get("expected_output_row")
        if expected_output:
            assert result_row == expected_output
        if case.get("expected_output_schema"):
            want = spark.createDataFrame([], case["expected_output_schema"]).schema
            assert [(f.name, f.dataType, f.nullable) for f in result.schema.fields] == [
                (f.name, f.dataType, f.nullable) for f in want.fields
            ]
        history = after.history(1).collect()[0]
        assert history["operation"] == "MERGE"
        metrics = {k: int(v) for k, v in history["operationMetrics"].items()}
        for key, value in (case.get("expected_metrics") or {}).items():
            assert metrics[key] == value, f"{key}: {metrics[key]} != {value} ({metrics})"
        if case.get("all_other_row_metrics_zero"):
            for key in ROW_METRICS:
                if key not in (case.get("expected_metrics") or {}):
                    assert metrics[key] == 0, f"{key} should be 0: {metrics}"
        if case.get("expected_cdc_rows") is not None:
            changes = deltamerge.read_changes(spark, target_path, history["version"], history["version"])
            cols = [f.name for f in after.toDF().schema.fields] + ["_change_type"]
            assert _rows(changes.select(*cols)) == _expected(case["expected_cdc_rows"])
    finally:
        deltamerge.unregister_table(spark, "target")
        if case.get("source_kind") == "delta_table":
            deltamerge.unregister_table(spark, "source")
