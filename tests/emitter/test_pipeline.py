"""The attachment's stages on captures built from fixture data, with no Spark: the listener's
wrapper dedupe, the pure event building (`emitter.pipeline`) and the pipeline thread's emitting
(`emitter.listener.worker`): batch actions with their snapshots, streaming runs, foreachBatch
parents, closing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from attrs import evolve
from openlineage.client.serde import Serde

from emitter.capture import (
    Capture,
    Endpoint,
    MicroBatchTag,
    RelationInfo,
    SchemaField,
    SessionInfo,
    SourceProgress,
    StreamEnded,
    StreamProgress,
    StreamStarted,
    TableRef,
    WriteInfo,
)
from emitter.config import EmitterConfig
from emitter.dedupe import WrapperDedupe
from emitter.listener.worker import PipelineWorker
from emitter.pipeline import action_events, new_context
from emitter.plan import parse_plan
from emitter.snapshots import MicroBatch, Snapshot
from tests.support.paths import PROJECT_ROOT
from tests.support.spec import assert_valid_event

FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "plans"
SESSION = SessionInfo(app_name="Fixture App", app_id="local-1", spark_version="4.0.0", warehouse_dir="file:/wh")
END = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
QUERY_ID = "11111111-1111-4111-8111-111111111111"
RUN_ID = "22222222-2222-4222-8222-222222222222"


class CollectingClient:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(Serde.to_dict(event))


class Stages:
    """An attachment's stages without Spark, called on the test's thread: the batch listener's
    dedupe, then the pipeline thread's building and emitting (`build_actions` / `build_stream`
    are what its thread runs for each queued item)."""

    def __init__(self, client: Any, session: SessionInfo = SESSION, **config: Any) -> None:
        settings = EmitterConfig(**{"namespace": "fixtures", **config})
        self.context = new_context(settings, session)
        self.dedupe = WrapperDedupe(emit_reads=settings.emit_reads)
        self.worker = PipelineWorker(self.context, client)
        self.app_run_id = self.context.app_run_id

    def handle(self, capture: Capture) -> list[Any]:
        return self.worker.build_actions(self.dedupe.accept(capture))

    # a batch listener's sink that builds at once, on the caller's thread
    @property
    def closed(self) -> bool:
        return self.worker.closed

    def handle_actions(self, actions: list[Capture]) -> None:
        self.worker.build_actions(actions)

    def handle_stream(self, capture: Any) -> list[Any]:
        return self.worker.build_stream(capture)

    def complete_application(self) -> None:
        """What the attachment's close does once the listeners are gone."""
        self.worker.build_actions(self.dedupe.drain())
        self.worker.stop(10)
        self.worker.complete_application()


def _pipeline(**config: Any) -> tuple[Stages, CollectingClient]:
    client = CollectingClient()
    return Stages(client, **config), client


def _aggregate_capture(micro_batch: MicroBatchTag | None = None) -> Capture:
    """The `aggregate` fixture's plan (a read of default.customers) written to /out."""
    case = json.loads((FIXTURES / "aggregate.json").read_text())
    leaf = next(node for node in parse_plan(case["plan"]).walk() if not node.children)
    customers = RelationInfo(
        node_class="LogicalRelation",
        paths=("file:/wh/customers",),
        format="parquet",
        table=TableRef("customers", "default"),
        table_location="file:/wh/customers",
        schema=tuple(SchemaField(attribute.name, "string") for attribute in leaf.output),
    )
    target = RelationInfo(node_class="InsertIntoHadoopFsRelationCommand", paths=("file:/out",), format="parquet")
    return Capture(
        func_name="command",
        query_execution_id=7,
        end_time=END,
        duration_ns=1_000_000_000,
        plan_json=json.dumps(case["plan"]),
        root_class="Aggregate",
        leaves={leaf.output[0].expr_id: customers},
        write=WriteInfo("InsertIntoHadoopFsRelationCommand", target, "Overwrite", tuple(case["columns"]), {"numOutputRows": 3}),
        input_snapshots={leaf.output[0].expr_id: Snapshot("in-1", "content")},
        output_snapshot=Snapshot("out-1", "content", partitions=({"dt": "2026-01-01"},)),
        micro_batch=micro_batch,
    )


