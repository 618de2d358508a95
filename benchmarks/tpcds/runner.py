"""`python -m benchmarks.tpcds run`: every TPC-DS CTAS without and with the emitter, in one run.

One SparkContext, two sessions over the same catalog: `plain` and `emitted` (a `newSession()`
with `emitter.attach`; Spark's QueryExecutionListeners are per session, so the plain one runs
no emitter code). Per statement both run back to back, alternating which goes first, and the
CTAS table is dropped after each. A statement's wall time runs from submitting the CTAS until
Spark's listener bus is empty, so it includes the emitter's callbacks, which Spark runs
asynchronously after the action.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from benchmarks.tpcds import analysis, generate, spark as spark_io
from benchmarks.tpcds.cpu import CpuClock
from benchmarks.tpcds.engine_check import EngineVerdict, run_capture, verdict
from benchmarks.tpcds.paths import results_dir, tables_dir
from benchmarks.tpcds.queries import Ctas, all_ctas, load_query_texts, select_queries
from benchmarks.tpcds.report import Summary, format_report, summarize

PLAIN, EMITTED = "plain", "emitted"


@attrs.define
class StatementTiming:
    name: str
    seconds: dict[str, float] = attrs.field(factory=dict)  # variant → submit-to-settled wall time
    call_seconds: dict[str, float] = attrs.field(factory=dict)  # variant → until spark.sql returned
    cpu_seconds: dict[str, float] = attrs.field(factory=dict)  # variant → Python + JVM CPU, submit to settled
    errors: dict[str, str] = attrs.field(factory=dict)
    capture_ms: list[float] = attrs.field(factory=list)  # JVM copy-out per captured callback
    pipeline_ms: list[float] = attrs.field(factory=list)  # parse + lineage + events + emit per capture
    captures: list[Any] = attrs.field(factory=list, repr=False)  # what the pipeline received
    first: str = PLAIN


class _PipelineTimer:
    """Wraps the listener's hand-off to the pipeline to time what runs in Python per capture."""

    def __init__(self, handle: Callable[[Any], Any]) -> None:
        self._handle = handle
        self.pipeline_ms: list[float] = []
        self.captures: list[Any] = []

    def __call__(self, capture: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._handle(capture)
        finally:
            self.pipeline_ms.append((time.perf_counter() - started) * 1000)
            self.captures.append(capture)


def main(wanted: Sequence[str] | None = None) -> int:
    generate.ensure_generated()
    statements = all_ctas(select_queries(load_query_texts(), wanted))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output_dir = results_dir() / stamp
    output_dir.mkdir(parents=True, exist_ok=True)
    summary = run(statements, output_dir)
    print(format_report(summary))
    (output_dir / "summary.json").write_text(json.dumps(attrs.asdict(summary), indent=1, default=str) + "\n")
    print(f"\nevents: {output_dir / 'events.jsonl'}\nsummary: {output_dir / 'summary.json'}")
    return 0


def run(statements: list[Ctas], output_dir: Path, tables_root: Path | None = None) -> Summary:
    """Time `statements` in both variants; events land in `output_dir/events.jsonl`."""
    tables_root = tables_root or tables_dir()
    events_path = output_dir / "events.jsonl"
    warehouse = Path(tempfile.mkdtemp(prefix="warehouse-", dir=output_dir))
    plain = spark_io.build_session(warehouse, "tpcds-bench")
    try:
        spark_io.register_tables(plain, tables_root, generate.table_names(tables_root))
        emitted = plain.newSession()
        emitted.catalog.setCurrentDatabase(spark_io.SOURCE_DATABASE)
        attachment, timer = _attach(emitted, events_path)
        clock = CpuClock(spark_io.jvm_pid(plain))
        timings = _run_all(plain, emitted, attachment, timer, clock, statements)
        attachment.close()
    finally:
        plain.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    coverage = analysis.coverage_by_statement(analysis.read_events(events_path), [s.name for s in statements])
    return summarize(timings, coverage, _engine_verdicts(timings))


def _engine_verdicts(timings: list[StatementTiming]) -> dict[str, EngineVerdict]:
    verdicts = {}
    for timing in timings:
        capture = run_capture(timing.captures)
        if capture is not None:
            verdicts[timing.name] = verdict(capture)
    return verdicts


def _attach(session: Any, events_path: Path) -> tuple[Any, _PipelineTimer]:
    import emitter

    transport = {"type": "file", "log_file_path": str(events_path), "append": True}
    attachment = emitter.attach(session, config={"transport": transport})
    if attachment is None:
        raise RuntimeError("emitter.attach returned None (disabled, or it failed: see the log)")
    timer = _PipelineTimer(attachment.listener.handle)
    attachment.listener.handle = timer
    return attachment, timer


def _run_all(
    plain: Any, emitted: Any, attachment: Any, timer: _PipelineTimer, clock: CpuClock, statements: list[Ctas]
) -> list[StatementTiming]:
    sessions = {PLAIN: plain, EMITTED: emitted}
    _warm_up(sessions, statements[0], clock)
    timings = []
    for position, statement in enumerate(statements):
        order = (PLAIN, EMITTED) if position % 2 == 0 else (EMITTED, PLAIN)
        timing = StatementTiming(statement.name, first=order[0])
        for variant in order:
            captures_before, pipelines_before = len(attachment.listener.extraction_ms), len(timer.pipeline_ms)
            _time_one(sessions[variant], statement, variant, timing, clock)
            if variant == EMITTED:
                timing.capture_ms = attachment.listener.extraction_ms[captures_before:]
                timing.pipeline_ms = timer.pipeline_ms[pipelines_before:]
                timing.captures = timer.captures[pipelines_before:]
        timings.append(timing)
        print(_progress_line(timing), flush=True)
    return timings


def _warm_up(sessions: dict[str, Any], statement: Ctas, clock: CpuClock) -> None:
    """JIT, Janino helper compilation and Python imports happen once here, outside the figures."""
    for session in sessions.values():
        _time_one(session, statement, "warm-up", StatementTiming(statement.name), clock)


def _time_one(session: Any, statement: Ctas, variant: str, timing: StatementTiming, clock: CpuClock) -> None:
    spark_io.drop_table(session, statement.table)
    spark_io.wait_for_listener_bus(session)
    cpu_started = clock.now()
    started = time.perf_counter()
    try:
        spark_io.run_ctas(session, statement)
    except Exception as error:  # a query Spark rejects is reported, not fatal
        timing.errors[variant] = str(error).splitlines()[0] if str(error) else type(error).__name__
    returned = time.perf_counter()
    spark_io.wait_for_listener_bus(session)
    settled = time.perf_counter()
    timing.cpu_seconds[variant] = clock.now() - cpu_started
    timing.call_seconds[variant] = returned - started
    timing.seconds[variant] = settled - started
    spark_io.drop_table(session, statement.table)
    spark_io.wait_for_listener_bus(session)


def _progress_line(timing: StatementTiming) -> str:
    plain, emitted = timing.seconds.get(PLAIN, 0.0), timing.seconds.get(EMITTED, 0.0)
    extraction = sum(timing.capture_ms) + sum(timing.pipeline_ms)
    errors = f" ERRORS {timing.errors}" if timing.errors else ""
    cpu = f"cpu plain {timing.cpu_seconds.get(PLAIN, 0.0):.2f}s emitted {timing.cpu_seconds.get(EMITTED, 0.0):.2f}s"
    return (
        f"{timing.name}: plain {plain:.2f}s emitted {emitted:.2f}s {cpu} "
        f"(first {timing.first}) extraction {extraction:.0f} ms in {len(timing.capture_ms)} captures{errors}"
    )
