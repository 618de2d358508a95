"""`python -m benchmarks.tpcds run`: every TPC-DS CTAS without and with the emitter, in one run.

One SparkContext, three sessions over the same catalog: `plain`, `emitted` (a `newSession()`
with `emitter.attach`, plans written by the listener's compact dump) and `emitted-toJSON` (the
same, plans written by Spark's own `toJSON()`, the path the compact dump replaced); Spark's
QueryExecutionListeners are per session, so the plain one runs no emitter code. Per statement
the three run back to back, rotating which goes first, and the CTAS table is dropped after each.
A statement's wall time runs from submitting the CTAS until Spark's listener bus is empty and
the emitter's pipeline thread has handed every event to the transport, so it includes all the
emitter's work (Spark runs the callbacks asynchronously after the action; the emitter builds
events on its own thread after the callback).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from benchmarks.tpcds import analysis, generate
from benchmarks.tpcds import spark as spark_io
from benchmarks.tpcds.cpu import CpuClock
from benchmarks.tpcds.engine_check import EngineVerdict, run_capture, verdict
from benchmarks.tpcds.paths import results_dir, tables_dir
from benchmarks.tpcds.queries import Ctas, all_ctas, load_query_texts, select_queries
from benchmarks.tpcds.report import PLAIN, StatementTiming, Summary, format_report, summarize

EMITTED, TOJSON = "emitted", "emitted-toJSON"
EMITTED_VARIANTS = (EMITTED, TOJSON)
EVENT_FILES = {EMITTED: "events.jsonl", TOJSON: "events-toJSON.jsonl"}


class _PipelineTimer:
    """Stands between the batch listener and the attachment's pipeline thread to time the dedupe
    and queueing of each capture (on Spark's listener bus), and times each build on the pipeline
    thread; everything else goes through unchanged."""

    def __init__(self, dedupe: Any, worker: Any) -> None:
        self._dedupe = dedupe
        self._worker = worker
        self._build_actions = worker.build_actions
        worker.build_actions = self._timed_build  # the worker looks it up per item it queues
        self.queueing_ms: list[float] = []
        self.build_ms: list[float] = []
        self.captures: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dedupe, name)

    def accept(self, capture: Any) -> Any:
        started = time.perf_counter()
        try:
            ready = self._dedupe.accept(capture)
            self._worker.handle_actions(ready)
            return []
        finally:
            self.queueing_ms.append((time.perf_counter() - started) * 1000)
            self.captures.append(capture)

    def _timed_build(self, actions: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._build_actions(actions)
        finally:
            self.build_ms.append((time.perf_counter() - started) * 1000)


def main(wanted: Sequence[str] | None = None, master: str = spark_io.DEFAULT_MASTER) -> int:
    generate.ensure_generated()
    statements = all_ctas(select_queries(load_query_texts(), wanted))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output_dir = results_dir() / stamp
    output_dir.mkdir(parents=True, exist_ok=True)
    summaries = run(statements, output_dir, master=master)
    print(f"Spark master: {master}")
    print(format_report(summaries))
    as_json: dict[str, Any] = {variant: attrs.asdict(summary) for variant, summary in summaries.items()}
    as_json["master"] = master
    (output_dir / "summary.json").write_text(json.dumps(as_json, indent=1, default=str) + "\n")
    print(f"\nevents: {output_dir / 'events.jsonl'}\nsummary: {output_dir / 'summary.json'}")
    return 0


def run(
    statements: list[Ctas], output_dir: Path, tables_root: Path | None = None, master: str = spark_io.DEFAULT_MASTER
) -> dict[str, Summary]:
    """Time `statements` in the three variants; the summary of each emitted variant. The events
    land in `output_dir/events.jsonl` (compact dump) and `output_dir/events-toJSON.jsonl`."""
    tables_root = tables_root or tables_dir()
    warehouse = Path(tempfile.mkdtemp(prefix="warehouse-", dir=output_dir))
    plain = spark_io.build_session(warehouse, "tpcds-bench", master)
    try:
        spark_io.register_tables(plain, tables_root, generate.table_names(tables_root))
        sessions = {PLAIN: plain}
        attached: dict[str, tuple[Any, _PipelineTimer]] = {}
        for variant in EMITTED_VARIANTS:
            sessions[variant] = plain.newSession()
            sessions[variant].catalog.setCurrentDatabase(spark_io.SOURCE_DATABASE)
            attached[variant] = _attach(sessions[variant], output_dir / EVENT_FILES[variant], compact=variant == EMITTED)
        clock = CpuClock(spark_io.jvm_pid(plain))
        timings = _run_all(sessions, attached, clock, statements)
        for attachment, _ in attached.values():
            attachment.close()
    finally:
        plain.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    names = [s.name for s in statements]
    return {
        variant: summarize(
            timings,
            analysis.coverage_by_statement(analysis.read_events(output_dir / EVENT_FILES[variant]), names),
            _engine_verdicts(timings, variant),
            variant,
        )
        for variant in EMITTED_VARIANTS
    }


def _engine_verdicts(timings: list[StatementTiming], variant: str) -> dict[str, EngineVerdict]:
    verdicts = {}
    for timing in timings:
        capture = run_capture(timing.captures.get(variant, []))
        if capture is not None:
            verdicts[timing.name] = verdict(capture)
    return verdicts


def _attach(session: Any, events_path: Path, compact: bool) -> tuple[Any, _PipelineTimer]:
    import emitter

    transport = {"type": "file", "log_file_path": str(events_path), "append": True}
    attachment = emitter.attach(session, config={"transport": transport})
    if attachment is None:
        raise RuntimeError("emitter.attach returned None (disabled, or it failed: see the log)")
    if not compact:
        attachment.listener.dumper.set_compact(False)
    timer = _PipelineTimer(attachment.listener.dedupe, attachment.worker)
    attachment.listener.dedupe = timer  # type: ignore[assignment]
    return attachment, timer


def _run_all(
    sessions: dict[str, Any], attached: dict[str, tuple[Any, _PipelineTimer]], clock: CpuClock, statements: list[Ctas]
) -> list[StatementTiming]:
    _warm_up(sessions, statements[0], clock)
    variants = list(sessions)
    timings = []
    for position, statement in enumerate(statements):
        shift = position % len(variants)
        order = variants[shift:] + variants[:shift]
        timing = StatementTiming(statement.name, first=order[0])
        for variant in order:
            if variant not in attached:
                _time_one(sessions[variant], statement, variant, timing, clock)
                continue
            attachment, timer = attached[variant]
            captures_before, queued_before = len(attachment.listener.extraction_ms), len(timer.queueing_ms)
            builds_before = len(timer.build_ms)
            _time_one(sessions[variant], statement, variant, timing, clock)
            timing.capture_ms[variant] = attachment.listener.extraction_ms[captures_before:]
            timing.queueing_ms[variant] = timer.queueing_ms[queued_before:]
            timing.build_ms[variant] = timer.build_ms[builds_before:]
            timing.captures[variant] = timer.captures[queued_before:]
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
    except Exception as error:  # noqa: BLE001 - a query Spark rejects is reported, not fatal
        timing.errors[variant] = str(error).splitlines()[0] if str(error) else type(error).__name__
    returned = time.perf_counter()
    spark_io.wait_for_listener_bus(session)
    settled = time.perf_counter()
    timing.cpu_seconds[variant] = clock.now() - cpu_started
    timing.call_seconds[variant] = returned - started
    timing.seconds[variant] = settled - started
    spark_io.drop_table(session, statement.table)
    spark_io.wait_for_listener_bus(session)


def _emitter_ms(timing: StatementTiming, variant: str) -> float:
    return sum(timing.capture_ms[variant]) + sum(timing.queueing_ms[variant]) + sum(timing.build_ms[variant])


def _progress_line(timing: StatementTiming) -> str:
    walls = " ".join(f"{variant} {seconds:.2f}s" for variant, seconds in timing.seconds.items())
    extraction = " ".join(f"{variant} {_emitter_ms(timing, variant):.0f} ms" for variant in timing.capture_ms)
    errors = f" ERRORS {timing.errors}" if timing.errors else ""
    return f"{timing.name}: {walls} (first {timing.first}); extraction {extraction}{errors}"
