"""The HTTP app: Marquez-compatible reads under /api/v1, our lineage questions under /api/v1/lineage-store,
and (when the write side provides it) OpenLineage ingestion at POST /api/v1/lineage behind the bearer token.

FastAPI lives only in this package. `create_app(store, settings)` is the one entry point; `settings` may carry
`api_token` (str | None): when set, ingestion and delete endpoints require `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from fastapi import Depends, FastAPI

from consumer.api import lineage_store, marquez
from consumer.api.auth import require_token
from consumer.api.errors import install_error_handlers
from consumer.api.paths import KeepEncodedSlashes

TOKEN_ENV = "LINEAGE_API_TOKEN"


def create_app(store: Any, settings: Any = None) -> FastAPI:
    app = FastAPI(
        title="spark-lineage query service",
        description="Marquez-compatible lineage API plus table, column and snapshot lineage questions (see docs/api.md).",
        version="0.1.0",
    )
    app.state.store = store
    app.state.api_token = getattr(settings, "api_token", None) or os.environ.get(TOKEN_ENV) or None
    install_error_handlers(app)
    app.add_middleware(KeepEncodedSlashes)
    app.include_router(marquez.router)
    app.include_router(marquez.search_v2beta)
    app.include_router(lineage_store.router)
    ingestion = _ingestion_router()
    if ingestion is not None:
        app.include_router(ingestion, dependencies=[Depends(require_token)])
    return app


def _ingestion_router() -> Any:
    """Engineer D's POST /api/v1/lineage router, when the write side ships it."""
    try:
        module = importlib.import_module("consumer.ingest_http")
    except ModuleNotFoundError as error:
        if error.name != "consumer.ingest_http":
            raise
        return None
    return module.router