def test_a_batch_capture_becomes_start_and_complete_with_lineage_and_snapshots() -> None:
    pipeline, client = _pipeline()
    built = pipeline.handle(_aggregate_capture())
    assert [event.eventType.value for event in built] == ["START", "COMPLETE"]
    start, complete = client.events
    for event in client.events:
        assert_valid_event(event)
    assert start["eventTime"] == (END - timedelta(seconds=1)).isoformat()
    [source] = complete["inputs"]
    assert (source["namespace"], source["name"]) == ("file", "/wh/customers")
    assert source["facets"]["snapshot"]["snapshotId"] == source["facets"]["version"]["datasetVersion"] == "in-1"
    [output] = complete["outputs"]
    assert output["facets"]["snapshot"] == {
        "_producer": output["facets"]["snapshot"]["_producer"],
        "_schemaURL": "https://raw.githubusercontent.com/spark-lineage/spark-lineage/main/schemas/1-0-0/SnapshotDatasetFacet.json#/$defs/SnapshotDatasetFacet",
        "snapshotId": "out-1",
        "kind": "content",
        "partitions": [{"dt": "2026-01-01"}],
    }
    lineage = output["facets"]["columnLineage"]["fields"]
    assert [(f["name"], f["field"]) for f in lineage["total_age"]["inputFields"]] == [("/wh/customers", "age")]
    assert complete["run"]["facets"]["parent"]["run"]["runId"] == pipeline.app_run_id


def test_input_snapshots_carry_the_partitions_read_by_every_scan_of_the_dataset() -> None:
    capture = _aggregate_capture()
    [key] = capture.leaves
    dimension = RelationInfo(node_class="LogicalRelation", paths=("file:/wh/dim",), format="parquet")
    capture = evolve(
        capture,
        # the same table read twice (a self-join: two leaves), and an unpartitioned dimension
        leaves={**capture.leaves, key + 1: capture.leaves[key], key + 2: dimension},
        input_snapshots={**capture.input_snapshots, key + 2: Snapshot("dim-1", "content")},
        input_partitions={key: ({"dt": "2026-01-02"},), key + 1: ({"dt": "2026-01-01"}, {"dt": "2026-01-02"})},
    )
    pipeline, client = _pipeline()
    pipeline.handle(capture)
    for event in client.events:
        assert_valid_event(event)
    snapshots = {source["name"]: source["facets"]["snapshot"] for source in client.events[-1]["inputs"]}
    assert snapshots["/wh/customers"]["partitions"] == [{"dt": "2026-01-01"}, {"dt": "2026-01-02"}]
    assert snapshots["/wh/customers"]["snapshotId"] == "in-1"
    assert "partitions" not in snapshots["/wh/dim"]


def _started(**changes: Any) -> StreamStarted:
    source = Endpoint("FileStreamSource[file:/in]", RelationInfo("FileStreamSource", paths=("file:/in",)), True)
    sink = Endpoint("FileSink[file:/sink]", RelationInfo("FileSink", paths=("file:/sink",)), True)
    started = StreamStarted(QUERY_ID, RUN_ID, None, END, "file:/ck", (source,), {1: source}, {}, sink)
    return evolve(started, **changes)


def _progress(batch_id: int, sink_snapshot: Snapshot | None = None) -> StreamProgress:
    batch = MicroBatch(batch_id, QUERY_ID, RUN_ID, 5, "file:/ck", 40)
    offsets = (SourceProgress("FileStreamSource[file:/in]", None if batch_id == 0 else '{"logOffset":0}', '{"logOffset":1}'),)
    return StreamProgress(QUERY_ID, RUN_ID, END, batch, offsets, {}, sink_snapshot)


def test_streaming_captures_make_one_run() -> None:
    pipeline, client = _pipeline()
    pipeline.handle_stream(_started())
    pipeline.handle_stream(_progress(0, Snapshot("sink-0", "content", batch_id=0)))
    pipeline.handle_stream(_progress(1))
    pipeline.handle_stream(StreamEnded(QUERY_ID, RUN_ID, END, "boom", None))
    for event in client.events:
        assert_valid_event(event)
    assert [(e["eventType"], e["run"]["runId"]) for e in client.events] == [
        ("START", RUN_ID),
        ("RUNNING", RUN_ID),
        ("RUNNING", RUN_ID),
        ("FAIL", RUN_ID),
    ]
    assert client.events[0]["job"]["name"] == "fixture_app.streaming.sink"
    running = client.events[1:3]
    assert [e["run"]["facets"]["microBatch"]["batchId"] for e in running] == [0, 1]
    offsets = [e["inputs"][0]["facets"]["snapshot"] for e in running]
    assert [(s["kind"], s.get("startOffset"), s["endOffset"]) for s in offsets] == [
        ("stream-offsets", None, {"logOffset": 1}),
        ("stream-offsets", {"logOffset": 0}, {"logOffset": 1}),
    ]
    sinks = [e["outputs"][0]["facets"]["snapshot"] for e in running]
    assert [(s["kind"], s["snapshotId"]) for s in sinks] == [("content", "sink-0"), ("sink-batch", f"{QUERY_ID}:1")]
    assert client.events[-1]["run"]["facets"]["errorMessage"]["message"] == "boom"


