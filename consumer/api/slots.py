"""At most a few API requests computed at once; the others wait their turn.

Answering a lineage question is mostly Python work under one interpreter lock. Started all at
once (the server's thread pool holds 40 threads), N requests each take about N times as long
plus the cost of switching between them, and a writer posting events meanwhile stretches every
one of them; taken a few at a time, each runs at full speed and the rest queue in order. On
two cores, eight clients reading `/lineage` while a ninth posted events: p50 / p95 384 / 628 ms
with every request computed at once, 264 / 434 ms with two at a time (benchmarks/query.py, SQLite).
Health, readiness and metrics never wait for a slot.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

from fastapi import Request


def default_slots() -> int:
    """One slot per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def computing_slot(request: Request) -> Iterator[None]:
    """A FastAPI dependency: hold one of the app's slots while the request is computed."""
    slots: threading.BoundedSemaphore = request.app.state.computing_slots
    with slots:
        yield
