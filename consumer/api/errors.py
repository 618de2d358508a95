"""Map errors to HTTP answers at the edge: Marquez's `{code, message}` body, never a stack trace."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from starlette.exceptions import HTTPException as StarletteHTTPException

from consumer.query.db import is_stopped_query
from consumer.query.errors import BadParameter, NotFound, SearchLimitReached
from consumer.store.store import StoreUnavailable

log = logging.getLogger(__name__)
# What reaching the store may raise besides query errors: the database's errors, the store's own
# (a SQLite writer lock held elsewhere), the file system's (a SQLite file that cannot be opened).
STORE_ERRORS: tuple[type[Exception], ...] = (DBAPIError, StoreUnavailable, OSError)
# Seconds a client told "the store is unavailable" (503) waits before asking again.
STORE_RETRY_AFTER = "5"


class ErrorBody(BaseModel):
    """Marquez's error body."""

    code: int
    message: str


def _documented(description: str) -> dict[str, Any]:
    # JSON also on routes answering text or images: FastAPI would document their errors in that media type
    json_body = {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
    return {"model": ErrorBody, "description": description, "content": {"application/json": json_body}}


# Answers every route may give (documented app-wide in the OpenAPI document). Validation errors are 400 with
# this body, not FastAPI's 422 `detail` list; 422 is a question too big to answer (e.g. aligned start's bound).
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _documented("A parameter is malformed or out of range"),
    404: _documented("The namespace, job, dataset, field, run, snapshot, partition or tag named is not in the store"),
    422: _documented("The question hit a documented search limit"),
    503: _documented("Too many requests at once, or the store is unavailable: retry after the Retry-After seconds"),
    504: _documented("The question's database work took longer than the statement timeout"),
}
TOKEN_ERRORS: dict[int | str, dict[str, Any]] = {401: _documented("A bearer token is configured and the request lacks it")}
INGEST_ERRORS: dict[int | str, dict[str, Any]] = {
    **TOKEN_ERRORS,
    413: _documented("The request body is above the event size limit"),
}


def error_body(code: int, message: str) -> bytes:
    return json.dumps({"code": code, "message": message}).encode()


def _error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=code, content={"code": code, "message": message}, headers=headers)


def database_error(error: Exception, what: str) -> JSONResponse:
    """A database error as an answer that names no host, user or SQL: the details go to the log.
    A statement stopped by its time budget -> 504, data the database refuses -> 400, anything else
    -> 503 (retry later)."""
    if isinstance(error, (DataError, IntegrityError)):
        log.warning("%s: the store refused the data: %s", what, error)
        return _error(400, "the store refused the request's data (details in the server log)")
    if is_stopped_query(error):
        log.warning("%s: stopped by the statement timeout or a client disconnect", what)
        return _error(504, "the question took longer than the statement timeout allows; ask a smaller one (e.g. a lower depth)")
    log.error("%s: database error: %s", what, error)
    return _error(503, "the store is unavailable; retry later", {"Retry-After": STORE_RETRY_AFTER})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(NotFound)
    async def not_found(_: Request, error: NotFound) -> JSONResponse:
        return _error(404, str(error))

    @app.exception_handler(BadParameter)
    async def bad_parameter(_: Request, error: BadParameter) -> JSONResponse:
        return _error(400, str(error))

    @app.exception_handler(SearchLimitReached)
    async def search_limit(_: Request, error: SearchLimitReached) -> JSONResponse:
        return _error(422, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in error.errors()
        )
        return _error(400, f"bad request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail), getattr(error, "headers", None))

    async def store_error(request: Request, error: Exception) -> JSONResponse:
        return database_error(error, f"{request.method} {request.url.path}")

    for unavailable in STORE_ERRORS:
        app.add_exception_handler(unavailable, store_error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _error(500, "internal error; see the server log")
