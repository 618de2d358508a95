"""Lineage as of an instant, on SQLite and PostgreSQL: a job whose lineage changed twice (v1; v2 adds a
column; v3 retypes an edge and swaps an input) answers every walk at an instant within each version's
period with that version's tables and columns, and without an instant with today's."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from consumer.api import create_app
from consumer.query import as_of as asof
from consumer.query import lineage_store as ls
from consumer.query import marquez as mq
from consumer.query.cli import main
from consumer.query.db import reading
from consumer.query.errors import BadParameter, NotFound
from consumer.store.store import Store
from tests.consumer.helpers import write_events
from tests.query.pipeline import events as pipeline_events
from tests.query.pipeline import ingest
from tests.support.events import BASE_TIME, WAREHOUSE, batch_write, table, transformation, with_column_lineage
from tests.support.paths import third_party_events

JOB = "app.insert_into.report"
SUMMARY_JOB = "app.insert_into.summary"


def _path(database: str, name: str) -> str:
    return f"{WAREHOUSE}/{database}.db/{name}"


ORDERS, CUSTOMERS, CLIENTS = _path("raw", "orders"), _path("raw", "customers"), _path("raw", "clients")
REPORT, SUMMARY = _path("mart", "report"), _path("mart", "summary")


def _day(day: int) -> datetime:
    return BASE_TIME + timedelta(days=day)


def _version_run(day: int, version: int) -> list[dict[str, Any]]:
    """One run of JOB on `day` doing what its version `version` does.
    v1: report(id, amount) <- orders; customers read. v2: + report.name <- customers.name.
    v3: amount retyped DIRECT/IDENTITY -> DIRECT/TRANSFORMATION; customers swapped for clients."""
    orders = table("raw", "orders", ["id", "amount"], snapshot="orders-1")
    side = table("raw", "clients" if version == 3 else "customers", ["id", "name"], snapshot=f"side-{day}")
    columns = ["id", "amount"] + (["name"] if version >= 2 else [])
    amount_how = transformation("DIRECT", "TRANSFORMATION", "amount * 100") if version == 3 else transformation()
    lineage: dict[str, list[Any]] = {"id": [(orders, "id")], "amount": [(orders, "amount", amount_how)]}
    if version >= 2:
        lineage["name"] = [(side, "name")]
    output = with_column_lineage(
        table("mart", "report", columns, snapshot=f"report-{day}"), lineage, indirect=[(orders, "id", "FILTER")]
    )
    return batch_write(JOB, [orders, side], output, run_id=f"00000000-0000-4000-8000-{day:012d}", start=_day(day))


def _summary_run(day: int) -> list[dict[str, Any]]:
    """The downstream job: summary(total) <- report.amount, its lineage never changes."""
    report = table("mart", "report", ["id", "amount"], snapshot="report-1")
    output = with_column_lineage(table("mart", "summary", ["total"], snapshot=f"summary-{day}"), {"total": [(report, "amount")]})
    return batch_write(
        SUMMARY_JOB, [report], output, run_id=f"00000000-0000-4000-9000-{day:012d}", start=_day(day) + timedelta(hours=2)
    )


@pytest.fixture
def history(store: Store) -> Store:
    write_events(store, _version_run(1, 1))
    write_events(store, _summary_run(1))
    write_events(store, _version_run(2, 2))
    write_events(store, _version_run(3, 3))
    return store


BEFORE = _day(0).isoformat()
V1, V2, V3 = (_day(day) + timedelta(hours=6) for day in (1, 2, 3))


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _upstream_tables(answer: dict) -> set[tuple[str | None, str, str]]:
    return {(e["from"] and e["from"]["name"], e["job"]["name"], e["to"]["name"]) for e in answer["edges"]}


# What each version says, by dataset path: (input, job, output) table steps upstream of summary, depth 5.
TABLES = {
    1: {(ORDERS, JOB, REPORT), (CUSTOMERS, JOB, REPORT), (REPORT, SUMMARY_JOB, SUMMARY)},
    2: {(ORDERS, JOB, REPORT), (CUSTOMERS, JOB, REPORT), (REPORT, SUMMARY_JOB, SUMMARY)},
    3: {(ORDERS, JOB, REPORT), (CLIENTS, JOB, REPORT), (REPORT, SUMMARY_JOB, SUMMARY)},
}
# report's column edges: (output field, input dataset, input field, type, subtype)
COLUMNS = {
    1: {("id", ORDERS, "id", "DIRECT", "IDENTITY"), ("amount", ORDERS, "amount", "DIRECT", "IDENTITY")},
    2: {
        ("id", ORDERS, "id", "DIRECT", "IDENTITY"),
        ("amount", ORDERS, "amount", "DIRECT", "IDENTITY"),
        ("name", CUSTOMERS, "name", "DIRECT", "IDENTITY"),
    },
    3: {
        ("id", ORDERS, "id", "DIRECT", "IDENTITY"),
        ("amount", ORDERS, "amount", "DIRECT", "TRANSFORMATION"),
        ("name", CLIENTS, "name", "DIRECT", "IDENTITY"),
    },
}
INSTANTS = {1: V1, 2: V2, 3: V3}


def _table_steps(answer: dict) -> set[tuple[str | None, str, str]]:
    return {(e["from"] and e["from"]["name"], e["job"]["name"], e["to"]["name"]) for e in answer["edges"]}


def _report_columns(store: Store, when: str | None) -> set[tuple[str, str, str, str, str]]:
    """Every upstream column edge into report's fields, by the column walk."""
    found = set()
    for column in ("id", "amount", "name"):
        answer = ls.column_lineage(store, f"file:{REPORT}", column, "upstream", 1, False, when)
        for e in answer["edges"]:
            how = e["transformation"]
            found.add((e["to"]["field"], e["from"]["dataset"], e["from"]["field"], how["type"], how["subtype"]))
    return found


