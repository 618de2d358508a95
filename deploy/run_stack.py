"""`./run stack`: the local Docker Compose stack, started and checked end to end.

Starts Tansu, PostgreSQL, the consumer and Marquez Web from the images deploy/local-images.sh
built (docker-compose.yml + deploy/compose.local.yml, host networking, loopback ports), runs the
demo pipeline in the spark-job container publishing to the broker container, reads every event
back from the topic, checks through the consumer's HTTP API that it stored each one (and that
Marquez Web answers with the API behind it), then stops and removes the containers and volumes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "lineage-stack"
COMPOSE = ["docker", "compose", "-p", PROJECT, "-f", "docker-compose.yml", "-f", "deploy/compose.local.yml"]
BROKER = "127.0.0.1:59092"
API = "http://127.0.0.1:55000"
WEB = "http://127.0.0.1:53000"
PORTS = (59092, 55432, 55000, 53000)
TOPIC = "openlineage.events"
API_START_TIMEOUT_SECONDS = 180.0
STORE_TIMEOUT_SECONDS = 180.0
TOPIC_IDLE_SECONDS = 8.0


def compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*COMPOSE, *args], cwd=ROOT, check=check)


def busy_ports() -> list[int]:
    busy = []
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                busy.append(port)
    return busy


@contextmanager
def running_services() -> Iterator[None]:
    try:
        compose("up", "-d", "--no-build", "--wait", "kafka", "postgres")
        compose("up", "-d", "--no-build", "consumer", "web")
        yield
    except BaseException:
        compose("logs", "--no-color", "--tail", "60", check=False)
        raise
    finally:
        compose("down", "--volumes", "--remove-orphans", "--timeout", "20", check=False)


def exited(service: str) -> bool:
    result = subprocess.run([*COMPOSE, "ps", "--status", "exited", "-q", service], cwd=ROOT, capture_output=True, text=True)
    return bool(result.stdout.strip())


def wait_for(url: str, timeout: float, service: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=3).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if exited(service):
            raise RuntimeError(f"the {service} container exited (its log is above)")
        time.sleep(1)
    raise RuntimeError(f"{url} did not answer 200 within {timeout:.0f} s")


def event_identity(payload: dict) -> tuple[str, str, str]:
    return (payload["run"]["runId"], payload.get("eventType") or "", payload["eventTime"])


def events_on_topic() -> set[tuple[str, str, str]]:
    """Every event the job published, read back with a group of its own (Tansu's end offsets
    are not reliable, so reading stops once the topic has been idle for a while)."""
    sys.path.insert(0, str(ROOT))
    from consumer.kafka_io import EventSource

    source = EventSource(BROKER, TOPIC, f"stack-check-{uuid.uuid4().hex[:8]}", session_timeout_ms=6000, max_poll_interval_ms=6000)
    seen: set[tuple[str, str, str]] = set()
    last_new = time.monotonic()
    try:
        while time.monotonic() - last_new < TOPIC_IDLE_SECONDS or not seen:
            if time.monotonic() - last_new > STORE_TIMEOUT_SECONDS:
                raise RuntimeError(f"no events on {TOPIC} within {STORE_TIMEOUT_SECONDS:.0f} s")
            for record in source.poll(1000):
                if record.value:
                    seen.add(event_identity(json.loads(record.value)))
                    last_new = time.monotonic()
    finally:
        source.close()
    return seen


def stored_events(expected: int) -> set[tuple[str, str, str]]:
    deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
    while True:
        total = httpx.get(f"{API}/api/v1/events/lineage", params={"limit": 1}, timeout=10).json()["totalCount"]
        if total >= expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    page = httpx.get(f"{API}/api/v1/events/lineage", params={"limit": 10_000}, timeout=30).json()
    return {event_identity(event) for event in page["events"]}


def check_web() -> None:
    wait_for(f"{WEB}/", 60, "web")
    namespaces = httpx.get(f"{WEB}/api/v1/namespaces", timeout=10)
    namespaces.raise_for_status()
    names = [n["name"] for n in namespaces.json()["namespaces"]]
    print(f"stack: Marquez Web answers at {WEB} with the API behind it (namespaces: {', '.join(names)})")


def main() -> int:
    if busy := busy_ports():
        print(f"stack: loopback ports {busy} are taken; stop what uses them first", file=sys.stderr)
        return 2
    started = time.monotonic()
    with running_services():
        wait_for(f"{API}/api/v1/namespaces", API_START_TIMEOUT_SECONDS, "consumer")
        print(f"stack: services up in {time.monotonic() - started:.0f} s; running the demo pipeline in spark-job")
        job_started = time.monotonic()
        compose("run", "--rm", "--no-deps", "spark-job")
        print(f"stack: demo pipeline finished in {time.monotonic() - job_started:.0f} s")
        published = events_on_topic()
        stored = stored_events(len(published))
        missing = published - stored
        print(f"stack: {len(published)} events published, {len(stored & published)} of them stored by the consumer container")
        if missing:
            print(f"stack: FAILED: {len(missing)} events not stored, e.g. {sorted(missing)[:3]}", file=sys.stderr)
            return 1
        check_web()
    print(f"stack: passed in {time.monotonic() - started:.0f} s (containers and volumes removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
