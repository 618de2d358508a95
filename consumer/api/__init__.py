"""The HTTP app: Marquez-compatible reads under /api/v1, our lineage questions under /api/v1/lineage-store,
and OpenLineage ingestion at POST /api/v1/lineage (consumer.ingest.http_route) behind the write token.

FastAPI lives only in this package. `create_app(store, settings, observability, clock)` is the one entry
point. `settings` (consumer.settings.Settings, or any object with some of these attributes):
`api_token` / `read_token` (str | None): the write token (ingestion, tags, deletes; default the
`LINEAGE_API_TOKEN` environment variable) and the read token (every other /api route; default none: open),
see consumer.api.auth; `role` ("kafka", "http" or "api": an `api` replica refuses every write);
`concurrent_requests`, `queued_requests`, `queue_timeout`, `max_body_bytes`, `max_event_bytes`, `body_timeout`,
`statement_timeout`: the bounds (or `limits`, a consumer.api.limits.Limits; the defaults for those not given);
`web_dir`: a built Marquez Web to serve at /. `clock` gives the current time to the routes that count
"the last 24 hours / 7 days" (`/api/v1/stats/*`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from fastapi import Depends, FastAPI

from consumer.api import health, history, lineage_store, marquez
from consumer.api.auth import Tokens, check_token, require_read_token, require_token
from consumer.api.errors import COMMON_ERRORS, INGEST_ERRORS, install_error_handlers
from consumer.api.limits import BoundedRequests, ComputingSlots, Limits
from consumer.api.paths import KeepEncodedSlashes
from consumer.ingest import http_route
from consumer.observability import Observability
from consumer.settings import READ_TOKEN_ENV, TOKEN_ENV

# /healthz fails when every computing slot has been taken, none released, this many statement timeouts long.
STALLED_STATEMENT_TIMEOUTS = 3


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def tokens_of(settings: Any) -> Tokens:
    """The tokens `settings` carries (else the environment's), each checked: TokenRefused when one is a placeholder."""
    write = getattr(settings, "api_token", None) or os.environ.get(TOKEN_ENV) or None
    read = getattr(settings, "read_token", None) or os.environ.get(READ_TOKEN_ENV) or None
    return Tokens(
        write=check_token(write, "the write token") if write else None,
        read=check_token(read, "the read token") if read else None,
    )


def _limits(settings: Any) -> Limits:
    """The bounds `settings` carries (a consumer.settings.Settings, or any object with some of its
    fields, or a ready `limits`); the defaults for the rest."""
    if isinstance(given_limits := getattr(settings, "limits", None), Limits):
        return given_limits
    defaults = Limits()

    def given(name: str, default: Any) -> Any:
        value = getattr(settings, name, None)
        return default if value is None else value

    return Limits(
        concurrent_requests=given("concurrent_requests", None) or defaults.concurrent_requests,
        queued_requests=given("queued_requests", defaults.queued_requests),
        queue_seconds=given("queue_timeout", defaults.queue_seconds),
        body_bytes=given("max_body_bytes", defaults.body_bytes),
        event_bytes=given("max_event_bytes", None) or defaults.event_bytes,
        body_seconds=given("body_timeout", defaults.body_seconds),
        statement_seconds=given("statement_timeout", defaults.statement_seconds),
    )


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
    limits = _limits(settings)
    app.state.store = store
    app.state.clock = clock
    app.state.tokens = tokens_of(settings)
    app.state.role = getattr(settings, "role", None) or "http"
    app.state.read_only = app.state.role == "api"
    app.state.observability = observability or Observability(ingesting=False)
    app.state.computing_slots = ComputingSlots(limits)
    app.state.stall_seconds = STALLED_STATEMENT_TIMEOUTS * limits.statement_seconds
    install_error_handlers(app)
    # outermost first: KeepEncodedSlashes, CountRequests, BoundedRequests
    app.add_middleware(BoundedRequests, slots=app.state.computing_slots)
    app.add_middleware(health.CountRequests, observability=app.state.observability)
    app.add_middleware(KeepEncodedSlashes)
    app.include_router(health.router)  # never waits for a computing slot, needs no token
    reading = [Depends(require_read_token)]
    app.include_router(marquez.router, dependencies=reading)
    app.include_router(marquez.search_v2beta, dependencies=reading)
    app.include_router(lineage_store.router, dependencies=reading)
    app.include_router(history.router, dependencies=reading)
    app.include_router(http_route.router, dependencies=[Depends(require_token)], responses=INGEST_ERRORS)
    if web_dir := getattr(settings, "web_dir", None):
        from consumer.api.web import mount_web

        mount_web(app, web_dir)  # last: its catch-all route must not hide an API route
    return app
