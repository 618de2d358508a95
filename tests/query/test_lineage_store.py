"""The lineage-store questions on real SQLite and PostgreSQL stores filled through the consumer's ingestion."""

from __future__ import annotations

import io

import pytest

from consumer.query import lineage_store as ls
from consumer.query.cli import main
from consumer.query.errors import BadParameter, NotFound, SearchLimitReached
from tests.query.pipeline import BRONZE, DIM, GOLD, SILVER, SRC, events, ingest, lake_table
from tests.support.events import BASE_TIME, run_event
from tests.support.spec import assert_valid_event


@pytest.fixture
def pipeline_store(store):
    produced = events()
    for event in produced:
        assert_valid_event(event)
    ingest(store, produced)
    return store


def _names(refs):
    return sorted(ref["name"] for ref in refs)


def test_upstream_tables_are_transitive_with_the_jobs_between(pipeline_store):
    answer = ls.table_lineage(pipeline_store, f"file:{GOLD}", "upstream", 20)
    assert {(t["name"], t["distance"]) for t in answer["tables"]} == {(SILVER, 1), (DIM, 1), (BRONZE, 2), (SRC, 3)}
    steps = {(e["from"]["name"], e["job"]["name"], e["to"]["name"]) for e in answer["edges"]}
    assert ("/lake/src", "etl.ingest", "/lake/bronze") in steps and ("/lake/dim", "etl.publish", "/lake/gold") in steps


def test_downstream_tables_respect_the_depth_limit(pipeline_store):
    assert _names(ls.table_lineage(pipeline_store, f"dataset:file:{SRC}", "downstream", 1)["tables"]) == [BRONZE]
    assert _names(ls.table_lineage(pipeline_store, f"dataset:file:{SRC}", "downstream", 5)["tables"]) == [BRONZE, GOLD, SILVER]
    # Paimon-style database.table names resolve through the symlinks facet
    assert _names(ls.table_lineage(pipeline_store, "lake.src", "downstream", 0)["tables"]) == []


def test_a_cycle_terminates_and_each_table_appears_once(store):
    cyclic = [
        run_event(
            "COMPLETE",
            f"loop{i}",
            [lake_table(a)],
            [lake_table(b)],
            run_id=f"00000000-0000-0000-0000-00000000000{i}",
            at=BASE_TIME,
        )
        for i, (a, b) in enumerate([(BRONZE, SILVER), (SILVER, BRONZE)])
    ]
    ingest(store, cyclic)
    answer = ls.table_lineage(store, f"file:{BRONZE}", "upstream", 50)
    assert [(t["name"], t["distance"]) for t in answer["tables"]] == [(SILVER, 1)]
    assert len(answer["edges"]) == 2


def test_column_upstream_carries_transformations_and_can_keep_direct_only(pipeline_store):
    answer = ls.column_lineage(pipeline_store, f"file:{GOLD}", "total", "upstream", 10, direct_only=False)
    edges = {
        (e["from"]["field"], e["to"]["field"], e["transformation"]["type"], e["transformation"]["subtype"])
        for e in answer["edges"]
    }
    assert ("amount_cents", "total", "DIRECT", "AGGREGATION") in edges
    assert ("country", "total", "INDIRECT", "GROUP_BY") in edges
    assert ("amount", "amount_cents", "DIRECT", "TRANSFORMATION") in edges  # two steps up
    assert ("amount", "amount", "DIRECT", "IDENTITY") in edges  # three steps up, from the source
    described = [e for e in answer["edges"] if e["transformation"]["subtype"] == "TRANSFORMATION"]
    assert described[0]["transformation"]["description"] == "amount * 100" and described[0]["job"]["name"] == "etl.refine"
    joins = {(i["from"]["dataset"], i["from"]["field"], i["transformation"]["subtype"]) for i in answer["tableLevelInputs"]}
    assert joins == {(SILVER, "country", "JOIN"), (DIM, "country", "JOIN")}
    direct = ls.column_lineage(pipeline_store, f"file:{GOLD}", "total", "upstream", 10, direct_only=True)
    assert {e["transformation"]["type"] for e in direct["edges"]} == {"DIRECT"}
    assert all(e["from"]["field"] != "country" for e in direct["edges"]) and direct["tableLevelInputs"] == []


def test_column_downstream_and_masking(pipeline_store):
    answer = ls.column_lineage(pipeline_store, f"file:{DIM}", "name", "downstream", 10, direct_only=False)
    [edge] = answer["edges"]
    assert (edge["to"]["dataset"], edge["to"]["field"], edge["transformation"]["masking"]) == (GOLD, "country_name", True)


