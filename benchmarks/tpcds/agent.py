"""`python -m benchmarks.tpcds agent`: the OpenLineage Spark agent beside the emitter, on the TPC-DS CTAS.

One Spark application, three sessions of one SparkContext over the same catalog: `plain` (no
lineage tool), `emitter` (`emitter.attach`, file transport) and `agent` (the OpenLineage Spark
agent's `OpenLineageSparkListener`, file transport). The agent is an application-wide
SparkListener; its jar is on the driver's classpath from the JVM's start, and the one listener
instance is added to Spark's listener bus (`SparkContext.addSparkListener`, the shared queue
`spark.extraListeners` also uses) only around the agent's statements and removed after them,
so plain and emitter statements run without it. After one untimed warm-up statement per
variant, each statement runs once untimed in the plain session (Spark compiles and caches its
generated code, which every session shares, so no variant pays for it), then in the three
variants back to back, rotating which goes first; the CTAS table is dropped before and after
each run (outside the window).

Per window (submit → listener bus empty and emitter settled): wall time; CPU of this Python
process plus the driver JVM (`/proc`); the SQL executions Spark's status store counted; the
event lines and bytes the variant's tool wrote; and the listener-bus time of each listener class,
from Spark's own per-class timers (`LiveListenerBusMetrics`, `listenerProcessingTime.<class>`),
registered before Spark creates them with a reservoir that keeps every sample, so sums are exact.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from benchmarks.tpcds import agent_report, generate
from benchmarks.tpcds import spark as spark_io
from benchmarks.tpcds.agent_report import AGENT, AGENT_LISTENER, EMITTER, EMITTER_BUS_CLASSES, PLAIN, VARIANTS, Window
from benchmarks.tpcds.analysis import read_events
from benchmarks.tpcds.cpu import CpuClock
from benchmarks.tpcds.paths import results_dir, tables_dir
from benchmarks.tpcds.queries import Ctas, all_ctas, load_query_texts, select_queries
from benchmarks.tpcds.reference import reference_for

EVENT_FILES = {EMITTER: "events-emitter.jsonl", AGENT: "events-agent.jsonl"}
TIMED_CLASSES = (AGENT_LISTENER, *EMITTER_BUS_CLASSES)
TIMER_PREFIX = "listenerProcessingTime."
BUS_THREAD = "spark-listener-group-shared"  # the shared queue's dispatch thread (the agent's and ours)
RESERVOIR_SIZE = 1 << 20  # samples kept per timed class; more in one run would make sums wrong (checked)


def main(wanted: Sequence[str] | None = None, master: str = spark_io.DEFAULT_MASTER) -> int:
    generate.ensure_generated()
    statements = all_ctas(select_queries(load_query_texts(), wanted))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output_dir = results_dir() / f"agent-{stamp}"
    output_dir.mkdir(parents=True, exist_ok=True)
    result = run(statements, output_dir, master=master)
    (output_dir / "summary.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(result["report"])
    print(f"\nevents: {output_dir}\nsummary: {output_dir / 'summary.json'}")
    return 0


def run(
    statements: list[Ctas], output_dir: Path, tables_root: Path | None = None, master: str = spark_io.DEFAULT_MASTER
) -> dict[str, Any]:
    """Run `statements` in the three variants; the figures, the report and every window."""
    tables_root = tables_root or tables_dir()
    warehouse = Path(tempfile.mkdtemp(prefix="warehouse-", dir=output_dir))
    agent_jar = _agent_jar()
    spark = _start(warehouse, master, agent_jar, output_dir / EVENT_FILES[AGENT])
    try:
        versions = {"spark": spark.version, "agent_jar": agent_jar, "master": master}
        spark_io.register_tables(spark, tables_root, generate.table_names(tables_root))
        sessions = {PLAIN: spark, EMITTER: spark.newSession(), AGENT: spark.newSession()}
        for session in (sessions[EMITTER], sessions[AGENT]):
            session.catalog.setCurrentDatabase(spark_io.SOURCE_DATABASE)
        attachment = _attach(sessions[EMITTER], output_dir / EVENT_FILES[EMITTER])
        bench = _Bench(spark, output_dir, attachment.listener.extraction_ms)
        windows = bench.run_all(sessions, statements)
        timers = bench.timer_names()
        attachment.close()
    finally:
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    # kept before the figures are made, so a run's windows outlive a failure in making them
    (output_dir / "windows.json").write_text(json.dumps([attrs.asdict(window) for window in windows]) + "\n")
    result = figures(statements, windows, output_dir, tables_root)
    result["report"] = f"PySpark {versions['spark']}, {Path(agent_jar).name}, master {master}\n" + result["report"]
    result["versions"] = versions
    result["listener_timers"] = timers
    result["windows"] = [attrs.asdict(window) for window in windows]
    return result


def figures(statements: list[Ctas], windows: list[Window], output_dir: Path, tables_root: Path) -> dict[str, Any]:
    """Lineage against sqlglot's reference and cost per tool, with the printed report."""
    names = [statement.name for statement in statements]
    sqlglot_version, reference = reference_for(statements, tables_root)
    reference_columns = sum(len(columns) for columns in reference.values() if columns is not None)
    lineage, verdicts = {}, {}
    for variant in (EMITTER, AGENT):
        reported = agent_report.reported_lineage(read_events(output_dir / EVENT_FILES[variant]), names)
        verdicts[variant] = agent_report.compare(reported, reference)
        lineage[variant] = agent_report.lineage_figures(reported, verdicts[variant])
    costs = {variant: agent_report.cost_figures(windows, variant) for variant in VARIANTS}
    disagreements = agent_report.agent_right_we_not(verdicts[EMITTER], verdicts[AGENT])
    errors = sorted({f"{window.variant} {window.statement}: {window.error}" for window in windows if window.error})
    untraced = [name for name, columns in reference.items() if columns is None]
    plain_windows = [window for window in windows if window.variant == PLAIN and not window.error]
    plain_cpu_ms = 1000 * sum(window.cpu_seconds for window in plain_windows) / max(costs[PLAIN].actions, 1)
    report = "\n".join(
        [
            agent_report.format_table(lineage, costs, reference_columns),
            f"\nsqlglot {sqlglot_version}: {len(reference) - len(untraced)} of {len(reference)} statements traced"
            + (f" (not: {', '.join(untraced)})" if untraced else "")
            + f", {reference_columns} columns. {costs[EMITTER].actions} actions ({costs[EMITTER].statements} CTAS) per tool.",
            f"plain: {plain_cpu_ms:.1f} ms driver CPU per action. The emitter's own figure for its callbacks (JVM"
            f" description + Python capture, `extraction_ms`): {costs[EMITTER].own_capture_ms_per_action:.2f} ms per action.",
            agent_report.format_disagreements(disagreements),
            *(["errors: " + "; ".join(errors)] if errors else []),
        ]
    )
    return {
        "report": report,
        "sqlglot": sqlglot_version,
        "lineage": {variant: attrs.asdict(figure) for variant, figure in lineage.items()},
        "costs": {variant: attrs.asdict(cost) for variant, cost in costs.items()},
        "agent_right_emitter_not": [
            {
                "statement": ours.statement,
                "column": ours.column,
                "reference": sorted(ours.reference),
                "emitter": sorted(ours.reported),
                "agent": sorted(agent.reported),
            }
            for ours, agent in disagreements
        ],
        "wrong": {
            variant: [
                {"statement": v.statement, "column": v.column, "reference": sorted(v.reference), "reported": sorted(v.reported)}
                for v in verdicts[variant]
                if not v.equal
            ]
            for variant in verdicts
        },
    }


