"""The HTTP app: Marquez-compatible reads under /api/v1, our lineage questions under /api/v1/lineage-store,
and OpenLineage ingestion at POST /api/v1/lineage (consumer.ingest.http_route) behind the bearer token.

FastAPI lives only in this package. `create_app(store, settings, observability, clock)` is the one entry point; `settings` may carry
`api_token` (str | None): when set, ingestion and delete endpoints require `Authorization: Bearer <token>`, and
`concurrent_requests` (int | None): how many requests are computed at once (`consumer.api.slots`; default one per CPU);
`clock` gives the current time to the routes that count "the last 24 hours / 7 days" (`/api/v1/stats/*`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from fastapi import Depends, FastAPI

from consumer.api import health, lineage_store, marquez
from consumer.api.auth import require_token
from consumer.api.errors import COMMON_ERRORS, INGEST_ERRORS, install_error_handlers
from consumer.api.paths import KeepEncodedSlashes
from consumer.api.slots import computing_slot, default_slots
from consumer.ingest import http_route
from consumer.ingest.kafka_loop import DEFAULT_MAX_EVENT_BYTES
from consumer.observability import Observability

TOKEN_ENV = "LINEAGE_API_TOKEN"


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def create_app(
    store: Any,
    settings: Any = None,
    observability: Observability | None = None,
    clock: Callable[[], datetime] = _utc_now,
) -> FastAPI:
    """`observability`: the process's metrics and ingestion state (a fresh one, not ingesting, if None)."""
    app = FastAPI(
        title="spark-lineage query service",
        description="Marquez-compatible lineage API plus table, column and snapshot lineage questions (see docs/api.md).",
        version=metadata.version("spark-lineage"),  # pyproject.toml, the one place it is written
        responses=COMMON_ERRORS,
    )
    app.state.store = store
    app.state.clock = clock
    app.state.api_token = getattr(settings, "api_token", None) or os.environ.get(TOKEN_ENV) or None
    app.state.max_event_bytes = getattr(settings, "max_event_bytes", DEFAULT_MAX_EVENT_BYTES)
    app.state.observability = observability or Observability(ingesting=False)
    app.state.computing_slots = threading.BoundedSemaphore(getattr(settings, "concurrent_requests", None) or default_slots())
    install_error_handlers(app)
    app.add_middleware(health.CountRequests, observability=app.state.observability)  # inside KeepEncodedSlashes
    app.add_middleware(KeepEncodedSlashes)
    app.include_router(health.router)  # never waits for a computing slot
    computing = [Depends(computing_slot)]
    app.include_router(marquez.router, dependencies=computing)
    app.include_router(marquez.search_v2beta, dependencies=computing)
    app.include_router(lineage_store.router, dependencies=computing)
    app.include_router(http_route.router, dependencies=[Depends(require_token), *computing], responses=INGEST_ERRORS)
    if web_dir := getattr(settings, "web_dir", None):
        from consumer.api.web import mount_web

        mount_web(app, web_dir)  # last: its catch-all route must not hide an API route
    return app
