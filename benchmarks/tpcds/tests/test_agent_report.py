"""The agent benchmark's pure rules: lineage read from events, compared with the reference, cost per action."""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchmarks.tpcds.agent_report import (
    AGENT,
    AGENT_LISTENER,
    EMITTER,
    EXECUTION_LISTENER_BUS,
    PLAIN,
    Window,
    agent_right_we_not,
    compare,
    cost_figures,
    lineage_figures,
    reported_lineage,
    table_of,
)


def _output(statement: str, columns: list[str], lineage: dict[str, list[tuple[str, str]]] | None) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "schema": {"fields": [{"name": column} for column in columns]},
        "symlinks": {"identifiers": [{"namespace": "x", "name": f"bench.{statement}", "type": "TABLE"}]},
    }
    if lineage is not None:
        facets["columnLineage"] = {
            "fields": {
                column: {"inputFields": [{"namespace": "file", "name": dataset, "field": field} for dataset, field in inputs]}
                for column, inputs in lineage.items()
            }
        }
    return {"namespace": "file", "name": f"/w/bench.db/{statement}", "facets": facets}


def test_a_dataset_names_its_table_by_the_last_path_or_dotted_part() -> None:
    assert table_of("/data/tpcds_sf0.1/store_sales") == "store_sales"
    assert table_of("/data/tpcds_sf0.1/Item/") == "item"
    assert table_of("spark_catalog.tpcds.date_dim") == "date_dim"


def test_the_last_facet_of_an_output_wins_and_a_later_event_without_one_keeps_it() -> None:
    events = [
        {"eventType": "START", "outputs": [_output("q01", ["a", "b"], {"a": [("/d/t1", "x")]})]},
        {"eventType": "RUNNING", "outputs": [_output("q01", ["a", "b"], {"a": [("/d/t1", "x")], "b": [("db.t2", "Y")]})]},
        {"eventType": "COMPLETE", "outputs": [_output("q01", ["a", "b"], None)]},
        {"eventType": "COMPLETE", "outputs": [_output("q02", ["n"], None)]},
    ]

    found = reported_lineage(events, ["q01", "q02"])

    assert found["q01"].columns == ("a", "b")
    assert found["q01"].inputs == {"a": frozenset({("t1", "x")}), "b": frozenset({("t2", "y")})}
    assert found["q02"].columns == ("n",)
    assert found["q02"].inputs == {}


def test_columns_pair_with_the_reference_by_position_and_count_as_equal_wrong_or_none_reported() -> None:
    reported = reported_lineage(
        [
            {
                "outputs": [
                    _output("q01", ["x", "sum(y)", "n"], {"x": [("/d/t", "x")], "sum(y)": [("/d/t", "y"), ("/d/u", "z")]}),
                    _output("q02", ["k"], {"k": [("/d/t", "k")]}),
                ]
            }
        ],
        ["q01", "q02", "q03"],
    )
    reference: dict[str, list[frozenset[tuple[str, str]]] | None] = {
        "q01": [frozenset({("t", "x")}), frozenset({("t", "y")}), frozenset()],
        "q02": [frozenset({("t", "k")})],
        "q03": [frozenset({("t", "a")})],
        "q04": None,
    }

    verdicts = compare(reported, reference)

    assert [(v.statement, v.column, v.equal) for v in verdicts] == [
        ("q01", "x", True),
        ("q01", "sum(y)", False),  # an extra input field
        ("q01", "n", True),  # source-less in both
        ("q02", "k", True),
        ("q03", "#1", False),  # no output seen at all
    ]
    figures = lineage_figures(reported, verdicts)
    assert (figures.outputs, figures.complete, figures.outputs_equal) == (2, 1, 1)
    assert (figures.columns, figures.equal, figures.wrong, figures.none_reported) == (5, 3, 2, 1)


def test_only_columns_the_agent_gets_right_and_we_do_not_are_listed() -> None:
    reference = {"q01": [frozenset({("t", "a")}), frozenset({("t", "b")}), frozenset({("t", "c")})]}
    ours = compare(reported_lineage([{"outputs": [_output("q01", ["a", "b", "c"], {"a": [("/t", "a")]})]}], ["q01"]), reference)
    agents = compare(
        reported_lineage([{"outputs": [_output("q01", ["a", "b", "c"], {"b": [("/t", "b")], "c": [("/t", "x")]})]}], ["q01"]),
        reference,
    )

    assert [(mine.column, theirs.column) for mine, theirs in agent_right_we_not(ours, agents)] == [("b", "b")]


def test_cost_is_per_action_against_the_plain_window_of_the_same_statement() -> None:
    def window(statement: str, variant: str, seconds: float, cpu: float, bus: dict[str, float], error: str = "") -> Window:
        return Window(statement, variant, seconds, cpu, 2, 3 if variant != PLAIN else 0, 300, bus, 1e6, 4.0, error)

    windows = [
        window("q01", PLAIN, 1.0, 0.5, {EXECUTION_LISTENER_BUS: 1e6}),
        window("q01", EMITTER, 1.1, 0.52, {EXECUTION_LISTENER_BUS: 5e6}),
        window("q01", AGENT, 1.5, 0.6, {AGENT_LISTENER: 40e6, EXECUTION_LISTENER_BUS: 1e6}),
        window("q02", PLAIN, 3.0, 1.0, {}),
        window("q02", EMITTER, 3.0, 1.0, {}, error="rejected"),
        window("q02", AGENT, 3.3, 1.2, {AGENT_LISTENER: 20e6}),
    ]

    emitter, agent = cost_figures(windows, EMITTER), cost_figures(windows, AGENT)

    assert (emitter.statements, emitter.actions, emitter.events_per_action, emitter.bytes_per_action) == (1, 2, 1.5, 150)
    assert emitter.bus_ms_per_action == pytest.approx(2.0)  # (5 - 1 ms of the plain window) / 2
    assert emitter.cpu_ms_per_action == pytest.approx(10.0)
    assert emitter.wall_ratio == pytest.approx(1.1)
    assert (agent.statements, agent.actions) == (2, 4)
    assert agent.bus_ms_per_action == pytest.approx(15.0)
    assert agent.bus_ms_per_action_p95 == pytest.approx(20.0)
    assert agent.cpu_ms_per_action == pytest.approx(75.0)
    assert agent.wall_ratio == pytest.approx(4.8 / 4.0)
    assert agent.bus_cpu_ms_per_action == 0.0
    assert emitter.own_capture_ms_per_action == pytest.approx(2.0)
    assert math.isnan(cost_figures([], AGENT).bus_ms_per_action)


def test_sqlglot_traces_each_select_column_to_the_columns_its_expression_names() -> None:
    pytest.importorskip("sqlglot", reason="sqlglot (the TPC-DS lineage reference) is not installed")
    from benchmarks.tpcds.reference import trace

    schema = {"sales": {"item": "STRING", "qty": "STRING", "day": "STRING"}, "items": {"id": "STRING", "name": "STRING"}}
    sql = """WITH s AS (SELECT item, sum(qty) AS total FROM sales WHERE day = 1 GROUP BY item)
             SELECT i.name, CASE WHEN s.total > 0 THEN s.total END, count(*) AS n
             FROM s JOIN items i ON i.id = s.item"""

    assert trace(sql, schema) == [frozenset({("items", "name")}), frozenset({("sales", "qty")}), frozenset()]
