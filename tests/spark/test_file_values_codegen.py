"""Per-file values read from array literals (``scan.file_values``) with Spark's code generation on.

The test session interprets expressions (``tests/spark_settings.py``); production compiles them.
Spark 4.3's generated code for ``element_at(<array literal>, <nullable index>)`` skips the index's
NULL check: a row whose file is not among the listed ones got the previous row's value, or failed
with INVALID_INDEX_OF_ZERO on a task's first row. DV mode's one job and its upsert without a join
read each matched row's number base that way, and rely on a NULL base to notice a path spelt
unlike the candidates' (then they retry another way): with code generation a wrong base would mark
another row deleted. ``make test-full`` runs everything compiled; these run compiled in ``make test``.
"""

from __future__ import annotations

import contextlib

import pytest

import deltamerge
from deltamerge import DeltaTable
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark import scan
from merge_variants import VARIANTS
from spark_settings import session_conf

pytestmark = pytest.mark.spark

# Compiled only, no fallback to the interpreter: the plans must run as generated code.
CODEGEN = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}


@pytest.mark.parametrize("compiled", [True, False], ids=["codegen", "interpreted"])
def test_unlisted_files_read_null(spark, compiled):
    """Rows of files not listed read NULL, first in the task or after a listed file's row."""
    rows = [("x",), ("a",), ("b",), ("y",), ("b",), (None,), ("a",)]
    df = spark.createDataFrame(rows, f"{scan.FILE_COL} string").coalesce(1)
    values = {"base": ("BIGINT", [100, 200]), "name": ("STRING", ["first", None])}
    with session_conf(spark, CODEGEN if compiled else {}):
        out, exprs = scan.file_values(df, ["a", "b"], values, inner=False)
        got = [tuple(r) for r in out.selectExpr(scan.FILE_COL, exprs["base"], exprs["name"]).collect()]
        kept, exprs = scan.file_values(df, ["a", "b"], values, inner=True)
        inner = [tuple(r) for r in kept.selectExpr(scan.FILE_COL, exprs["base"]).collect()]
    assert got == [
        ("x", None, None),
        ("a", 100, "first"),
        ("b", 200, None),
        ("y", None, None),
        ("b", 200, None),
        (None, None, None),
        ("a", 100, "first"),
    ]
    assert inner == [("a", 100), ("b", 200), ("b", 200), ("a", 100)]


def _respell(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Candidates' paths spelt unlike Spark's ``_metadata.file_path`` ('-' percent-encoded)."""
    from deltamerge.merge import one_job, single_pass, uniform_upsert

    real_index = scan.file_index

    def respelt(root, files):  # type: ignore[no-untyped-def]
        index = real_index(root, files)
        return scan.FileIndex({k.replace("-", "%2D"): v for k, v in index.by_spark_path.items()})

    for module in (single_pass, one_job, uniform_upsert):
        monkeypatch.setattr(module, "file_index", respelt)


@pytest.mark.parametrize(
    "clauses",
    [
        [("whenMatchedDelete", "s.v = 2"), ("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)],
        [("whenMatchedUpdateAll",), ("whenNotMatchedInsertAll",)],
    ],
    ids=["one-job", "uniform-upsert"],
)
def test_dv_merge_with_respelt_paths_compiled(spark, tmp_path, monkeypatch, clauses):
    """DV mode's default executions, compiled, on candidates whose paths do not match Spark's
    spelling: they notice, retry, and give the Delta-shaped path's rows, counters and deletion
    vectors (not another file's row marked deleted, not INVALID_INDEX_OF_ZERO)."""
    results = []
    for variant in ("default", "delta-shaped"):
        path = str(tmp_path / variant)
        deltamerge.write(
            spark.range(0, 400, numPartitions=4).selectExpr("id", "CAST(id % 7 AS INT) AS v"),
            path,
            configuration={"delta.enableDeletionVectors": "true"},
        )
        DeltaTable.forPath(spark, path).delete("id % 50 = 7")  # existing deletion vectors
        src = spark.createDataFrame(
            [(5, 1), (57, 9), (120, 2), (130, 3), (333, 4), (999, 5)], "id long, v int"
        )
        with contextlib.ExitStack() as stack:
            if variant == "default":
                _respell(stack.enter_context(monkeypatch.context()))  # undone after this merge
                stack.enter_context(session_conf(spark, CODEGEN))
            stack.enter_context(session_conf(spark, VARIANTS[variant]))
            merge = DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
            for name, *args in clauses:
                merge = getattr(merge, name)(*args)
            result = tuple(merge.execute().collect()[0])
        snap = DeltaLog.for_table(path).update()
        dvs = sorted(f.deletion_vector.cardinality for f in snap.files if f.deletion_vector)
        rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
        results.append((result, rows, dvs))
    assert results[0] == results[1]
