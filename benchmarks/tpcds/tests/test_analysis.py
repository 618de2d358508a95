"""Coverage and statistics rules of the report (pure, over event-shaped dicts)."""

from __future__ import annotations

from typing import Any

from benchmarks.tpcds.analysis import coverage_by_statement, distribution, percentile, statement_of


def _output(name: str, columns: list[str], lineage: dict[str, list[str]], symlink: str | None = None) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "schema": {"fields": [{"name": column, "type": "string"} for column in columns]},
        "columnLineage": {
            "fields": {
                column: {"inputFields": [{"namespace": "file", "name": "/d/t", "field": f} for f in inputs]}
                for column, inputs in lineage.items()
            }
        },
    }
    if symlink:
        facets["symlinks"] = {"identifiers": [{"namespace": "x", "name": symlink, "type": "TABLE"}]}
    return {"namespace": "file", "name": name, "facets": facets}


def test_statement_is_found_by_symlink_else_by_the_last_path_part() -> None:
    assert statement_of(_output("/w/elsewhere", [], {}, symlink="bench.q05"), ["q01", "q05"]) == "q05"
    assert statement_of(_output("/w/bench.db/q01/", [], {}), ["q01", "q05"]) == "q01"
    assert statement_of(_output("/w/bench.db/other", [], {}), ["q01"]) is None


def test_coverage_tells_columns_with_inputs_from_empty_entries_and_absent_ones() -> None:
    events = [
        {"eventType": "START", "outputs": [_output("/w/bench.db/q01", ["a"], {})]},
        {
            "eventType": "COMPLETE",
            "outputs": [_output("/w/bench.db/q01", ["a", "b", "c"], {"a": ["x"], "b": []})],
        },
        {"eventType": "COMPLETE", "outputs": [_output("/w/bench.db/q02", ["a", "b"], {"a": ["x"], "b": ["y"]})]},
        {"eventType": "COMPLETE", "outputs": [_output("/w/bench.db/q03", ["a", "k"], {"a": ["x"], "k": []})]},
    ]

    coverage = coverage_by_statement(events, ["q01", "q02", "q03"])

    assert coverage["q01"].with_inputs == ("a",)
    assert coverage["q01"].without_inputs == ("b", "c")
    assert not coverage["q01"].complete_strict
    assert coverage["q02"].complete_strict
    assert not coverage["q03"].complete_strict


def test_percentiles_use_nearest_rank_and_the_middle_mean_for_even_medians() -> None:
    values = sorted(float(v) for v in range(1, 21))

    assert percentile(values, 95) == 19.0
    assert percentile(values, 50) == 10.5
    summary = distribution([3.0, 1.0, 2.0])
    assert (summary.count, summary.total, summary.median, summary.p95, summary.maximum) == (3, 6.0, 2.0, 3.0, 3.0)


def _summary(median: float, covered: list[str]) -> dict[str, Any]:
    figures = {"median": median, "p95": median * 3, "maximum": median * 5, "total": median * 10, "count": 10}
    keys = ("action_ms", "capture_ms", "queueing_ms", "build_ms", "statement_ms")
    return {
        "emitted": {
            **{key: figures for key in keys},
            "wall_ratio": 1.05,
            "cpu_ratio": 1.04,
            "covered_strict": covered,
            "covered": covered,
            "statements": 2,
        }
    }


def test_two_runs_side_by_side_name_both_figures_and_whether_coverage_is_the_same() -> None:
    from benchmarks.tpcds.report import format_side_by_side

    table = format_side_by_side(_summary(17.0, ["q1"]), _summary(8.0, ["q1"]))
    assert "all emitter work per CTAS" in table
    row = next(line for line in table.splitlines() if line.startswith("all emitter work per CTAS"))
    assert "17.0 / 51.0 ms" in row and row.index("17.0") < row.index("8.0 / 24.0 ms")
    assert table.endswith("the same statements covered: yes")
    assert format_side_by_side(_summary(17.0, ["q1"]), _summary(8.0, [])).endswith("NO")
