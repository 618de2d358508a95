"""Map errors to HTTP answers at the edge: Marquez's `{code, message}` body, never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from consumer.query.errors import BadParameter, NotFound, SearchLimitReached

log = logging.getLogger(__name__)


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
}
TOKEN_ERRORS: dict[int | str, dict[str, Any]] = {401: _documented("A bearer token is configured and the request lacks it")}
INGEST_ERRORS: dict[int | str, dict[str, Any]] = {
    **TOKEN_ERRORS,
    413: _documented("The request body is above the event size limit"),
    503: _documented("The store is unavailable; retry later"),
}


def _error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=code, content={"code": code, "message": message}, headers=headers)


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

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _error(500, "internal error; see the server log")
