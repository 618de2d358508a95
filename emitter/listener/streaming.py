"""The streaming hook: a Python `StreamingQueryListener` turning one streaming query run into ONE
OpenLineage run: START when it starts, RUNNING per micro-batch (run facet `microBatch`, a
`snapshot` facet on every input and on the sink), COMPLETE or FAIL when it stops.

What PySpark 4.3 gives (measured):
- `onQueryStarted` arrives when the query thread has built its analyzed plan: the wrapper from
  `spark.streams.get(id)` is still there, and `_jsq.streamingQuery().logicalPlan()` is the plan
  with one `StreamingExecutionRelation` (V1 sources) or `StreamingDataSourceV2*` leaf per source,
  whose source prints exactly as the progress' `sources[].description`. That plan is used for
  inputs and column lineage; it does not change between batches.
- `onQueryProgress` may arrive after the query ended (`availableNow`), when `spark.streams.get`
  returns None: the query object is kept from `onQueryStarted`.
- Writes inside `foreachBatch` run on the micro-batch thread with local properties
  `sql.streaming.queryId`, `streaming.sql.batchId`, job group = the run id and job description
  "id = {query}\nrunId = {run}\nbatch = {n}", but the batch `QueryExecutionListener` is called on
  the listener bus thread, which has none of them, and `QueryExecution.id` is not the SQL
  execution id the jobs carry. `SparkListenerSQLExecutionStart` carries both the description
  and `QueryExecution.queryId` (a UUID): a small JVM `SparkListener` (Janino-compiled) records
  queryId -> description, and `parent_of(queryId)` turns it into a `parent` facet pointing at the
  streaming run, for the batch pipeline to put on those writes.

The streaming run's OpenLineage run id is Spark's query run id (a UUID, new at each (re)start),
so a micro-batch's writes can name their parent without shared state.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import attrs
from pyspark.sql.streaming import StreamingQueryListener

from emitter import events, facets, lineage, snapshots
from emitter import plan as plan_model
from emitter.capture import RelationInfo
from emitter.listener import files, jvm
from emitter.naming import job_name

log = logging.getLogger(__name__)

STREAMING_COMMAND = "streaming"
# How many SQL executions of micro-batches the JVM side remembers (oldest forgotten first).
REMEMBERED_EXECUTIONS = 4096
# Streaming runs remembered after they end, so late foreachBatch captures still find a parent.
REMEMBERED_RUNS = 256
_BRACKETED = re.compile(r"^(\w+)\[(.*)\]$", re.DOTALL)
FILE_SOURCE_NAMES = frozenset({"FileStreamSource", "FileSource"})
FILE_SINK_NAMES = frozenset({"FileSink", "FileStreamSink"})


@attrs.frozen
class Endpoint:
    """A streaming source or sink: Spark's description of it and the dataset it is (if any)."""

    description: str
    relation: RelationInfo | None
    is_file: bool = False


@attrs.frozen
class StreamingRun:
    query_id: str
    run_id: str
    name: str | None
    job: tuple[str, str]
    checkpoint_location: str | None
    sources: tuple[Endpoint, ...]
    static_inputs: Mapping[int, RelationInfo]
    sink: Endpoint | None
    column_lineage: Any | None = None  # the columnLineage facet of the sink


def endpoint_from_description(description: str, node_class: str = "") -> Endpoint:
    """`FileStreamSource[file:/in]` / `FileSink[file:/out]` → a file dataset; anything else
    (Kafka, rate, memory, foreachBatch) is kept by description only."""
    match = _BRACKETED.match(description.strip())
    if match and match.group(1) in FILE_SOURCE_NAMES | FILE_SINK_NAMES:
        path = match.group(2)
        return Endpoint(description, RelationInfo(node_class=node_class or match.group(1), paths=(path,)), True)
    return Endpoint(description, None)


