"""Runs the Spark Connect tests of this directory in a child pytest (see conftest.py for why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TIMEOUT_S = int(os.environ.get("DELTAMERGE_CONNECT_TIMEOUT", "1500"))


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_connect_suite_in_subprocess():
    env = dict(os.environ, DELTAMERGE_CONNECT_TESTS="inprocess")
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
        env.pop(var, None)
    cmd = [
        sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider", "-rfE",
        f"--timeout={TIMEOUT_S}", "--ignore", str(HERE / Path(__file__).name),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            cmd, cwd=HERE.parent.parent, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")[-6000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-6000:]
        pytest.fail(f"the Connect tests did not finish within {TIMEOUT_S} s:\n{out}")
    tail = done.stdout[-8000:]
    print(tail)
    detail = f"{tail}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"Connect tests failed (exit {done.returncode}):\n{detail}"