@pytest.mark.parametrize("version", [1, 2, 3])
def test_the_table_and_column_walks_answer_with_the_version_current_at_the_instant(history: Store, version: int) -> None:
    when = _iso(INSTANTS[version])

    upstream = ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5, when)
    assert _table_steps(upstream) == TABLES[version]
    assert upstream["asOf"] == when
    downstream = ls.table_lineage(history, f"file:{CUSTOMERS}", "downstream", 5, when)
    assert bool(downstream["edges"]) == (version < 3)  # swapped for clients by v3
    assert _report_columns(history, when) == COLUMNS[version]
    # the dataset-level (INDIRECT) input every version has
    name = ls.column_lineage(history, f"file:{REPORT}", "amount", "upstream", 1, False, when)
    assert [(x["from"]["field"], x["transformation"]["subtype"]) for x in name["tableLevelInputs"]] == [("id", "FILTER")]
    # downstream, through the job that changed and the one that did not
    amount = ls.column_lineage(history, f"file:{ORDERS}", "amount", "downstream", 5, False, when)
    assert {(e["to"]["dataset"], e["to"]["field"], e["transformation"]["subtype"]) for e in amount["edges"]} == {
        (REPORT, "amount", "TRANSFORMATION" if version == 3 else "IDENTITY"),
        (SUMMARY, "total", "IDENTITY"),
    }


def test_a_run_not_finished_at_the_instant_leaves_the_version_of_the_one_finished_before(history: Store) -> None:
    during_v2s_first_run = _iso(_day(2) + timedelta(seconds=2))  # started, not yet COMPLETE
    assert _report_columns(history, during_v2s_first_run) == COLUMNS[1]
    assert _report_columns(history, _iso(_day(2) + timedelta(seconds=5))) == COLUMNS[2]  # completed at that instant


def test_without_an_instant_the_walks_answer_as_today(history: Store) -> None:
    later = _iso(_day(30))
    today = ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5)
    assert "asOf" not in today and _table_steps(today) == TABLES[3]
    assert {k: v for k, v in ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5, later).items() if k != "asOf"} == today
    assert _report_columns(history, None) == COLUMNS[3] == _report_columns(history, later)
    for node in (f"job:spark:{JOB}", f"dataset:file:{REPORT}"):
        assert mq.lineage_graph(history, node, 20) == mq.lineage_graph(history, node, 20, later)
        assert mq.column_lineage_graph(history, node, 20, True) == mq.column_lineage_graph(history, node, 20, True, later)
    with reading(history) as conn:
        assert asof.replaced_at(conn, _day(30)) == {}


def test_before_the_jobs_first_run_it_has_no_lineage(history: Store) -> None:
    assert ls.table_lineage(history, f"file:{REPORT}", "upstream", 5, BEFORE)["edges"] == []
    assert ls.table_lineage(history, f"file:{ORDERS}", "downstream", 5, BEFORE)["edges"] == []
    assert _report_columns(history, BEFORE) == set()
    graph = mq.lineage_graph(history, f"job:spark:{JOB}", 20, BEFORE)["graph"]
    assert [(node["id"], node["inEdges"], node["outEdges"]) for node in graph] == [(f"job:spark:{JOB}", [], [])]
    assert mq.column_lineage_graph(history, f"dataset:file:{REPORT}", 20, True, BEFORE)["graph"] == []


