"""Run the lineage engine over the captured TPC-DS write plans (benchmarks/.data/plans, made by
`python -m benchmarks.tpcds capture`) and report crashes, warnings, coverage and engine time.

    .venv/bin/python -m tests.lineage.measure_tpcds [--verbose]

A column is covered when it has input columns, or when it is legitimately source-less: every
path from it ends in an expression that reads no column (a literal, count(*), current_date()).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from emitter.lineage import column_lineage, write_command
from emitter.lineage.graph import Graph
from emitter.plan import parse_plan

PLANS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / ".data" / "plans"


def _sourceless(graph: Graph, expr_id: int, seen: set[int]) -> bool:
    if expr_id in seen:
        return True
    seen.add(expr_id)
    if expr_id in graph.leaves:
        return False
    edges = graph.edges.get(expr_id, [])
    if not edges:
        return expr_id in graph.declared
    return all(_sourceless(graph, source, seen) for source, _ in edges)


def main(verbose: bool) -> int:
    entries = [
        entry
        for entry in json.loads((PLANS_DIR / "index.json").read_text())
        if entry["is_write"] and (PLANS_DIR / entry["file"]).exists()
    ]
    parse_ms: list[float] = []
    engine_ms: list[float] = []
    engine_wall_ms: list[float] = []
    crashes: list[str] = []
    warnings: Counter[str] = Counter()
    fully_covered = 0
    uncovered_columns: list[str] = []
    for entry in entries:
        text = (PLANS_DIR / entry["file"]).read_text()
        try:
            started = time.process_time()
            root = parse_plan(text)
            parsed, parsed_wall = time.process_time(), time.perf_counter()
            command = write_command(root)
            assert command is not None, f"not a write: {root.cls}"
            result = column_lineage(command.query, {}, command.output_columns)
            finished, finished_wall = time.process_time(), time.perf_counter()
        except Exception:
            crashes.append(f"{entry['name']}: {traceback.format_exc(limit=3)}")
            continue
        parse_ms.append((parsed - started) * 1000)
        engine_ms.append((finished - parsed) * 1000)
        engine_wall_ms.append((finished_wall - parsed_wall) * 1000)
        warnings.update(result.warnings)
        graph = Graph()
        graph.add_plan(command.query)
        missing = [
            name
            for (name, edges), attribute in zip(result.columns.items(), command.query.output, strict=False)
            if not edges and not _sourceless(graph, attribute.expr_id, set())
        ]
        if missing:
            uncovered_columns.extend(f"{entry['name']}.{name}" for name in missing)
        else:
            fully_covered += 1
    print(f"write plans: {len(entries)}  crashes: {len(crashes)}  fully covered: {fully_covered}")
    print(f"warnings: {sum(warnings.values())} {dict(warnings)}")
    print(f"uncovered columns: {len(uncovered_columns)} {uncovered_columns[:30]}")
    print("CPU time (process_time) except where marked wall; the machine is shared, wall time is noisier:")
    for label, values in (("parse", parse_ms), ("engine", engine_ms), ("engine wall", engine_wall_ms)):
        ordered = sorted(values)
        p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
        print(f"{label} ms: median {statistics.median(ordered):.2f}  p95 {p95:.2f}  max {ordered[-1]:.2f}")
    if verbose:
        for crash in crashes:
            print(crash)
    return 0


if __name__ == "__main__":
    sys.exit(main("--verbose" in sys.argv))
