"""A real Spark Connect server (`python -m emitter connect-server`, PySpark 4's own server jar) with
thin clients through `remote("sc://127.0.0.1:PORT")`: every client session's writes, CTAS,
`saveAsTable`, `insertInto`, path writes and streaming `foreachBatch` writes are runs with the same
column lineage as the same program in a classic session; each session names its own namespace, app
and Connect session, and two clients at once never mix.

One server and one run of each program for the whole module: client A (batch, analytics, stream)
and client B (batch, under `python -m emitter run`, which must only say that Connect lineage comes
from the server) run at the same time, and the classic baseline beside them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from emitter.naming import normalize
from tests.support.paths import PROJECT_ROOT
from tests.support.spark import SCRIPT_TIMEOUT_S, SPARK_TEST_CONF, file_transport_env, read_events, require_spark_connect
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

PROGRAM = Path(__file__).with_name("client_program.py")
SERVER_START_TIMEOUT_S = 240
SERVER_STOP_TIMEOUT_S = 120
CLIENT_A, CLIENT_B, CLASSIC = "conn_a", "conn_b", "classic"
NAMESPACE_A, NAMESPACE_B = "team_a", "team_b"
USER_B = "bob"  # client A sends no user id
CONNECT_CLIENT_NOTICE = "Spark Connect client session: its lineage comes from the Connect server"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """`python -m emitter connect-server` in a child process, its events in a file."""

    def __init__(self, data_dir: Path, events_path: Path) -> None:
        self.port = free_port()
        self.events_path = events_path
        conf = {"spark.master": "local[2]", "spark.sql.warehouse.dir": str(data_dir / "warehouse"), **SPARK_TEST_CONF}
        command = [sys.executable, "-m", "emitter", "connect-server", "--port", str(self.port)]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        self.log_path = data_dir / "server.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            command, cwd=data_dir, env=file_transport_env(events_path), stdout=self.log, stderr=subprocess.STDOUT
        )
        self._wait_until_listening()

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if "listening at" in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"the Connect server did not start:\n{self.log_path.read_text()[-4000:]}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SERVER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return int(self.process.returncode)


def start_program(
    where: str, data_dir: Path, app: str, namespace: str, steps: list[str], *, under_emitter: bool, events: Path
) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        *(["-m", "emitter", "run"] if under_emitter else []),
        str(PROGRAM),
        where,
        str(data_dir),
        app,
        namespace,
        *steps,
    ]
    env = file_transport_env(events)
    if not under_emitter:  # a thin client: nothing of this project on its path
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != PROJECT_ROOT.resolve()
        )
    return subprocess.Popen(command, cwd=data_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str], server: Server) -> tuple[str, str]:
    out, err = process.communicate(timeout=SCRIPT_TIMEOUT_S)
    server_log = server.log_path.read_text(errors="replace")
    assert process.returncode == 0, f"exit {process.returncode}\n{out[-2000:]}\n{err[-3000:]}\nserver:\n{server_log[-5000:]}"
    return out, err


class Outcome:
    """What the module's programs printed and the events of the server and of the classic run."""

    def __init__(self, data_dir: Path, classic_dir: Path, outputs: dict[str, tuple[str, str]]) -> None:
        self.data_dir = data_dir
        self.classic_dir = classic_dir
        self.outputs = outputs
        self.server_events = read_events(data_dir / "server-events.jsonl")
        self.classic_events = read_events(classic_dir / "events.jsonl")

    def session_id(self, app: str) -> str:
        match = re.search(r"^session (\S+)$", self.outputs[app][0], re.MULTILINE)
        assert match is not None, self.outputs[app][0]
        return match.group(1)

    def of_session(self, app: str) -> list[dict[str, Any]]:
        session_id = self.session_id(app)
        return [e for e in self.server_events if e["run"]["facets"].get("sparkConnectSession", {}).get("sessionId") == session_id]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    require_spark_connect()
    data_dir = tmp_path_factory.mktemp("connect")
    classic_dir = tmp_path_factory.mktemp("classic")
    server = Server(data_dir, data_dir / "server-events.jsonl")
    try:
        all_steps = ["batch", "analytics", "stream"]
        client_a = start_program(
            server.url, data_dir, CLIENT_A, NAMESPACE_A, all_steps, under_emitter=False, events=data_dir / "a.jsonl"
        )
        client_b = start_program(
            f"{server.url}/;user_id={USER_B}",
            data_dir,
            CLIENT_B,
            NAMESPACE_B,
            ["batch"],
            under_emitter=True,
            events=data_dir / "b.jsonl",
        )
        outputs = {CLIENT_A: finish(client_a, server), CLIENT_B: finish(client_b, server)}
        # after the clients: fewer JVMs at once (the server gives a foreachBatch worker 10 s to start)
        classic = start_program(
            "local", classic_dir, CLASSIC, NAMESPACE_A, all_steps, under_emitter=True, events=classic_dir / "events.jsonl"
        )
        outputs[CLASSIC] = finish(classic, server)
    finally:
        exit_code = server.stop()
    assert exit_code == 0, server.log_path.read_text()[-4000:]
    yield Outcome(data_dir, classic_dir, outputs)


