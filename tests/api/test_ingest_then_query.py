"""Events posted to the ingestion route (POST /api/v1/lineage, behind the bearer token) are answered by
the read routes."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.query.pipeline import events


def test_posted_events_are_queryable_and_posting_needs_the_token(store):
    app = create_app(store, SimpleNamespace(api_token="a9c4e1b7d2f05e38"))
    with TestClient(app, raise_server_exceptions=False) as client:
        batch = events()
        assert client.post("/api/v1/lineage", json=batch).status_code == 401
        assert client.get("/api/v1/namespaces/spark/jobs").status_code == 404  # nothing got in
        posted = client.post("/api/v1/lineage", json=batch, headers={"Authorization": "Bearer a9c4e1b7d2f05e38"})
        assert posted.status_code == 201
        plan = client.get("/api/v1/lineage-store/correction-plan", params={"table": "file:/lake/bronze", "snapshot": "b2"}).json()
        assert {t["name"]: t["rollBackTo"] for t in plan["tables"]} == {"/lake/silver": "s1", "/lake/gold": "g1"}
        assert client.get("/api/v1/namespaces/spark/jobs").json()["totalCount"] == 3
