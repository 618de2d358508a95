"""POST /api/v1/lineage: OpenLineage ingestion over HTTP, through the same validate ->
materialize -> store path as Kafka. One event (a JSON object, as Marquez) or a batch (a JSON
list) -> 201; any invalid event -> 400 naming it, and nothing of the request is stored. The app's
request bounds (consumer.api.limits) answer a body above the maximum event size (the Kafka path's
limit too) with 413 before this route runs.
The app (consumer.api.create_app) includes this router behind its write-token guard; a store
error propagates to the app's error handlers, which answer 503 and log the details, never echo them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from consumer.ingest.prepare import prepare
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import InvalidEvent, decode

router = APIRouter(prefix="/api/v1")


def _bad_request(reason: str) -> JSONResponse:
    return JSONResponse(status_code=400, content={"code": 400, "message": reason})


@router.post("/lineage", status_code=201, summary="Ingest one OpenLineage event or a JSON list of events")
async def ingest_lineage(request: Request) -> Response:
    # The raw body, not a pydantic model: validation errors must name the OpenLineage field.
    # Already read whole and bounded by the event size limit (413 beyond it) by consumer.api.limits.
    body = await request.body()
    # Decoding and validating a large event takes long enough to stall every other request: off the event loop.
    return await run_in_threadpool(_ingest, request.app.state.store, body)


def _ingest(store: Any, body: bytes) -> Response:
    try:
        decoded = decode(body)
    except InvalidEvent as error:
        return _bad_request(str(error))
    events = decoded if isinstance(decoded, list) else [decoded]
    if not events:
        return _bad_request("empty list: nothing to ingest")
    prepared = []
    for index, event in enumerate(events):
        try:
            prepared.append(prepare(event))
        except InvalidEvent as error:
            where = f"event [{index}] " if isinstance(decoded, list) else ""
            return _bad_request(f"{where}{error}")
    writes = store if isinstance(store, StoreWrites) else StoreWrites(store)  # the app's (with its hooks), or a bare Store
    stored = writes.write(prepared)
    writes.train_raw_dictionary()  # once the store holds enough events: this request waits ~0.2 s, once per store
    if isinstance(decoded, list):
        return JSONResponse(status_code=201, content={"received": len(events), "stored": stored})
    return Response(status_code=201)
