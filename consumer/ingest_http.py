"""POST /api/v1/lineage: OpenLineage ingestion over HTTP, through the same validate ->
materialize -> store path as Kafka. One event (a JSON object, as Marquez) or a batch (a JSON
list) -> 201; any invalid event -> 400 naming it, and nothing of the request is stored.
The app (consumer.api.create_app) includes this router behind its bearer-token guard."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.concurrency import run_in_threadpool

from consumer.events import InvalidEvent, decode
from consumer.ingest import prepare

router = APIRouter(prefix="/api/v1")


def _bad_request(reason: str) -> JSONResponse:
    return JSONResponse(status_code=400, content={"code": 400, "message": reason})


@router.post("/lineage", status_code=201, summary="Ingest one OpenLineage event or a JSON list of events")
async def ingest_lineage(request: Request) -> Response:
    # The raw body, not a pydantic model: validation errors must name the OpenLineage field.
    body = await request.body()
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
    store = request.app.state.store
    try:
        stored = await run_in_threadpool(store.write, prepared)
    except DBAPIError as error:
        cause = str(error.orig or error).splitlines()[0]
        if isinstance(error, (OperationalError, InterfaceError)) or error.connection_invalidated:
            return JSONResponse(status_code=503, content={"code": 503, "message": f"store unavailable: {cause}"})
        return _bad_request(f"store rejected the events: {cause}")
    if isinstance(decoded, list):
        return JSONResponse(status_code=201, content={"received": len(events), "stored": stored})
    return Response(status_code=201)
