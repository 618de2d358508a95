"""Streaming queries as OpenLineage runs, from plain captures (pure; `emitter.pipeline` builds their events).

A streaming query run is ONE OpenLineage run: START when it starts, RUNNING per micro-batch
(run facet `microBatch`, a `snapshot` facet on every input and on the sink), COMPLETE or FAIL
when it stops. Its run id is Spark's query run id (a UUID, new at each (re)start), so the writes
a micro-batch makes (`foreachBatch`) can name it as their parent.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs

from emitter.capture import Endpoint, RelationInfo, StreamProgress, StreamStarted
from emitter.lineage import write_command
from emitter.naming import KAFKA_SCHEME, dataset_name, job_name, stream_source_uris
from emitter.plan import leaf_key, parse_plan
from emitter.snapshots import Snapshot, sink_batch_snapshot, stream_offsets_snapshot

STREAMING_COMMAND = "streaming"
# Streaming runs remembered after they end, so late foreachBatch captures still find their parent.
REMEMBERED_RUNS = 256
_BRACKETED = re.compile(r"^(\w+)\[(.*)\]$", re.DOTALL)
FILE_SOURCE_NAMES = frozenset({"FileStreamSource", "FileSource"})
FILE_SINK_NAMES = frozenset({"FileSink", "FileStreamSink"})


def endpoint_from_description(description: str, node_class: str = "") -> Endpoint:
    """`FileStreamSource[file:/in]` / `FileSink[file:/out]` → a file dataset; anything else
    (Kafka, rate, memory, foreachBatch) is kept by description only."""
    match = _BRACKETED.match(description.strip())
    if match and match.group(1) in FILE_SOURCE_NAMES | FILE_SINK_NAMES:
        path = match.group(2)
        return Endpoint(description, RelationInfo(node_class=node_class or match.group(1), paths=(path,)), True)
    return Endpoint(description, None)


def stream_endpoint(description: str, source: tuple[str, Mapping[str, str]] | None) -> Endpoint:
    """A source (or sink) Spark describes without its location (`KafkaV2[Subscribe[a,b]]`,
    `RateStreamV2[...]`), named from `source` = (short name, naming options) when known."""
    endpoint = endpoint_from_description(description)
    if endpoint.relation is not None or source is None:
        return endpoint
    source_name, options = source
    uris = stream_source_uris(source_name, options)
    if not uris:
        return endpoint
    relation = RelationInfo(node_class="StreamingRelationV2", paths=uris, format=source_name)
    return Endpoint(description, relation)


def one_per_path(relation: RelationInfo) -> list[RelationInfo]:
    """A relation per dataset: a Kafka source subscribed to several topics is one per topic."""
    if len(relation.paths) < 2:
        return [relation]
    return [attrs.evolve(relation, paths=(path,)) for path in relation.paths]


def per_dataset(relation: RelationInfo, snapshot: Snapshot | None) -> list[tuple[RelationInfo, Snapshot | None]]:
    """A relation per dataset, each with its own snapshot: a Kafka source subscribed to several
    topics is one per topic, each with its topic's offsets only (`kafka_topic_snapshot`)."""
    return [(one, kafka_topic_snapshot(one, snapshot)) for one in one_per_path(relation)]


def kafka_topic_snapshot(relation: RelationInfo, snapshot: Snapshot | None) -> Snapshot | None:
    """The micro-batch's snapshot of ONE Kafka topic: the per-partition offsets of that topic out
    of the source's (`{"orders": {"0": 42}, "payments": {...}}` → `{"orders": {"0": 42}}`), its id
    a hash of the topic's dataset (`kafka://host:port/orders`) and those offsets, so the same range
    of a topic has the same id whichever query read it. Anything else, or offsets not keyed by
    this topic (a `subscribePattern` source's dataset is its pattern), keeps `snapshot`."""
    if snapshot is None or not snapshot.has_offsets:
        return snapshot
    if (relation.format or "").lower() != KAFKA_SCHEME or len(relation.paths) != 1:
        return snapshot
    _, topic = dataset_name(relation.paths[0])
    end = _topic_offsets(snapshot.end_offset, topic)
    if end is None:
        return snapshot
    start = _topic_offsets(snapshot.start_offset, topic)
    return stream_offsets_snapshot(relation.paths[0], start, end, snapshot.batch_id)


def _topic_offsets(offsets: Any, topic: str) -> Mapping[str, Any] | None:
    """`{topic: {partition: offset}}` of one topic out of a Kafka source's offsets, or None."""
    if not isinstance(offsets, Mapping) or not isinstance(offsets.get(topic), Mapping):
        return None
    return {topic: offsets[topic]}


def micro_batch_leaf_keys(batch_plan_json: str, query_plan_json: str) -> list[int]:
    """Leaf keys of the LogicalRDDs in a foreachBatch action's plan that stand for the micro-batch
    of the query whose plan is `query_plan_json` (their columns are the query's output columns)."""
    root = parse_plan(query_plan_json)
    write = write_command(root)
    output_ids = {attribute.expr_id for attribute in (write.query if write is not None else root).output}
    keys = [leaf_key(node) for node in parse_plan(batch_plan_json).walk() if node.cls == "LogicalRDD"]
    return [key for key in keys if key is not None and key in output_ids]


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


@attrs.frozen
class StreamingRun:
    """What the pipeline keeps of a started query for its later events."""

    started: StreamStarted
    job: tuple[str, str]
    column_lineage: Any | None = None  # the columnLineage facet of the sink

    @property
    def run_id(self) -> str:
        return self.started.run_id


def lineage_relations(started: StreamStarted) -> dict[int, RelationInfo]:
    """Every leaf of the query's plan that is a dataset, by leaf key (sources and static sides)."""
    relations: dict[int, RelationInfo] = dict(started.static_inputs)
    for key, endpoint in started.stream_leaves.items():
        if endpoint.relation is not None:
            relations[key] = endpoint.relation
    return relations


def source_offsets(progress: StreamProgress | None) -> Mapping[str, tuple[Any, Any]]:
    if progress is None:
        return {}
    return {source.description: (source.start_offset, source.end_offset) for source in progress.sources}


def source_snapshot(endpoint: Endpoint, progress: StreamProgress | None) -> Any | None:
    offsets = source_offsets(progress)
    if progress is None or endpoint.description not in offsets:
        return None
    start, end = offsets[endpoint.description]
    return stream_offsets_snapshot(endpoint.description, start, end, progress.batch.batch_id)


def sink_snapshot(run: StreamingRun, progress: StreamProgress | None) -> Any | None:
    if progress is None:
        return None
    return progress.sink_snapshot or sink_batch_snapshot(run.started.query_id, progress.batch.batch_id)


class StreamRuns:
    """The streaming runs an attachment knows, by query id: the latest (re)start of each query,
    the oldest forgotten past REMEMBERED_RUNS. Kept by one thread (the attachment's pipeline thread)."""

    def __init__(self, kept: int = REMEMBERED_RUNS) -> None:
        self._kept = kept
        self._runs: OrderedDict[str, StreamingRun] = OrderedDict()

    def started(self, run: StreamingRun) -> None:
        query_id = run.started.query_id
        self._runs.pop(query_id, None)
        self._runs[query_id] = run
        while len(self._runs) > self._kept:
            self._runs.popitem(last=False)

    def live(self) -> Mapping[str, StreamingRun]:
        """A copy: a context built from it does not change as later runs start."""
        return dict(self._runs)
