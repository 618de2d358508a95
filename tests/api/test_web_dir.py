"""`serve --web-dir`: a built Marquez Web's files at /, index.html for its client routes, and every
API route still answered by the API (the static route comes last)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from consumer.settings import Settings
from consumer.store import open_store


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    web = tmp_path / "dist"
    (web / "fonts").mkdir(parents=True)
    (web / "index.html").write_text("<html>marquez web</html>")
    (web / "bundle.js").write_text("console.log('bundle')")
    (web / "fonts" / "a.ttf").write_bytes(b"\x00font")
    (tmp_path / "secret.txt").write_text("outside")
    store = open_store(f"sqlite:///{tmp_path / 'lineage.db'}")
    return TestClient(create_app(store, Settings(web_dir=str(web))))


def test_files_and_client_routes(client: TestClient) -> None:
    assert client.get("/").text == "<html>marquez web</html>"
    assert client.get("/bundle.js").text == "console.log('bundle')"
    assert client.get("/fonts/a.ttf").content == b"\x00font"
    for route in ("/jobs", "/datasets", "/lineage/dataset/ns/a%2Fb", "/datasets/column-level/ns/t"):
        response = client.get(route)
        assert response.status_code == 200 and response.text == "<html>marquez web</html>", route


def test_api_routes_win_and_unknown_api_paths_stay_404(client: TestClient) -> None:
    assert client.get("/api/v1/namespaces").json()["namespaces"] == []
    assert client.get("/api/v1/no-such-route").status_code == 404
    assert client.get("/openapi.json").json()["info"]["title"]


def test_nothing_outside_the_web_dir_is_served(client: TestClient) -> None:
    assert "outside" not in client.get("/../secret.txt").text
    assert "outside" not in client.get("/%2e%2e/secret.txt").text


def test_a_dir_without_index_html_is_refused(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lineage.db'}")
    with pytest.raises(ValueError, match="index.html"):
        create_app(store, Settings(web_dir=str(tmp_path)))
