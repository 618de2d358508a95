"""openlineage-python's file, HTTP and console transports as the emitter's client builds them:
each writes the event's JSON through `records.serialize`, the same document `Serde.to_json`
gives, with openlineage-python's own file handling and HTTP request."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde

from emitter import transports
from emitter.transports import standard
from tests.transports.test_records import _fixture_write_events


def _client(transport: dict[str, Any]) -> OpenLineageClient:
    return OpenLineageClient(config={"transport": transport}, factory=transports.factory())


def _documents(events: list[Any]) -> list[Any]:
    return [json.loads(Serde.to_json(event)) for event in events]


def test_the_file_transport_writes_each_event_as_serde_would(tmp_path: Path) -> None:
    events = _fixture_write_events()
    client = _client({"type": "file", "log_file_path": str(tmp_path / "events.jsonl"), "append": True})
    assert type(client.transport) is standard.FileTransport
    for event in events:
        client.emit(event)
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == _documents(events)


class _Recorder(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(201)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_receiver() -> Any:
    _Recorder.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.bodies
    finally:
        server.shutdown()
        server.server_close()


def test_the_http_transport_posts_each_event_as_serde_would(http_receiver: Any) -> None:
    url, bodies = http_receiver
    events = _fixture_write_events()
    client = _client({"type": "http", "url": url})
    assert type(client.transport) is standard.HttpTransport
    for event in events:
        client.emit(event)
    assert [json.loads(body) for body in bodies] == _documents(events)


def test_the_console_transport_logs_each_event_as_serde_would(caplog: pytest.LogCaptureFixture) -> None:
    [event, *_] = _fixture_write_events()
    client = _client({"type": "console"})
    assert type(client.transport) is standard.ConsoleTransport
    with caplog.at_level(logging.INFO, logger="openlineage.client.transport.console"):
        client.emit(event)
    assert [json.loads(record.getMessage()) for record in caplog.records] == _documents([event])
