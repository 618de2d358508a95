"""`./run stack`: the local Docker Compose stack, started and checked end to end.

Starts Apache Kafka, PostgreSQL, the consumer and Marquez Web from the images
deploy/local-images.sh built (docker-compose.yml + deploy/compose.local.yml, host networking,
loopback ports), waits until the consumer is ready (store reachable, ingestion running, the events
topic's partition assigned), runs the demo pipeline in the spark-job container publishing to the
broker container, reads every event back from the topic (to its end offsets), checks through the
consumer's HTTP API that it stored
each one (the events route, /metrics and /readyz) and that Marquez Web answers with the API
behind it, then stops and removes the containers and volumes, also when a step fails or the
run is interrupted.

Ports: 59092 (broker), 59093 (its KRaft controller), 55432 (PostgreSQL), 55000 (API) and 53000
(Marquez Web) when free on 127.0.0.1, else free ones; STACK_BROKER_PORT, STACK_CONTROLLER_PORT,
STACK_POSTGRES_PORT, STACK_API_PORT and STACK_WEB_PORT choose them (a port given that way must be
free).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from demo.broker import free_port

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "lineage-stack"
COMPOSE_FILES = ("-f", "docker-compose.yml", "-f", "deploy/compose.local.yml")
TOPIC = "openlineage.events"
DEFAULT_PORTS: dict[str, int] = {
    "STACK_BROKER_PORT": 59092,
    "STACK_CONTROLLER_PORT": 59093,
    "STACK_POSTGRES_PORT": 55432,
    "STACK_API_PORT": 55000,
    "STACK_WEB_PORT": 53000,
}

SERVICES_TIMEOUT_SECONDS = 180  # broker and PostgreSQL healthy
READY_TIMEOUT_SECONDS = 180.0  # the consumer's /readyz answers 200
JOB_TIMEOUT_SECONDS = 1800  # the demo pipeline's Spark run (about 80 s on 2 cores)
STORE_TIMEOUT_SECONDS = 180.0  # every published event read back and stored
COMPOSE_TIMEOUT_SECONDS = 300  # any other docker / docker compose command
STOP_TIMEOUT_SECONDS = 20  # per container, before it is killed


class StackError(RuntimeError):
    """A step of the check failed; the message says which and why."""


# --- ports ---


def port_taken(port: int) -> bool:
    """Something listens on 127.0.0.1:`port` (or on every address), so a service cannot bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def choose_ports(environ: Mapping[str, str], taken: Callable[[int], bool] = port_taken) -> dict[str, int]:
    """The port of each service: the one the environment names (which must be free), else the
    default when free, else a free one; never the same port twice."""
    chosen: dict[str, int] = {}
    for name, default in DEFAULT_PORTS.items():
        if environ.get(name):
            port = int(environ[name])
            if taken(port) or port in chosen.values():
                raise StackError(f"{name}={port}: that port is taken on 127.0.0.1; choose another or unset {name}")
        else:
            port = default
            while taken(port) or port in chosen.values():
                port = free_port()
        chosen[name] = port
    return chosen


# --- docker compose ---


class Stack:
    """The compose project on the chosen ports."""

    def __init__(self, ports: Mapping[str, int]) -> None:
        self.ports = dict(ports)
        self.env = {**os.environ, **{name: str(port) for name, port in self.ports.items()}}
        # the API's write token (docker-compose.yml requires one): a fresh random one unless given
        self.env["LINEAGE_API_TOKEN"] = os.environ.get("LINEAGE_API_TOKEN") or secrets.token_hex(32)
        self.broker = f"127.0.0.1:{self.ports['STACK_BROKER_PORT']}"
        self.api = f"http://127.0.0.1:{self.ports['STACK_API_PORT']}"
        self.web = f"http://127.0.0.1:{self.ports['STACK_WEB_PORT']}"

    def compose(self, *args: str, timeout: float = COMPOSE_TIMEOUT_SECONDS, check: bool = True) -> str:
        """Run `docker compose ARGS`, its output shown as it comes; a StackError when it fails or hangs."""
        return self._run(
            ["docker", "compose", "-p", PROJECT, *COMPOSE_FILES, *args], timeout, check, what=f"docker compose {args[0]}"
        )

    def _run(
        self, command: list[str], timeout: float, check: bool, capture: bool = False, detach: bool = False, what: str = ""
    ) -> str:
        shown = what or " ".join(command[:3])
        try:
            result = subprocess.run(  # noqa: S603 - the project's own programs, no shell
                command,
                cwd=ROOT,
                env=self.env,
                timeout=timeout,
                text=True,
                stdout=subprocess.PIPE if capture else None,
                start_new_session=detach,  # cleanup: a second Ctrl-C must not kill it half way
            )
        except subprocess.TimeoutExpired:
            raise StackError(f"`{shown}` did not finish within {timeout:.0f} s") from None
        if check and result.returncode != 0:
            raise StackError(f"`{shown}` failed with exit status {result.returncode} (its output is above)")
        return result.stdout or ""

    def exited(self, service: str) -> bool:
        command = ["docker", "compose", "-p", PROJECT, *COMPOSE_FILES, "ps", "--status", "exited", "-q", service]
        return bool(self._run(command, 60, check=False, capture=True).strip())

    def show_logs(self) -> None:
        try:
            self.compose("logs", "--no-color", "--tail", "60", timeout=60, check=False)
        except StackError as error:
            print(f"stack: {error}", file=sys.stderr)

    def remove(self) -> None:
        """Stop and remove every container and volume of the project (also a leftover of an
        interrupted earlier run, and `run` containers), whatever state they are in."""
        label = f"label=com.docker.compose.project={PROJECT}"
        down = ["docker", "compose", "-p", PROJECT, *COMPOSE_FILES, "--profile", "jobs", "down", "--volumes", "--remove-orphans"]
        try:
            self._run([*down, "--timeout", str(STOP_TIMEOUT_SECONDS)], COMPOSE_TIMEOUT_SECONDS, check=False, detach=True)
        except StackError as error:
            print(f"stack: {error}", file=sys.stderr)
        for kind, remove in (("ps", ["docker", "rm", "-f", "-v"]), ("volume", ["docker", "volume", "rm", "-f"])):
            listing = ["docker", kind, "ls" if kind == "volume" else "-a", "-q", "--filter", label]
            try:
                leftovers = self._run(listing, 60, check=False, capture=True, detach=True).split()
                if leftovers:
                    self._run(remove + leftovers, COMPOSE_TIMEOUT_SECONDS, check=False, detach=True)
            except StackError as error:
                print(f"stack: {error}", file=sys.stderr)


