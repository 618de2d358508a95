"""Marquez `/lineage` on a hub-heavy store (dimension tables every job of a group reads): each job and
dataset is visited once, and the answer is the one a full walk over every (job, depth) gives."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from benchmarks.query import RECURSIVE_WALK
from consumer.query import graph
from consumer.query import marquez as mq
from consumer.query.db import reading
from tests.query.pipeline import ingest
from tests.support.events import batch_write, table

GROUPS = 3
JOBS_PER_GROUP = 8
COLUMNS = ["id", "value"]


def _job(group: int, step: int) -> str:
    return f"group_{group}.step_{step}"


def _events() -> list[dict[str, Any]]:
    """Groups of jobs in a chain (step k reads step k-1's output, step 0 a fact table); in the hub groups
    every job also reads the group's two dimension tables. The last group has no hubs: a plain chain."""
    produced = []
    for group in range(GROUPS):
        dims = [table(f"g{group}", f"dim_{d}", COLUMNS) for d in range(2)] if group < GROUPS - 1 else []
        previous = table(f"g{group}", "fact", COLUMNS)
        for step in range(JOBS_PER_GROUP):
            output = table(f"g{group}", f"out_{step}", COLUMNS)
            produced += batch_write(_job(group, step), [previous, *dims], output)
            previous = output
    return produced


@pytest.fixture
def hub_store(store):
    ingest(store, _events())
    return store


def _jobs(answer: dict) -> set[str]:
    return {node["data"]["name"] for node in answer["graph"] if node["type"] == "JOB"}


def _datasets(answer: dict) -> set[str]:
    return {node["data"]["name"].removeprefix("/tmp/warehouse/") for node in answer["graph"] if node["type"] == "DATASET"}


def test_a_hub_connects_its_whole_group_in_one_hop_and_nothing_else(hub_store):
    one_hop = mq.lineage_graph(hub_store, f"job:spark:{_job(0, 3)}", 1)
    assert _jobs(one_hop) == {_job(0, step) for step in range(JOBS_PER_GROUP)}
    assert _datasets(one_hop) == {"g0.db/fact", "g0.db/dim_0", "g0.db/dim_1"} | {f"g0.db/out_{k}" for k in range(8)}
    edges = {(e["origin"], e["destination"]) for node in one_hop["graph"] for e in node["inEdges"] + node["outEdges"]}
    assert len(edges) == JOBS_PER_GROUP * 4, "3 inputs and 1 output per job"
    assert _jobs(mq.lineage_graph(hub_store, f"job:spark:{_job(0, 3)}", 0)) == {_job(0, 3)}
    hub = mq.lineage_graph(hub_store, "dataset:file:/tmp/warehouse/g1.db/dim_0", 0)
    assert _jobs(hub) == {_job(1, step) for step in range(JOBS_PER_GROUP)}, "depth 0: the jobs touching the node"


def test_without_hubs_depth_counts_job_hops_along_the_chain(hub_store):
    chain = GROUPS - 1
    assert _jobs(mq.lineage_graph(hub_store, f"job:spark:{_job(chain, 3)}", 2)) == {_job(chain, k) for k in range(1, 6)}
    whole = mq.lineage_graph(hub_store, f"job:spark:{_job(chain, 0)}", 20)
    assert _jobs(whole) == {_job(chain, k) for k in range(JOBS_PER_GROUP)}


@pytest.mark.parametrize("ids_per_query", [5_000, 2], ids=["one query per level", "two steps in chunks"])
def test_connected_jobs_equal_the_recursive_walk_for_every_start_and_depth(hub_store, ids_per_query, monkeypatch):
    """The walk the store used before (every (job, depth) row) is slow on hubs but right: same answers,
    also when the frontier or the datasets seen outgrow one query's id list."""
    monkeypatch.setattr(graph, "_IDS_PER_QUERY", ids_per_query)
    with reading(hub_store) as conn:
        every_job = list(conn.execute(text("SELECT id FROM jobs")).scalars())
        for depth in (0, 1, 2, 3, 7, 20):
            for job in every_job:
                expected = list(conn.execute(RECURSIVE_WALK, {"start": [job], "depth": depth}).scalars())
                assert graph.connected_jobs(conn, [job], depth) == expected, (job, depth)
        assert graph.connected_jobs(conn, every_job[:3], 2) == list(
            conn.execute(RECURSIVE_WALK, {"start": every_job[:3], "depth": 2}).scalars()
        )
