"""The streaming listener: a Python `StreamingQueryListener` turning each callback of a streaming
query into one plain capture (`StreamStarted`, `StreamProgress`, `StreamEnded`) for the pipeline,
which makes the query's run of it (`emitter.streams`).

What PySpark gives (measured on 4.x):
- `onQueryStarted` arrives when the query thread has built its analyzed plan: the wrapper from
  `spark.streams.get(id)` is still there, and `_jsq.streamingQuery().logicalPlan()` is the plan
  with one `StreamingExecutionRelation` (V1 sources) or `StreamingDataSourceV2*` leaf per source,
  whose source prints exactly as the progress' `sources[].description`. That plan is used for
  inputs and column lineage; it does not change between batches.
- `onQueryProgress` may arrive after the query ended (`availableNow`), when `spark.streams.get`
  returns None: the query object is kept from `onQueryStarted`.
- Writes inside `foreachBatch` are tagged with their micro-batch by the batch listener (through
  `java/SparkLineageMicroBatchTags.java`); the pipeline names this query's run as their parent.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import attrs
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryStartedEvent

from emitter import described
from emitter.capture import (
    Endpoint,
    RelationInfo,
    SourceProgress,
    StreamCapture,
    StreamEnded,
    StreamProgress,
    StreamStarted,
)
from emitter.listener import files, jvm
from emitter.naming import naming_options
from emitter.snapshots import Snapshot
from emitter.streams import endpoint_from_description, stream_endpoint

log = logging.getLogger(__name__)

STREAM_LEAF_CLASSES = frozenset(
    {
        "StreamingExecutionRelation",
        "StreamingRelation",
        "StreamingRelationV2",
        "StreamingDataSourceV2Relation",
        "StreamingDataSourceV2ScanRelation",
    }
)


KAFKA_SOURCE_DESCRIPTION = "Kafka"  # KafkaV2[Subscribe[...]] (KafkaSource[...] on the V1 path)


@attrs.frozen
class _LiveQuery:
    """What the listener keeps of a running query to take each micro-batch's snapshots."""

    query: Any  # py4j StreamingQuery (the inner execution)
    checkpoint_location: str | None
    sink: Endpoint | None
    static_keys: tuple[int, ...]


