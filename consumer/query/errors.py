"""Errors of the read side. The API maps them to HTTP codes at its edge; messages name the offending thing."""

from __future__ import annotations


class QueryError(Exception):
    """Root of every error a query can raise on purpose."""


class NotFound(QueryError):
    """The node, run or dataset asked about is not in the store (HTTP 404)."""


class BadParameter(QueryError):
    """A parameter is malformed or out of range (HTTP 400)."""
