"""Deeply nested JSON is a clear validation error (HTTP 400, a dead-letter reason), never a
RecursionError or a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from consumer.api import create_app
from consumer.ingest.validate import MAX_DEPTH, InvalidEvent, decode, nesting_exceeds
from tests.support.events import batch_write, table


def _nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def _event_with_facet_depth(levels: int) -> dict:
    event = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    event["run"]["facets"]["deep"] = json.loads(_nested(levels))
    return event


@pytest.mark.parametrize("raw", [_nested(20_000), _nested(20_000).encode(), "[" * 20_000 + "]" * 20_000])
def test_twenty_thousand_levels_are_too_deeply_nested(raw):
    with pytest.raises(InvalidEvent, match="nested too deeply"):
        decode(raw)


def test_the_limit_counts_the_whole_event():
    fits = json.dumps(_event_with_facet_depth(MAX_DEPTH - 4))  # event > run > facets > deep
    too_deep = json.dumps(_event_with_facet_depth(MAX_DEPTH))
    assert decode(fits)["run"]["facets"]["deep"]
    with pytest.raises(InvalidEvent, match="nested too deeply"):
        decode(too_deep)


def test_http_answers_400_for_a_deeply_nested_body(store):
    with TestClient(create_app(store)) as client:
        response = client.post("/api/v1/lineage", content=_nested(20_000).encode(), headers={"Content-Type": "application/json"})
        in_a_batch = client.post(
            "/api/v1/lineage",
            content=json.dumps([_event_with_facet_depth(MAX_DEPTH)]).encode(),
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 400 and "nested too deeply" in response.json()["message"]
    assert in_a_batch.status_code == 400 and "nested too deeply" in in_a_batch.json()["message"]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


# Strings full of what the byte scan must not count: brackets, quotes, backslashes, escapes.
_tricky_text = st.text(alphabet='{}[]"\\/ \n\tab\u00e9\u2028', max_size=8)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _tricky_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_tricky_text, children, max_size=3),
    max_leaves=40,
)


@given(value=_json_values, ascii_only=st.booleans(), indent=st.none() | st.integers(0, 2), slack=st.integers(-2, 2))
def test_the_byte_scan_measures_nesting_as_a_walk_of_the_value_does(value, ascii_only, indent, slack):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    limit = max(_depth(value) + slack, 0)
    assert nesting_exceeds(text, limit) == (_depth(value) > limit)