def job_for(app_name: str, namespace: str, query_name: str | None, query_id: str, sink: Endpoint | None) -> tuple[str, str]:
    """`{app}.streaming.{query name | sink path | query id}`: the query id is stable across
    restarts from the same checkpoint."""
    if query_name:
        label = query_name
    elif sink is not None and sink.relation is not None and sink.relation.paths:
        label = sink.relation.paths[0].split(":", 1)[-1]
    else:
        label = query_id
    return namespace, job_name(app_name, STREAMING_COMMAND, label)


class _RunRegistry:
    """Streaming runs by query id (one live run per query id at a time), bounded."""

    def __init__(self) -> None:
        self._runs: dict[str, StreamingRun] = {}
        self._lock = threading.Lock()

    def put(self, run: StreamingRun) -> None:
        with self._lock:
            self._runs.pop(run.query_id, None)
            self._runs[run.query_id] = run
            while len(self._runs) > REMEMBERED_RUNS:
                self._runs.pop(next(iter(self._runs)))

    def get(self, query_id: str) -> StreamingRun | None:
        with self._lock:
            return self._runs.get(query_id)


# The registries of the listeners created in this process, newest last (a few at most: one per
# attached session); `parent_of` looks a micro-batch's run up in them.
_registries: list[_RunRegistry] = []
REMEMBERED_REGISTRIES = 8


def _new_registry() -> _RunRegistry:
    registry = _RunRegistry()
    _registries.append(registry)
    del _registries[:-REMEMBERED_REGISTRIES]
    return registry


def find_run(query_id: str, run_id: str) -> StreamingRun | None:
    for registry in reversed(_registries):
        run = registry.get(query_id)
        if run is not None and run.run_id == run_id:
            return run
    return None


# ---------------------------------------------------------------------------------------------
# foreachBatch writes -> parent
_TAGGER_CLASS = "SparkLineageMicroBatchTags"
_TAGGER_SOURCE = """
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;

public class SparkLineageMicroBatchTags extends SparkListener {
    private final ConcurrentHashMap tags = new ConcurrentHashMap();
    private final ConcurrentLinkedQueue order = new ConcurrentLinkedQueue();

    public void onOtherEvent(SparkListenerEvent event) {
        if (!(event instanceof SparkListenerSQLExecutionStart)) return;
        SparkListenerSQLExecutionStart start = (SparkListenerSQLExecutionStart) event;
        String description = start.description();
        if (start.queryId().isEmpty() || description == null || description.indexOf("%(marker)s") < 0) return;
        String key = start.queryId().get().toString();
        if (tags.put(key, description) == null) {
            order.add(key);
            while (order.size() > %(limit)d) {
                Object oldest = order.poll();
                if (oldest != null) tags.remove(oldest);
            }
        }
    }

    /** The micro-batch description a QueryExecution (by its queryId) ran under, else null. */
    public String descriptionOf(String queryExecutionId) {
        return (String) tags.get(queryExecutionId);
    }
}
""" % {"marker": "runId = ", "limit": REMEMBERED_EXECUTIONS}
# Spark's micro-batch job description: "{name}\nid = {queryId}\nrunId = {runId}\nbatch = {batchId}"
_BATCH_DESCRIPTION = re.compile(r"id = (?P<query>[0-9a-f-]{36})\s+runId = (?P<run>[0-9a-f-]{36})\s+batch = (?P<batch>\d+)")

_tagger_classes: dict[int, Any] = {}  # per JVM: one compiled class (py4j caches methods by class name)
_taggers: dict[int, Any] = {}  # per SparkContext; only the live one is kept
_tagger_lock = threading.Lock()


def install_batch_tagger(spark: Any) -> Any:
    """Register (once per SparkContext) the JVM listener remembering which SQL executions ran
    inside which micro-batch. It reads `SparkListenerSQLExecutionStart`: posted when an action
    starts, so it is always seen before the QueryExecutionListener hears of the action's end."""
    spark_context = spark.sparkContext._jsc.sc()
    jvm_view = spark.sparkContext._jvm
    key = int(jvm_view.System.identityHashCode(spark_context))
    with _tagger_lock:
        if key not in _taggers:
            tagger = _tagger_class(jvm_view).newInstance()
            spark_context.addSparkListener(tagger)
            _taggers.clear()  # one SparkContext per JVM: the others are stopped
            _taggers[key] = tagger
        return _taggers[key]


