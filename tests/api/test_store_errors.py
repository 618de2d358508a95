"""A store that does not answer: /readyz, the API and ingestion answer 503 (never 500, never a
hang) and name no host, port, user, database or file; the details go to the server log."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from consumer.store.store import Store, engine_for
from tests.support.broker import free_port
from tests.support.events import batch_write, table

TOKEN = "6a2e9c4f1b8d3e7a5c0f9b2d4e6a8c1f"


@pytest.fixture(params=["sqlite", "postgres"])
def unreachable(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Store, list[str]]:
    """A store on a database that is not there, and the words its errors would give away."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/hidden-directory/private.db"
        return Store(engine_for(url)), ["hidden-directory", "private.db", str(tmp_path)]
    port = str(free_port())
    url = f"postgresql://secretuser:pw@127.0.0.1:{port}/hiddendb?connect_timeout=2"
    return Store(engine_for(url)), [port, "secretuser", "hiddendb", "127.0.0.1", "pw"]


def test_nothing_of_the_database_is_echoed(unreachable, caplog: pytest.LogCaptureFixture) -> None:
    store, secrets = unreachable
    event = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    with TestClient(create_app(store, SimpleNamespace(api_token=TOKEN)), raise_server_exceptions=False) as client:
        answers = {
            "readyz": client.get("/readyz"),
            "namespaces": client.get("/api/v1/namespaces"),
            "lineage": client.get("/api/v1/lineage", params={"nodeId": "dataset:raw:a"}),
            "ingest": client.post("/api/v1/lineage", json=event, headers={"Authorization": f"Bearer {TOKEN}"}),
        }
    for name, answer in answers.items():
        assert answer.status_code == 503, (name, answer.status_code, answer.text)
        assert not [word for word in secrets if word in answer.text], (name, answer.text)
    assert answers["namespaces"].headers["Retry-After"] and answers["ingest"].headers["Retry-After"]
    assert answers["readyz"].json()["store"].startswith("unreachable")
    assert any(secrets[0] in record.getMessage() for record in caplog.records), "the details are in the log"
