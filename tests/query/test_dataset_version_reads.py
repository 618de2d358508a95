"""A dataset's versions page, its last-modified time and its latest version's run are read from the
top of `ix_dataset_versions_dataset_created`, so what they cost does not grow with the runs that
wrote the dataset: each database's plan of the statement reads the index in order, with no sort
of all the dataset's versions."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from benchmarks.dataset_history import TABLE, add_versions
from benchmarks.query import HUB_GROUP, NS, T0, build_hubs
from consumer.query import marquez
from consumer.query.marquez.catalog import _versions_page
from consumer.query.marquez.loaders import _last_modified_query
from consumer.query.marquez.search import _latest_runs_query
from consumer.store import schema as s
from tests.support.databases import query_plan

INDEX = "ix_dataset_versions_dataset_created"


@pytest.mark.parametrize(
    ("question", "statement", "parameters"),
    [
        ("versions page", _versions_page, {"dataset": 1, "limit": 25, "offset": 50}),
        ("last modified", _last_modified_query, {"datasets": [1, 2, 3]}),
        ("latest version's run", _latest_runs_query, {"datasets": [1, 2, 3]}),
    ],
    ids=["versions-page", "last-modified", "latest-run"],
)
def test_read_from_the_top_of_the_index(store: Any, question: str, statement: Any, parameters: dict[str, Any]) -> None:
    with store.engine.connect() as conn:
        built = statement(conn)
    plan = query_plan(store, built.params(parameters))
    assert INDEX in plan, f"{question}:\n{plan}"
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, f"{question} sorts the dataset's versions:\n{plan}"


def test_answers_about_a_long_written_dataset(store: Any) -> None:
    """Read from the top of the index, the answers are the newest version's: its run in a search
    hit, the newest one a completed run wrote as `lastModifiedAt`, the versions newest first."""
    build_hubs(store, HUB_GROUP)
    add_versions(store, 30)
    with store.engine.begin() as conn:  # the newest version's run failed
        newest_run = conn.execute(select(s.runs.c.id).order_by(s.runs.c.created_at.desc()).limit(1)).scalar_one()
        conn.execute(update(s.runs).where(s.runs.c.id == newest_run).values(state="FAILED"))
        newest_uuid = conn.execute(select(s.runs.c.uuid).where(s.runs.c.id == newest_run)).scalar_one()

    dataset = marquez.get_dataset(store, NS, TABLE)
    assert datetime.fromisoformat(dataset["lastModifiedAt"]) == T0 + timedelta(hours=29)  # version 28's
    page = marquez.list_dataset_versions(store, NS, TABLE, 5, 2)
    assert [version["id"]["version"] for version in page["versions"]] == ["v27", "v26", "v25", "v24", "v23"]
    assert page["totalCount"] == 30
    [hit] = marquez.search_hits(store, TABLE, "DATASET", 10)["hits"]
    assert (hit["run_id"], hit["eventType"]) == (newest_uuid, "FAIL")
