"""The API computes a bounded number of requests at once (consumer.api.slots) on a real uvicorn
server: with every slot taken, API requests wait their turn and are answered once one frees,
while health, readiness and metrics answer at once."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import httpx

from consumer.api import create_app
from tests.support.server import serving


def test_requests_wait_for_a_slot_and_health_checks_never_do(filled_store) -> None:
    app = create_app(filled_store, SimpleNamespace(concurrent_requests=2))
    slots: threading.BoundedSemaphore = app.state.computing_slots
    with serving(app) as url:
        assert httpx.get(f"{url}/api/v1/namespaces", timeout=10).status_code == 200
        assert slots.acquire(timeout=5) and slots.acquire(timeout=5)  # every slot taken
        answered: list[int] = []
        waiting = threading.Thread(target=lambda: answered.append(httpx.get(f"{url}/api/v1/namespaces", timeout=30).status_code))
        waiting.start()
        try:
            for route in ("/healthz", "/readyz", "/metrics"):
                assert httpx.get(f"{url}{route}", timeout=5).status_code == 200, route
            waiting.join(1.0)
            assert waiting.is_alive() and answered == [], "an API request waits while every slot is taken"
        finally:
            slots.release()
        waiting.join(10)
        assert answered == [200]
        slots.release()
        assert slots.acquire(timeout=5) and slots.acquire(timeout=5), "both slots are free again"
        slots.release()
        slots.release()


def test_one_slot_per_cpu_by_default(store) -> None:
    import os

    app = create_app(store)
    slots = app.state.computing_slots
    taken = 0
    while slots.acquire(blocking=False):
        taken += 1
    assert taken == len(os.sched_getaffinity(0))
