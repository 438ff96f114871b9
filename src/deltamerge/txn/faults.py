"""Crash-test fault points of a commit (tests/reliability kills writers at them)."""

from __future__ import annotations

import os
import signal
from typing import Any

from deltamerge.log.snapshot import Snapshot

#: Crash-test hook (tests/reliability): ``DELTAMERGE_FAULT=<point>`` in a writer's environment makes
#: :func:`fault` SIGKILL that process at the named point. Read once at import; unset, every
#: ``fault(...)`` call is a single comparison.
FAULT_POINTS = ("before_commit_write", "after_tmp_write_before_link", "before_checkpoint", "mid_checkpoint")
_FAULT_POINT = os.environ.get("DELTAMERGE_FAULT") or None


def fault(point: str, store: Any = None, name: str = "", payload: Any = None) -> None:
    """Kill this process with SIGKILL at ``point`` when ``DELTAMERGE_FAULT`` names it (crash tests only).

    Points: ``before_commit_write`` (data files written, nothing in the log);
    ``after_tmp_write_before_link`` (the store's temp file for commit ``name`` is written and fsynced,
    the ``link`` that publishes it is not made); ``before_checkpoint`` (the commit landed, its
    checkpoint is due); ``mid_checkpoint`` (the first half of the checkpoint Parquet sits at its final
    name and ``_last_checkpoint`` is not updated: a torn checkpoint, as a store without atomic
    overwrite can leave it).
    """
    if point != _FAULT_POINT:
        return
    if point == "after_tmp_write_before_link" and hasattr(store, "_write_temp"):
        store._write_temp(name, payload)  # write_exclusive's first step (LocalLogStore)
    elif point == "mid_checkpoint" and isinstance(payload, Snapshot):
        from deltamerge.log.checkpoint import checkpoint_rows, encode_checkpoint

        snap = payload
        txns, domains = snap.transactions.values(), snap.domains.values()
        data = encode_checkpoint(
            checkpoint_rows(snap.protocol, snap.metadata, txns, domains, snap.files, snap.tombstones)
        )
        store.write(name, data[: len(data) // 2])
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
