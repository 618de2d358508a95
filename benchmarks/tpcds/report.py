"""The benchmark's figures from per-statement timings and coverage, and their printed form (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from benchmarks.tpcds.analysis import Coverage, Distribution, distribution
from benchmarks.tpcds.engine_check import EngineVerdict

PLAIN = "plain"  # the session without the emitter
EXTRACTION_MEDIAN_TARGET_MS = 5.0
EXTRACTION_P95_TARGET_MS = 25.0
WALL_RATIO_TARGET = 1.02


@attrs.define
class StatementTiming:
    name: str
    seconds: dict[str, float] = attrs.field(factory=dict)  # variant → submit-to-settled wall time
    call_seconds: dict[str, float] = attrs.field(factory=dict)  # variant → until spark.sql returned
    cpu_seconds: dict[str, float] = attrs.field(factory=dict)  # variant → Python + JVM CPU, submit to settled
    errors: dict[str, str] = attrs.field(factory=dict)
    # per emitted variant:
    capture_ms: dict[str, list[float]] = attrs.field(factory=dict)  # JVM copy-out per captured callback
    queueing_ms: dict[str, list[float]] = attrs.field(factory=dict)  # dedupe + queueing per capture (on the bus)
    build_ms: dict[str, list[float]] = attrs.field(factory=dict)  # parse + lineage + events + emit (pipeline thread)
    captures: dict[str, list[Any]] = attrs.field(factory=dict, repr=False)  # what the pipeline received
    first: str = PLAIN


@attrs.frozen
class Summary:
    variant: str  # the emitted session these figures are of (compact plan dump or toJSON())
    statements: int
    failed: dict[str, dict[str, str]]  # statement → variant → error
    covered_strict: list[str]  # statements whose every output column has input fields in the facet
    covered: list[str]  # same, also counting columns the engine marks source-less
    source_less: dict[str, list[str]]  # statement → columns without inputs the engine marks source-less
    not_covered: dict[str, list[str]]  # statement → columns without inputs, not marked source-less
    engine_warnings: dict[str, list[str]]  # statement → the engine's warnings for its plan
    without_event: list[str]  # statements that ran but whose output never appeared in an event
    action_ms: Distribution  # capture + queueing: what each captured callback holds Spark's listener bus
    capture_ms: Distribution  # JVM copy-out (plan JSON, leaves, write target) per callback
    queueing_ms: Distribution  # wrapper dedupe + queueing for the pipeline thread, per callback
    build_ms: Distribution  # plan parse + lineage + event build + transport emit, on the pipeline thread
    statement_ms: Distribution  # all emitter work of one CTAS (its callbacks and its builds)
    plain_seconds: float
    emitted_seconds: float
    wall_ratio: float
    median_query_ratio: float
    call_ratio: float  # same, timed only until spark.sql returned (callbacks run after)
    plain_cpu_seconds: float  # Python + driver JVM CPU (executors are threads of that JVM in local mode)
    emitted_cpu_seconds: float
    cpu_ratio: float
    median_query_cpu_ratio: float

    @property
    def extraction_target_met(self) -> bool:
        return self.action_ms.median <= EXTRACTION_MEDIAN_TARGET_MS and self.action_ms.p95 <= EXTRACTION_P95_TARGET_MS

    @property
    def wall_target_met(self) -> bool:
        return self.wall_ratio <= WALL_RATIO_TARGET


def summarize(
    timings: Sequence[StatementTiming],
    coverage: Mapping[str, Coverage],
    verdicts: Mapping[str, EngineVerdict],
    variant: str = "emitted",
) -> Summary:
    """The figures of the emitted session `variant` against the plain one."""
    ran = [timing for timing in timings if not timing.errors]
    capture_ms = [timing.capture_ms.get(variant, []) for timing in ran]
    queueing_ms = [timing.queueing_ms.get(variant, []) for timing in ran]
    build_ms = [timing.build_ms.get(variant, []) for timing in ran]
    action_ms = [
        c + q
        for captures, queueings in zip(capture_ms, queueing_ms, strict=True)
        for c, q in zip(captures, queueings, strict=False)
    ]
    plain = sum(timing.seconds["plain"] for timing in ran)
    emitted = sum(timing.seconds[variant] for timing in ran)
    plain_calls = sum(timing.call_seconds["plain"] for timing in ran)
    emitted_calls = sum(timing.call_seconds[variant] for timing in ran)
    ratios = [timing.seconds[variant] / timing.seconds["plain"] for timing in ran]
    plain_cpu = sum(timing.cpu_seconds["plain"] for timing in ran)
    emitted_cpu = sum(timing.cpu_seconds[variant] for timing in ran)
    cpu_ratios = [timing.cpu_seconds[variant] / timing.cpu_seconds["plain"] for timing in ran if timing.cpu_seconds["plain"]]
    checked = [coverage[timing.name] for timing in ran if timing.name in coverage]
    marked = {item.statement: _marked_source_less(item, verdicts.get(item.statement)) for item in checked}
    unexplained = {
        item.statement: [c for c in item.output_columns if c not in item.with_inputs and c not in marked[item.statement]]
        for item in checked
    }
    return Summary(
        variant=variant,
        statements=len(timings),
        failed={timing.name: dict(timing.errors) for timing in timings if timing.errors},
        covered_strict=[item.statement for item in checked if item.complete_strict],
        covered=[item.statement for item in checked if item.output_columns and not unexplained[item.statement]],
        source_less={name: columns for name, columns in marked.items() if columns},
        not_covered={name: columns for name, columns in unexplained.items() if columns},
        engine_warnings={name: list(v.warnings) for name, v in verdicts.items() if v.warnings},
        without_event=[timing.name for timing in ran if timing.name not in coverage],
        action_ms=distribution(action_ms),
        capture_ms=distribution([ms for captures in capture_ms for ms in captures]),
        queueing_ms=distribution([ms for queueings in queueing_ms for ms in queueings]),
        build_ms=distribution([ms for builds in build_ms for ms in builds]),
        statement_ms=distribution([sum(c) + sum(q) + sum(b) for c, q, b in zip(capture_ms, queueing_ms, build_ms, strict=True)]),
        plain_seconds=plain,
        emitted_seconds=emitted,
        wall_ratio=emitted / plain if plain else float("nan"),
        median_query_ratio=distribution(ratios).median,
        call_ratio=emitted_calls / plain_calls if plain_calls else float("nan"),
        plain_cpu_seconds=plain_cpu,
        emitted_cpu_seconds=emitted_cpu,
        cpu_ratio=emitted_cpu / plain_cpu if plain_cpu else float("nan"),
        median_query_cpu_ratio=distribution(cpu_ratios).median,
    )


def _marked_source_less(item: Coverage, engine: EngineVerdict | None) -> list[str]:
    """Output columns without input fields that the engine resolved to no input, warning-free."""
    if engine is None or engine.warnings:
        return []
    return [c for c in item.output_columns if c not in item.with_inputs and c in engine.source_less]


def format_report(summaries: Mapping[str, Summary]) -> str:
    """Each emitted variant's figures, then the compact dump against toJSON() side by side."""
    blocks = [_format_summary(summary) for summary in summaries.values()]
    if len(summaries) == 2:
        blocks.append(_comparison(*summaries.values()))
    return "\n".join(blocks)


