"""Every bound of consumer.api.limits on a real uvicorn server: computing slots and their queue
(503 + Retry-After beyond it, health never waits, /healthz fails when the slots are stuck), body
size on every route (before any token check) and body time, and each request's database work
stopped by the statement timeout (504) or when its client disconnects, on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from consumer.api import create_app
from consumer.api.limits import Limits
from consumer.query.db import reading
from tests.support.server import serving

HOLD = "/api/v1/test-hold"
LONG_QUERY = "/api/v1/test-long-query"
# minutes of work unless stopped
LONG = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000000) SELECT count(*) FROM c",
    "postgresql": "SELECT pg_sleep(120)",
}


def _app(store: Any, **limits: Any) -> FastAPI:
    return create_app(store, SimpleNamespace(limits=Limits(**limits)))


def _holding_route(app: FastAPI) -> tuple[threading.Event, list[str]]:
    """A route that keeps its computing slot until `release` is set."""
    release, entered = threading.Event(), []

    @app.get(HOLD)
    def hold() -> dict:
        entered.append("in")
        release.wait(30)
        return {}

    return release, entered


def _long_query_route(app: FastAPI, outcome: list[Any]) -> None:
    """A route whose one statement runs for minutes unless the request's budget stops it."""

    @app.get(LONG_QUERY)
    def long_query() -> dict:
        started = time.monotonic()
        try:
            with reading(app.state.store) as connection:
                connection.execute(text(LONG[connection.dialect.name])).all()
        except Exception as error:
            outcome.append((error, time.monotonic() - started))
            raise
        outcome.append((None, time.monotonic() - started))
        return {}


def _in_threads(calls: list[Callable[[], Any]]) -> list[threading.Thread]:
    threads = [threading.Thread(target=call, daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    return threads


def _wait_until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_beyond_slots_and_queue_a_fast_503_and_health_never_waits(sqlite_store) -> None:
    app = _app(sqlite_store, concurrent_requests=2, queued_requests=2, queue_seconds=30)
    release, entered = _holding_route(app)
    with serving(app) as url:
        answers: list[int] = []
        holders = _in_threads([lambda: answers.append(httpx.get(url + HOLD, timeout=60).status_code)] * 2)
        _wait_until(lambda: len(entered) == 2)
        queued = _in_threads([lambda: answers.append(httpx.get(url + "/api/v1/namespaces", timeout=60).status_code)] * 2)
        _wait_until(lambda: app.state.computing_slots.waiting == 2)
        refused = httpx.get(url + "/api/v1/namespaces", timeout=5)
        assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
        assert "retry" in refused.json()["message"]
        for route in ("/healthz", "/readyz", "/metrics"):
            assert httpx.get(url + route, timeout=5).status_code == 200, route
        release.set()
        for thread in holders + queued:
            thread.join(30)
        assert sorted(answers) == [200, 200, 200, 200]


def test_a_request_waits_no_longer_than_the_queue_time(sqlite_store) -> None:
    app = _app(sqlite_store, concurrent_requests=1, queue_seconds=0.5)
    release, entered = _holding_route(app)
    with serving(app) as url:
        holder = _in_threads([lambda: httpx.get(url + HOLD, timeout=60)])
        _wait_until(lambda: len(entered) == 1)
        waited = httpx.get(url + "/api/v1/namespaces", timeout=10)
        assert waited.status_code == 503 and waited.headers["Retry-After"]
        release.set()
        holder[0].join(30)
        assert httpx.get(url + "/api/v1/namespaces", timeout=10).status_code == 200


def test_healthz_fails_while_every_slot_is_stuck(sqlite_store) -> None:
    app = _app(sqlite_store, concurrent_requests=1)
    release, entered = _holding_route(app)
    app.state.stall_seconds = 0.5
    with serving(app) as url:
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200
        holder = _in_threads([lambda: httpx.get(url + HOLD, timeout=60)])
        _wait_until(lambda: len(entered) == 1)
        time.sleep(0.6)  # past the stall limit
        stuck = httpx.get(url + "/healthz", timeout=10)
        assert stuck.status_code == 503 and "none released" in stuck.json()["problems"][0]
        release.set()
        holder[0].join(30)
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200


def _routes_with_a_body(app: FastAPI) -> list[tuple[str, str]]:
    filled = {"namespace": "ns", "job": "j", "dataset": "d", "field": "f", "tag": "t", "run_id": "r", "entity": "jobs"}
    return [
        (method.upper(), path.format(**filled))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method in {"post", "put", "delete", "patch"}
    ]


def test_every_route_refuses_a_body_above_its_limit_before_anything_else(sqlite_store) -> None:
    token = "9c1f0e6d2b7a4c58a3e1f0d9b8c7a6e5"
    app = create_app(sqlite_store, SimpleNamespace(api_token=token, limits=Limits(body_bytes=1024, event_bytes=4096)))
    routes = _routes_with_a_body(app)
    assert ("PUT", "/api/v1/tags/t") in routes and ("POST", "/api/v1/lineage") in routes and len(routes) >= 10
    with serving(app) as url:
        for method, path in routes:
            limit = 4096 if path == "/api/v1/lineage" else 1024
            declared = httpx.request(method, url + path, content=b"x" * (limit + 1), timeout=10)
            assert declared.status_code == 413, (method, path, declared.status_code)

            def chunks(size: int = limit + 1) -> Any:  # no Content-Length: counted as it arrives
                yield b"{" + b" " * (size - 1)

            streamed = httpx.request(method, url + path, content=chunks(), timeout=10)
            assert streamed.status_code == 413, (method, path, streamed.status_code)
        # within the limit, the token check answers
        assert httpx.put(url + "/api/v1/tags/t", json={"description": "d"}, timeout=10).status_code == 401


def test_a_slow_upload_times_out_and_holds_no_slot(sqlite_store) -> None:
    app = _app(sqlite_store, concurrent_requests=1, body_seconds=1.0)
    with serving(app) as url:
        address = urlsplit(url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as slow:
            slow.sendall(
                b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nContent-Type: application/json\r\n\r\n{"
            )
            # meanwhile the one computing slot is free
            assert httpx.get(url + "/api/v1/namespaces", timeout=5).status_code == 200
            answer = slow.recv(4096).decode()
        assert answer.startswith("HTTP/1.1 408"), answer[:80]


def test_the_statement_timeout_is_answered_504(store) -> None:
    app = _app(store, statement_seconds=1.0)
    outcome: list[Any] = []
    _long_query_route(app, outcome)
    with serving(app) as url:
        answer = httpx.get(url + LONG_QUERY, timeout=60)
        assert answer.status_code == 504, answer.text
        assert "statement timeout" in answer.json()["message"]
        assert httpx.get(url + "/api/v1/namespaces", timeout=10).status_code == 200
    error, seconds = outcome[0]
    assert error is not None and seconds < 30, "stopped by the timeout, long before the query's end"


def test_a_disconnected_clients_query_is_stopped(store) -> None:
    app = _app(store, statement_seconds=120.0, concurrent_requests=1)
    outcome: list[Any] = []
    _long_query_route(app, outcome)
    with serving(app) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(url + LONG_QUERY, timeout=1.0)  # gives up: closes the connection
        _wait_until(lambda: bool(outcome), seconds=30)
        error, seconds = outcome[0]
        assert error is not None and seconds < 30, "stopped when the client left, not after the statement's two minutes"
        # the slot is free again
        assert httpx.get(url + "/api/v1/namespaces", timeout=10).status_code == 200