def test_snapshot_lineage_upstream_and_downstream_with_job_and_batch(pipeline_store):
    up = ls.snapshot_lineage(pipeline_store, f"file:{GOLD}", "g2", "upstream", 10)
    steps = {(x["from"]["name"], x["from"]["snapshot"], x["job"]["name"], x["batchId"], x["to"]["snapshot"]) for x in up["steps"]}
    assert steps == {
        (SILVER, "s2", "etl.publish", 2, "g2"),
        (DIM, "dim-1", "etl.publish", 2, "g2"),
        (BRONZE, "b2", "etl.refine", 2, "s2"),
        (SRC, "src-2", "etl.ingest", 2, "b2"),
    }
    down = ls.snapshot_lineage(pipeline_store, f"file:{SRC}", "src-1", "downstream", 10)
    assert sorted((x["to"]["name"], x["to"]["snapshot"]) for x in down["steps"]) == [(BRONZE, "b1"), (GOLD, "g1"), (SILVER, "s1")]
    assert ls.snapshot_lineage(pipeline_store, f"file:{SRC}", "src-1", "downstream", 1)["steps"][0]["to"]["snapshot"] == "b1"


def test_correction_plan_names_rollback_points_and_restart_batches(pipeline_store):
    plan = ls.correction_plan(pipeline_store, f"file:{BRONZE}", "b2")
    assert plan["rollBackTableTo"] == "b1"
    tables = {t["name"]: (t["derivedSnapshots"], t["rollBackTo"]) for t in plan["tables"]}
    assert tables == {SILVER: (["s2"], "s1"), GOLD: (["g2"], "g1")}
    assert {j["name"]: j["restartFromBatch"] for j in plan["jobs"]} == {"etl.refine": 2, "etl.publish": 2}


def test_aligned_start_picks_the_newest_mutually_consistent_snapshots(pipeline_store):
    # bronze is at b3, but silver's newest (s2) derives from b2: a job reading both must start at (b2, s2)
    answer = ls.aligned_start(pipeline_store, [f"file:{BRONZE}", f"file:{SILVER}"])
    assert answer["consistent"] is True
    assert [(x["name"], x["snapshot"]) for x in answer["snapshots"]] == [(BRONZE, "b2"), (SILVER, "s2")]
    alone = ls.aligned_start(pipeline_store, [f"file:{BRONZE}"])
    assert alone["snapshots"][0]["snapshot"] == "b3"


def test_aligned_start_stops_at_its_search_limit_with_a_clear_error(pipeline_store):
    with pytest.raises(SearchLimitReached, match="2 tables gave up after 1 candidate checks"):
        ls.aligned_start(pipeline_store, [f"file:{BRONZE}", f"file:{SILVER}"], max_steps=1)


def test_aligned_start_search_is_bounded_when_nothing_is_consistent():
    # four tables, 50 snapshots each: the first three agree on upstream table 99, the fourth never does,
    # so unbounded backtracking would try 50**4 combinations before answering "not consistent"
    agreeing = [(f"s{k}", None, {99: {"u1"}}) for k in range(ls.ALIGNED_CANDIDATES)]
    conflicting = [(f"t{k}", None, {99: {"u2"}}) for k in range(ls.ALIGNED_CANDIDATES)]
    with pytest.raises(SearchLimitReached, match=f"4 tables gave up after {ls.ALIGNED_SEARCH_STEPS:,}"):
        ls._newest_consistent([agreeing, agreeing, agreeing, conflicting], ls.ALIGNED_SEARCH_STEPS)
    assert ls._newest_consistent([agreeing, conflicting[:3]], ls.ALIGNED_SEARCH_STEPS) is None, "small searches still answer"


def test_unknown_table_and_bad_direction_are_reported(pipeline_store):
    with pytest.raises(NotFound, match="no/such"):
        ls.table_lineage(pipeline_store, "file:/no/such", "upstream", 3)
    with pytest.raises(BadParameter, match="sideways"):
        ls.table_lineage(pipeline_store, f"file:{GOLD}", "sideways", 3)
    with pytest.raises(NotFound, match="b9"):
        ls.correction_plan(pipeline_store, f"file:{BRONZE}", "b9")


def test_cli_prints_readable_tables(pipeline_store, capsys):
    out = io.StringIO()
    assert main(["upstream", f"file:{GOLD}", "--depth", "2"], pipeline_store, out) == 0
    text = out.getvalue()
    assert "from table" in text and "file:/lake/bronze" in text and "etl.refine" in text and "file:/lake/src" not in text
    out = io.StringIO()
    assert main(["correction-plan", f"file:{BRONZE}", "b2"], pipeline_store, out) == 0
    assert "roll back to" in out.getvalue() and "s1" in out.getvalue()
    out = io.StringIO()
    assert main(["columns", f"file:{GOLD}", "total", "--direct-only"], pipeline_store, out) == 0
    assert "AGGREGATION" in out.getvalue() and "GROUP_BY" not in out.getvalue()
    assert main(["upstream", "file:/missing"], pipeline_store, io.StringIO()) == 1
    assert "not found" in capsys.readouterr().err


def test_pictures_hold_every_node_once(pipeline_store):
    from consumer.query.render import to_dot, to_svg

    picture = ls.picture(pipeline_store, f"dataset:file:{SILVER}", 5)
    ids = [n.id for n in picture.nodes]
    assert len(ids) == len(set(ids)) == 7  # src, bronze, silver, gold and the 3 jobs; dim is neither up- nor downstream
    svg = to_svg(picture)
    assert svg.count('<g class="node') == 7 and svg.count('class="edge"') == len(picture.edges) == 6
    assert f'"job:spark:etl.refine" -> "dataset:file:{SILVER}"' in to_dot(picture)
