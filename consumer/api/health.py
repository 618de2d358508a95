"""Operations routes: GET /healthz (the process answers), GET /readyz (the store answers and,
when this process ingests from Kafka, the ingestion loop runs with partitions assigned and the
broker reachable) and GET /metrics (Prometheus text format); plus the middleware counting HTTP
requests by route template and status."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from consumer.observability import Observability

STORE_CHECK_TIMEOUT_SECONDS = 5.0
UNMATCHED_ROUTE = "<unmatched>"

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "up"}


@router.get("/readyz", summary="Ready to serve: store reachable and, when ingesting, ingestion running")
async def readyz(request: Request) -> JSONResponse:
    observability: Observability = request.app.state.observability
    store_check = await _store_check(request.app.state.store)
    checks: dict[str, Any] = {"store": store_check, **observability.ingestion_checks()}
    ready = store_check == "reachable" and checks.pop("ready", True)
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
    except Exception as error:  # noqa: BLE001 - any failure to answer means not ready, with the reason
        return f"unreachable: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
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
