"""Runs the README's ```python blocks, in order and in one namespace, against temporary paths.

Convention (documented in the README): the examples write under ``/tmp/deltamerge-readme``; here
that prefix becomes a pytest temporary directory. Blocks fenced as ```text or ```sh are not run.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"
PREFIX = "/tmp/deltamerge-readme"
BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def readme_blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_python_examples():
    blocks = readme_blocks()
    assert len(blocks) >= 5
    assert all(PREFIX in b for b in blocks if "/tmp/" in b), "README examples must write under " + PREFIX


def test_readme_examples_run(spark, tmp_path):
    import deltamerge
    from deltamerge import DeltaTable, catalog

    if not (hasattr(DeltaTable, "update") and hasattr(DeltaTable, "delete")):
        pytest.skip("the README uses DeltaTable.update/delete, which have not landed")
    before = set(catalog._NAMES)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    try:
        for i, block in enumerate(readme_blocks()):
            code = compile(block.replace(PREFIX, str(tmp_path)), f"README.md python block {i + 1}", "exec")
            exec(code, namespace)
    finally:
        deltamerge.unconfigure()
        for name in set(catalog._NAMES) - before:
            location = catalog.path_for_name(name)
            deltamerge.unregister_table(spark, name)
            if location and not location.startswith(str(tmp_path)):
                shutil.rmtree(location, ignore_errors=True)  # saveAsTable's warehouse directory
