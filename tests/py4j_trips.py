"""Counting the py4j round trips (Python -> JVM calls) of one block of code, for tests that bound
how many a driver-side step costs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def round_trips() -> Iterator[list[int]]:
    """The calling thread's round trips inside the block: the yielded list grows by one per call.

    Only this thread's: under xdist or with Spark's own Python threads, another thread's calls
    would land in the count otherwise."""
    from py4j import clientserver

    calls: list[int] = []
    real = clientserver.ClientServerConnection.send_command
    me = threading.current_thread()

    def counting(self, command):  # type: ignore[no-untyped-def]
        if threading.current_thread() is me:
            calls.append(1)
        return real(self, command)

    clientserver.ClientServerConnection.send_command = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        clientserver.ClientServerConnection.send_command = real  # type: ignore[method-assign]
