"""Message keys by the OpenLineage convention, and the value bytes (the JSON document of
openlineage-python's `Serde.to_json`, written in one pass), which every transport of the
emitter's client writes."""

from __future__ import annotations

import enum
import json
import uuid
from datetime import datetime, timezone
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st
from openlineage.client import event_v2
from openlineage.client.facet_v2 import parent_run
from openlineage.client.serde import Serde

from emitter.transports.records import Sequence, message_key, serialize
from tests.emitter.test_pipeline import _aggregate_capture, _pipeline
from tests.transports.lineage_events import PRODUCER, application_events

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc).isoformat()


def run_event(facets: dict) -> event_v2.RunEvent:
    return event_v2.RunEvent(
        eventType=event_v2.RunState.START,
        eventTime=NOW,
        run=event_v2.Run(runId=str(uuid.uuid4()), facets=facets),
        job=event_v2.Job(namespace="ns", name="app.insert.t"),
        producer=PRODUCER,
    )


def test_a_run_is_keyed_by_its_root_parent_job() -> None:
    run_id = str(uuid.uuid4())
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_id),
        job=parent_run.Job(namespace="ns", name="app.foreach_batch"),
        root=parent_run.Root(run=parent_run.RootRun(runId=run_id), job=parent_run.RootJob(namespace="root-ns", name="app")),
    )
    assert message_key(run_event({"parent": parent})) == "run:root-ns/app"


def test_without_a_root_the_parent_job_is_the_key() -> None:
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=str(uuid.uuid4())), job=parent_run.Job(namespace="ns", name="app")
    )
    assert message_key(run_event({"parent": parent})) == "run:ns/app"


def test_without_a_parent_the_job_itself_is_the_key() -> None:
    assert message_key(run_event({})) == "run:ns/app.insert.t"


def test_dataset_and_job_events_are_keyed_by_what_they_describe() -> None:
    dataset_event = event_v2.DatasetEvent(
        eventTime=NOW, producer=PRODUCER, dataset=event_v2.StaticDataset(namespace="file", name="/data/t")
    )
    job_event = event_v2.JobEvent(eventTime=NOW, producer=PRODUCER, job=event_v2.Job(namespace="ns", name="job"))
    assert message_key(dataset_event) == "dataset:file//data/t"
    assert message_key(job_event) == "job:ns/job"


def test_all_events_of_one_application_get_one_key() -> None:
    assert {message_key(event) for event in application_events("app", 3)} == {"run:spark-tests/app"}


def test_the_value_is_the_events_json_in_utf8() -> None:
    event = application_events("app-é", 0)[0]
    value = serialize(event)
    assert json.loads(value) == json.loads(Serde.to_json(event))
    assert json.loads(value.decode("utf-8"))["job"]["name"] == "app-é"


def test_sequence_numbers_strictly_increase() -> None:
    sequence = Sequence()
    numbers = [sequence.next() for _ in range(1000)]
    assert numbers == sorted(set(numbers))


class Color(enum.Enum):
    RED = "red"


@attrs.define
class Leaf:
    name: str | None
    color: Color | None = None
    when: datetime | None = None
    id: uuid.UUID | None = None


@attrs.define
class Tree:
    leaves: list[Any]
    props: dict[str, Any]
    child: Any = None


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),  # not JSON: orjson writes null, json `Infinity`
    st.text(max_size=5),
    st.just(Color.RED),
    st.just(datetime(2026, 1, 1, tzinfo=timezone.utc)),
    st.just(uuid.UUID(int=7)),
)
_leaves = st.builds(Leaf, st.one_of(st.none(), st.text(max_size=3)), st.one_of(st.none(), st.just(Color.RED)))
_values = st.recursive(
    st.one_of(_scalars, _leaves),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.builds(Tree, st.lists(children, max_size=3), st.dictionaries(st.text(max_size=3), children, max_size=3), children),
    ),
    max_leaves=20,
)


@given(_values.map(lambda value: Tree([value], {"v": value}, value)))
def test_values_are_the_json_openlineage_serde_writes(tree: Tree) -> None:
    assert json.loads(serialize(tree)) == json.loads(Serde.to_json(tree))


def test_pipeline_events_are_the_json_openlineage_serde_writes() -> None:
    events = [*application_events("app", 3), *_fixture_write_events()]
    assert any(
        "columnLineage" in (getattr(event.outputs[0], "facets", None) or {})
        for event in events
        if getattr(event, "outputs", None)
    )
    for event in events:
        assert json.loads(serialize(event)) == json.loads(Serde.to_json(event))


def _fixture_write_events() -> list[Any]:
    pipeline, _ = _pipeline()
    return list(pipeline.handle(_aggregate_capture()))
