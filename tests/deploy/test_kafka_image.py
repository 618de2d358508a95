"""The local Kafka image's healthcheck (deploy/local/kafka-image/ready.sh) against the tests' Apache
Kafka: healthy only when the broker answers a Kafka request, not when a port merely accepts
connections (as the broker's does before it serves) or is closed."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import free_port

READY = Path(__file__).resolve().parents[2] / "deploy" / "local" / "kafka-image" / "ready.sh"


def _ready(address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(READY), address], capture_output=True, text=True, timeout=30)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


def test_a_serving_broker_is_ready(kafka_bootstrap: str) -> None:
    result = _ready(kafka_bootstrap)
    assert result.returncode == 0, result.stderr


def test_a_port_that_accepts_but_does_not_answer_is_not_ready(silent_port: int) -> None:
    started = time.monotonic()
    assert _ready(f"127.0.0.1:{silent_port}").returncode != 0
    assert time.monotonic() - started < 15, "the probe gives up on its own, within the healthcheck's timeout"


def test_a_closed_port_is_not_ready() -> None:
    assert _ready(f"127.0.0.1:{free_port()}").returncode != 0