@contextmanager
def running(stack: Stack) -> Iterator[None]:
    """Whatever happens inside, the project's containers and volumes are gone afterwards."""
    stack.remove()
    try:
        yield
    except BaseException:
        stack.show_logs()
        raise
    finally:
        previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            stack.remove()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _stop_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through `running`, which removes the stack


# --- checks ---


def _get(url: str, **params: Any) -> httpx.Response:
    try:
        return httpx.get(url, params=params, timeout=30)
    except httpx.HTTPError as error:
        raise StackError(f"GET {url}: {type(error).__name__}: {error}") from None


def create_topic(bootstrap: str) -> None:
    """The events topic, before the consumer starts: it is then assigned its partition (and
    ready) before the first event arrives."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
    except KafkaError as error:
        raise StackError(f"creating {TOPIC} on the broker container at {bootstrap}: {error!r}") from None


def wait_ready(stack: Stack) -> dict[str, Any]:
    """/readyz answering 200 with the ingestion consuming (partitions assigned); an error naming
    the failed checks when it does not in time."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{stack.api}/readyz", timeout=10)
            if response.status_code == 200 and response.json().get("consuming"):
                return dict(response.json())
            last = f"{response.status_code} {response.text}"
        except httpx.HTTPError as error:
            last = f"{type(error).__name__}: {error}"
        if stack.exited("consumer"):
            raise StackError("the consumer container exited (its log is above)")
        time.sleep(1)
    raise StackError(f"{stack.api}/readyz not 200 within {READY_TIMEOUT_SECONDS:.0f} s; last answer: {last}")


def wait_for_web(stack: Stack) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{stack.web}/", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if stack.exited("web") or time.monotonic() > deadline:
            raise StackError(f"Marquez Web at {stack.web} does not answer")
        time.sleep(1)


def event_identity(payload: Mapping[str, Any]) -> tuple[str, str, str]:
    return (payload["run"]["runId"], payload.get("eventType") or "", payload["eventTime"])


