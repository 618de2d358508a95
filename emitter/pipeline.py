"""From a `Capture` to emitted OpenLineage events: the emitter's one composition point.

The listener (py4j thread) calls `Pipeline.handle(capture)`; everything here is plain Python.
Column lineage comes from the pure engine (`emitter.plan` + `emitter.lineage`); if it fails the
event is still sent, without the columnLineage facet, and a warning is logged.

Per-dataset extra facets (snapshots, from `emitter.snapshots`) are attached in
`extra_dataset_facets`, the single hook for them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote, urlsplit

from attrs import evolve

from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent

from emitter import events, facets
from emitter.capture import Capture, RelationInfo, SessionInfo
from emitter.config import EmitterConfig
from emitter.naming import job_name, normalize, table_namespace

log = logging.getLogger(__name__)

# Commands that only wrap a nested data-writing command: Spark reports both (the nested one
# first, with a higher QueryExecution id); the nested one is the run, the wrapper is dropped.
WRAPPER_COMMANDS = frozenset(
    {
        "SaveAsV1TableCommand",
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoDataSourceDirCommand",
        "InsertIntoHiveDirCommand",
    }
)
RECENT_WRITES_KEPT = 64
PENDING_KEPT = 16
NESTED_WRITE_FUNC = "file source write"
DatasetFacetHook = Callable[[RelationInfo, str, Capture], Mapping[str, Any]]


class Pipeline:
    """Turns captures into runs under one parent application run and emits them."""

    def __init__(self, config: EmitterConfig, session: SessionInfo, client: Any) -> None:
        self.config = config
        self.session = session
        self.client = client
        self.table_namespace = table_namespace(session.warehouse_dir, session.metastore_uri)
        self.app_run_id = events.new_run_id()
        self.app_job = (config.namespace, normalize(session.app_name) or "spark")
        self._pending: list[Capture] = []  # nested writes waiting for their wrapper commands, oldest first
        self._merged: deque[tuple[str, int]] = deque(maxlen=RECENT_WRITES_KEPT)  # (table, wrapper qe id)
        self._lock = threading.Lock()
        self._app_completed = False
        self.emitted_events = 0  # handed to the transport (which may still be delivering them)

    # application run -------------------------------------------------------------------
    def start_application(self, when: datetime | None = None) -> None:
        self.emit(self._application_event("START", when))

    def complete_application(self, when: datetime | None = None) -> None:
        with self._lock:
            if self._app_completed:
                return
            self._app_completed = True
        self.flush()
        self.emit(self._application_event("COMPLETE", when))

    def _application_event(self, event_type: str, when: datetime | None) -> RunEvent:
        return events.build_run_event(
            event_type,
            when or datetime.now(timezone.utc),
            self.app_run_id,
            self.app_job,
            run_facets={"processing_engine": facets.processing_engine_facet(self.session.spark_version)},
            job_facets={"jobType": facets.job_type_facet("BATCH", "APPLICATION")},
        )

    # actions ---------------------------------------------------------------------------
    def handle(self, capture: Capture) -> list[RunEvent]:
        """Build and emit the events of one Spark action; returns them (empty when held or skipped)."""
        with self._lock:
            ready = self._dedupe(capture)
        return self._emit_actions(ready)

    def flush(self) -> list[RunEvent]:
        """Emit the nested writes still waiting for their wrappers (at the end of the application)."""
        with self._lock:
            ready, self._pending = self._pending, []
        return self._emit_actions(ready)

    def _emit_actions(self, actions: list[Capture]) -> list[RunEvent]:
        built = [event for action in actions for event in build_action_events(action, self)]
        for event in built:
            self.emit(event)
        return built

    def _dedupe(self, capture: Capture) -> list[Capture]:
        """The actions ready to become runs once `capture` arrived.

        Spark reports one saveAsTable / CTAS as a nested data write (first, funcName
        NESTED_WRITE_FUNC, higher QueryExecution id) and then each wrapper command. The nested
        write is held until its wrapper arrives and merged into it (the wrapper knows the
        catalog table; the nested write the path, metrics and plan); outer wrappers of an
        already merged write are dropped. Writes of other threads may come in between, so
        several nested writes can wait at once, each for the wrapper that `wraps` it.
        """
        if capture.func_name == NESTED_WRITE_FUNC and capture.write is not None:
            self._pending.append(capture)
            overflow = len(self._pending) - PENDING_KEPT
            if overflow > 0:  # a wrapper that never came: emit the write as it is
                ready, self._pending = self._pending[:overflow], self._pending[overflow:]
                return ready
            return []
        if capture.write is not None and capture.write.command in WRAPPER_COMMANDS:
            table = _table_name(capture)
            for pending in self._pending:
                if wraps(capture.query_execution_id, capture.write.target, pending):
                    self._pending.remove(pending)
                    self._merged.append((table, capture.query_execution_id))
                    return [merge_nested(pending, capture)]
            if any(name == table and qe_id > capture.query_execution_id for name, qe_id in self._merged):
                return []
        if capture.write is not None or (self.config.emit_reads and capture.leaves):
            return [capture]
        return []

    def emit(self, event: RunEvent) -> None:
        try:
            self.client.emit(event)
        except Exception as error:  # noqa: BLE001 - a transport failure must never reach the job
            log.warning("OpenLineage event not emitted: %s", error)
        else:
            self.emitted_events += 1

    def parent_facet(self) -> Any:
        return facets.parent_facet(self.app_run_id, *self.app_job)


def _table_name(capture: Capture) -> str:
    table = capture.write.target.table if capture.write else None
    return table.name.lower() if table is not None else ""


def wraps(wrapper_id: int, wrapper_target: RelationInfo, nested: Capture) -> bool:
    """Whether a wrapper command (CTAS / saveAsTable: QueryExecution id, write target) is the
    command that ran the data write `nested` reported just before it. Spark reports the nested
    write first, with a higher QueryExecution id; since actions of other threads can come in
    between, the targets must agree too: the same location when the wrapper knows it, else a
    directory named after the table (a managed table's); with neither known, the order alone."""
    if nested.query_execution_id <= wrapper_id or nested.write is None:
        return False
    written = nested.write.target.paths[0] if nested.write.target.paths else None
    if written is None:
        return True
    if wrapper_target.table_location:
        return _local_path(written) == _local_path(wrapper_target.table_location)
    if wrapper_target.table is not None:
        return _local_path(written).rsplit("/", 1)[-1].lower() == wrapper_target.table.name.lower()
    return True


def _local_path(uri: str) -> str:
    return unquote(urlsplit(uri).path).rstrip("/")


def merge_nested(nested: Capture, wrapper: Capture) -> Capture:
    """One action from a nested data write and the command that wrapped it."""
    assert nested.write is not None and wrapper.write is not None
    target = nested.write.target
    if wrapper.write.target.table is not None:
        location = target.paths[0] if target.paths else wrapper.write.target.table_location
        target = evolve(target, table=wrapper.write.target.table, table_location=location)
    write = evolve(
        nested.write,
        command=wrapper.write.command,
        target=target,
        mode=wrapper.write.mode or nested.write.mode,
    )
    return evolve(
        nested,
        func_name=wrapper.func_name,
        query_execution_id=wrapper.query_execution_id,
        end_time=max(nested.end_time, wrapper.end_time),
        duration_ns=max(nested.duration_ns, wrapper.duration_ns),
        succeeded=nested.succeeded and wrapper.succeeded,
        error_message=nested.error_message or wrapper.error_message,
        error_stack=nested.error_stack or wrapper.error_stack,
        write=write,
        extraction_ms=nested.extraction_ms + wrapper.extraction_ms,
    )


def build_action_events(capture: Capture, pipeline: Pipeline) -> list[RunEvent]:
    """START and COMPLETE (or FAIL) of the run for one action."""
    run_id = events.new_run_id(capture.end_time)
    job = (pipeline.config.namespace, action_job_name(capture, pipeline))
    inputs = input_datasets(capture, pipeline.table_namespace)
    outputs = output_datasets(capture, pipeline.table_namespace)
    run_facets: dict[str, Any] = {
        "parent": parent_for(capture, pipeline),
        "processing_engine": facets.processing_engine_facet(pipeline.session.spark_version),
    }
    job_facets = {"jobType": facets.job_type_facet("BATCH", "SQL_JOB" if capture.func_name == "command" else "JOB")}
    start_time = capture.end_time - timedelta(microseconds=capture.duration_ns // 1000)
    start = events.build_run_event(
        "START", start_time, run_id, job, run_facets=run_facets, job_facets=job_facets, inputs=inputs, outputs=outputs
    )
    final_facets = dict(run_facets)
    if not capture.succeeded:
        final_facets["errorMessage"] = facets.error_facet(capture.error_message or "unknown error", capture.error_stack)
    final = events.build_run_event(
        "COMPLETE" if capture.succeeded else "FAIL",
        capture.end_time,
        run_id,
        job,
        run_facets=final_facets,
        job_facets=job_facets,
        inputs=inputs,
        outputs=outputs,
    )
    return [start, final]


def action_job_name(capture: Capture, pipeline: Pipeline) -> str:
    """`{appName}.{command}.{output}`; conf `jobName` replaces the app part, `fullJobName` all of it."""
    if pipeline.config.full_job_name:
        return pipeline.config.full_job_name
    app = pipeline.config.job_name or pipeline.session.app_name
    if capture.write is None:
        first = next(iter(capture.leaves.values()), None)
        return job_name(app, capture.func_name, _relation_label(first) if first else "")
    return job_name(app, capture.write.command, _relation_label(capture.write.target))


def _relation_label(relation: RelationInfo) -> str:
    if relation.table is not None:
        return relation.table.qualified
    return relation.paths[0].split(":", 1)[-1] if relation.paths else relation.node_class


def input_datasets(capture: Capture, namespace_of_tables: str) -> list[InputDataset]:
    seen: dict[tuple[str, str], InputDataset] = {}
    for relation in capture.leaves.values():
        dataset = events.input_dataset(
            relation, namespace_of_tables, extra_dataset_facets(relation, "input", capture)
        )
        if dataset is not None:
            seen.setdefault((dataset.namespace, dataset.name), dataset)
    return list(seen.values())


def output_datasets(capture: Capture, namespace_of_tables: str) -> list[OutputDataset]:
    if capture.write is None:
        return []
    write = capture.write
    extra = dict(extra_dataset_facets(write.target, "output", capture))
    lineage_facet = column_lineage(capture, namespace_of_tables)
    if lineage_facet is not None:
        extra["columnLineage"] = lineage_facet
    dataset = events.output_dataset(
        write.target,
        namespace_of_tables,
        extra,
        {"outputStatistics": facets.output_statistics_facet(write.metrics)},
    )
    return [dataset] if dataset is not None else []


ParentHook = Callable[[Capture], Any]
_parent_hooks: list[ParentHook] = []


def register_parent_hook(hook: ParentHook) -> None:
    """Add a provider of the parent facet of an action (e.g. the streaming run of a foreachBatch
    write); the first hook answering non-None wins, else the application run is the parent."""
    if hook not in _parent_hooks:
        _parent_hooks.append(hook)


def parent_for(capture: Capture, pipeline: Pipeline) -> Any:
    for hook in _parent_hooks:
        try:
            parent = hook(capture)
        except Exception as error:  # noqa: BLE001
            log.warning("parent hook %r failed: %s", hook, error)
            continue
        if parent is not None:
            return parent
    return pipeline.parent_facet()


_dataset_facet_hooks: list[DatasetFacetHook] = []


def register_dataset_facet_hook(hook: DatasetFacetHook) -> None:
    """Add a provider of extra dataset facets (role is "input" or "output"), e.g. snapshots."""
    if hook not in _dataset_facet_hooks:
        _dataset_facet_hooks.append(hook)


def extra_dataset_facets(relation: RelationInfo, role: str, capture: Capture) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for hook in _dataset_facet_hooks:
        try:
            extra.update(hook(relation, role, capture))
        except Exception as error:  # noqa: BLE001 - a missing facet beats a missing event
            log.warning("dataset facet hook %r failed: %s", hook, error)
    return extra


def column_lineage(capture: Capture, namespace_of_tables: str) -> Any | None:
    """The columnLineage facet of the write, or None when the engine cannot tell."""
    try:
        from emitter import lineage, plan
    except ImportError:
        return None
    try:
        root = plan.parse_plan(capture.plan_json)
        write = lineage.write_command(root)
        query = write.query if write is not None else root
        output_columns = (capture.write.output_columns if capture.write else ()) or (
            tuple(write.output_columns) if write is not None else None
        )
        cached = {key: plan.parse_plan(text) for key, text in capture.cached_plan_jsons.items()}
        result = lineage.column_lineage(query, cached, output_columns or None)
        for warning in result.warnings:
            log.info("column lineage: %s", warning)
    except Exception as error:  # noqa: BLE001
        log.warning("column lineage not computed for %s: %s", capture.root_class, error)
        return None

    def locate(relation: Any) -> tuple[str, str] | None:
        info = capture.leaves.get(plan.leaf_key(relation))
        return events.dataset_location(info, namespace_of_tables) if info is not None else None

    return facets.column_lineage_facet(result.columns, result.dataset, locate)
