"""The demo's local services: an Apache Kafka broker (demo/broker.py) and the lineage consumer (`python -m consumer serve`)
on a SQLite file, both stopped when the demo ends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx

from demo.broker import free_port, start_kafka

CONSUMER_START_TIMEOUT_SECONDS = 90.0
TOPIC = "openlineage.events"
PREFERRED_API_PORT = 5000  # Marquez's port, so Marquez Web and marquez-python find us by default


@attrs.frozen
class Stack:
    bootstrap: str
    api_url: str
    store_url: str
    topic: str = TOPIC


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _api_port(requested: int | None) -> int:
    if requested:
        return requested
    return PREFERRED_API_PORT if _port_is_free(PREFERRED_API_PORT) else free_port()


def _wait_for_api(api_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + CONSUMER_START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the consumer exited early:\n{log_path.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{api_url}/api/v1/namespaces", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the consumer's API did not answer within {CONSUMER_START_TIMEOUT_SECONDS:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_stack(work_dir: Path, api_port: int | None = None) -> Iterator[Stack]:
    broker = start_kafka(work_dir / "kafka")
    port = _api_port(api_port)
    store_url = f"sqlite:///{work_dir / 'lineage.db'}"
    log_path = work_dir / "consumer.log"
    env = {
        **os.environ,
        "LINEAGE_STORE_URL": store_url,
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "LINEAGE_TOPIC": TOPIC,
        "LINEAGE_HOST": "127.0.0.1",
        "LINEAGE_PORT": str(port),
    }
    with log_path.open("wb") as log_file:
        consumer = subprocess.Popen(
            [sys.executable, "-m", "consumer", "serve"], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        api_url = f"http://127.0.0.1:{port}"
        _wait_for_api(api_url, consumer, log_path)
        yield Stack(bootstrap=broker.bootstrap, api_url=api_url, store_url=store_url)
    finally:
        _stop(consumer)
        broker.stop()
