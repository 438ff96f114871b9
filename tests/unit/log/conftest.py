"""Fixtures for the log-layer tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from logtest_helpers import RawTable

from deltamerge.log.snapshot import DeltaLog


@pytest.fixture
def table(tmp_path: Path) -> RawTable:
    return RawTable(tmp_path / "t")


@pytest.fixture(autouse=True)
def _fresh_log_cache() -> Iterator[None]:
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()
