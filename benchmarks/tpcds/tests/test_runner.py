"""The benchmark runner on real Spark with the real emitter attached to one of two sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.tpcds.queries import all_ctas, select_queries
from benchmarks.tpcds.runner import run

pytestmark = pytest.mark.spark


def test_runner_times_both_variants_and_counts_lineage_from_the_emitted_events(
    tmp_path: Path, tpcds_tables: Path, tpcds_query_texts: dict[str, str], openlineage_spec
) -> None:
    statements = all_ctas(select_queries(tpcds_query_texts, ["q42", "q3", "q96"]))

    summary = run(statements, tmp_path, tpcds_tables)

    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for event in events:
        openlineage_spec(event)
    q03_runs = [
        event
        for event in events
        if event["eventType"] == "COMPLETE" and any(o["name"].endswith("/bench.db/q03") for o in event["outputs"])
    ]
    # q42 also ran as the warm-up; q03 ran once per variant, and only the emitted one reports.
    assert len(q03_runs) == 1
    assert summary.statements == 3 and summary.failed == {}
    # q96 is `SELECT count(*) ...`: no input column, which the engine reports as source-less.
    assert sorted(summary.covered_strict) == ["q03", "q42"]
    assert sorted(summary.covered) == ["q03", "q42", "q96"]
    assert summary.source_less == {"q96": ["count(1)"]}
    assert summary.not_covered == {} and summary.without_event == []
    assert summary.statement_ms.count == 3
    assert summary.action_ms.count == summary.capture_ms.count == summary.pipeline_ms.count >= 2
    assert summary.plain_seconds > 0 and summary.emitted_seconds > 0
    assert summary.plain_cpu_seconds > 0 and summary.emitted_cpu_seconds > 0
    assert not list(tmp_path.glob("warehouse-*"))
