"""Property-based fuzz of the HTTP API against its own OpenAPI document (schemathesis): for every route,
a bounded number of generated requests on a SQLite store seeded with Marquez's demo events and our
Spark-like pipelines. No answer may be a 5xx, use an undocumented status code, or break the documented
response schema."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from consumer.api import create_app
from consumer.store import open_store
from tests.query.daily_pipeline import events as daily_events
from tests.query.pipeline import events as pipeline_events
from tests.query.pipeline import ingest
from tests.support.paths import third_party_events

EXAMPLES_PER_ROUTE = 20


# The document is the app's own; the store is attached per module below (the routes read app.state.store).
# (schemathesis.pytest.from_fixture would build the app in a fixture, but it does not run under pytest 9.)
app = create_app(None, SimpleNamespace(api_token=None))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module", autouse=True)
def seeded_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'lineage.db'}")
    ingest(store, third_party_events())
    ingest(store, pipeline_events())
    ingest(store, daily_events())
    app.state.store = store
    yield store
    app.state.store = None
    store.dispose()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_ROUTE,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
)
def test_no_request_gets_a_server_error_or_an_undocumented_answer(case):
    response = case.call()
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
