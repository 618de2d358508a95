"""The benchmark runner on real Spark with the real emitter attached to one of two sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tpcds.queries import all_ctas, select_queries
from benchmarks.tpcds.runner import EMITTED, TOJSON, run

pytestmark = pytest.mark.spark


def test_runner_times_the_variants_and_counts_lineage_from_the_emitted_events(
    tmp_path: Path, tpcds_tables: Path, tpcds_query_texts: dict[str, str], openlineage_spec: Any
) -> None:
    statements = all_ctas(select_queries(tpcds_query_texts, ["q42", "q3", "q96"]))

    summaries = run(statements, tmp_path, tpcds_tables)
    summary = summaries[EMITTED]

    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for event in events:
        openlineage_spec(event)
    q03_runs = [
        event
        for event in events
        if event["eventType"] == "COMPLETE" and any(o["name"].endswith("/bench.db/q03") for o in event["outputs"])
    ]
    # q42 also ran as the warm-up; q03 ran once per variant, and each emitted session writes its own file.
    assert len(q03_runs) == 1
    assert summary.statements == 3 and summary.failed == {}
    # q96 is `SELECT count(*) ...`: no input column, which the engine reports as source-less.
    assert sorted(summary.covered_strict) == ["q03", "q42"]
    assert sorted(summary.covered) == ["q03", "q42", "q96"]
    assert summary.source_less == {"q96": ["count(1)"]}
    assert summary.not_covered == {} and summary.without_event == []
    assert summary.statement_ms.count == 3
    assert summary.action_ms.count == summary.capture_ms.count == summary.queueing_ms.count >= 2
    assert summary.build_ms.count >= 3, "one build per CTAS at least, on the pipeline thread"
    assert summary.plain_seconds > 0 and summary.emitted_seconds > 0
    assert summary.plain_cpu_seconds > 0 and summary.emitted_cpu_seconds > 0
    assert not list(tmp_path.glob("warehouse-*"))
    # the toJSON() session gives the same coverage from its own events
    old = summaries[TOJSON]
    assert (old.covered_strict, old.covered, old.source_less) == (summary.covered_strict, summary.covered, summary.source_less)
    assert old.action_ms.count == summary.action_ms.count
