"""Bounds on every API request, so that no burst, slow client or heavy question hangs the server.

`BoundedRequests` (ASGI middleware) takes each request through, in order:

1. its body, read whole before anything else: at most `event_bytes` (POST /api/v1/lineage) or
   `body_bytes` (every other route) -> else 413 at once, without reading on; within
   `body_seconds` -> else 408. A slow upload holds no computing slot and no thread.
2. a computing slot (`ComputingSlots`): at most `concurrent_requests` computed at once, at most
   `queued_requests` more waiting, each at most `queue_seconds` -> else 503 with Retry-After.
   Waiting is asyncio, never a thread: a burst queues on the event loop, and the server's thread
   pool only ever runs the requests holding a slot (and health checks).
3. the route, under a `consumer.query.db.QueryBudget` of `statement_seconds`: its database work
   stops when the time is up (504) or when the client disconnects (cancelled).

Health, readiness and metrics skip all three. Why a few slots: answering a lineage question is
mostly Python work under one interpreter lock; started all at once, N requests each take about
N times as long plus the cost of switching between them; taken a few at a time each runs at full
speed and the rest queue in order (benchmarks/query.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs

from consumer.api.errors import error_body
from consumer.query.db import QueryBudget, budgeted

INGEST_PATH = "/api/v1/lineage"
UNBOUNDED_PATHS = frozenset({"/healthz", "/readyz", "/readyz/ingestion", "/metrics"})


def default_slots() -> int:
    """One slot per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@attrs.frozen
class Limits:
    concurrent_requests: int = attrs.field(factory=default_slots)
    queued_requests: int = 64
    queue_seconds: float = 10.0
    body_bytes: int = 64 * 1024
    event_bytes: int = 4 * 1024 * 1024
    body_seconds: float = 30.0
    statement_seconds: float = 30.0

    @property
    def retry_after(self) -> str:
        """Seconds a client told 503 waits before asking again."""
        return str(max(1, round(self.queue_seconds / 2)))


class Overloaded(Exception):
    """No computing slot free and the queue full, or none freed within the queue time."""


class ComputingSlots:
    """An asyncio semaphore with a bounded queue in front, and what the watchdog needs to know:
    whether every slot stayed taken without any being released for a long time."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._semaphore: asyncio.Semaphore | None = None  # made on the server's event loop
        self.busy = 0
        self.waiting = 0
        self._last_release = time.monotonic()

    def _slots(self) -> asyncio.Semaphore:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.limits.concurrent_requests)
        return self._semaphore

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        semaphore = self._slots()
        if semaphore.locked() and self.waiting >= self.limits.queued_requests:
            raise Overloaded
        self.waiting += 1
        try:
            await _acquire_within(semaphore, self.limits.queue_seconds)
        finally:
            self.waiting -= 1
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self._last_release = time.monotonic()
            semaphore.release()

    def stalled_seconds(self) -> float:
        """How long every slot has been taken with none released (0 while one is free)."""
        if self.busy < self.limits.concurrent_requests:
            return 0.0
        return time.monotonic() - self._last_release


async def _acquire_within(semaphore: asyncio.Semaphore, seconds: float) -> None:
    """Acquire, or Overloaded after `seconds`. A slot granted just as the wait ended (time out, or
    this task cancelled) is given back, so none leaks."""
    acquiring = asyncio.ensure_future(semaphore.acquire())
    try:
        done, _ = await asyncio.wait({acquiring}, timeout=seconds)
    except BaseException:
        _abandon(acquiring, semaphore)
        raise
    if not done:
        _abandon(acquiring, semaphore)
        raise Overloaded


def _abandon(acquiring: asyncio.Future[Any], semaphore: asyncio.Semaphore) -> None:
    if acquiring.done() and not acquiring.cancelled():
        semaphore.release()
    else:
        acquiring.cancel()


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    """The client disconnected before its body was complete."""


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BoundedRequests:
    """ASGI middleware applying `Limits` (see the module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]], slots: ComputingSlots) -> None:
        self.app = app
        self.slots = slots
        self.limits = slots.limits

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") in UNBOUNDED_PATHS:
            await self.app(scope, receive, send)
            return
        limit = self.limits.event_bytes if scope.get("path") == INGEST_PATH else self.limits.body_bytes
        try:
            body = await asyncio.wait_for(_read_body(scope, receive, limit), self.limits.body_seconds)
        except ClientGone:
            return
        except BodyTooLarge:
            await _answer(send, 413, f"request body above the limit of {limit} bytes", close=True)
            return
        except asyncio.TimeoutError:  # not yet the built-in TimeoutError on Python 3.10
            await _answer(send, 408, f"request body not received within {self.limits.body_seconds:g} s", close=True)
            return
        try:
            async with self.slots.slot():
                await self._run(scope, body, receive, send)
        except Overloaded:
            await _answer(send, 503, "too many requests at once; retry later", {"Retry-After": self.limits.retry_after})

    async def _run(self, scope: dict[str, Any], body: bytes, receive: Receive, send: Send) -> None:
        """The route with its body replayed, its database work cancelled if the client leaves."""
        budget = QueryBudget(self.limits.statement_seconds)
        gone = asyncio.Event()
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def watch() -> None:
            # With the body read, the server's next message is the disconnect (or the end of the response).
            message = await receive()
            if message["type"] == "http.disconnect":
                budget.cancel()
                gone.set()

        watcher = asyncio.create_task(watch())
        try:
            with budgeted(budget):
                await self.app(scope, replay, send)
        finally:
            watcher.cancel()


async def _read_body(scope: dict[str, Any], receive: Receive, limit: int) -> bytes:
    """The whole body, or BodyTooLarge as soon as it is known to exceed `limit` (read no further)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _answer(send: Send, status: int, message: str, headers: dict[str, str] | None = None, close: bool = False) -> None:
    """An error answer in Marquez's body; `close`: the connection too (its unread body is abandoned)."""
    content = error_body(status, message)
    header_list = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    header_list += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    if close:
        header_list.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": header_list})
    await send({"type": "http.response.body", "body": content})