def _agent_jar() -> str:
    """The agent's jar of this PySpark's Scala version (jars/pom.xml: `openlineage-spark_<scala>`)."""
    import pyspark

    from jars import classpath

    jars_dir = Path(pyspark.__file__).parent / "jars"
    scala = ".".join(next(jars_dir.glob("scala-library-*.jar")).stem.split("-")[-1].split(".")[:2])
    return classpath(f"openlineage-spark_{scala}")


def _start(warehouse: Path, master: str, agent_jar: str, agent_events: Path) -> Any:
    """The SparkContext first, so the listener timers are registered before any session's
    ExecutionListenerBus asks for its own; then the session over it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster(master).setAppName("tpcds-agent-bench")
    settings = {
        **spark_io.SESSION_CONF,
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.driver.extraClassPath": agent_jar,
        "spark.sql.ui.retainedExecutions": "100000",  # the status store counts every execution of the run
        # read by the agent (the emitter reads no spark.openlineage.transport.* setting)
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(agent_events),
    }
    for key, value in settings.items():
        conf.set(key, value)
    context = SparkContext(conf=conf)
    context.setLogLevel("ERROR")
    jvm = context._jvm
    assert jvm is not None
    registry = context._jsc.sc().listenerBus().metrics().metricRegistry()
    for name in TIMED_CLASSES:
        reservoir = jvm.com.codahale.metrics.SlidingWindowReservoir(RESERVOIR_SIZE)
        registry.register(TIMER_PREFIX + name, jvm.com.codahale.metrics.Timer(reservoir))
    return SparkSession.builder.getOrCreate()


def _attach(session: Any, events_path: Path) -> Any:
    import emitter

    transport = {"type": "file", "log_file_path": str(events_path), "append": True}
    attachment = emitter.attach(session, config={"transport": transport})
    if attachment is None:
        raise RuntimeError("emitter.attach returned None (disabled, or it failed: see the log)")
    return attachment


class _Bench:
    def __init__(self, spark: Any, output_dir: Path, emitter_capture_ms: list[float]) -> None:
        self._spark = spark
        self._emitter_capture_ms = emitter_capture_ms  # appended to by the emitter's listener, per callback
        self._jsc = spark.sparkContext._jsc.sc()
        jvm = spark.sparkContext._jvm
        self._agent = jvm.io.openlineage.spark.agent.OpenLineageSparkListener(self._jsc.getConf())
        self._registry = self._jsc.listenerBus().metrics().metricRegistry()
        self._status = spark._jsparkSession.sharedState().statusStore()
        self._clock = CpuClock(spark_io.jvm_pid(spark))
        self._files = {variant: output_dir / name for variant, name in EVENT_FILES.items()}
        self._threads = jvm.java.lang.management.ManagementFactory.getThreadMXBean()
        self._bus_thread_id: int | None = None

    def run_all(self, sessions: dict[str, Any], statements: list[Ctas]) -> list[Window]:
        for variant, session in sessions.items():  # JIT, code generation, imports, the agent's setup
            self._window(session, statements[0], variant)
        windows = []
        for position, statement in enumerate(statements):
            # untimed, without a lineage tool: the statement's generated code is compiled and cached
            # here (Spark shares that cache between sessions), not in the first timed variant
            self._window(sessions[PLAIN], statement, PLAIN)
            shift = position % len(VARIANTS)
            order = [*VARIANTS[shift:], *VARIANTS[:shift]]
            done = [self._window(sessions[variant], statement, variant) for variant in order]
            windows.extend(done)
            print(_progress(statement, done), flush=True)
        return windows

    def timer_names(self) -> list[str]:
        return sorted(str(name) for name in self._registry.getTimers().keySet())

    def _window(self, session: Any, statement: Ctas, variant: str) -> Window:
        spark_io.drop_table(session, statement.table)
        spark_io.wait_for_listener_bus(session)
        if variant == AGENT:
            self._jsc.addSparkListener(self._agent)
        bus_before, executions_before, thread_before = self._bus_ns(), self._executions(), self._bus_thread_cpu_ns()
        sizes_before = {name: _size(path) for name, path in self._files.items()}
        captures_before = len(self._emitter_capture_ms)
        error = ""
        cpu_started, started = self._clock.now(), time.perf_counter()
        try:
            spark_io.run_ctas(session, statement)
        except Exception as exception:  # noqa: BLE001 - a query Spark rejects is reported, not fatal
            error = str(exception).splitlines()[0] if str(exception) else type(exception).__name__
        spark_io.wait_for_listener_bus(session)
        seconds, cpu_seconds = time.perf_counter() - started, self._clock.now() - cpu_started
        bus_after, executions = self._bus_ns(), self._executions() - executions_before
        thread_cpu_ns = self._bus_thread_cpu_ns() - thread_before
        if variant == AGENT:
            self._jsc.removeSparkListener(self._agent)
        events, event_bytes = 0, 0
        if variant in self._files:
            events, event_bytes = _appended(self._files[variant], sizes_before[variant])
        spark_io.drop_table(session, statement.table)
        spark_io.wait_for_listener_bus(session)
        bus = {name: bus_after[name] - bus_before.get(name, 0.0) for name in bus_after}
        own_ms = sum(self._emitter_capture_ms[captures_before:])
        return Window(
            statement.name, variant, seconds, cpu_seconds, executions, events, event_bytes, bus, thread_cpu_ns, own_ms, error
        )

    def _bus_thread_cpu_ns(self) -> float:
        """CPU nanoseconds so far of the shared queue's dispatch thread (the emitter's listener keeps
        that queue, and so its thread, alive for the whole run; the thread is found again if not)."""
        if self._bus_thread_id is not None:
            cpu_ns = int(self._threads.getThreadCpuTime(self._bus_thread_id))
            if cpu_ns >= 0:
                return float(cpu_ns)
        for thread in self._spark.sparkContext._jvm.java.lang.Thread.getAllStackTraces().keySet():
            if thread.getName() == BUS_THREAD:
                self._bus_thread_id = int(thread.getId())
                return float(self._threads.getThreadCpuTime(self._bus_thread_id))
        raise RuntimeError(f"no thread {BUS_THREAD!r}: the shared listener queue is not running")

    def _bus_ns(self) -> dict[str, float]:
        """Total listener-bus nanoseconds so far of each timed listener class."""
        totals = {}
        for name in TIMED_CLASSES:
            timer = self._registry.getTimers().get(TIMER_PREFIX + name)
            if timer is None:
                continue
            if timer.getCount() > RESERVOIR_SIZE:
                raise RuntimeError(f"{name}: more listener calls than the timer keeps ({RESERVOIR_SIZE})")
            snapshot = timer.getSnapshot()
            totals[name] = float(snapshot.getMean()) * int(snapshot.size())
        return totals

    def _executions(self) -> int:
        return int(self._status.executionsCount())


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _appended(path: Path, offset: int) -> tuple[int, int]:
    """(lines, bytes) written to `path` after `offset`."""
    if not path.exists():
        return 0, 0
    with path.open("rb") as handle:
        handle.seek(offset)
        added = handle.read()
    return added.count(b"\n"), len(added)


def _progress(statement: Ctas, windows: list[Window]) -> str:
    parts = []
    for window in windows:
        bus_ms = sum(window.bus_ns.get(name, 0.0) for name in agent_report.TOOL_BUS_CLASSES[window.variant]) / 1e6
        parts.append(
            f"{window.variant} {window.seconds:.2f}s cpu {window.cpu_seconds:.2f}s bus {bus_ms:.1f}ms "
            f"x{window.executions} ev {window.events}" + (f" ERROR {window.error[:80]}" if window.error else "")
        )
    return f"{statement.name}: " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