class LineageStreamingListener(StreamingQueryListener):
    """Hands every streaming query of `session` to `handle` as captures; never raises."""

    def __init__(self, session: Any, handle: Callable[[StreamCapture], Any]) -> None:
        self.session = session  # not `spark`: PySpark 3.5 makes that property read-only
        self.handle = handle
        self.gateway = session.sparkContext._gateway
        self.dumper = jvm.PlanDumper(self.gateway)
        self._queries: dict[str, _LiveQuery] = {}  # query id -> the running query
        self._started_runs: set[str] = set()  # run ids whose start was recorded (`catch_up` and the event)

    @property
    def _jlistener(self) -> Any:
        """PySpark's JVM wrapper of this listener, with start events read safely (`_StartedEventReader`)."""
        if not hasattr(self, "_jlistenerobj"):
            gateway_jvm = self.gateway.jvm
            self._jlistenerobj = gateway_jvm.PythonStreamingQueryListenerWrapper(_StartedEventReader(self))
        return self._jlistenerobj

    def catch_up(self) -> None:
        """Record the start of the session's queries that started before this listener was
        registered (a Spark Connect session is attached while its first operation runs)."""
        for query in self.session.streams.active:
            if str(query.runId) not in self._started_runs:
                self._guard("start", self._on_started, _StartOfRunning(query.id, query.runId, query.name))

    # callbacks -------------------------------------------------------------------------------
    def onQueryStarted(self, event: Any) -> None:  # noqa: N802
        self._guard("start", self._on_started, event)

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        self._guard("progress", self._on_progress, event)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        """No batch ran: nothing to record."""

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        self._guard("termination", self._on_terminated, event)

    def _guard(self, what: str, handler: Callable[[Any], None], event: Any) -> None:
        try:
            handler(event)
        except Exception as error:  # never let lineage break the query
            log.warning("OpenLineage: streaming %s not recorded: %s", what, error, exc_info=log.isEnabledFor(10))

    def _on_started(self, event: Any) -> None:
        query_id, run_id = str(event.id), str(event.runId)
        if run_id in self._started_runs:
            return
        self._started_runs.add(run_id)
        when = described.parse_time(getattr(event, "timestamp", None))
        query = self.session.streams.get(query_id)
        inner = query._jsq.streamingQuery() if query is not None else None
        started = StreamStarted(query_id, run_id, event.name, when)
        if inner is not None:
            try:
                started = self._describe(inner, started)
            except Exception as error:  # noqa: BLE001 - still one run, without datasets
                log.warning("OpenLineage: streaming query %s not described: %s", query_id, error)
            static_keys = tuple(started.static_inputs)
            self._queries[query_id] = _LiveQuery(inner, started.checkpoint_location, started.sink, static_keys)
        self.handle(started)

    def _on_progress(self, event: Any) -> None:
        # the progress' JSON keeps offsets as Spark reports them (PySpark's accessors turn a
        # missing start offset into the string "None")
        progress = json.loads(event.progress.json)
        live = self._queries.get(str(progress["id"]))
        batch = described.micro_batch_of_progress(progress, live.checkpoint_location if live else None)
        sources = tuple(
            SourceProgress(str(s["description"]), self._start_offset(s, index, live), s.get("endOffset"))
            for index, s in enumerate(progress.get("sources", []))
        )
        static_snapshots: dict[int, Snapshot] = {}
        sink_snapshot = None
        if live is not None:
            for key in live.static_keys:
                snapshot = jvm.guarded(None, self._static_snapshot, live, key)
                if snapshot is not None:
                    static_snapshots[key] = snapshot
            sink = live.sink
            if sink is not None and sink.is_file and sink.relation is not None:
                sink_snapshot = jvm.guarded(None, files.file_sink_snapshot, sink.relation.paths[0], batch.batch_id)
        when = described.parse_time(progress.get("timestamp"))
        self.handle(StreamProgress(batch.query_id, batch.run_id, when, batch, sources, static_snapshots, sink_snapshot))

    @staticmethod
    def _start_offset(source: Mapping[str, Any], index: int, live: _LiveQuery | None) -> Any:
        """The progress' start offset; on a query's first batch (Spark reports none) the start its
        checkpoint kept for a Kafka source (other sources keep other things there)."""
        start = source.get("startOffset")
        if start is not None or live is None or not live.checkpoint_location:
            return start
        if not str(source.get("description", "")).startswith(KAFKA_SOURCE_DESCRIPTION):
            return None
        return jvm.guarded(None, files.initial_source_offsets, live.checkpoint_location, index)

    def _on_terminated(self, event: Any) -> None:
        query_id = str(event.id)
        self._queries.pop(query_id, None)
        self._started_runs.discard(str(event.runId))
        error = str(event.exception) if event.exception is not None else None
        error_class = getattr(event, "errorClassOnException", None) if error is not None else None
        self.handle(StreamEnded(query_id, str(event.runId), datetime.now(timezone.utc), error, error_class))

    # reading the query -------------------------------------------------------------------
    def _describe(self, inner: Any, started: StreamStarted) -> StreamStarted:
        checkpoint = jvm.guarded(None, lambda: str(inner.resolvedCheckpointRoot()))
        sink = jvm.guarded(None, lambda: _sink_endpoint(inner))
        plan = inner.logicalPlan()
        stream_leaves = _stream_leaves(plan)
        v2_sources = jvm.guarded({}, _v2_source_options, inner)
        stream_leaves = {
            key: stream_endpoint(endpoint.description, v2_sources.get(key)) for key, endpoint in stream_leaves.items()
        }
        # the static side's datasets, and the plan for the sink's column lineage and that of
        # writes inside foreachBatch (over the same output)
        static: dict[int, RelationInfo] = {}
        plan_json = ""
        if self.dumper.available:
            plan_described = self.dumper.describe(plan)
            static, _ = described.described_leaves(plan_described, skip_classes=STREAM_LEAF_CLASSES)
            plan_json = plan_described.plan_json
        return attrs.evolve(
            started,
            checkpoint_location=checkpoint,
            sources=tuple(stream_leaves.values()),
            stream_leaves=stream_leaves,
            static_inputs=static,
            sink=sink,
            plan_json=plan_json,
        )

    def _static_snapshot(self, live: _LiveQuery, leaf_key: int) -> Snapshot | None:
        """The static side's content, from the file index the query's plan holds (Spark reuses
        that index for every batch, so this is what the batch joined against)."""
        leaf = _leaf_by_key(live.query.logicalPlan(), leaf_key)
        if leaf is None or jvm.simple_class(leaf) != "LogicalRelation":
            return None
        return files.input_snapshot(self.gateway, leaf.relation().location())