def _comparison(new: Summary, old: Summary) -> str:
    same = (new.covered_strict, new.covered) == (old.covered_strict, old.covered)
    return "\n".join(
        [
            "",
            f"{new.variant} against {old.variant} (same run):",
            f"  listener-bus time per action median {new.action_ms.median:.1f} vs {old.action_ms.median:.1f} ms,"
            f" p95 {new.action_ms.p95:.1f} vs {old.action_ms.p95:.1f} ms, sum {new.action_ms.total:.0f} vs {old.action_ms.total:.0f} ms",
            f"  all emitter work per CTAS median {new.statement_ms.median:.1f} vs {old.statement_ms.median:.1f} ms,"
            f" p95 {new.statement_ms.p95:.1f} vs {old.statement_ms.p95:.1f} ms,"
            f" sum {new.statement_ms.total:.0f} vs {old.statement_ms.total:.0f} ms",
            f"  wall ratio to plain {new.wall_ratio:.3f} vs {old.wall_ratio:.3f}; CPU ratio {new.cpu_ratio:.3f} vs {old.cpu_ratio:.3f}",
            f"  coverage {len(new.covered_strict)} / {len(new.covered)} vs {len(old.covered_strict)} / {len(old.covered)}"
            f" (strict / lenient): {'the same statements' if same else 'DIFFERENT'}",
        ]
    )


