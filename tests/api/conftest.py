"""An API client over a real store (SQLite and PostgreSQL) filled through the consumer's own ingestion with
Marquez's demo seed, every third-party OpenLineage sample (tests/fixtures/external) and our Spark-like pipeline."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.api.shapes import shape_errors
from tests.query.pipeline import events as pipeline_events
from tests.query.pipeline import ingest
from tests.support.paths import MARQUEZ_OPENAPI, third_party_events


@pytest.fixture
def filled_store(store):
    ingest(store, third_party_events())
    ingest(store, pipeline_events())
    return store


@pytest.fixture
def client(filled_store):
    with TestClient(create_app(filled_store), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def check_shape():
    def check(schema_name: str, body: Any) -> Any:
        errors = shape_errors(MARQUEZ_OPENAPI, schema_name, body)
        assert not errors, "\n".join(errors[:15])
        return body

    return check
