"""Lineage history on SQLite and PostgreSQL (consumer.query.history): a job whose lineage changes
twice lists three versions with their first and last runs, the diff between each pair lists
exactly the changes, by hash or by instant, and a dataset's field history says which version
change touched each field, and when."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from consumer.query import cli as query_cli
from consumer.query import history
from consumer.query.errors import BadParameter, NotFound
from consumer.store import schema as s
from consumer.store.store import Store
from tests.consumer import history_scenario as sc
from tests.consumer.helpers import write_events


@pytest.fixture
def changed_twice(store: Store) -> Store:
    for events in sc.every_day():
        write_events(store, events)
    return store


def _iso(day: int) -> str:
    return sc.started(day).isoformat().replace("+00:00", "Z")


def _hashes(store: Store) -> list[str]:
    return [v["version"] for v in history.job_versions(store, sc.NAMESPACE, sc.JOB)["versions"]]


def _diff(store: Store, before: str, after: str) -> dict[str, Any]:
    return history.job_version_diff(store, sc.NAMESPACE, sc.JOB, before, after)["diff"]


def _edge(source: dict[str, str], out_field: str | None, in_field: str) -> tuple[Any, ...]:
    return (out_field, source["name"], in_field)


def _edges(listed: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["output"]["field"], e["input"]["dataset"], e["input"]["field"]) for e in listed]


def _names(listed: list[dict[str, Any]]) -> list[str]:
    return [d["name"] for d in listed]


def test_three_versions_with_their_first_and_last_runs(changed_twice: Store) -> None:
    answer = history.job_versions(changed_twice, sc.NAMESPACE, sc.JOB)
    summary = [(v["firstRunAt"], v["lastRunAt"], v["runCount"], v["current"]) for v in answer["versions"]]
    assert summary == [(_iso(0), _iso(1), 2, False), (_iso(2), _iso(3), 2, False), (_iso(4), _iso(4), 1, True)]
    assert answer["totalCount"] == 3 and answer["currentVersion"] == answer["versions"][2]["version"]
    assert len(set(_hashes(changed_twice))) == 3
    assert history.job_versions(changed_twice, sc.NAMESPACE, sc.JOB, limit=1, offset=2)["versions"] == answer["versions"][2:]


def test_v1_to_v2_adds_a_column(changed_twice: Store) -> None:
    v1, v2, _ = _hashes(changed_twice)
    diff = _diff(changed_twice, v1, v2)
    assert diff["inputs"] == diff["outputs"] == {"added": [], "removed": []}
    assert [(f["field"], f["type"]) for f in diff["fields"]["added"]] == [("name", "string")]
    assert diff["fields"]["removed"] == diff["fields"]["retyped"] == []
    assert _edges(diff["edges"]["added"]) == [_edge(sc.CUSTOMERS, "name", "name")]
    assert diff["edges"]["removed"] == diff["edges"]["changed"] == []


def test_v2_to_v3_retypes_an_edge_and_swaps_an_input(changed_twice: Store) -> None:
    _, v2, v3 = _hashes(changed_twice)
    diff = _diff(changed_twice, v2, v3)
    assert _names(diff["inputs"]["added"]) == [sc.REGIONS["name"]] and _names(diff["inputs"]["removed"]) == [sc.CUSTOMERS["name"]]
    assert diff["outputs"] == {"added": [], "removed": []}
    assert diff["fields"] == {"added": [], "removed": [], "retyped": []}
    assert _edges(diff["edges"]["added"]) == [_edge(sc.REGIONS, "name", "name")]
    assert _edges(diff["edges"]["removed"]) == [_edge(sc.CUSTOMERS, "name", "name")]
    [changed] = diff["edges"]["changed"]
    assert _edges([changed]) == [_edge(sc.ORDERS, "amount", "amount")]
    assert (changed["from"]["type"], changed["from"]["subtype"]) == ("DIRECT", "IDENTITY")
    assert (changed["to"]["type"], changed["to"]["subtype"], changed["to"]["description"]) == (
        "DIRECT",
        "TRANSFORMATION",
        sc.ROUND,
    )
    assert changed["changes"] == ["subtype", "description"]


def test_v1_to_v3_is_both_changes_at_once(changed_twice: Store) -> None:
    v1, _, v3 = _hashes(changed_twice)
    diff = _diff(changed_twice, v1, v3)
    assert _names(diff["inputs"]["added"]) == [sc.REGIONS["name"]] and _names(diff["inputs"]["removed"]) == [sc.CUSTOMERS["name"]]
    assert [f["field"] for f in diff["fields"]["added"]] == ["name"]
    assert _edges(diff["edges"]["added"]) == [_edge(sc.REGIONS, "name", "name")]
    assert diff["edges"]["removed"] == []
    assert _edges(diff["edges"]["changed"]) == [_edge(sc.ORDERS, "amount", "amount")]
    assert _diff(changed_twice, v3, v1)["edges"]["removed"] == diff["edges"]["added"]


def test_versions_named_by_instant_and_by_hash_prefix(changed_twice: Store) -> None:
    v1, v2, v3 = _hashes(changed_twice)
    # mid-day 1: the day-1 run (v1) finished; day 4, one second after its run (v3) started: that run
    # is not finished yet, the latest finished one (day 3) ran v2
    answer = history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, _iso(1)[:10] + "T12:00:00Z", v3[:7])
    assert (answer["from"]["version"], answer["to"]["version"]) == (v1, v3)
    during = (sc.started(4) + timedelta(seconds=1)).isoformat()
    assert history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, during, v2)["from"]["version"] == v2
    # before the job's first run: no version; everything is added
    before = history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, "2020-01-01T00:00:00Z", v1)
    assert before["from"]["version"] is None
    assert _names(before["diff"]["inputs"]["added"]) == sorted([sc.ORDERS["name"], sc.CUSTOMERS["name"]])


def test_the_instant_rule_at_now_is_the_current_version(changed_twice: Store) -> None:
    with changed_twice.engine.connect() as conn:
        job_id, current = conn.execute(select(s.jobs.c.id, s.jobs.c.current_version_id).where(s.jobs.c.name == sc.JOB)).one()
        assert history.version_current_at(conn, job_id, sc.started(100)) == current
        assert history.version_current_at(conn, job_id, sc.started(-1)) is None


def test_unknown_jobs_and_versions_and_bad_names(changed_twice: Store) -> None:
    v1 = _hashes(changed_twice)[0]
    with pytest.raises(NotFound):
        history.job_versions(changed_twice, sc.NAMESPACE, "no.such.job")
    with pytest.raises(NotFound):
        history.job_version_diff(changed_twice, "nowhere", sc.JOB, v1, v1)
    with pytest.raises(NotFound):
        history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, "0" * 64, v1)
    with pytest.raises(BadParameter):
        history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, "yesterday", v1)
    with pytest.raises(BadParameter):
        history.job_versions(changed_twice, sc.NAMESPACE, sc.JOB, limit=-1)


def test_field_history_says_which_version_change_touched_each_field_and_when(changed_twice: Store) -> None:
    v1, v2, v3 = _hashes(changed_twice)
    answer = history.field_history(changed_twice, sc.ENRICHED["namespace"], sc.ENRICHED["name"])
    by_field = {
        entry["field"]: [
            (c["at"], c["fromVersion"], c["toVersion"], len(c["added"]), len(c["removed"]), len(c["changed"]))
            for c in entry["changes"]
        ]
        for entry in answer["fields"]
    }
    assert by_field == {
        None: [(_iso(0), None, v1, 1, 0, 0)],  # the FILTER on orders.id, from the first run on
        "id": [(_iso(0), None, v1, 1, 0, 0)],
        "amount": [(_iso(0), None, v1, 1, 0, 0), (_iso(4), v2, v3, 0, 0, 1)],
        "name": [(_iso(2), v1, v2, 1, 0, 0), (_iso(4), v2, v3, 1, 1, 0)],
    }
    assert {c["job"]["name"] for entry in answer["fields"] for c in entry["changes"]} == {sc.JOB}
    with pytest.raises(NotFound):
        history.field_history(changed_twice, "file", "no/such/dataset")


def test_a_job_named_by_namespace_and_name_or_alone(changed_twice: Store) -> None:
    with changed_twice.engine.connect() as conn:
        assert history.resolve_job(conn, sc.JOB) == (sc.NAMESPACE, sc.JOB)
        assert history.resolve_job(conn, f"{sc.NAMESPACE}:{sc.JOB}") == (sc.NAMESPACE, sc.JOB)
        assert history.resolve_job(conn, f"job:{sc.NAMESPACE}:{sc.JOB}") == (sc.NAMESPACE, sc.JOB)
        with pytest.raises(NotFound):
            history.resolve_job(conn, "nothing")


def test_an_instant_out_of_range_is_a_bad_parameter(changed_twice: Store) -> None:
    with pytest.raises(BadParameter):
        history.job_version_diff(changed_twice, sc.NAMESPACE, sc.JOB, "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")


def test_the_command_line_prints_versions_diffs_and_field_history(changed_twice: Store) -> None:
    v1, v2, v3 = _hashes(changed_twice)

    def printed(*argv: str) -> str:
        out = io.StringIO()
        assert query_cli.main(list(argv), changed_twice, out) == 0
        return out.getvalue()

    versions = printed("versions", sc.JOB).splitlines()
    assert versions[0] == f"lineage versions of {sc.NAMESPACE}:{sc.JOB} (3)"
    assert [line.split()[0] for line in versions[3:]] == [v[:12] for v in (v1, v2, v3)]
    assert versions[-1].split()[-1] == "yes" and versions[3].split()[1:] == [_iso(0), _iso(1), "2"]

    diff = printed("diff", f"{sc.NAMESPACE}:{sc.JOB}", "--from", v2[:7], "--to", _iso(5))
    changes = [line.split()[:2] for line in diff.splitlines()[3:]]
    assert changes == [["reads", "added"], ["reads", "removed"], ["edge", "added"], ["edge", "removed"], ["edge", "changed"]]
    assert "DIRECT/IDENTITY -> DIRECT/TRANSFORMATION 'round(amount, 2)'" in diff

    field_history = printed("field-history", "mart.enriched")
    assert field_history.count("edge changed") == 1 and field_history.count("edge added") == 5

    assert '"changed"' in printed("--json", "diff", sc.JOB, "--from", v1, "--to", v3)
    assert query_cli.main(["diff", sc.JOB, "--from", "yesterday", "--to", v3], changed_twice, io.StringIO()) == 1