def events_on_topic(bootstrap: str) -> set[tuple[str, str, str]]:
    """Every event the job published: the topic read from its start to the end offsets it has
    once the job is done (a consumer of no group, so the consumer's own group is left alone)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    try:
        reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    except KafkaError as error:
        raise StackError(f"reading {TOPIC} from the broker container at {bootstrap}: {error!r}") from None
    seen: set[tuple[str, str, str]] = set()
    try:
        partitions = [TopicPartition(TOPIC, partition) for partition in reader.partitions_for_topic(TOPIC)]
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        end = reader.end_offsets(partitions)
        deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
        while any(reader.position(partition) < end[partition] for partition in partitions):
            if time.monotonic() > deadline:
                raise StackError(f"{TOPIC} not read to its end offsets {end} within {STORE_TIMEOUT_SECONDS:.0f} s")
            for records in reader.poll(1000).values():
                seen.update(event_identity(json.loads(record.value)) for record in records if record.value)
    finally:
        reader.close()
    if not seen:
        raise StackError(f"the demo pipeline published no events to {TOPIC}")
    return seen


def stored_events(stack: Stack, expected: int) -> set[tuple[str, str, str]]:
    """The events the consumer stored, once it counts `expected` (or the time is up)."""
    deadline = time.monotonic() + STORE_TIMEOUT_SECONDS
    while _get(f"{stack.api}/api/v1/events/lineage", limit=1).json()["totalCount"] < expected:
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    page = _get(f"{stack.api}/api/v1/events/lineage", limit=10_000).json()
    return {event_identity(event) for event in page["events"]}


def metric_samples(stack: Stack) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """/metrics as {(sample name, labels): value}."""
    text = _get(f"{stack.api}/metrics").text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def check_metrics(stack: Stack, stored: int) -> str:
    """/metrics agrees with what was stored: the stored counter, no dead letters, the broker
    reachable and the lag of every partition back to 0. A one-line summary."""
    deadline = time.monotonic() + 30
    while True:
        samples = metric_samples(stack)
        lags = {dict(labels)["partition"]: value for (name, labels), value in samples.items() if name == "lineage_consumer_lag"}
        if lags and not any(lags.values()) or time.monotonic() > deadline:
            break
        time.sleep(1)

    def value(name: str) -> float:
        return sum(v for (sample, _), v in samples.items() if sample == name)

    problems = []
    if value("lineage_events_stored_total") != stored:
        problems.append(f"lineage_events_stored_total is {value('lineage_events_stored_total'):.0f}, not {stored}")
    if value("lineage_events_dead_lettered_total"):
        problems.append(f"{value('lineage_events_dead_lettered_total'):.0f} records dead-lettered")
    if value("lineage_broker_reachable") != 1:
        problems.append("lineage_broker_reachable is not 1")
    if not lags or any(lags.values()):
        problems.append(f"consumer lag by partition is {lags or 'missing'}, not 0")
    if problems:
        raise StackError("/metrics: " + "; ".join(problems))
    return (
        f"lineage_events_stored_total {value('lineage_events_stored_total'):.0f}, "
        f"{value('lineage_store_transaction_seconds_count'):.0f} store transactions, "
        f"lag 0 on partition(s) {', '.join(sorted(lags))}, nothing dead-lettered"
    )


def check_web(stack: Stack) -> str:
    wait_for_web(stack)
    namespaces = _get(f"{stack.web}/api/v1/namespaces")
    if namespaces.status_code != 200:
        raise StackError(f"Marquez Web's /api/v1/namespaces answered {namespaces.status_code}")
    return ", ".join(namespace["name"] for namespace in namespaces.json()["namespaces"])


def check(stack: Stack) -> int:
    started = time.monotonic()
    stack.compose(
        "up", "-d", "--no-build", "--wait", "--wait-timeout", str(SERVICES_TIMEOUT_SECONDS), "kafka", "postgres",
        timeout=SERVICES_TIMEOUT_SECONDS + 60,
    )  # fmt: skip
    create_topic(stack.broker)
    stack.compose("up", "-d", "--no-build", "consumer", "web")
    readiness = wait_ready(stack)
    print(f"stack: services up and the consumer ready in {time.monotonic() - started:.0f} s ({json.dumps(readiness)})")

    print("stack: running the demo pipeline in the spark-job container")
    job_started = time.monotonic()
    stack.compose("run", "--rm", "--no-deps", "spark-job", timeout=JOB_TIMEOUT_SECONDS)
    print(f"stack: demo pipeline finished in {time.monotonic() - job_started:.0f} s")

    published = events_on_topic(stack.broker)
    stored = stored_events(stack, len(published))
    missing = published - stored
    print(
        f"stack: checked {len(published)} events published to {TOPIC}: {len(stored & published)} of them stored by the consumer"
    )
    if missing:
        raise StackError(f"{len(missing)} events not stored, e.g. {sorted(missing)[:3]}")
    print(f"stack: /metrics: {check_metrics(stack, len(stored))}")
    readiness_after = _get(f"{stack.api}/readyz")
    if readiness_after.status_code != 200:
        raise StackError(f"/readyz answers {readiness_after.status_code} after ingesting: {readiness_after.text}")
    print(f"stack: Marquez Web answers at {stack.web} with the API behind it (namespaces: {check_web(stack)})")
    return len(stored)


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on_signal)
    started = time.monotonic()
    try:
        ports = choose_ports(os.environ)
        print("stack: ports " + ", ".join(f"{name}={port}" for name, port in ports.items()))
        stack = Stack(ports)
        with running(stack):
            stored = check(stack)
    except StackError as error:
        print(f"stack: FAILED: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit) as stopped:
        print("stack: interrupted (containers and volumes removed)", file=sys.stderr)
        return stopped.code if isinstance(stopped, SystemExit) and isinstance(stopped.code, int) else 130
    print(f"stack: passed in {time.monotonic() - started:.0f} s: all {stored} events stored (containers and volumes removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
