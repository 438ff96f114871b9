"""A delta-spark style script on classic PySpark (the script: tests/connect/delta_spark_script.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = Path(__file__).resolve().parent.parent / "connect" / "delta_spark_script.py"


def _script():
    spec = importlib.util.spec_from_file_location("delta_spark_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_delta_spark_script_on_classic(spark, tmp_path):
    try:
        skipped = _script().run(spark, str(tmp_path))
    finally:
        import deltamerge

        deltamerge.unconfigure()
    if skipped:
        pytest.skip("ran everything except: " + "; ".join(skipped))
