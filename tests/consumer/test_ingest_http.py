"""POST /api/v1/lineage through the real app (consumer.api.create_app) on both databases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from consumer.api import create_app
from tests.support.events import batch_write, table, with_column_lineage


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as test_client:
        yield test_client


def _count(store, table_name: str) -> int:
    with store.engine.connect() as connection:
        return connection.execute(text(f"SELECT count(*) FROM {table_name}")).scalar_one()


def test_one_event_is_created_and_a_list_is_a_batch(client, store):
    source = table("raw", "orders", ["id"])
    output = with_column_lineage(table("mart", "o", ["id"]), {"id": [(source, "id")]})
    start, complete = batch_write("app.insert_into.o", [source], output)

    single = client.post("/api/v1/lineage", json=start)
    batch = client.post("/api/v1/lineage", json=[start, complete])

    assert single.status_code == 201
    assert batch.status_code == 201 and batch.json() == {"received": 2, "stored": 1}
    assert _count(store, "lineage_events") == 2 and _count(store, "column_lineage") == 1


def test_bad_input_is_refused_with_the_reason_and_nothing_stored(client, store):
    good = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    bad_run_id = {**good, "run": {"runId": "not-a-uuid"}}

    not_json = client.post("/api/v1/lineage", content=b"{nope", headers={"Content-Type": "application/json"})
    invalid = client.post("/api/v1/lineage", json=bad_run_id)
    batch_with_bad = client.post("/api/v1/lineage", json=[good, {**good, "eventTime": "yesterday"}])

    assert not_json.status_code == 400 and "not JSON" in not_json.json()["message"]
    assert invalid.status_code == 400 and "run.runId" in invalid.json()["message"]
    assert batch_with_bad.status_code == 400 and "event [1] eventTime" in batch_with_bad.json()["message"]
    assert _count(store, "lineage_events") == 0


def test_token_guards_ingestion_when_configured(store, monkeypatch):
    monkeypatch.setenv("LINEAGE_API_TOKEN", "4b1d9e0c7f3a2e6d")
    event = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    with TestClient(create_app(store)) as client:
        refused = client.post("/api/v1/lineage", json=event)
        accepted = client.post("/api/v1/lineage", json=event, headers={"Authorization": "Bearer 4b1d9e0c7f3a2e6d"})
    assert refused.status_code == 401 and accepted.status_code == 201