# comparing with the classic session ------------------------------------------------------------
def normalized(value: Any, app: str, data_dir: Path) -> Any:
    """`value` without what differs between two runs of the program: facets' producer and
    schema URL, the data directory and the table prefix (placeholders instead)."""
    if isinstance(value, dict):
        return {k: normalized(v, app, data_dir) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [normalized(v, app, data_dir) for v in value]
    if isinstance(value, str):
        for directory in (str(data_dir.resolve()), str(data_dir)):
            value = value.replace(directory, "DATA").replace(normalize(directory), "DATA")  # in paths, in job names
        return value.replace(app, "APP")
    return value


def completed_writes(events: list[dict[str, Any]], app: str, data_dir: Path) -> list[tuple[str, Any, Any]]:
    """Per COMPLETE of a write, in order: its job name, inputs and outputs (column lineage,
    schema, which facets) without run-specific values."""
    found = []
    for event in events:
        if event["eventType"] != "COMPLETE" or not event.get("outputs"):
            continue
        outputs = [
            {
                "name": o["name"],
                "columnLineage": o["facets"].get("columnLineage"),
                "schema": o["facets"].get("schema"),
                "facets": sorted(o["facets"]),
            }
            for o in event["outputs"]
        ]
        inputs = [{"name": i["name"], "facets": sorted(i["facets"])} for i in event.get("inputs", [])]
        found.append(
            (
                normalized(event["job"]["name"], app, data_dir),
                normalized(inputs, app, data_dir),
                normalized(outputs, app, data_dir),
            )
        )
    return found


WRITES = 8  # saveAsTable, CTAS, insertInto, parquet(path); saveAsTable, join+aggregate+window; two foreachBatch writes


def test_every_write_of_a_client_has_the_classic_sessions_lineage(outcome: Outcome) -> None:
    connect = completed_writes(outcome.of_session(CLIENT_A), CLIENT_A, outcome.data_dir)
    classic = completed_writes(outcome.classic_events, CLASSIC, outcome.classic_dir)
    assert len(classic) == WRITES, [job for job, _, _ in classic]
    assert [job for job, _, _ in connect] == [job for job, _, _ in classic]
    for (job, connect_inputs, connect_outputs), (_, classic_inputs, classic_outputs) in zip(connect, classic, strict=True):
        assert connect_inputs == classic_inputs, job
        assert connect_outputs == classic_outputs, job
    ranked = next(outputs[0] for job, _, outputs in connect if job.endswith("default_APP_ranked"))
    rank = ranked["columnLineage"]["fields"]["rank"]["inputFields"]
    assert {(f["field"], t["subtype"]) for f in rank for t in f["transformations"]} >= {
        ("amount", "WINDOW"),
        ("country", "WINDOW"),
    }
    assert ranked["columnLineage"]["fields"]["revenue"]["inputFields"][0]["transformations"][0]["description"] == "sum(amount)"
    assert {"snapshot", "version", "columnLineage", "schema", "symlinks"} <= set(ranked["facets"])


def test_every_event_is_spec_valid(outcome: Outcome) -> None:
    assert outcome.server_events
    for event in outcome.server_events:
        assert_valid_event(event)


def test_each_session_is_its_own_application_with_its_settings(outcome: Outcome) -> None:
    for app, namespace in ((CLIENT_A, NAMESPACE_A), (CLIENT_B, NAMESPACE_B)):
        events = outcome.of_session(app)
        assert events, app
        assert {e["job"]["namespace"] for e in events} == {namespace}
        application = [e for e in events if e["job"]["name"] == app]
        assert [e["eventType"] for e in application] == ["START", "COMPLETE"]  # the client's spark.stop() ends it
        app_run_id = application[0]["run"]["runId"]
        for event in events:
            if event["job"]["name"] == app:
                continue
            assert event["job"]["name"].startswith(app + "."), event["job"]["name"]
            parent = event["run"]["facets"]["parent"]
            assert parent["job"] == {"namespace": namespace, "name": app} or parent["root"]["run"]["runId"] == app_run_id


def test_two_clients_at_once_never_mix(outcome: Outcome) -> None:
    a, b = outcome.session_id(CLIENT_A), outcome.session_id(CLIENT_B)
    assert a != b
    sessions = {e["run"]["facets"].get("sparkConnectSession", {}).get("sessionId") for e in outcome.server_events}
    assert sessions == {a, b}  # every event names its session; the foreachBatch worker's session is not a third
    for app, other in ((CLIENT_A, CLIENT_B), (CLIENT_B, CLIENT_A)):
        text = json.dumps(outcome.of_session(app))
        assert other not in text, f"{app}'s events name {other}"
    b_writes = completed_writes(outcome.of_session(CLIENT_B), CLIENT_B, outcome.data_dir)
    a_writes = completed_writes(outcome.of_session(CLIENT_A), CLIENT_A, outcome.data_dir)
    assert b_writes == a_writes[:4]  # the same batch step, in its own namespace and tables


def test_foreach_batch_writes_belong_to_the_streaming_run(outcome: Outcome) -> None:
    events = outcome.of_session(CLIENT_A)
    streaming = [e for e in events if e["job"]["facets"]["jobType"]["processingType"] == "STREAMING"]
    assert [e["eventType"] for e in streaming] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    assert [e["run"]["facets"]["microBatch"]["batchId"] for e in streaming[1:3]] == [0, 1]
    run_id = streaming[0]["run"]["runId"]
    sink_writes = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and any(o["name"].endswith(f"{CLIENT_A}_stream_sink") for o in e.get("outputs", []))
    ]
    assert len(sink_writes) == 2
    for write in sink_writes:
        assert write["run"]["facets"]["parent"]["run"]["runId"] == run_id
        assert [i["name"] for i in write["inputs"]] == [str(outcome.data_dir / f"{CLIENT_A}_events")]
        lineage = write["outputs"][0]["facets"]["columnLineage"]["fields"]
        assert [(f["field"], f["transformations"][0]["description"]) for f in lineage["n10"]["inputFields"]] == [
            ("n", "(n * 10)")
        ]