def test_progress_of_a_run_never_started_or_of_an_older_run_emits_nothing() -> None:
    pipeline, client = _pipeline()
    assert pipeline.handle_stream(_progress(0)) == []
    pipeline.handle_stream(_started(run_id="33333333-3333-4333-8333-333333333333"))
    assert pipeline.handle_stream(_progress(0)) == []
    assert [e["eventType"] for e in client.events] == ["START"]


def test_a_write_inside_a_micro_batch_names_the_streaming_run_as_parent() -> None:
    pipeline, client = _pipeline()
    pipeline.handle_stream(_started())
    pipeline.handle(_aggregate_capture(MicroBatchTag(QUERY_ID, RUN_ID, 0)))
    pipeline.handle(_aggregate_capture(MicroBatchTag(QUERY_ID, "44444444-4444-4444-8444-444444444444", 0)))
    inside, other = (e["run"]["facets"]["parent"] for e in client.events if e["eventType"] == "COMPLETE")
    assert (inside["run"]["runId"], inside["job"]["name"]) == (RUN_ID, "fixture_app.streaming.sink")
    assert inside["root"]["run"]["runId"] == pipeline.app_run_id
    assert other["run"]["runId"] == pipeline.app_run_id, "an unknown streaming run: the application is the parent"


def test_a_completed_attachment_emits_nothing_more() -> None:
    pipeline, client = _pipeline()
    pipeline.worker.start_application()
    pipeline.complete_application()
    assert pipeline.worker.closed
    pipeline.worker.handle_actions([_aggregate_capture()])
    pipeline.worker.handle_stream(_started())
    pipeline.handle(_aggregate_capture())
    assert [e["eventType"] for e in client.events] == ["START", "COMPLETE"]


def test_building_events_is_a_pure_function_of_capture_and_context() -> None:
    capture = _aggregate_capture()
    context = new_context(EmitterConfig(namespace="fixtures"), SESSION)
    before = (capture, context)
    first, second = action_events(capture, context), action_events(capture, context)
    assert (capture, context) == before, "neither input is changed"
    strip = [("run", "runId")]
    as_dicts = [[Serde.to_dict(event) for event in built] for built in (first, second)]
    for built in as_dicts:
        for event in built:
            for outer, inner in strip:
                event[outer].pop(inner)
    assert as_dicts[0] == as_dicts[1], "the same events but for the new run's id"


def test_only_wrapper_commands_are_merged() -> None:
    pipeline, _ = _pipeline()
    pending = evolve(_aggregate_capture(), func_name="file source write", query_execution_id=9)
    assert pipeline.handle(pending) == []
    target = RelationInfo("CreateDataSourceTableAsSelectCommand", table=TableRef("out"), table_location="file:/out")
    assert pipeline.dedupe.merges("CreateDataSourceTableAsSelectCommand", 8, target)
    assert not pipeline.dedupe.merges("InsertIntoHadoopFsRelationCommand", 8, target)
    assert not pipeline.dedupe.merges("CreateDataSourceTableAsSelectCommand", 10, target), "the wrapper comes with a lower id"
    [merged, _] = pipeline.handle(_wrapper(8, target))
    assert merged.job.name == "fixture_app.create_data_source_table_as_select_command.out"
    assert pipeline.dedupe.merges("SaveAsV1TableCommand", 6, target), "an outer wrapper of the merged write"
    assert pipeline.handle(_wrapper(6, target, "SaveAsV1TableCommand")) == []


def _wrapper(qe_id: int, target: RelationInfo, command: str = "CreateDataSourceTableAsSelectCommand") -> Capture:
    return Capture("command", qe_id, END, 0, "", root_class=command, write=WriteInfo(command, target, "ErrorIfExists"))