def _format_summary(summary: Summary) -> str:
    ran = summary.statements - len(summary.failed)
    lines = [
        "",
        f"== {summary.variant} ==",
        f"TPC-DS CTAS statements: {summary.statements}, ran in both variants: {ran}, failed: {len(summary.failed)}",
        *(f"  failed {name}: {errors}" for name, errors in summary.failed.items()),
        f"column lineage for every output column: {len(summary.covered_strict)} of {ran} with input fields for"
        f" every column; {len(summary.covered)} of {ran} counting columns the engine marks source-less",
        *(f"  {name}: source-less per the engine: {', '.join(columns)}" for name, columns in summary.source_less.items()),
        *(f"  {name}: NO lineage for {', '.join(columns)}" for name, columns in summary.not_covered.items()),
        *(f"  {name}: engine warnings: {'; '.join(warnings)}" for name, warnings in summary.engine_warnings.items()),
        *(f"  {name}: no event with this output" for name in summary.without_event),
        "listener-bus time per action (each captured Spark callback):",
        _distribution_line("  total   ", summary.action_ms),
        _distribution_line("  capture ", summary.capture_ms),
        _distribution_line("  queueing", summary.queueing_ms),
        _distribution_line("pipeline thread per build (parse, lineage, facets, events, emit)", summary.build_ms),
        _distribution_line("all emitter work per CTAS (callbacks and builds)", summary.statement_ms),
        f"wall time: plain {summary.plain_seconds:.1f} s, emitted {summary.emitted_seconds:.1f} s,"
        f" ratio {summary.wall_ratio:.3f}; per-query median ratio {summary.median_query_ratio:.3f};"
        f" until spark.sql returned: ratio {summary.call_ratio:.3f}",
        f"CPU time (Python + driver JVM): plain {summary.plain_cpu_seconds:.1f} s, emitted"
        f" {summary.emitted_cpu_seconds:.1f} s, ratio {summary.cpu_ratio:.3f}; per-query median ratio"
        f" {summary.median_query_cpu_ratio:.3f}",
        f"targets: listener-bus time per action median <= {EXTRACTION_MEDIAN_TARGET_MS:.0f} ms and p95 <= {EXTRACTION_P95_TARGET_MS:.0f} ms "
        f"{'met' if summary.extraction_target_met else 'NOT met'}; wall ratio <= {WALL_RATIO_TARGET} "
        f"{'met' if summary.wall_target_met else 'NOT met'}",
    ]
    return "\n".join(lines)


def _distribution_line(label: str, values: Distribution) -> str:
    return (
        f"{label}: n={values.count} median {values.median:.1f} ms, p95 {values.p95:.1f} ms,"
        f" max {values.maximum:.1f} ms, sum {values.total:.0f} ms"
    )


SIDE_BY_SIDE_ROWS = (
    ("listener-bus time per action", "action_ms"),
    ("  capture (JVM copy-out)", "capture_ms"),
    ("  dedupe and queueing", "queueing_ms"),
    ("pipeline thread per build", "build_ms"),
    ("all emitter work per CTAS", "statement_ms"),
)


def format_side_by_side(landed: Mapping[str, Any], this: Mapping[str, Any], variant: str = "emitted") -> str:
    """Two runs' `summary.json` (the landed code's and this code's, run one after the other on
    the same statements) as one table: median / p95 ms of each figure, coverage and ratios."""
    old, new = landed[variant], this[variant]
    lines = [f"{'figure':34s} {'landed':>18s} {'this code':>18s}"]
    for label, key in SIDE_BY_SIDE_ROWS:
        lines.append(f"{label:34s} {_median_p95(old[key]):>18s} {_median_p95(new[key]):>18s}")
    for label, key in (("wall ratio to plain", "wall_ratio"), ("CPU ratio to plain", "cpu_ratio")):
        lines.append(f"{label:34s} {old[key]:>18.3f} {new[key]:>18.3f}")
    coverage = [f"{len(run['covered_strict'])} / {len(run['covered'])} of {run['statements']}" for run in (old, new)]
    lines.append(f"{'coverage strict / lenient':34s} {coverage[0]:>18s} {coverage[1]:>18s}")
    same = (old["covered_strict"], old["covered"]) == (new["covered_strict"], new["covered"])
    lines.append(f"the same statements covered: {'yes' if same else 'NO'}")
    return "\n".join(lines)


def _median_p95(values: Mapping[str, Any]) -> str:
    return f"{values['median']:.1f} / {values['p95']:.1f} ms"
