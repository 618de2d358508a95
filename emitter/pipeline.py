"""From captures to OpenLineage events: pure functions of (capture, attachment context).

`action_events(capture, context)` builds the runs of one batch action (after the listener's
wrapper-command dedupe, `emitter.dedupe`), `stream_events(capture, context)` the events of one
streaming callback; both return a list of events and change nothing. What they need of the
attachment is in the frozen `Context`: settings, session facts, the parent application run,
and the streaming runs live at that moment (by query id; `streams.StreamRuns` keeps them on
the attachment's pipeline thread, `emitter.listener.worker`). Nothing here does I/O, holds a
lock or keeps state: handing the events to the transport is the caller's business.

Column lineage comes from the pure engine (`emitter.plan` + `emitter.lineage`); if it fails the
event is still built, without the columnLineage facet, and a warning is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from attrs import evolve, field, frozen
from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent

from emitter import events, facets, lineage, plan, streams
from emitter.capture import (
    Capture,
    RelationInfo,
    SessionInfo,
    StreamCapture,
    StreamEnded,
    StreamProgress,
    StreamStarted,
)
from emitter.catalogs import CatalogInfo
from emitter.config import EmitterConfig
from emitter.naming import KAFKA_SCHEME, job_name, normalize, table_namespace
from emitter.snapshots import Snapshot, distinct_partitions

log = logging.getLogger(__name__)


@frozen
class Context:
    """What building an attachment's events needs besides the capture."""

    config: EmitterConfig
    session: SessionInfo
    app_run_id: str
    app_job: tuple[str, str]
    table_namespace: str
    stream_runs: Mapping[str, streams.StreamingRun] = field(factory=dict)  # query id -> its live run

    def with_streams(self, live: Mapping[str, streams.StreamingRun]) -> Context:
        return evolve(self, stream_runs=live)


def new_context(config: EmitterConfig, session: SessionInfo, app_run_id: str | None = None) -> Context:
    """The context of a new attachment: a new application run (unless `app_run_id` is given)."""
    return Context(
        config=config,
        session=session,
        app_run_id=app_run_id or events.new_run_id(),
        app_job=(config.namespace, normalize(session.app_name) or "spark"),
        table_namespace=table_namespace(session.warehouse_dir, session.metastore_uri),
    )


# application run -------------------------------------------------------------------------
def application_event(context: Context, event_type: str, when: datetime | None = None) -> RunEvent:
    """START or COMPLETE of the application run every action and streaming query is a child of."""
    return events.build_run_event(
        event_type,
        when or datetime.now(timezone.utc),
        context.app_run_id,
        context.app_job,
        run_facets=session_run_facets(context),
        job_facets={"jobType": facets.job_type_facet("BATCH", "APPLICATION")},
    )


def session_run_facets(context: Context) -> dict[str, Any]:
    """The run facets of every run of the attachment: the engine, and the Spark Connect session it serves."""
    return {
        "processing_engine": facets.processing_engine_facet(context.session.spark_version),
        **facets.connect_session_facets(context.session.connect),
    }


def application_parent(context: Context) -> Any:
    return facets.parent_facet(context.app_run_id, *context.app_job)


