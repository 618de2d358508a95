"""deploy/run_stack.py (`./run stack`) without Docker: the ports it picks (never one already
listening on the host), its promise to remove the stack whatever happens inside, and how it reads
the published events back (against the tests' Apache Kafka)."""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.broker import unique_topic

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_stack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_stack", ROOT / "deploy" / "run_stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_stack"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A socket listening on a loopback port, as a host service would."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


def _port(server: socket.socket) -> int:
    return int(server.getsockname()[1])


def test_free_defaults_are_kept(run_stack: ModuleType) -> None:
    assert run_stack.choose_ports({}, taken=lambda port: False) == run_stack.DEFAULT_PORTS


def test_a_port_in_use_is_seen_as_taken(run_stack: ModuleType, listening: socket.socket) -> None:
    port = _port(listening)
    assert run_stack.port_taken(port)
    listening.close()
    assert not run_stack.port_taken(port)


def test_taken_defaults_are_replaced_by_free_distinct_ports(
    run_stack: ModuleType, listening: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = {_port(listening), 5432}  # and the host's own PostgreSQL port, taken or not
    defaults = {**run_stack.DEFAULT_PORTS, "STACK_POSTGRES_PORT": 5432, "STACK_BROKER_PORT": _port(listening)}
    monkeypatch.setattr(run_stack, "DEFAULT_PORTS", defaults)
    chosen = run_stack.choose_ports({}, taken=lambda port: port in busy or run_stack.port_taken(port))
    assert set(chosen) == set(defaults)
    assert not busy & set(chosen.values())
    assert len(set(chosen.values())) == len(chosen)
    assert not any(run_stack.port_taken(port) for port in chosen.values())


def test_ports_from_the_environment_win_and_must_be_free(run_stack: ModuleType, listening: socket.socket) -> None:
    chosen = run_stack.choose_ports({"STACK_API_PORT": "41555"}, taken=lambda port: False)
    assert chosen["STACK_API_PORT"] == 41555
    with pytest.raises(run_stack.StackError, match=f"STACK_API_PORT={_port(listening)}"):
        run_stack.choose_ports({"STACK_API_PORT": str(_port(listening))})
    with pytest.raises(run_stack.StackError, match="STACK_WEB_PORT=41555"):
        run_stack.choose_ports({"STACK_API_PORT": "41555", "STACK_WEB_PORT": "41555"}, taken=lambda port: False)


class FakeStack:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def remove(self) -> None:
        self.calls.append("remove")

    def show_logs(self) -> None:
        self.calls.append("logs")


def test_the_stack_is_removed_before_and_after_also_when_a_step_fails(run_stack: ModuleType) -> None:
    stack = FakeStack()
    with run_stack.running(stack):
        stack.calls.append("checks")
    assert stack.calls == ["remove", "checks", "remove"]

    failing = FakeStack()
    with pytest.raises(run_stack.StackError), run_stack.running(failing):
        raise run_stack.StackError("the consumer did not get ready")
    assert failing.calls == ["remove", "logs", "remove"]


def test_a_termination_signal_unwinds_through_the_cleanup(run_stack: ModuleType) -> None:
    stack = FakeStack()
    # a shell starts background jobs with SIGINT ignored: begin from Python's own handler
    previous_interrupt = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGTERM, run_stack._stop_on_signal)
    try:
        with pytest.raises(SystemExit) as stopped, run_stack.running(stack):
            signal.raise_signal(signal.SIGTERM)
        interrupt_after_cleanup = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_interrupt)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert stack.calls == ["remove", "logs", "remove"]
    assert interrupt_after_cleanup is signal.default_int_handler, "signals are ignored only during the cleanup"


def test_the_events_on_the_topic_are_read_to_its_end_offsets(
    run_stack: ModuleType, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the job published, read back without a consumer group: every event of every
    partition, each once, and an error for a topic the job left empty."""
    from kafka import KafkaProducer

    topic = unique_topic("stack-check", kafka_bootstrap, partitions=2)
    monkeypatch.setattr(run_stack, "TOPIC", topic)
    with pytest.raises(run_stack.StackError, match="no events"):
        run_stack.events_on_topic(kafka_bootstrap)

    events = [
        {"run": {"runId": f"run-{n}"}, "eventType": "COMPLETE", "eventTime": f"2026-01-0{n}T00:00:00Z"} for n in range(1, 6)
    ]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        for n, event in enumerate([*events, events[0]]):  # a redelivered event counts once
            producer.send(topic, json.dumps(event).encode(), partition=n % 2)
        producer.send(topic, None, key=b"tombstone", partition=0)  # a record without a value is no event
        producer.flush(30)
    finally:
        producer.close()
    assert run_stack.events_on_topic(kafka_bootstrap) == {run_stack.event_identity(event) for event in events}