def _marquez_column_edges(graph: list[dict]) -> set[tuple[str, str, str, str, str]]:
    """(output field, input dataset, input field, type, subtype) of every report field's inputFields."""
    found = set()
    for node in graph:
        if node["data"]["dataset"] != REPORT:
            continue
        for source in node["data"]["inputFields"]:
            for how in source["transformations"]:
                found.add((node["data"]["field"], source["dataset"], source["field"], how["type"], how["subtype"]))
    return found


def _marquez_table_edges(graph: list[dict]) -> set[tuple[str, str]]:
    return {(edge["origin"], edge["destination"]) for node in graph for edge in node["outEdges"]}


def _dataset(path: str) -> str:
    return f"dataset:file:{path}"


@pytest.fixture
def client(history: Store):  # type: ignore[no-untyped-def]
    with TestClient(create_app(history), raise_server_exceptions=False) as test_client:
        yield test_client


def test_marquez_lineage_and_column_lineage_answer_as_of_each_version(client: TestClient) -> None:
    job = f"job:spark:{JOB}"
    for version, instant in INSTANTS.items():
        when = _iso(instant)
        side = CLIENTS if version == 3 else CUSTOMERS
        graph = client.get("/api/v1/lineage", params={"nodeId": job, "asOf": when}).json()["graph"]
        assert _marquez_table_edges(graph) == {
            (_dataset(ORDERS), job),
            (_dataset(side), job),
            (job, _dataset(REPORT)),
            (_dataset(REPORT), f"job:spark:{SUMMARY_JOB}"),
            (f"job:spark:{SUMMARY_JOB}", _dataset(SUMMARY)),
        }, version
        response = client.get("/api/v1/column-lineage", params={"nodeId": _dataset(REPORT), "asOf": when})
        assert response.status_code == 200
        fields = response.json()["graph"]
        assert _marquez_column_edges(fields) == COLUMNS[version]
        report_fields = {node["data"]["field"] for node in fields if node["data"]["dataset"] == REPORT}
        assert report_fields == ({"id", "amount"} if version == 1 else {"id", "amount", "name"})  # the fields known then
        by_job = client.get("/api/v1/column-lineage", params={"nodeId": job, "asOf": when}).json()["graph"]
        assert _marquez_column_edges(by_job) == COLUMNS[version]

    today = client.get("/api/v1/lineage", params={"nodeId": job})
    assert today.status_code == 200
    assert _marquez_table_edges(today.json()["graph"]) == _marquez_table_edges(
        client.get("/api/v1/lineage", params={"nodeId": job, "asOf": _iso(V3)}).json()["graph"]
    )
    assert _marquez_column_edges(client.get("/api/v1/column-lineage", params={"nodeId": job}).json()["graph"]) == COLUMNS[3]


def test_the_lineage_store_routes_and_pictures_take_as_of(client: TestClient) -> None:
    params = {"table": f"file:{REPORT}", "column": "name", "asOf": _iso(V2)}
    columns = client.get("/api/v1/lineage-store/columns", params=params).json()
    assert [(e["from"]["dataset"], e["from"]["field"]) for e in columns["edges"]] == [(CUSTOMERS, "name")]
    assert columns["asOf"] == _iso(V2)
    tables = client.get("/api/v1/lineage-store/tables", params={"table": f"file:{REPORT}", "asOf": _iso(V1)}).json()
    assert {t["name"] for t in tables["tables"]} == {ORDERS, CUSTOMERS}
    dot_then = client.get("/api/v1/lineage-store/graph.dot", params={"nodeId": f"job:spark:{JOB}", "asOf": _iso(V1)}).text
    dot_now = client.get("/api/v1/lineage-store/graph.dot", params={"nodeId": f"job:spark:{JOB}"}).text
    assert CUSTOMERS in dot_then and CLIENTS not in dot_then
    assert CLIENTS in dot_now and CUSTOMERS not in dot_now