# batch actions ---------------------------------------------------------------------------
def action_events(capture: Capture, context: Context) -> list[RunEvent]:
    """START and COMPLETE (or FAIL) of the run for one action the dedupe let through."""
    capture = with_micro_batch_sources(capture, context)
    run_id = events.new_run_id(capture.end_time)
    job = (context.config.namespace, action_job_name(capture, context))
    inputs = input_datasets(capture, context.table_namespace, context.session.catalogs)
    outputs = output_datasets(capture, context.table_namespace, context.session.catalogs)
    run_facets: dict[str, Any] = {
        "parent": parent_of(capture, context),
        **session_run_facets(context),
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


def _live_run_of(capture: Capture, context: Context) -> streams.StreamingRun | None:
    """The streaming run whose micro-batch ran this action (`foreachBatch`), if it is live."""
    tag = capture.micro_batch
    if tag is None:
        return None
    run = context.stream_runs.get(tag.query_id)
    return run if run is not None and run.run_id == tag.run_id else None


def with_micro_batch_sources(capture: Capture, context: Context) -> Capture:
    """A write inside foreachBatch reads a LogicalRDD over its streaming query's output:
    give the engine the query's plan for it (as for a cached DataFrame) and the query's
    sources as leaves, so the write's inputs and column lineage name the stream's sources."""
    run = _live_run_of(capture, context)
    if run is None or not capture.plan_json or not run.started.plan_json:
        return capture
    try:
        batch_keys = streams.micro_batch_leaf_keys(capture.plan_json, run.started.plan_json)
    except plan.PlanError as error:
        log.warning("micro-batch lineage not traced: %s", error)
        return capture
    if not batch_keys:
        return capture
    sources = {key: relation for key, relation in streams.lineage_relations(run.started).items() if key not in capture.leaves}
    return evolve(
        capture,
        cached_plan_jsons={**capture.cached_plan_jsons, **{key: run.started.plan_json for key in batch_keys}},
        leaves={**sources, **capture.leaves},
    )


def parent_of(capture: Capture, context: Context) -> Any:
    """The parent run facet of an action: the streaming run whose micro-batch ran it
    (`foreachBatch`), else the application run."""
    run = _live_run_of(capture, context)
    if run is not None:
        root = (context.app_run_id, *context.app_job)
        return facets.parent_facet(run.run_id, run.job[0], run.job[1], root=root)
    return application_parent(context)


# streaming queries -----------------------------------------------------------------------
def started_run(started: StreamStarted, context: Context) -> streams.StreamingRun:
    """The run of a streaming query that (re)started: its job and the sink's column lineage."""
    config = context.config
    if config.full_job_name:
        job = (config.namespace, config.full_job_name)
    else:
        app = config.job_name or context.session.app_name
        job = streams.job_for(app, config.namespace, started.name, started.query_id, started.sink)
    lineage_facet = None
    if started.sink is not None and started.sink.relation is not None and started.plan_json:
        relations = streams.lineage_relations(started)
        lineage_facet = column_lineage_facet(started.plan_json, {}, None, relations, context.table_namespace)
    return streams.StreamingRun(started, job, lineage_facet)


def stream_events(capture: StreamCapture, context: Context) -> list[RunEvent]:
    """The event of one streaming callback: START, RUNNING per micro-batch, COMPLETE or FAIL;
    none for a query whose run is not in `context.stream_runs` (not seen starting, or another run)."""
    run = context.stream_runs.get(capture.query_id)
    if run is None or run.run_id != capture.run_id:
        return []
    progress = capture if isinstance(capture, StreamProgress) else None
    run_facets: dict[str, Any] = {
        **session_run_facets(context),
        "parent": application_parent(context),
    }
    event_type = "START"
    if progress is not None:
        event_type = "RUNNING"
        run_facets["microBatch"] = facets.micro_batch_facet(progress.batch)
    elif isinstance(capture, StreamEnded):
        event_type = "COMPLETE"
        if capture.error_message is not None:
            event_type = "FAIL"
            run_facets["errorMessage"] = facets.error_facet(capture.error_message, capture.error_class)
    event = events.build_run_event(
        event_type,
        capture.when,
        run.run_id,
        run.job,
        run_facets=run_facets,
        job_facets={"jobType": facets.job_type_facet("STREAMING", "JOB")},
        inputs=_stream_inputs(run, progress, context.table_namespace),
        outputs=_stream_outputs(run, progress, context.table_namespace),
    )
    return [event]


def _stream_inputs(run: streams.StreamingRun, progress: StreamProgress | None, namespace_of_tables: str) -> list[InputDataset]:
    started = run.started
    built: dict[tuple[str, str], InputDataset] = {}
    described: list[tuple[RelationInfo, Snapshot | None]] = [
        (source.relation, streams.source_snapshot(source, progress)) for source in started.sources if source.relation
    ]
    for key, relation in started.static_inputs.items():
        snapshot = progress.static_snapshots.get(key) if progress is not None else None
        described.append((relation, evolve(snapshot, batch_id=progress.batch.batch_id) if snapshot and progress else None))
    for relation, snapshot in described:
        for one, one_snapshot in streams.per_dataset(relation, snapshot):  # a Kafka source: a dataset per topic
            dataset = events.input_dataset(one, namespace_of_tables, facets.snapshot_facets(one_snapshot))
            if dataset is not None:
                built.setdefault((dataset.namespace, dataset.name), dataset)
    return list(built.values())


def _stream_outputs(run: streams.StreamingRun, progress: StreamProgress | None, namespace_of_tables: str) -> list[OutputDataset]:
    sink = run.started.sink
    if sink is None or sink.relation is None:
        return []
    extra: dict[str, Any] = {}
    if run.column_lineage is not None:
        extra["columnLineage"] = run.column_lineage
    extra.update(facets.snapshot_facets(streams.sink_snapshot(run, progress)))
    dataset = events.output_dataset(sink.relation, namespace_of_tables, extra)
    return [dataset] if dataset is not None else []


def action_job_name(capture: Capture, context: Context) -> str:
    """`{appName}.{command}.{output}`; conf `jobName` replaces the app part, `fullJobName` all of it."""
    if context.config.full_job_name:
        return context.config.full_job_name
    app = context.config.job_name or context.session.app_name
    if capture.write is None:
        first = next(iter(capture.leaves.values()), None)
        return job_name(app, capture.func_name, _relation_label(first) if first else "")
    return job_name(app, capture.write.command, _relation_label(capture.write.target))


def _relation_label(relation: RelationInfo) -> str:
    if relation.table is not None:
        return relation.table.qualified
    return relation.paths[0].split(":", 1)[-1] if relation.paths else relation.node_class


def input_datasets(capture: Capture, namespace_of_tables: str, catalogs: Sequence[CatalogInfo] = ()) -> list[InputDataset]:
    """One input per dataset read; its snapshot carries the partitions read when its scans tell them."""
    read = partitions_read_per_dataset(capture, namespace_of_tables)
    seen: dict[tuple[str, str], InputDataset] = {}
    for key, relation in _one_per_topic(capture.leaves):
        location = events.dataset_location(relation, namespace_of_tables)
        if location is None or location in seen:
            continue
        snapshot = streams.kafka_topic_snapshot(relation, capture.input_snapshots.get(key))
        if snapshot is not None and location in read:
            snapshot = evolve(snapshot, partitions=read[location])
        extra = {**facets.snapshot_facets(snapshot), **facets.table_format_facets(relation, snapshot, catalogs)}
        dataset = events.input_dataset(relation, namespace_of_tables, extra)
        if dataset is not None:
            seen[location] = dataset
    return list(seen.values())


def _one_per_topic(leaves: Mapping[int, RelationInfo]) -> list[tuple[int, RelationInfo]]:
    """Leaves by key; a batch read of several Kafka topics as one relation per topic."""
    return [
        (key, one)
        for key, leaf in leaves.items()
        for one in (streams.one_per_path(leaf) if leaf.format == KAFKA_SCHEME else [leaf])
    ]


def partitions_read_per_dataset(
    capture: Capture, namespace_of_tables: str
) -> dict[tuple[str, str], tuple[dict[str, str | None], ...]]:
    """The partitions read per input dataset: of all its leaves (a self-join reads one dataset twice)."""
    found: dict[tuple[str, str], list[Mapping[str, str | None]]] = {}
    for key, partitions in capture.input_partitions.items():
        relation = capture.leaves.get(key)
        location = events.dataset_location(relation, namespace_of_tables) if relation is not None else None
        if location is not None:
            found.setdefault(location, []).extend(partitions)
    return {location: distinct_partitions(partitions) for location, partitions in found.items()}


def output_datasets(capture: Capture, namespace_of_tables: str, catalogs: Sequence[CatalogInfo] = ()) -> list[OutputDataset]:
    if capture.write is None:
        return []
    write = capture.write
    extra = {
        **facets.snapshot_facets(capture.output_snapshot),
        **facets.table_format_facets(write.target, capture.output_snapshot, catalogs),
    }
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


def column_lineage(capture: Capture, namespace_of_tables: str) -> Any | None:
    """The columnLineage facet of the write, or None when the engine cannot tell."""
    output_columns = capture.write.output_columns if capture.write else ()
    return column_lineage_facet(
        capture.plan_json, capture.cached_plan_jsons, output_columns, capture.leaves, namespace_of_tables, capture.root_class
    )


def column_lineage_facet(
    plan_json: str,
    cached_plan_jsons: Mapping[int, str],
    output_columns: tuple[str, ...] | None,
    relations: Mapping[int, RelationInfo],
    namespace_of_tables: str,
    what: str = "",
) -> Any | None:
    """The columnLineage facet of a plan's output, its leaves named by `relations` (by leaf key);
    None when the engine cannot tell."""
    try:
        root = plan.parse_plan(plan_json)
        write = lineage.write_command(root)
        query = write.query if write is not None else root
        columns = output_columns or (tuple(write.output_columns) if write is not None else None)
        cached = {key: plan.parse_plan(text) for key, text in cached_plan_jsons.items()}
        pushed = {key: relation.pushed_filters for key, relation in relations.items() if relation.pushed_filters}
        result = lineage.column_lineage(query, cached, columns or None, pushed)
        for warning in result.warnings:
            log.info("column lineage: %s", warning)
    except Exception as error:  # noqa: BLE001
        log.warning("column lineage not computed for %s: %s", what or "the plan", error)
        return None

    def locate(relation: Any) -> list[tuple[str, str]] | None:
        key = plan.leaf_key(relation)
        info = relations.get(key) if key is not None else None
        return events.dataset_locations(info, namespace_of_tables) if info is not None else None

    return facets.column_lineage_facet(result.columns, result.dataset, locate)
