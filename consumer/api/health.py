"""Operations routes: GET /healthz (the process can serve: a no-op goes through the worker
threads the routes run on, and the computing slots are not all stuck), GET /readyz (the store
answers; when this process ingests from Kafka, the ingestion loop, broker and partitions are
reported but are no reason to take the API out of service) and GET /metrics (Prometheus text
format); plus the middleware counting HTTP requests by route template and status."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from consumer.observability import Observability

STORE_CHECK_TIMEOUT_SECONDS = 5.0
THREAD_CHECK_TIMEOUT_SECONDS = 5.0
UNMATCHED_ROUTE = "<unmatched>"

log = logging.getLogger(__name__)
router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process can serve (a liveness probe: failing means restart it)")
async def healthz(request: Request) -> JSONResponse:
    problems: list[str] = []
    stalled = request.app.state.computing_slots.stalled_seconds()
    if stalled > request.app.state.stall_seconds:
        problems.append(f"every computing slot taken, none released for {stalled:.0f} s")
    try:
        await asyncio.wait_for(run_in_threadpool(lambda: None), THREAD_CHECK_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:  # not yet the built-in TimeoutError on Python 3.10
        problems.append(f"no worker thread ran a no-op within {THREAD_CHECK_TIMEOUT_SECONDS:g} s")
    if problems:
        log.error("not healthy: %s", "; ".join(problems))
        return JSONResponse(status_code=503, content={"status": "stuck", "problems": problems})
    return JSONResponse(content={"status": "up"})


@router.get("/readyz", summary="Ready to serve the API: the store answers (ingestion is reported, not required)")
async def readyz(request: Request) -> JSONResponse:
    observability: Observability = request.app.state.observability
    store_check = await _store_check(request.app.state.store)
    checks: dict[str, Any] = {"role": request.app.state.role, "store": store_check, **observability.ingestion_checks()}
    ready = store_check == "reachable"
    return JSONResponse(status_code=200 if ready else 503, content={"ready": ready, **checks})


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    body, content_type = request.app.state.observability.render()
    return Response(content=body, media_type=content_type)


async def _store_check(store: Any) -> str:
    def probe() -> None:
        with store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    try:
        await asyncio.wait_for(run_in_threadpool(probe), STORE_CHECK_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:  # not yet the built-in TimeoutError on Python 3.10
        log.warning("readiness: the store did not answer within %g s", STORE_CHECK_TIMEOUT_SECONDS)
        return "unreachable: no answer in time"
    except Exception as error:  # noqa: BLE001 - the reason goes to the log only: it may name hosts and users
        log.warning("readiness: the store does not answer: %s: %s", type(error).__name__, error)
        return "unreachable: see the server log"
    return "reachable"


class CountRequests:
    """ASGI middleware: one count and one duration per request, labelled by the matched route's
    template (e.g. /api/v1/namespaces/{namespace}/jobs), never by the raw path."""

    def __init__(self, app: Callable[..., Awaitable[None]], observability: Observability) -> None:
        self.app = app
        self.observability = observability

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_counting(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or UNMATCHED_ROUTE
            self.observability.http_request(scope.get("method", ""), template, status, time.perf_counter() - started)
