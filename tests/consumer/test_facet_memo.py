"""The preparing process's memo of schema and column-lineage facets (consumer.ingest.facet_memo):
events that repeat a facet reuse what was derived from it, and whatever the events, preparing
with a memo gives exactly what preparing without one gives."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.ingest.facet_memo import FacetMemo
from consumer.ingest.prepare import INVALID, prepare, prepare_batch
from tests.consumer.test_store_properties import _event
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage

# What may happen to an output dataset's facets: ways to break a checked facet, a schema only in
# outputFacets (not checked, still materialized), values JSON tells apart but Python equality may not.
_BREAKS = (
    "none",
    "empty field name",
    "control character in a field name",
    "bad transformation type",
    "schema in outputFacets",
    "description NaN",
    "description null",
    "description 1",
    "description 1.0",
    "description true",
)


def _broken(event: dict[str, Any], how: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    datasets = event.get("outputs") or [event["dataset"]] if "dataset" in event else event.get("outputs") or []
    for dataset in datasets:
        facets = dataset["facets"]
        fields = facets["schema"]["fields"]
        if how == "empty field name":
            fields[0]["name"] = ""
        elif how == "control character in a field name":
            fields[0]["name"] = "id\x1b[2J"
        elif how == "bad transformation type" and "columnLineage" in facets:
            next(iter(facets["columnLineage"]["fields"].values()))["inputFields"][0]["transformations"][0]["type"] = "BAD"
        elif how == "schema in outputFacets":
            dataset["outputFacets"] = {"schema": {"fields": [*fields, {"name": "id\x1b[2J"}]}}
        elif how.startswith("description "):
            fields[0]["description"] = {"NaN": float("nan"), "null": None, "1": 1, "1.0": 1.0, "true": True}[how.split()[1]]
    return event


@st.composite
def _batches(draw: st.DrawFn) -> list[list[bytes]]:
    minutes = draw(st.lists(st.integers(0, 10_000), min_size=1, max_size=14, unique=True))
    values = [json.dumps(_broken(draw(_event(minute)), draw(st.sampled_from(_BREAKS)))).encode() for minute in minutes]
    cuts = sorted(draw(st.lists(st.integers(1, len(values)), max_size=3, unique=True)))
    return [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True) if a < b]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=_batches(), capacity=st.sampled_from([1, 3, 4096]))
def test_preparing_with_a_memo_gives_what_preparing_without_one_gives(batches, capacity):
    """Batch after batch with one memo (of any capacity): the same refusals with the same reasons
    and the same folded rows (compared by repr: NaN is not equal to itself) as without a memo."""
    memo = FacetMemo(capacity)
    for values in batches:
        with_memo = prepare_batch(values, None, memo=memo)
        without = prepare_batch(values, None)
        assert with_memo.refused == without.refused
        assert repr(with_memo.folded) == repr(without.folded)
        assert repr(with_memo.events) == repr(without.events)


def _repeated_runs(count: int) -> list[bytes]:
    """A job run `count` times: the same schemas and column lineage, new runs, snapshots and times."""
    values = []
    for run in range(count):
        source = table("raw", "orders", ["id", "amount"], snapshot=f"s{run}")
        target = with_column_lineage(
            table("mart", "totals", ["id", "amount"], snapshot=f"t{run}"), {"amount": [(source, "amount")]}
        )
        values += [json.dumps(e).encode() for e in batch_write("totals", [source], target, start=BASE_TIME.replace(minute=run))]
    return values


def test_repeated_facets_are_derived_once_and_shared():
    memo = FacetMemo()
    values = _repeated_runs(5)
    events = [prepare(value, memo) for value in values]
    outputs = [rows.datasets[-1] for rows in events]
    assert all(output.fields is outputs[0].fields for output in outputs), "one field-row tuple for one schema"
    assert all(rows.column_edges == events[0].column_edges for rows in events)
    assert all(a is b for rows in events for a, b in zip(rows.column_edges, events[0].column_edges, strict=True))
    # One schema (both tables have the same) and one column-lineage facet, each checked and derived
    # once: 4 misses; each of 10 events checks and derives 2 schemas and 1 column-lineage facet
    assert (memo.misses, memo.hits) == (4, 10 * 6 - 4)
    assert events == [prepare(value) for value in values]


def test_a_facet_that_fails_its_check_is_refused_every_time():
    memo = FacetMemo()
    good, bad = _repeated_runs(1)[0], _broken(json.loads(_repeated_runs(1)[0]), "bad transformation type")
    prepare(good, memo)
    outcomes = prepare_batch([json.dumps(bad).encode()] * 2, None, memo=memo)
    assert [refused.reason_class for refused in outcomes.refused.values()] == [INVALID, INVALID]
    assert "must be DIRECT or INDIRECT" in outcomes.refused[1].reason


def test_a_schema_materialized_unchecked_does_not_pass_the_check_later():
    """A schema only in outputFacets is materialized but not checked: the same schema in `facets`
    is still checked (and refused)."""
    memo = FacetMemo()
    event = json.loads(_repeated_runs(1)[0])
    unchecked = copy.deepcopy(event)
    bad_schema = {"fields": [{"name": "id\x1b[2J", "type": "long"}]}
    unchecked["outputs"][0]["outputFacets"] = {"schema": bad_schema}
    checked = copy.deepcopy(event)
    checked["outputs"][0]["facets"]["schema"] = bad_schema
    assert prepare_batch([json.dumps(unchecked).encode()], None, memo=memo).refused == {}
    refused = prepare_batch([json.dumps(checked).encode()], None, memo=memo).refused
    assert refused[0].reason_class == INVALID and "control characters" in refused[0].reason
