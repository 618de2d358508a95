"""Marquez Web (the prebuilt bundle in tests/fixtures/external) in a real browser, served by our API
process itself (`serve --web-dir`) over the demo pipeline's recorded events: the jobs page lists
the jobs, the table-lineage page draws the job's datasets, the column-level page shows the
fields. Playwright drives Chromium (Debian's, ./run tests installs it); screenshots are kept under .run/marquez-web/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from consumer.api import create_app
from consumer.ingest.prepare import prepare
from consumer.ingest.store_writes import StoreWrites
from consumer.settings import Settings
from consumer.store import open_store
from tests.support.browser import (
    GRAPH_JOB_NAME_CHARS,
    JOB_NAME_CHARS,
    graph_groups,
    open_page,
    svg_labels,
    truncated,
)
from tests.support.paths import PROJECT_ROOT
from tests.support.require import marquez_web_dist
from tests.support.server import serving

DEMO_EVENTS = PROJECT_ROOT / "tests" / "fixtures" / "demo_events.jsonl"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dist = marquez_web_dist()
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('web') / 'lineage.db'}")
    StoreWrites(store).write([prepare(line) for line in DEMO_EVENTS.read_bytes().splitlines() if line.strip()])
    with serving(create_app(store, Settings(web_dir=str(dist)))) as url:
        yield url
    store.dispose()


def _api(site: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{site}{path}", params=params, timeout=30)
    response.raise_for_status()
    return response.json()


def _demo_dataset(site: str) -> dict[str, Any]:
    """The demo's dataset with the most column lineage (an aggregate of a join)."""
    datasets = _api(site, "/api/v1/namespaces/file/datasets")["datasets"]
    return max(datasets, key=lambda dataset: (len(dataset.get("columnLineage") or []), dataset["name"]))


def test_the_jobs_page_lists_every_job(site: str, page: Any) -> None:
    jobs = [job["name"] for job in _api(site, "/api/v1/jobs")["jobs"]]
    assert len(jobs) >= 5
    open_page(page, f"{site}/jobs", "jobs")
    rows = page.eval_on_selector_all("table tbody tr", "rows => rows.map(r => r.cells[0].innerText.trim())")
    assert sorted(rows) == sorted(truncated(name, JOB_NAME_CHARS) for name in jobs)


def test_the_table_lineage_page_draws_the_graph_the_api_gives(site: str, page: Any) -> None:
    dataset = _demo_dataset(site)
    node_id = f"dataset:file:{dataset['name']}"
    graph = _api(site, "/api/v1/lineage", nodeId=node_id, depth=20)["graph"]
    api_jobs = {node["data"]["name"] for node in graph if node["type"] == "JOB"}
    api_datasets = [frozenset(f["name"] for f in node["data"]["fields"]) for node in graph if node["type"] == "DATASET"]
    assert len(api_jobs) >= 3 and len(api_datasets) >= 3
    url = f"{site}/lineage/dataset/file/{quote(dataset['name'], safe='')}?depth=20&isFull=true"
    labels = svg_labels(page, url, "table-lineage")
    shown_jobs, shown_datasets = graph_groups(labels)
    assert sorted(shown_jobs) == sorted(truncated(name, GRAPH_JOB_NAME_CHARS) for name in api_jobs)
    assert sorted(shown_datasets, key=sorted) == sorted(api_datasets, key=sorted)


def test_the_column_level_page_shows_the_fields_the_api_gives(site: str, page: Any) -> None:
    dataset = _demo_dataset(site)
    graph = _api(site, "/api/v1/column-lineage", nodeId=f"dataset:file:{dataset['name']}", depth=20)["graph"]
    api_fields = {node["data"]["field"] for node in graph}
    assert {field["name"] for field in dataset["fields"]} <= api_fields
    url = f"{site}/datasets/column-level/file/{quote(dataset['name'], safe='')}?depth=20"
    labels = set(svg_labels(page, url, "column-level"))
    assert api_fields <= labels, f"fields not shown: {sorted(api_fields - labels)}"
