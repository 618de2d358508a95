"""Names with slashes in paths: Marquez Web and marquez-python send `/lake/gold` or `hive://host:9083`
as one URL-encoded segment (`%2Flake%2Fgold`). ASGI servers decode `%2F` before routing, which would split
the name into several segments. This middleware routes on the raw path with `%2F` kept encoded; routes
then decode their name parameters with `segment()`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

ENCODED_SLASH = "%2F"


class KeepEncodedSlashes:
    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope.get("raw_path")
        if scope.get("type") == "http" and raw and b"%2" in raw:
            text = raw.decode("latin-1").split("?", 1)[0]
            text = text.replace("%2f", ENCODED_SLASH).replace(ENCODED_SLASH, "%25" + "2F")
            scope = {**scope, "path": unquote(text)}
        await self.app(scope, receive, send)


def segment(value: str) -> str:
    """A path parameter with its kept-encoded slashes restored."""
    return value.replace(ENCODED_SLASH, "/")