def _tagger_class(jvm_view: Any) -> Any:
    gateway_key = id(jvm_view)
    if gateway_key not in _tagger_classes:
        compiler = jvm_view.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(jvm_view.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
        compiler.cook(_TAGGER_SOURCE)
        _tagger_classes[gateway_key] = compiler.getClassLoader().loadClass(_TAGGER_CLASS)
    return _tagger_classes[gateway_key]


@attrs.frozen
class MicroBatchTag:
    query_id: str
    run_id: str
    batch_id: int


def parse_batch_description(description: str) -> MicroBatchTag | None:
    match = _BATCH_DESCRIPTION.search(description)
    if match is None:
        return None
    return MicroBatchTag(match.group("query"), match.group("run"), int(match.group("batch")))


def micro_batch_of(query_execution_id: str) -> MicroBatchTag | None:
    """Which micro-batch an action ran in, by its `QueryExecution.queryId()` (a UUID); None
    for actions outside streaming."""
    for tagger in list(_taggers.values()):
        description = tagger.descriptionOf(str(query_execution_id))
        if description:
            return parse_batch_description(str(description))
    return None


def parent_of(query_execution_id: str, root: tuple[str, str, str] | None = None) -> Any | None:
    """The `parent` run facet for a write done inside a micro-batch (foreachBatch), pointing at
    the streaming run; None when the action is no micro-batch's. `root` is the application
    run (run id, namespace, name)."""
    tag = micro_batch_of(query_execution_id)
    if tag is None:
        return None
    run = find_run(tag.query_id, tag.run_id)
    if run is None:
        return None
    return facets.parent_facet(run.run_id, run.job[0], run.job[1], root=root)


class ParentHook:
    """For the batch pipeline: capture -> `parent` facet of the streaming run whose micro-batch
    the action ran in (None otherwise), with the application run as root. One per process;
    `use` points it at the pipeline attached last. Needs `capture.query_execution_uuid`
    (`QueryExecution.queryId()`)."""

    def __init__(self) -> None:
        self.root: tuple[str, str, str] | None = None

    def use(self, pipeline: Any) -> ParentHook:
        app_run, app_job = getattr(pipeline, "app_run_id", None), getattr(pipeline, "app_job", None)
        self.root = (app_run, app_job[0], app_job[1]) if app_run and app_job else None
        return self

    def __call__(self, capture: Any) -> Any | None:
        query_execution_id = getattr(capture, "query_execution_uuid", None)
        return parent_of(query_execution_id, self.root) if query_execution_id else None


parent_hook = ParentHook()


# ---------------------------------------------------------------------------------------------
# the listener
class LineageStreamingListener(StreamingQueryListener):
    """Emits the run of every streaming query of `spark` through `emit`; never raises."""

    def __init__(
        self,
        spark: Any,
        emit: Callable[[Any], None],
        *,
        namespace: str,
        app_name: str,
        spark_version: str,
        table_namespace: str,
        parent: Any | None = None,
        full_job_name: str | None = None,
    ) -> None:
        self.spark = spark
        self.full_job_name = full_job_name
        self.emit = emit
        self.namespace = namespace
        self.app_name = app_name
        self.spark_version = spark_version
        self.table_namespace = table_namespace
        self.parent = parent
        self.gateway = spark.sparkContext._gateway
        self.dumper = jvm.PlanDumper(self.gateway)
        self._queries: dict[str, Any] = {}  # query id -> py4j StreamingQuery (kept from start)
        self.runs = _new_registry()

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
        except Exception as error:  # noqa: BLE001 - never let lineage break the query
            log.warning("OpenLineage: streaming %s not recorded: %s", what, error, exc_info=log.isEnabledFor(10))

    def _on_started(self, event: Any) -> None:
        query_id, run_id = str(event.id), str(event.runId)
        query = self.spark.streams.get(query_id)
        inner = query._jsq.streamingQuery() if query is not None else None
        try:
            run = self._describe(inner, query_id, run_id, event.name)
        except Exception as error:  # noqa: BLE001 - still one run, without datasets
            log.warning("OpenLineage: streaming query %s not described: %s", query_id, error)
            run = self._describe(None, query_id, run_id, event.name)
        self.runs.put(run)
        if inner is not None:
            self._queries[query_id] = inner
        when = _parse_time(getattr(event, "timestamp", None))
        self.emit(self._event("START", when, run, self._inputs(run, None), self._outputs(run, None)))

    def _on_progress(self, event: Any) -> None:
        # the progress' JSON keeps offsets as Spark reports them (PySpark's accessors turn a
        # missing start offset into the string "None")
        progress = json.loads(event.progress.json)
        run = self.runs.get(str(progress["id"]))
        if run is None or run.run_id != str(progress["runId"]):
            return
        batch = micro_batch_of_progress(progress, run.checkpoint_location)
        sources = [(str(s["description"]), s.get("startOffset"), s.get("endOffset")) for s in progress.get("sources", [])]
        extra = {"microBatch": snapshots.micro_batch_facet(batch, facets.PRODUCER)}
        inputs = self._inputs(run, (batch.batch_id, sources))
        outputs = self._outputs(run, batch.batch_id)
        self.emit(self._event("RUNNING", _parse_time(progress.get("timestamp")), run, inputs, outputs, extra))

    def _on_terminated(self, event: Any) -> None:
        run = self.runs.get(str(event.id))
        if run is None or run.run_id != str(event.runId):
            return
        self._queries.pop(run.query_id, None)
        failed = event.exception is not None
        extra: dict[str, Any] = {}
        if failed:
            extra["errorMessage"] = facets.error_facet(str(event.exception), getattr(event, "errorClassOnException", None))
        when = datetime.now(timezone.utc)
        self.emit(self._event("FAIL" if failed else "COMPLETE", when, run, self._inputs(run, None), self._outputs(run, None), extra))

    # reading the query -------------------------------------------------------------------
    def _job(self, name: str | None, query_id: str, sink: Endpoint | None) -> tuple[str, str]:
        if self.full_job_name:
            return self.namespace, self.full_job_name
        return job_for(self.app_name, self.namespace, name, query_id, sink)

    def _describe(self, inner: Any, query_id: str, run_id: str, name: str | None) -> StreamingRun:
        if inner is None:  # ended before we could look: a run without datasets
            return StreamingRun(query_id, run_id, name, self._job(name, query_id, None),
                                None, (), {}, None)
        checkpoint = jvm.guarded(None, lambda: str(inner.resolvedCheckpointRoot()))
        sink = jvm.guarded(None, lambda: endpoint_from_description(str(inner.sink().toString())))
        plan = inner.logicalPlan()
        leaves = _stream_and_static_leaves(plan)
        run = StreamingRun(
            query_id,
            run_id,
            name,
            self._job(name, query_id, sink),
            checkpoint,
            tuple(endpoint_from_description(description) for _, description in leaves.stream),
            leaves.static,
            sink,
        )
        return attrs.evolve(run, column_lineage=jvm.guarded(None, lambda: self._column_lineage(plan, leaves, run)))

    def _column_lineage(self, plan: Any, leaves: _Leaves, run: StreamingRun) -> Any | None:
        if run.sink is None or run.sink.relation is None:
            return None
        root = plan_model.parse_plan(self.dumper.to_json(plan))
        write = lineage.write_command(root)
        query = write.query if write is not None else root
        output_columns = tuple(write.output_columns) if write is not None else None
        result = lineage.column_lineage(query, {}, output_columns or None)
        for warning in result.warnings:
            log.info("streaming column lineage: %s", warning)
        relations: dict[int, RelationInfo] = dict(leaves.static)
        for key, description in leaves.stream:
            endpoint = endpoint_from_description(description)
            if endpoint.relation is not None:
                relations[key] = endpoint.relation

        def locate(relation_node: Any) -> tuple[str, str] | None:
            info = relations.get(plan_model.leaf_key(relation_node))
            return events.dataset_location(info, self.table_namespace) if info is not None else None

        return facets.column_lineage_facet(result.columns, result.dataset, locate)

    # events ------------------------------------------------------------------------------
    def _event(
        self,
        event_type: str,
        when: datetime,
        run: StreamingRun,
        inputs: list[Any],
        outputs: list[Any],
        extra_run_facets: Mapping[str, Any] | None = None,
    ) -> Any:
        run_facets: dict[str, Any] = {"processing_engine": facets.processing_engine_facet(self.spark_version)}
        if self.parent is not None:
            run_facets["parent"] = self.parent
        run_facets.update(extra_run_facets or {})
        return events.build_run_event(
            event_type,
            when,
            run.run_id,
            run.job,
            run_facets=run_facets,
            job_facets={"jobType": facets.job_type_facet("STREAMING", "JOB")},
            inputs=inputs,
            outputs=outputs,
        )

    def _inputs(self, run: StreamingRun, batch: tuple[int, list[tuple[str, Any, Any]]] | None) -> list[Any]:
        offsets = {description: (start, end) for description, start, end in batch[1]} if batch else {}
        built: dict[tuple[str, str], Any] = {}
        for source in run.sources:
            if source.relation is None:
                continue
            extra: dict[str, Any] = {}
            if batch is not None and source.description in offsets:
                start, end = offsets[source.description]
                snapshot = snapshots.stream_offsets_snapshot(source.description, start, end, batch[0])
                extra = snapshots.dataset_facets(snapshot, facets.PRODUCER)
            dataset = events.input_dataset(source.relation, self.table_namespace, extra)
            if dataset is not None:
                built.setdefault((dataset.namespace, dataset.name), dataset)
        for key, relation in run.static_inputs.items():
            extra = {}
            if batch is not None:
                snapshot = jvm.guarded(None, lambda key=key: self._static_snapshot(run, key, batch[0]))
                extra = snapshots.dataset_facets(snapshot, facets.PRODUCER)
            dataset = events.input_dataset(relation, self.table_namespace, extra)
            if dataset is not None:
                built.setdefault((dataset.namespace, dataset.name), dataset)
        return list(built.values())

    def _static_snapshot(self, run: StreamingRun, leaf_key: int, batch_id: int) -> snapshots.Snapshot | None:
        """The static side's content, from the file index the query's plan holds (Spark reuses
        that index for every batch, so this is what the batch joined against)."""
        inner = self._queries.get(run.query_id)
        leaf = _leaf_by_key(inner.logicalPlan(), leaf_key) if inner is not None else None
        if leaf is None or jvm.simple_class(leaf) != "LogicalRelation":
            return None
        snapshot = files.input_snapshot(self.gateway.jvm, leaf.relation().location())
        return attrs.evolve(snapshot, batch_id=batch_id) if snapshot is not None else None

    def _outputs(self, run: StreamingRun, batch_id: int | None) -> list[Any]:
        sink = run.sink
        if sink is None or sink.relation is None:
            return []
        extra: dict[str, Any] = {}
        if run.column_lineage is not None:
            extra["columnLineage"] = run.column_lineage
        if batch_id is not None:
            snapshot = None
            if sink.is_file:
                snapshot = jvm.guarded(None, lambda: files.file_sink_snapshot(sink.relation.paths[0], batch_id))
            extra.update(snapshots.dataset_facets(snapshot or snapshots.sink_batch_snapshot(run.query_id, batch_id), facets.PRODUCER))
        dataset = events.output_dataset(sink.relation, self.table_namespace, extra)
        return [dataset] if dataset is not None else []


@attrs.frozen
class _Leaves:
    stream: tuple[tuple[int, str], ...]  # (leaf key, source description)
    static: Mapping[int, RelationInfo]


STREAM_LEAF_CLASSES = frozenset(
    {"StreamingExecutionRelation", "StreamingRelation", "StreamingRelationV2", "StreamingDataSourceV2Relation",
     "StreamingDataSourceV2ScanRelation"}
)


def _stream_and_static_leaves(plan: Any) -> _Leaves:
    stream: list[tuple[int, str]] = []
    static: dict[int, RelationInfo] = {}
    for leaf in jvm.leaves_with_subqueries(plan):
        key = jvm.leaf_key(leaf)
        if key is None:
            continue
        node_class = jvm.simple_class(leaf)
        if node_class in STREAM_LEAF_CLASSES:
            stream.append((key, _source_description(leaf, node_class)))
            continue
        info = jvm.relation_info(leaf, node_class)
        if info.paths or info.table is not None:
            static[key] = info
    return _Leaves(tuple(stream), static)


def _source_description(leaf: Any, node_class: str) -> str:
    if node_class == "StreamingExecutionRelation":
        return str(leaf.source().toString())
    if node_class in {"StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation"}:
        relation = leaf.relation() if node_class == "StreamingDataSourceV2ScanRelation" else leaf
        return str(relation.stream().toString())
    return str(leaf.toString())


def _leaf_by_key(plan: Any, leaf_key: int) -> Any | None:
    for leaf in jvm.leaves_with_subqueries(plan):
        if jvm.leaf_key(leaf) == leaf_key:
            return leaf
    return None


def micro_batch_of_progress(progress: Mapping[str, Any], checkpoint_location: str | None) -> snapshots.MicroBatch:
    """The `microBatch` facet's content from a StreamingQueryProgress JSON."""
    duration = (progress.get("durationMs") or {}).get("triggerExecution")
    return snapshots.MicroBatch(
        batch_id=int(progress["batchId"]),
        query_id=str(progress["id"]),
        run_id=str(progress["runId"]),
        num_input_rows=int(progress.get("numInputRows") or 0),
        checkpoint_location=checkpoint_location,
        duration_ms=int(duration) if duration is not None else None,
    )


def _parse_time(text: str | None) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(timezone.utc)


# ---------------------------------------------------------------------------------------------
# wiring
_listeners: dict[int, LineageStreamingListener] = {}  # per SparkSession (JVM identity)


def register(spark: Any, pipeline: Any) -> LineageStreamingListener:
    """Called by `emitter.listener.attach`: the streaming listener emitting through the batch
    pipeline's client under its application run, the foreachBatch parent lookup, and the
    batch snapshot facets. Re-attaching a session replaces its previous listener."""
    session = pipeline.session
    listener = LineageStreamingListener(
        spark,
        pipeline.emit,
        namespace=pipeline.config.namespace,
        app_name=pipeline.config.job_name or session.app_name,
        spark_version=session.spark_version,
        table_namespace=pipeline.table_namespace,
        parent=pipeline.parent_facet(),
        full_job_name=pipeline.config.full_job_name,
    )
    unregister(spark)
    spark.streams.addListener(listener)
    _listeners[_session_key(spark)] = listener
    jvm.guarded(None, lambda: install_batch_tagger(spark))
    _register_pipeline_hooks(spark, pipeline)
    return listener


def unregister(spark: Any) -> None:
    """Remove the streaming listener `register` added to this session (for detaching)."""
    listener = _listeners.pop(_session_key(spark), None)
    if listener is not None:
        jvm.guarded(None, lambda: spark.streams.removeListener(listener))


def _session_key(spark: Any) -> int:
    return int(spark.sparkContext._jvm.System.identityHashCode(spark._jsparkSession))


def _register_pipeline_hooks(spark: Any, pipeline: Any) -> None:
    from emitter import pipeline as pipeline_module

    register_facets = getattr(pipeline_module, "register_dataset_facet_hook", None)
    if register_facets is not None:
        register_facets(files.batch_snapshot_hook.use(spark._jvm, spark._jsc.hadoopConfiguration()))
    register_parent = getattr(pipeline_module, "register_parent_hook", None)
    if register_parent is not None:
        register_parent(parent_hook.use(pipeline))
