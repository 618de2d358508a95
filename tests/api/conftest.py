"""An API client over a real store (SQLite and PostgreSQL) filled through the consumer's own ingestion with
Marquez's demo seed, every shared OpenLineage sample and our Spark-like pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.api.shapes import shape_errors
from tests.query.pipeline import events as pipeline_events
from tests.query.pipeline import ingest


def shared_events(shared_dir: Path) -> list[dict]:
    loaded = json.loads((shared_dir / "marquez" / "metadata.json").read_text())
    for path in sorted((shared_dir / "openlineage-samples").glob("*.json")):
        data = json.loads(path.read_text())
        loaded += data if isinstance(data, list) else [data]
    return loaded


@pytest.fixture
def filled_store(store, shared_dir):
    ingest(store, shared_events(shared_dir))
    ingest(store, pipeline_events())
    return store


@pytest.fixture
def client(filled_store):
    with TestClient(create_app(filled_store), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def check_shape(shared_dir):
    spec = shared_dir / "marquez" / "openapi.yml"

    def check(schema_name: str, body: Any) -> Any:
        errors = shape_errors(spec, schema_name, body)
        assert not errors, "\n".join(errors[:15])
        return body

    return check