@attrs.frozen
class _StartOfRunning:
    """What `_on_started` reads of a start event, for a query found already running."""

    id: str
    runId: str  # noqa: N815
    name: str | None
    timestamp: str | None = None


class _StartedEventReader(JStreamingQueryListener):
    """PySpark's py4j side of a streaming listener, reading a start event's job tags as the
    strings py4j already made them (PySpark 4's own reader calls `.toString()` on them and so
    fails on every query that has tags, as a Spark Connect client's queries do)."""

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802
        try:
            event = QueryStartedEvent.fromJObject(jevent)
        except AttributeError:
            event = QueryStartedEvent(
                id=uuid.UUID(str(jevent.id().toString())),
                runId=uuid.UUID(str(jevent.runId().toString())),
                name=jevent.name(),
                timestamp=jevent.timestamp(),
                jobTags=_strings(jevent.jobTags()),
            )
        self.pylistener.onQueryStarted(event)


def _strings(scala_set: Any) -> set[str]:
    found: set[str] = set()
    iterator = scala_set.iterator()
    while iterator.hasNext():
        found.add(str(iterator.next()))
    return found


def _stream_leaves(plan: Any) -> dict[int, Endpoint]:
    """Leaf key -> the source each streaming leaf reads, named by its description."""
    stream: dict[int, Endpoint] = {}
    for leaf in jvm.leaves_with_subqueries(plan):
        key = jvm.leaf_key(leaf)
        node_class = jvm.simple_class(leaf)
        if key is not None and node_class in STREAM_LEAF_CLASSES:
            stream[key] = endpoint_from_description(_source_description(leaf, node_class))
    return stream


def _source_description(leaf: Any, node_class: str) -> str:
    if node_class == "StreamingExecutionRelation":
        return str(leaf.source().toString())
    if node_class in {"StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation"}:
        # the MicroBatchStream, printed as the progress' description: on the scan relation in
        # Spark 4, on the relation in Spark 3.5
        stream = jvm.guarded(None, leaf.stream) or jvm.guarded(None, lambda: leaf.relation().stream())
        return str(stream.toString()) if stream is not None else str(leaf.toString())
    return str(leaf.toString())


def _v2_source_options(inner: Any) -> dict[int, tuple[str, dict[str, str]]]:
    """Leaf key -> (short name, naming options) of each V2 source (Kafka, rate, socket, Python
    data sources), from the query's analyzed plan: the running plan's relations drop options."""
    found: dict[int, tuple[str, dict[str, str]]] = {}
    for leaf in jvm.leaves_with_subqueries(inner.analyzedPlan()):
        key = jvm.leaf_key(leaf)
        if key is None or jvm.simple_class(leaf) != "StreamingRelationV2":
            continue
        options = jvm.guarded({}, lambda leaf=leaf: dict(leaf.extraOptions().asCaseSensitiveMap()))
        found[key] = (str(leaf.sourceName()), naming_options(options))
    return found


def _sink_endpoint(inner: Any) -> Endpoint:
    """The sink; a Kafka sink is named by the write's options (`kafka.bootstrap.servers`, `topic`)."""
    sink = inner.sink()
    description = str(sink.toString())
    if "kafka" not in str(sink.getClass().getName()).lower():
        return endpoint_from_description(description)
    options = jvm.guarded({}, lambda: jvm.naming_options(inner.logicalPlan().writeOptions()))
    return stream_endpoint(description, ("kafka", naming_options(options)))


def _leaf_by_key(plan: Any, leaf_key: int) -> Any | None:
    for leaf in jvm.leaves_with_subqueries(plan):
        if jvm.leaf_key(leaf) == leaf_key:
            return leaf
    return None
