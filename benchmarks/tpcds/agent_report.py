"""Figures of `python -m benchmarks.tpcds agent` (pure: events, windows and the reference in, figures out).

Lineage: per CTAS output, the column lineage a tool reported (the last event of the run that
carries a `columnLineage` facet for that output wins, as a consumer merging a run's events would
keep it), each column's input fields reduced to `(table, column)` pairs (the dataset name's last
path or dotted part is the TPC-DS table, whatever naming the tool uses), all field-level
transformations counted (DIRECT and the field-level INDIRECT: CONDITIONAL, WINDOW, GROUP_BY for
`grouping()`), the dataset-level list not. Columns are paired with sqlglot's reference by position.

Cost: one `Window` per statement and variant, the time from submitting the CTAS until Spark's
listener bus is empty and the emitter has settled; figures per action are over the SQL executions
the windows ran (a CTAS is two: the CTAS command and its nested insert).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from benchmarks.tpcds.analysis import percentile, statement_of
from benchmarks.tpcds.reference import Field, StatementReference

PLAIN, EMITTER, AGENT = "plain", "emitter", "agent"
VARIANTS = (PLAIN, EMITTER, AGENT)
AGENT_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
EXECUTION_LISTENER_BUS = "org.apache.spark.sql.util.ExecutionListenerBus"
# What runs the emitter's listeners on the listener bus: Spark's wrappers of QueryExecutionListeners
# (per session) and StreamingQueryListeners (moved to a `runtime` package in Spark 4), and the
# emitter's own SparkListener (compiled at attach time, in no package) that tags micro-batch jobs
EMITTER_BUS_CLASSES = (
    EXECUTION_LISTENER_BUS,
    "SparkLineageMicroBatchTags",
    "org.apache.spark.sql.execution.streaming.StreamingQueryListenerBus",
    "org.apache.spark.sql.execution.streaming.runtime.StreamingQueryListenerBus",
)
TOOL_BUS_CLASSES = {PLAIN: (), EMITTER: EMITTER_BUS_CLASSES, AGENT: (AGENT_LISTENER,)}


@attrs.frozen
class OutputLineage:
    statement: str
    columns: tuple[str, ...]  # the output's schema facet, in order
    inputs: Mapping[str, frozenset[Field]]  # column → its field-level input fields


@attrs.frozen
class ColumnVerdict:
    statement: str
    position: int
    column: str  # the tool's name, else sqlglot's position
    reference: frozenset[Field]
    reported: frozenset[Field]

    @property
    def equal(self) -> bool:
        return self.reported == self.reference


@attrs.frozen
class LineageFigures:
    outputs: int  # CTAS outputs seen in the tool's events
    complete: int  # outputs whose every column has input fields
    outputs_equal: int  # outputs whose every column is equal to the reference
    columns: int  # columns compared with the reference
    equal: int
    wrong: int  # reported fields differ from the reference
    none_reported: int  # of the wrong ones: no input field at all where the reference has some


@attrs.define
class Window:
    """One statement in one variant."""

    statement: str
    variant: str
    seconds: float  # submit → bus empty and emitter settled
    cpu_seconds: float  # Python + driver JVM over the same span
    executions: int  # SQL executions Spark's status store counted in it
    events: int  # event lines the variant's tool wrote in it
    event_bytes: int
    bus_ns: dict[str, float] = attrs.field(factory=dict)  # listener class → time on the listener bus
    bus_thread_cpu_ns: float = 0.0  # CPU of the shared queue's dispatch thread (every listener on it)
    emitter_capture_ms: float = 0.0  # the emitter's own figure for its callbacks (`BatchListener.extraction_ms`)
    error: str = ""


@attrs.frozen
class CostFigures:
    variant: str
    statements: int
    actions: int
    events_per_action: float
    bytes_per_action: float
    bus_ms_per_action: float  # the tool's listener classes, less what they cost in the plain windows
    bus_ms_per_action_p95: float  # over statements: each window's tool time ÷ its actions
    bus_cpu_ms_per_action: float  # CPU of the shared queue's thread, less the plain windows', ÷ actions
    own_capture_ms_per_action: float  # the emitter's own extraction figure, ÷ actions (0 for the agent)
    cpu_ms_per_action: float  # (Python + JVM) CPU of the variant's windows less the plain ones, ÷ actions
    wall_ratio: float  # Σ wall ÷ Σ plain wall over the same statements


def table_of(dataset_name: str) -> str:
    """The TPC-DS table a dataset names: `/…/tpcds_sf0.1/store_sales` or `tpcds.store_sales`."""
    return dataset_name.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower()


def reported_lineage(events: Iterable[Mapping[str, Any]], statement_names: Sequence[str]) -> dict[str, OutputLineage]:
    """Statement → the lineage its output last carried; an output seen only without a
    `columnLineage` facet has no input fields for any column."""
    found: dict[str, OutputLineage] = {}
    for event in events:
        for output in event.get("outputs", []):
            statement = statement_of(output, statement_names)
            if statement is None:
                continue
            facets = output.get("facets", {})
            lineage = facets.get("columnLineage")
            if lineage is None and statement in found:
                continue
            fields = (lineage or {}).get("fields", {})
            columns = tuple(field["name"] for field in facets.get("schema", {}).get("fields", [])) or tuple(fields)
            inputs = {
                column: frozenset(
                    (table_of(str(source.get("name", ""))), str(source.get("field", "")).lower())
                    for source in entry.get("inputFields", [])
                )
                for column, entry in fields.items()
            }
            if lineage is not None or columns:
                found[statement] = OutputLineage(statement, columns, inputs)
    return found


def compare(reported: Mapping[str, OutputLineage], reference: Mapping[str, StatementReference]) -> list[ColumnVerdict]:
    """Every reference column against what the tool reported at its position (nothing, when the
    tool gave no lineage for the output or fewer columns)."""
    verdicts = []
    for statement, columns in reference.items():
        if columns is None:
            continue
        output = reported.get(statement)
        for position, expected in enumerate(columns):
            name = output.columns[position] if output and position < len(output.columns) else f"#{position + 1}"
            got = output.inputs.get(name, frozenset()) if output else frozenset()
            verdicts.append(ColumnVerdict(statement, position, name, expected, got))
    return verdicts


def lineage_figures(reported: Mapping[str, OutputLineage], verdicts: Sequence[ColumnVerdict]) -> LineageFigures:
    wrong = [verdict for verdict in verdicts if not verdict.equal]
    wrong_statements = {verdict.statement for verdict in wrong}
    return LineageFigures(
        outputs=len(reported),
        complete=sum(1 for output in reported.values() if output.columns and all(output.inputs.get(c) for c in output.columns)),
        outputs_equal=len({verdict.statement for verdict in verdicts} - wrong_statements),
        columns=len(verdicts),
        equal=len(verdicts) - len(wrong),
        wrong=len(wrong),
        none_reported=sum(1 for verdict in wrong if not verdict.reported),
    )


def agent_right_we_not(
    ours: Sequence[ColumnVerdict], agents: Sequence[ColumnVerdict]
) -> list[tuple[ColumnVerdict, ColumnVerdict]]:
    """(ours, the agent's) for every column the agent reports as the reference does and we do not."""
    by_key = {(verdict.statement, verdict.position): verdict for verdict in agents}
    return [
        (verdict, by_key[(verdict.statement, verdict.position)])
        for verdict in ours
        if not verdict.equal
        and (verdict.statement, verdict.position) in by_key
        and by_key[(verdict.statement, verdict.position)].equal
    ]


def cost_figures(windows: Sequence[Window], variant: str) -> CostFigures:
    """The variant's cost against the plain windows of the statements both ran without error."""
    plain = {window.statement: window for window in windows if window.variant == PLAIN and not window.error}
    mine = [window for window in windows if window.variant == variant and not window.error and window.statement in plain]
    actions = sum(window.executions for window in mine)
    classes = TOOL_BUS_CLASSES[variant]
    per_window_ms = [(_bus_ns(window, classes) - _bus_ns(plain[window.statement], classes)) / 1e6 for window in mine]
    per_action = sorted(ms / window.executions for ms, window in zip(per_window_ms, mine, strict=True) if window.executions)
    plain_seconds = sum(plain[window.statement].seconds for window in mine)
    return CostFigures(
        variant=variant,
        statements=len(mine),
        actions=actions,
        events_per_action=_ratio(sum(window.events for window in mine), actions),
        bytes_per_action=_ratio(sum(window.event_bytes for window in mine), actions),
        bus_ms_per_action=_ratio(sum(per_window_ms), actions),
        bus_ms_per_action_p95=percentile(per_action, 95) if per_action else math.nan,
        bus_cpu_ms_per_action=_ratio(
            sum(window.bus_thread_cpu_ns - plain[window.statement].bus_thread_cpu_ns for window in mine) / 1e6, actions
        ),
        own_capture_ms_per_action=_ratio(sum(window.emitter_capture_ms for window in mine), actions),
        cpu_ms_per_action=_ratio(
            1000 * sum(window.cpu_seconds - plain[window.statement].cpu_seconds for window in mine), actions
        ),
        wall_ratio=_ratio(sum(window.seconds for window in mine), plain_seconds),
    )


def _bus_ns(window: Window, classes: Iterable[str]) -> float:
    return sum(window.bus_ns.get(name, 0.0) for name in classes)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def format_table(lineage: Mapping[str, LineageFigures], costs: Mapping[str, CostFigures], reference_columns: int) -> str:
    header = (
        "| tool | outputs: complete lineage / all columns = reference / seen | columns = reference | columns wrong "
        "(none reported) | events / action | bytes / action | listener bus ms / action (p95 per CTAS) "
        "| bus thread CPU ms / action | driver CPU ms / action | wall ratio |"
    )
    lines = [header, "|" + "---|" * 10]
    for variant in VARIANTS:
        cost = costs.get(variant)
        figures = lineage.get(variant)
        lineage_cells = (
            f"{figures.complete} / {figures.outputs_equal} / {figures.outputs} | {figures.equal} / {reference_columns} | "
            f"{figures.wrong} ({figures.none_reported})"
            if figures
            else "— | — | —"
        )
        if variant == PLAIN or cost is None:
            cost_cells = "— | — | — | — | — | 1.000" if variant == PLAIN else "— | — | — | — | — | —"
        else:
            cost_cells = (
                f"{cost.events_per_action:.2f} | {cost.bytes_per_action:,.0f} | "
                f"{cost.bus_ms_per_action:.2f} ({cost.bus_ms_per_action_p95:.2f}) | {cost.bus_cpu_ms_per_action:.1f} | "
                f"{cost.cpu_ms_per_action:.1f} | {cost.wall_ratio:.3f}"
            )
        lines.append(f"| {variant} | {lineage_cells} | {cost_cells} |")
    return "\n".join(lines)


def format_disagreements(pairs: Sequence[tuple[ColumnVerdict, ColumnVerdict]]) -> str:
    if not pairs:
        return "No column where the agent matches the reference and the emitter does not."
    lines = [f"{len(pairs)} columns where the agent matches sqlglot's reference and the emitter does not:"]
    for ours, _agent in pairs:
        missing = sorted(ours.reference - ours.reported)
        extra = sorted(ours.reported - ours.reference)
        lines.append(
            f"  {ours.statement}.{ours.column} (#{ours.position + 1}): missing {_fields(missing)}; extra {_fields(extra)}"
        )
    return "\n".join(lines)


def _fields(fields: Sequence[Field]) -> str:
    return ", ".join(f"{table}.{column}" for table, column in fields) or "—"
