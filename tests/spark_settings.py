"""Spark settings shared by the test sessions (tests/conftest.py, tests/connect/conftest.py)."""

from __future__ import annotations

import os


def interpreted_settings() -> dict[str, str]:
    """Spark settings that run tiny test queries without compiling code for them.

    A test query handles a few rows, so Spark's code generation (Janino compiling each plan's
    whole-stage and projection classes) costs more than it saves: ``make test`` runs ~14% faster
    with the expressions interpreted. Production runs with code generation (falling back to the
    interpreter where it fails), so ``make test-full`` keeps it on: DELTAMERGE_TEST_CODEGEN=1.
    """
    if os.environ.get("DELTAMERGE_TEST_CODEGEN", "") not in ("", "0"):
        return {}
    return {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
