"""The consumer's API over a store, after events went in through its ingestion route (POST
/api/v1/lineage behind its bearer token): for live tests that ask the read side about the events
real Spark produced."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from fastapi.testclient import TestClient

from consumer.api import create_app

TOKEN = "c0ffee4d2b9a7e51"


@contextmanager
def api_after_ingesting(store: Any, events: list[dict[str, Any]]) -> Iterator[TestClient]:
    """A client of the API over `store` once `events` are ingested (each answered 201)."""
    with TestClient(create_app(store, SimpleNamespace(api_token=TOKEN)), raise_server_exceptions=False) as client:
        posted = client.post("/api/v1/lineage", json=events, headers={"Authorization": f"Bearer {TOKEN}"})
        assert posted.status_code == 201, posted.text
        yield client
