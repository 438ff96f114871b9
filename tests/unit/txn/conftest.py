"""Fixtures for the transaction tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deltamerge.log.snapshot import DeltaLog


@pytest.fixture(autouse=True)
def _fresh_log_cache() -> Iterator[None]:
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()
