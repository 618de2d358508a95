"""A burst of heavy requests on a real uvicorn server: every request gets an answer (200, or 503
with Retry-After once the queue is full) within 30 s, and the API answers normally right after.
Marquez's demo events, lineage at depth 20, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import httpx
import pytest

from consumer.api import create_app
from tests.query.pipeline import ingest
from tests.support.paths import MARQUEZ_DEMO_EVENTS
from tests.support.server import serving

BURST = 200
ANSWER_WITHIN_SECONDS = 30.0
LINEAGE = {"nodeId": "dataset:food_delivery:public.delivery_7_days", "depth": "20"}


@pytest.fixture
def demo_store(store):
    ingest(store, json.loads(MARQUEZ_DEMO_EVENTS.read_text()))
    return store


async def _burst(url: str) -> list[httpx.Response | BaseException]:
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=ANSWER_WITHIN_SECONDS, limits=limits) as client:

        async def one() -> httpx.Response:
            return await client.get("/api/v1/lineage", params=LINEAGE)

        return await asyncio.gather(*(one() for _ in range(BURST)), return_exceptions=True)


def test_a_burst_of_lineage_requests_is_answered_and_the_api_recovers(demo_store) -> None:
    with serving(create_app(demo_store, SimpleNamespace())) as url:
        started = time.monotonic()
        answers = asyncio.run(_burst(url))
        elapsed = time.monotonic() - started
        failures = [repr(answer) for answer in answers if isinstance(answer, BaseException)]
        assert not failures, f"{len(failures)} of {BURST} requests got no answer within {ANSWER_WITHIN_SECONDS} s: {failures[:3]}"
        statuses = [answer.status_code for answer in answers if isinstance(answer, httpx.Response)]
        assert set(statuses) <= {200, 503}, statuses
        assert statuses.count(200) > 0
        for answer in answers:
            if isinstance(answer, httpx.Response) and answer.status_code == 503:
                assert int(answer.headers["Retry-After"]) > 0
        print(f"{statuses.count(200)} x 200, {statuses.count(503)} x 503 in {elapsed:.1f} s")
        # right after: the API, health and readiness answer normally
        after = httpx.get(f"{url}/api/v1/lineage", params=LINEAGE, timeout=10)
        assert after.status_code == 200 and after.json()["graph"]
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
