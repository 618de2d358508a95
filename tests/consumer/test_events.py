"""Validation: what is accepted, and that every rejection names the offending field."""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timezone

import pytest

from consumer.ingest.materialize import materialize
from consumer.ingest.validate import DATASET_EVENT, JOB_EVENT, RUN_EVENT, InvalidEvent, parse_time, validate
from tests.support.events import BASE_TIME, run_event, table, with_column_lineage


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2020-12-28T19:51:01.641499123Z", datetime(2020, 12, 28, 19, 51, 1, 641499, tzinfo=timezone.utc)),
        ("2020-12-28T19:51:01.641499", datetime(2020, 12, 28, 19, 51, 1, 641499, tzinfo=timezone.utc)),
        ("2020-12-28T19:52:00.001+10:00", datetime(2020, 12, 28, 9, 52, 0, 1000, tzinfo=timezone.utc)),
        ("2020-01-01", datetime(2020, 1, 1, tzinfo=timezone.utc)),
    ],
)
def test_event_times_with_or_without_zone_and_nanoseconds(text, expected):
    assert parse_time(text, "eventTime") == expected


def _event() -> dict:
    source = table("raw", "a", ["x"], snapshot="s1")
    output = with_column_lineage(table("mart", "b", ["x"]), {"x": [(source, "x")]})
    return run_event(
        "RUNNING",
        "j",
        [source],
        [output],
        run_id=str(uuid.uuid4()),
        at=BASE_TIME,
        streaming=True,
        micro_batch={"batchId": 4, "queryId": "q", "runId": "r", "numInputRows": 1},
    )


@pytest.mark.parametrize(
    "path, value, field",
    [
        (("run", "runId"), "42", "run.runId"),
        (("eventType",), "DONE", "eventType"),
        (("job", "name"), 7, "job.name"),
        (("producer",), None, "producer"),
        (
            ("outputs", 0, "facets", "columnLineage", "fields", "x", "inputFields", 0, "transformations", 0, "type"),
            "COPY",
            "outputs[0].facets.columnLineage.fields.x.inputFields[0].transformations[0].type",
        ),
        (("inputs", 0, "facets", "snapshot", "kind"), "mystery", "inputs[0].facets.snapshot.kind"),
        (("run", "facets", "microBatch", "batchId"), "4", "run.facets.microBatch.batchId"),
        (("outputs", 0, "facets", "schema", "fields"), {"x": 1}, "outputs[0].facets.schema.fields"),
    ],
)
def test_rejections_name_the_offending_field(path, value, field):
    event = copy.deepcopy(_event())
    holder = event
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    with pytest.raises(InvalidEvent) as raised:
        validate(event)
    assert raised.value.field == field


def test_kinds_by_schema_url_and_unknown_facets_kept():
    event = _event()
    event["run"]["facets"]["somethingNew"] = {"_producer": "p", "_schemaURL": "u", "anything": [1]}
    dataset_event = {
        "eventTime": "2020-01-01T00:00:00Z",
        "producer": "p",
        "dataset": {"namespace": "n", "name": "d"},
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
    }
    job_event = {
        "eventTime": "2020-01-01T00:00:00Z",
        "producer": "p",
        "job": {"namespace": "n", "name": "j"},
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
    }

    assert validate(dataset_event).kind == DATASET_EVENT and validate(job_event).kind == JOB_EVENT
    rows = materialize(validate(event))
    assert validate(event).kind == RUN_EVENT and "somethingNew" in rows.run.facets
    assert rows.run.batch_id == 4 and [s.batch_id for s in rows.snapshots] == [4]
