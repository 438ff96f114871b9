"""Reliability suites: concurrency stress, crash safety, bad input, generated-input fuzzing.

The default run is bounded (CI). ``make soak`` sets ``DELTAMERGE_SOAK=1`` and selects the tests
marked ``soak``: more writer processes, longer runs, more kill cycles, more generated inputs.
Tune a soak with ``DELTAMERGE_SOAK_SECONDS`` (stress duration), ``DELTAMERGE_SOAK_KILLS``
(kill cycles) and ``DELTAMERGE_SOAK_EXAMPLES`` (fuzz examples).
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reliability_helpers

SOAK = os.environ.get("DELTAMERGE_SOAK", "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: long reliability runs (make soak; DELTAMERGE_SOAK=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SOAK:
        return
    skip = pytest.mark.skip(reason="soak run: make soak (DELTAMERGE_SOAK=1)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)