@pytest.mark.parametrize(
    "value",
    ["yesterday", "2026-13-01T00:00:00Z", "0001-01-01T00:00:00+05:00", "2026-01-01T00:00:00+99:00", ""],
)
def test_a_bad_as_of_is_a_400_naming_it(client: TestClient, value: str) -> None:
    requests = [
        ("/api/v1/lineage", {"nodeId": f"job:spark:{JOB}"}),
        ("/api/v1/column-lineage", {"nodeId": _dataset(REPORT)}),
        ("/api/v1/lineage-store/tables", {"table": f"file:{REPORT}"}),
        ("/api/v1/lineage-store/columns", {"table": f"file:{REPORT}", "column": "id"}),
        ("/api/v1/lineage-store/snapshots", {"table": f"file:{REPORT}", "snapshot": "report-1"}),
        ("/api/v1/lineage-store/graph.dot", {"nodeId": _dataset(REPORT)}),
    ]
    for path, params in requests:
        response = client.get(path, params={**params, "asOf": value})
        assert response.status_code == 400, (path, response.text)
        assert "asOf" in response.text, response.text


def test_snapshot_lineage_as_of_holds_the_runs_created_by_then(history: Store) -> None:
    def derived(when: str | None) -> set[str]:
        answer = ls.snapshot_lineage(history, f"file:{ORDERS}", "orders-1", "downstream", 5, when)
        return {step["to"]["snapshot"] for step in answer["steps"]}

    assert derived(_iso(V1)) == {"report-1", "summary-1"}
    assert derived(_iso(V2)) == {"report-1", "report-2", "summary-1"}
    assert derived(None) == derived(_iso(V3)) == {"report-1", "report-2", "report-3", "summary-1"}
    with pytest.raises(NotFound, match="report-3"):
        ls.snapshot_lineage(history, f"file:{REPORT}", "report-3", "upstream", 5, _iso(V2))
    with pytest.raises(NotFound):
        ls.snapshot_lineage(history, f"file:{ORDERS}", "orders-1", "downstream", 5, BEFORE)


def test_the_cli_answers_as_of_and_refuses_a_bad_instant(history: Store, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert main(["columns", f"file:{REPORT}", "name", "--as-of", _iso(V2)], history, out) == 0
    printed = out.getvalue()
    assert f"as of {_iso(V2)}" in printed and CUSTOMERS in printed and CLIENTS not in printed
    out = io.StringIO()
    assert main(["upstream", f"file:{REPORT}", "--as-of", "2026-01-03"], history, out) == 0  # a date: its midnight, UTC
    assert CUSTOMERS in out.getvalue() and CLIENTS not in out.getvalue()

    assert main(["upstream", f"file:{REPORT}", "--as-of", "tuesday"], history, io.StringIO()) == 1
    assert "--as-of='tuesday' is not an ISO-8601 instant" in capsys.readouterr().err
    with pytest.raises(BadParameter):
        ls.table_lineage(history, f"file:{REPORT}", "upstream", 5, "tuesday")


def test_lineage_retired_by_the_sweep_is_gone_from_then_on(history: Store) -> None:
    assert sorted(history.retire_stale_jobs(timedelta(days=1), now=_day(10))) == [JOB, SUMMARY_JOB]
    assert ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5)["edges"] == []
    assert ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5, _iso(_day(11)))["edges"] == []
    assert _table_steps(ls.table_lineage(history, f"file:{SUMMARY}", "upstream", 5, _iso(V3))) == TABLES[3]
    assert _report_columns(history, _iso(V1)) == COLUMNS[1]


def test_as_of_now_every_job_answers_with_the_rows_the_store_holds(store: Store) -> None:
    """The definition at the present picks each job's current version, on third-party and Spark event streams
    (runs finished, failed, still running, events late and out of order), so an as-of answer from after
    the last run is today's."""
    ingest(store, third_party_events())
    ingest(store, pipeline_events())
    with reading(store) as conn:
        jobs = conn.execute(text("SELECT count(*) FROM jobs")).scalar()
        versions = asof.versions_at(conn, datetime.now(timezone.utc))
        assert len(versions) == jobs and any(version is not None for version in versions.values())
        assert asof.replaced_at(conn, datetime.now(timezone.utc)) == {}


def test_each_jobs_version_at_an_instant_is_the_one_the_history_routes_name(history: Store) -> None:
    """The walks (all jobs at once) and the history diff (one job) choose the same version at every instant."""
    from consumer.query.history import version_current_at

    instants = [_day(0), _day(2) + timedelta(seconds=2), *INSTANTS.values(), _day(30)]
    with reading(history) as conn:
        for instant in instants:
            at = asof.versions_at(conn, instant)
            assert at == {job: version_current_at(conn, job, instant) for job in at}, instant
        # the report job's v1 and v3, and the summary job's one version
        assert len(set(asof.versions_at(conn, V1).values()) | set(asof.versions_at(conn, V3).values())) == 3
