"""The pipeline's thread (`emitter.listener.worker`) on fixture captures, with no Spark: the
listener's call returns before the events are built, the listener's wrapper dedupe stays exact
for the next callback, events come out in arrival order (streaming callbacks included), a failing
capture does not end the thread, a full backlog waits instead of dropping, and stop drains."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from attrs import evolve
from openlineage.client.serde import Serde

from emitter import pipeline
from emitter.capture import MicroBatchTag, RelationInfo, StreamEnded, TableRef
from emitter.config import EmitterConfig
from emitter.dedupe import WrapperDedupe
from emitter.listener.worker import PipelineWorker
from emitter.pipeline import new_context
from tests.emitter.test_pipeline import END, QUERY_ID, RUN_ID, SESSION, _aggregate_capture, _started, _wrapper
from tests.support.spec import assert_valid_event

WAIT_S = 10


class GatedClient:
    """A transport that holds every emit until the test opens the gate."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.emitting = threading.Event()
        self.threads: set[str] = set()

    def emit(self, event: Any) -> None:
        self.emitting.set()
        assert self.gate.wait(WAIT_S)
        self.threads.add(threading.current_thread().name)
        self.events.append(Serde.to_dict(event))


class ListenerSide:
    """What the batch listener does with a capture: its dedupe decides, the worker gets the rest."""

    def __init__(self, worker: PipelineWorker) -> None:
        self.dedupe = WrapperDedupe()
        self.worker = worker

    def handle(self, capture: Any) -> None:
        self.worker.handle_actions(self.dedupe.accept(capture))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.worker, name)


def _worker(capacity: int = 64) -> tuple[ListenerSide, GatedClient]:
    client = GatedClient()
    worker = PipelineWorker(new_context(EmitterConfig(namespace="fixtures"), SESSION), client, capacity)
    return ListenerSide(worker), client


def test_the_listeners_call_returns_before_the_events_are_built() -> None:
    worker, client = _worker()
    worker.handle(_aggregate_capture())
    assert client.emitting.wait(WAIT_S)
    assert client.events == [], "the events wait on the pipeline's thread, not the caller's"
    client.gate.set()
    assert worker.settle(WAIT_S)
    assert [e["eventType"] for e in client.events] == ["START", "COMPLETE"]
    assert client.threads == {"openlineage-pipeline"}
    for event in client.events:
        assert_valid_event(event)
    assert worker.stop(WAIT_S)


def test_a_wrapper_is_merged_while_the_nested_write_is_still_held() -> None:
    worker, client = _worker()
    worker.handle(_aggregate_capture())  # keeps the thread busy at the gate
    nested = evolve(_aggregate_capture(), func_name="file source write", query_execution_id=9)
    worker.handle(nested)
    target = RelationInfo("CreateDataSourceTableAsSelectCommand", table=TableRef("out"), table_location="file:/out")
    assert worker.dedupe.merges("CreateDataSourceTableAsSelectCommand", 8, target), "decided at once, not when built"
    worker.handle(_wrapper(8, target))
    client.gate.set()
    assert worker.stop(WAIT_S)
    names = [e["job"]["name"] for e in client.events if e["eventType"] == "COMPLETE"]
    assert names == [
        "fixture_app.insert_into_hadoop_fs_relation_command.out",
        "fixture_app.create_data_source_table_as_select_command.out",
    ], "the held write comes out once, merged into its wrapper's run"


def test_events_come_out_in_arrival_order_streaming_included() -> None:
    worker, client = _worker()
    worker.handle_stream(_started())
    worker.handle(_aggregate_capture(MicroBatchTag(QUERY_ID, RUN_ID, 0)))
    worker.handle_stream(StreamEnded(QUERY_ID, RUN_ID, END, None, None))
    client.gate.set()
    assert worker.stop(WAIT_S)
    assert [(e["eventType"], e["job"]["name"]) for e in client.events] == [
        ("START", "fixture_app.streaming.sink"),
        ("START", client.events[1]["job"]["name"]),
        ("COMPLETE", client.events[1]["job"]["name"]),
        ("COMPLETE", "fixture_app.streaming.sink"),
    ]
    parent = client.events[2]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == RUN_ID, "the micro-batch's run was known when the write was built"


def test_a_capture_that_fails_to_build_does_not_end_the_thread(caplog: pytest.LogCaptureFixture) -> None:
    worker, client = _worker()
    client.gate.set()
    broken = evolve(_aggregate_capture(), end_time="not a datetime")  # type: ignore[arg-type]
    worker.handle(broken)
    worker.handle(_aggregate_capture())
    assert worker.stop(WAIT_S)
    assert [e["eventType"] for e in client.events] == ["START", "COMPLETE"]
    assert "not built" in caplog.text


def test_a_full_backlog_makes_the_listener_wait_and_loses_nothing() -> None:
    worker, client = _worker(capacity=1)
    done = threading.Event()

    def listener_thread() -> None:
        for _ in range(3):  # one being built, one queued, the third must wait for room
            worker.handle(_aggregate_capture())
        done.set()

    threading.Thread(target=listener_thread, daemon=True).start()
    assert client.emitting.wait(WAIT_S)
    assert not done.wait(0.5), "the listener waits while the backlog is full"
    client.gate.set()
    assert done.wait(WAIT_S)
    assert worker.stop(WAIT_S)
    assert [e["eventType"] for e in client.events] == ["START", "COMPLETE"] * 3


def test_settle_times_out_while_a_build_is_held_and_stop_drains_afterwards() -> None:
    worker, client = _worker()
    worker.handle(_aggregate_capture())
    assert client.emitting.wait(WAIT_S)
    assert not worker.settle(0.2)
    client.gate.set()
    assert worker.stop(WAIT_S)
    worker.handle(_aggregate_capture())  # after stop: built on the caller's thread, not lost
    assert len(client.events) == 4


class CollectorWatchingClient:
    """A transport that notes whether Python's cyclic garbage collector was on while each event was emitted."""

    def __init__(self) -> None:
        self.collector_on: list[bool] = []

    def emit(self, event: Any) -> None:
        self.collector_on.append(gc.isenabled())


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_while_events_are_built_not_while_they_are_emitted(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build's objects, promoted by collections during it, set off full collections of the whole
    process: the pipeline thread pauses the collector while it builds (never while the transport
    may wait on a network), and leaves it as it found it."""
    collector_on_while_building: list[bool] = []
    build = pipeline.action_events

    def watched_build(capture: Any, context: Any) -> Any:
        collector_on_while_building.append(gc.isenabled())
        return build(capture, context)

    monkeypatch.setattr(pipeline, "action_events", watched_build)
    client = CollectorWatchingClient()
    worker = PipelineWorker(new_context(EmitterConfig(namespace="fixtures"), SESSION), client)
    was_enabled = gc.isenabled()
    if not enabled:
        gc.disable()
    try:
        worker.handle_actions([_aggregate_capture()])
        assert worker.stop(WAIT_S)
        assert collector_on_while_building == [False]
        assert client.collector_on == [enabled, enabled]
        assert gc.isenabled() is enabled
    finally:
        if was_enabled:
            gc.enable()
