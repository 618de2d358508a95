"""Answers bounded whatever is asked or stored: the search highlight matcher is linear (a pattern of
many `%` against a long name with newlines, which a lazy regex takes minutes on), `q` has a length
cap, and a page of raw events stops at its byte bound (on SQLite and PostgreSQL)."""

from __future__ import annotations

import re
import time

from hypothesis import given
from hypothesis import strategies as st

from consumer.query.marquez import catalog
from consumer.query.marquez.search import like_span
from tests.query.pipeline import ingest
from tests.support.events import batch_write, table


def _like(pattern: str, name: str) -> bool:
    """SQL LIKE ... anywhere (as the search's `%text%`), case-insensitive, % and _ spanning newlines."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.search(regex, name, re.IGNORECASE | re.DOTALL) is not None


@given(st.text("ab_%\n", max_size=8), st.text("abAB\n", max_size=20))
def test_like_span_matches_where_like_matches(pattern: str, name: str) -> None:
    span = like_span(pattern, name)
    assert (span is not None) == _like(pattern, name)
    if span is not None and span[0] < span[1]:
        assert _like(pattern.strip("%"), name[span[0] : span[1]])


def test_the_highlight_of_many_wildcards_on_a_long_name_with_newlines_is_quick() -> None:
    name = ("a" * 60 + "\n") * 50 + "b"
    pattern = "%a" * 20 + "%b"
    started = time.monotonic()
    assert like_span(pattern, name) == (0, len(name))
    # a regex of lazy runs that stop at newlines tries C(60, 20) ways per line: minutes
    assert time.monotonic() - started < 1.0


def test_q_is_length_capped(client) -> None:
    for route in ("/api/v1/search", "/api/v2beta/search/jobs", "/api/v2beta/search/datasets"):
        assert client.get(route, params={"q": "x" * 200}).status_code == 200, route
        refused = client.get(route, params={"q": "x" * 201})
        assert refused.status_code == 400 and "200 characters" in refused.json()["message"], route


def test_a_page_of_events_stops_at_its_byte_bound(store, monkeypatch) -> None:
    events = [
        event
        for i in range(6)
        for event in batch_write(f"job{i}", [table("raw", f"in{i}", ["x"])], table("mart", f"out{i}", ["x"]))
    ]
    ingest(store, events)
    whole = catalog.lineage_events(store, None, None, "asc", 100, 0)
    assert len(whole["events"]) == len(events) == whole["totalCount"]
    size = len(catalog.json.dumps(whole["events"][0]))
    monkeypatch.setattr(catalog, "EVENTS_PAGE_BYTES", 3 * size)
    first = catalog.lineage_events(store, None, None, "asc", 100, 0)
    assert 1 <= len(first["events"]) < len(events) and first["totalCount"] == len(events)
    assert first["events"] == whole["events"][: len(first["events"])]
    monkeypatch.setattr(catalog, "EVENTS_PAGE_BYTES", 1)
    assert len(catalog.lineage_events(store, None, None, "asc", 100, 0)["events"]) == 1, "at least one event"
