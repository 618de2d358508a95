"""Errors of the read side. The API maps them to HTTP codes at its edge; messages name the offending thing.

`NotFound` is the store's (consumer.store.lookup): the read side and the tag writes share one vocabulary."""

from __future__ import annotations

from consumer.store.lookup import NotFound

__all__ = ["QueryError", "NotFound", "BadParameter", "SearchLimitReached"]


class QueryError(Exception):
    """Root of the errors a query raises on purpose besides `NotFound`."""


class BadParameter(QueryError):
    """A parameter is malformed or out of range (HTTP 400)."""


class SearchLimitReached(QueryError):
    """A search stopped at its documented bound before finding an answer (HTTP 422); the message says
    which bound and how to ask a smaller question."""
