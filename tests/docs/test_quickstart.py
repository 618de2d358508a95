"""docs/quickstart.md, word for word: its `sh` blocks, taken from the Markdown, run in order by bash
in a copy of the repository, with the broker and the PostgreSQL database of the tests standing in
for the user's. Only the addresses change, and only through the environment variables the doc itself
exports in its first block. Then Marquez Web, served by the doc's `serve --web-dir`, shows the
PySpark job's lineage in a real browser; the doc's last block stops the consumer.

It installs both extras into fresh virtualenvs (pip's cache makes that quick), so the emitter and
the consumer each run from what `pip install` gave them: each holds none of the other half's
dependencies, and both report the version pyproject.toml sets."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from demo.broker import KafkaBroker, start_kafka
from tests.support.broker import free_port
from tests.support.browser import GRAPH_JOB_NAME_CHARS, JOB_NAME_CHARS, graph_groups, open_page, svg_labels, truncated
from tests.support.checkout import clean_environment, repository_copy
from tests.support.kafka_server import _started
from tests.support.paths import PROJECT_ROOT, PROJECT_VERSION

QUICKSTART = PROJECT_ROOT / "docs" / "quickstart.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.DOTALL | re.MULTILINE)
EXPORT = re.compile(r"^export (\w+)=(.*)$", re.MULTILINE)
# The user's addresses: the only values the test puts in place of the doc's.
ADDRESSES = ("KAFKA_BOOTSTRAP_SERVERS", "LINEAGE_STORE_URL", "LINEAGE_PORT")
SCRIPT_TIMEOUT_SECONDS = 900
OUTPUT = "quickstart-data/revenue_by_country"
CONSUMER_ONLY = {"fastapi", "uvicorn", "sqlalchemy", "psycopg", "alembic", "prometheus-client", "zstandard"}
EMITTER_ONLY = {"pyspark", "openlineage-python", "py4j"}

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.postgres]


def doc_blocks() -> list[str]:
    return SH_BLOCK.findall(QUICKSTART.read_text())


def with_addresses(block: str, addresses: dict[str, str]) -> str:
    """The doc's first block with each address's value replaced (it must export every one)."""
    exported = dict(EXPORT.findall(block))
    assert sorted(exported) == sorted(ADDRESSES), f"the first block must export exactly {ADDRESSES}: {exported}"
    return EXPORT.sub(lambda match: f"export {match[1]}={addresses[match[1]]}", block)


def _run(script: str, cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    (cwd / f"{name}.sh").write_text("set -eo pipefail\n" + script)
    result = subprocess.run(
        ["bash", f"{name}.sh"], cwd=cwd, env=clean_environment(), capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_SECONDS
    )
    print(result.stdout[-4000:], result.stderr[-4000:], sep="\n")
    return result


@pytest.fixture(scope="module")
def quickstart_database(postgres_database_url: str) -> Iterator[str]:
    """An empty database of its own, as the doc asks for (`postgresql://` as a user writes it)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"quickstart_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(postgres_database_url).set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="module")