def test_session_facet_names_the_connect_session(outcome: Outcome) -> None:
    for app, user in ((CLIENT_A, None), (CLIENT_B, USER_B)):
        facet = outcome.of_session(app)[0]["run"]["facets"]["sparkConnectSession"]
        assert facet["sessionId"] == outcome.session_id(app)
        assert facet.get("userId") == user
        assert facet["_schemaURL"].endswith("SparkConnectSessionRunFacet.json#/$defs/SparkConnectSessionRunFacet")


def test_a_client_under_the_emitter_is_told_where_lineage_comes_from(outcome: Outcome) -> None:
    out, err = outcome.outputs[CLIENT_B]
    assert f"done {CLIENT_B}" in out
    assert err.count(CONNECT_CLIENT_NOTICE) == 1, err[-3000:]
    assert "python -m emitter connect-server" in err
    assert not read_events(outcome.data_dir / "b.jsonl")  # the client emits nothing itself
    assert not read_events(outcome.data_dir / "a.jsonl")


def test_a_connect_run_is_stored_and_queried_like_any_other(outcome: Outcome, store: Any) -> None:
    from fastapi.testclient import TestClient

    from consumer.api import create_app

    secret = "5e1f0c2a9b7d4e36"
    token = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(store, SimpleNamespace(api_token=secret)), raise_server_exceptions=False) as client:
        assert client.post("/api/v1/lineage", json=outcome.server_events, headers=token).status_code == 201
        jobs = client.get(f"/api/v1/namespaces/{NAMESPACE_A}/jobs", params={"limit": 100}).json()["jobs"]
        assert f"{CLIENT_A}.create_data_source_table_as_select_command.default_{CLIENT_A}_ranked" in {job["name"] for job in jobs}
        origins = client.get("/api/v1/lineage-store/columns", params={"table": f"default.{CLIENT_A}_ranked", "column": "revenue"})
        assert origins.status_code == 200, origins.text
        assert f"{CLIENT_A}_orders" in origins.text and "amount" in origins.text
        write = next(e for e in outcome.of_session(CLIENT_A) if e["eventType"] == "COMPLETE" and e.get("outputs"))
        run_facets = client.get(f"/api/v1/jobs/runs/{write['run']['runId']}/facets").json()
        assert run_facets["facets"]["sparkConnectSession"]["sessionId"] == outcome.session_id(CLIENT_A)
