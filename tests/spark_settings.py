"""Spark settings shared by the test sessions (tests/conftest.py, tests/connect/conftest.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

#: Spark's code generation as production runs it (the test session interprets: see below).
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def interpreted_settings() -> dict[str, str]:
    """Spark settings that run tiny test queries without compiling code for them.

    A test query handles a few rows, so Spark's code generation (Janino compiling each plan's
    whole-stage and projection classes) costs more than it saves: ``make test`` runs ~14% faster
    with the expressions interpreted. Production runs with code generation (falling back to the
    interpreter where it fails), so ``make test-full`` keeps it on: DELTAMERGE_TEST_CODEGEN=1.

    The JVM of a test session lives a few minutes and shares 2 cores with another test process, so
    it runs with the C1 compiler only and the serial collector: C2's compile threads and G1's
    concurrent threads cost more CPU than they win back in so short a life (the conformance and
    pruning files ran 19% faster with C1 alone, 25% with both). ``make test-full`` keeps the JVM's
    defaults too.
    """
    if os.environ.get("DELTAMERGE_TEST_CODEGEN", "") not in ("", "0"):
        return {}
    return {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }


@contextlib.contextmanager
def session_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Set ``conf`` on the session for a block; each key's value from before (or its absence)
    comes back after."""
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