def quickstart_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker of its own, as new as the user's cluster: the session's shared broker holds other
    tests' topics and consumer groups under the doc's default names."""
    broker = _started(lambda: start_kafka(tmp_path_factory.mktemp("kafka-quickstart")))
    assert isinstance(broker, KafkaBroker)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def quickstart(
    tmp_path_factory: pytest.TempPathFactory, quickstart_broker: str, quickstart_database: str
) -> Iterator[dict[str, Any]]:
    """The doc run up to its last block; the consumer it started is stopped by that block (or by its
    pid, should the test fail before)."""
    port = free_port()
    checkout = repository_copy(tmp_path_factory.mktemp("quickstart"))
    first, *middle, stop = doc_blocks()
    addresses = {
        "KAFKA_BOOTSTRAP_SERVERS": quickstart_broker,
        "LINEAGE_STORE_URL": quickstart_database,
        "LINEAGE_PORT": str(port),
    }
    steps = _run("\n".join([with_addresses(first, addresses), *middle]), checkout, "steps")
    try:
        yield {"site": f"http://localhost:{port}", "steps": steps, "stop": stop, "checkout": checkout}
    finally:
        _stop_leftover(checkout)


def _stop_leftover(checkout: Path) -> None:
    pid_file = checkout / "consumer.pid"
    if pid_file.is_file():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def _api(site: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{site}{path}", params=params, timeout=30)
    response.raise_for_status()
    return response.json()


def test_every_step_of_the_quickstart_succeeds(quickstart: dict[str, Any]) -> None:
    steps = quickstart["steps"]
    assert steps.returncode == 0, f"a quickstart step failed:\n{steps.stdout[-3000:]}\n{steps.stderr[-3000:]}"
    assert "created openlineage.events (6 partitions)" in steps.stdout
    assert "created lineage.changes (6 partitions, cleanup.policy=compact)" in steps.stdout
    assert '"ready":true' in steps.stdout.replace(" ", "")


def test_the_jobs_arrived_by_kafka_and_by_http(quickstart: dict[str, Any]) -> None:
    assert quickstart["steps"].returncode == 0
    by_namespace = {
        ns: _api(quickstart["site"], f"/api/v1/namespaces/{ns}/jobs")["jobs"] for ns in ("default", "quickstart-http")
    }
    for namespace, jobs in by_namespace.items():
        assert any(job["name"].startswith("quickstart.") and job["latestRun"]["state"] == "COMPLETED" for job in jobs), namespace


def test_each_half_installs_without_the_others_dependencies_at_the_projects_version(quickstart: dict[str, Any]) -> None:
    assert quickstart["steps"].returncode == 0
    emitter_side = _distributions(quickstart["checkout"] / ".venv-emitter")
    consumer_side = _distributions(quickstart["checkout"] / ".venv-consumer")
    assert not CONSUMER_ONLY & set(emitter_side), (
        f"the emitter's install holds consumer dependencies: {CONSUMER_ONLY & set(emitter_side)}"
    )
    assert not EMITTER_ONLY & set(consumer_side), (
        f"the consumer's install holds emitter dependencies: {EMITTER_ONLY & set(consumer_side)}"
    )
    assert emitter_side["spark-lineage"] == consumer_side["spark-lineage"] == PROJECT_VERSION
    jobs = _api(quickstart["site"], "/api/v1/namespaces/default/jobs")["jobs"]
    reported = {
        job["latestRun"]["facets"]["processing_engine"]["openlineageAdapterVersion"]
        for job in jobs
        if job["name"].startswith("quickstart.")
    }
    assert reported == {PROJECT_VERSION}
    consumer = quickstart["checkout"] / ".venv-consumer" / "bin" / "python"
    usage = subprocess.run([str(consumer), "-m", "consumer", "--help"], capture_output=True, text=True, check=True).stdout
    assert all(command in usage for command in ("serve", "ingest", "migrate", "create-topics", "replay"))
    assert _api(quickstart["site"], "/openapi.json")["info"]["version"] == PROJECT_VERSION


def _distributions(venv: Path) -> dict[str, str]:
    """The distributions installed in `venv`, name → version."""
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True
    ).stdout
    return {item["name"].lower(): item["version"] for item in json.loads(listed)}


def test_marquez_web_draws_the_jobs_lineage(quickstart: dict[str, Any], page: Any) -> None:
    assert quickstart["steps"].returncode == 0
    site = quickstart["site"]
    output = str(quickstart["checkout"] / OUTPUT)
    graph = _api(site, "/api/v1/lineage", nodeId=f"dataset:file:{output}", depth=20)["graph"]
    api_jobs = [node["data"]["name"] for node in graph if node["type"] == "JOB"]  # a name per namespace
    assert len(api_jobs) >= 2  # the writer of the orders and of the revenue, in both namespaces
    open_page(page, f"{site}/jobs", "quickstart-jobs")
    rows = page.eval_on_selector_all("table tbody tr", "rows => rows.map(r => r.cells[0].innerText.trim())")
    default_jobs = [job["name"] for job in _api(site, "/api/v1/namespaces/default/jobs")["jobs"]]  # the page's namespace
    assert sorted(rows) == sorted(truncated(name, JOB_NAME_CHARS) for name in default_jobs)
    labels = svg_labels(page, f"{site}/lineage/dataset/file/{quote(output, safe='')}?depth=20&isFull=true", "quickstart-lineage")
    shown_jobs, shown_datasets = graph_groups(labels)
    assert sorted(shown_jobs) == sorted(truncated(name, GRAPH_JOB_NAME_CHARS) for name in api_jobs)
    assert frozenset({"country", "revenue"}) in shown_datasets
    assert frozenset({"id", "country", "amount"}) in shown_datasets


def test_the_last_step_stops_the_consumer(quickstart: dict[str, Any]) -> None:
    assert quickstart["steps"].returncode == 0
    stopped = _run(quickstart["stop"], quickstart["checkout"], "stop")
    assert stopped.returncode == 0, stopped.stderr
    with pytest.raises(httpx.TransportError):
        for _ in range(50):
            httpx.get(f"{quickstart['site']}/healthz", timeout=2)
            time.sleep(0.2)
