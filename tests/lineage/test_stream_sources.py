"""Streaming sources and sinks named by their options (Kafka, rate, socket, Python data sources).

The plans in tests/fixtures/plans/stream_sources/ are running micro-batch plans as Spark 4
serializes them; the Kafka ones carry the Kafka connector's schema on the V2 stream leaf Spark
builds for every V2 source (no Kafka connector runs here). Each fixture's `stream_sources` /
`stream_sink` is what the listener copies from the query: short name, options, description.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from emitter import events, facets
from emitter.capture import Endpoint
from emitter.described import described_relation, kafka_reads_by_leaf, parse_initial_offsets
from emitter.lineage import column_lineage, write_command
from emitter.naming import dataset_name, naming_options, stream_source_uris
from emitter.plan import leaf_key, parse_plan
from emitter.snapshots import stream_offsets_snapshot
from emitter.streams import one_per_path, per_dataset, stream_endpoint

CASES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "stream_sources"
TABLE_NAMESPACE = "file"


def _case_names() -> list[str]:
    return sorted(path.stem for path in CASES_DIR.glob("*.json"))


def _endpoint(described: dict[str, Any]) -> Endpoint:
    return stream_endpoint(described["description"], (described["sourceName"], naming_options(described["options"])))


def _lineage_rows(case: dict[str, Any], sources: dict[int, Endpoint]) -> dict[str, list[list[str]]]:
    command = write_command(parse_plan(case["plan"]))
    assert command is not None
    result = column_lineage(command.query, {}, case["columns"])
    relations = {key: endpoint.relation for key, endpoint in sources.items() if endpoint.relation is not None}

    def locate(node: Any) -> list[tuple[str, str]] | None:
        relation = relations.get(leaf_key(node))  # type: ignore[arg-type]
        return events.dataset_locations(relation, TABLE_NAMESPACE) if relation is not None else None

    facet = facets.column_lineage_facet(result.columns, result.dataset, locate)
    return {
        column: sorted(
            [field.namespace, field.name, field.field, t.type, t.subtype]
            for field in fields.inputFields
            for t in field.transformations or []
        )
        for column, fields in facet.fields.items()
    }


def _datasets(endpoints: list[Endpoint]) -> list[list[str]]:
    return sorted(
        list(location)
        for endpoint in endpoints
        if endpoint.relation is not None
        for location in events.dataset_locations(endpoint.relation, TABLE_NAMESPACE)
    )


@pytest.mark.parametrize("name", _case_names())
def test_stream_source_fixture_names_datasets_and_lineage(name: str) -> None:
    case = json.loads((CASES_DIR / f"{name}.json").read_text())
    sources = {int(key): _endpoint(described) for key, described in case["stream_sources"].items()}
    sink = [_endpoint(case["stream_sink"])] if case.get("stream_sink") else []

    datasets = {"inputs": _datasets(list(sources.values())), "outputs": _datasets(sink)}

    assert datasets == case["expected_datasets"]
    assert _lineage_rows(case, sources) == case["expected_lineage"]


def test_kafka_subscribe_list_is_one_dataset_per_topic_under_the_first_bootstrap_server() -> None:
    uris = stream_source_uris("kafka", {"kafka.bootstrap.servers": "b1:9092, b2:9092", "subscribe": "orders, payments,orders"})

    assert [dataset_name(uri) for uri in uris] == [("kafka://b1:9092", "orders"), ("kafka://b1:9092", "payments")]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"kafka.bootstrap.servers": "b1:9092", "assign": '{"t1": [0, 1], "t2": [0]}'}, ["t1", "t2"]),
        ({"kafka.bootstrap.servers": "b1:9092", "subscribePattern": "orders-?[0-9]+"}, ["orders-?[0-9]+"]),
        ({"Kafka.Bootstrap.Servers": "SASL_SSL://b1:9093", "topic": "out"}, ["out"]),
    ],
)
def test_kafka_topics_from_assign_pattern_and_sink_topic(options: dict[str, str], expected: list[str]) -> None:
    names = [dataset_name(uri) for uri in stream_source_uris("kafka", options)]

    assert names == [(names[0][0], topic) for topic in expected]
    assert names[0][0] in ("kafka://b1:9092", "kafka://b1:9093")


@pytest.mark.parametrize(
    "options",
    [
        {"subscribe": "orders"},  # no bootstrap servers
        {"kafka.bootstrap.servers": "b1:9092", "assign": "{not json"},
        {"kafka.bootstrap.servers": "b1:9092"},  # a sink taking the topic from a column
    ],
)
def test_a_kafka_source_without_a_nameable_topic_is_no_dataset_and_breaks_nothing(options: dict[str, str]) -> None:
    case = json.loads((CASES_DIR / "stream_kafka_subscribe.json").read_text())
    key, described = next(iter(case["stream_sources"].items()))
    broken = stream_endpoint(described["description"], ("kafka", naming_options(options)))

    rows = _lineage_rows(case, {int(key): broken})

    assert broken.relation is None
    assert rows == {}  # the facet is still built, with no Kafka input


def test_socket_rate_and_python_sources_are_named_by_short_name_or_options() -> None:
    assert [dataset_name(uri) for uri in stream_source_uris("socket", {"host": "localhost", "port": "9999"})] == [
        ("socket://localhost:9999", "/")
    ]
    assert [dataset_name(uri) for uri in stream_source_uris("rate", {"rowsPerSecond": "5"})] == [("rate", "rate")]
    assert [dataset_name(uri) for uri in stream_source_uris("my_events", {})] == [("my-events", "my-events")]
    assert [dataset_name(uri) for uri in stream_source_uris("my_events", {"path": "s3a://bucket/in"})] == [("s3://bucket", "in")]


def test_naming_options_keep_no_credentials() -> None:
    kept = naming_options({"kafka.sasl.jaas.config": "secret", "kafka.bootstrap.servers": "b:1", "Subscribe": "t"})

    assert kept == {"kafka.bootstrap.servers": "b:1", "subscribe": "t"}


KAFKA_OPTIONS = {"kafka.bootstrap.servers": "b1:9092", "subscribe": "orders,payments"}


def _kafka_source() -> Endpoint:
    return stream_endpoint("KafkaV2[Subscribe[orders,payments]]", ("kafka", naming_options(KAFKA_OPTIONS)))


def test_each_topic_of_a_kafka_source_gets_its_own_offsets_and_id() -> None:
    relation = _kafka_source().relation
    assert relation is not None
    start = '{"orders": {"0": 2, "1": 1}, "payments": {"0": 5}}'
    end = {"orders": {"0": 4, "1": 3}, "payments": {"0": 5}}
    whole = stream_offsets_snapshot("KafkaV2[Subscribe[orders,payments]]", start, end, 7)

    per_topic = {one.paths[0]: snapshot for one, snapshot in per_dataset(relation, whole)}

    orders, payments = per_topic["kafka://b1:9092/orders"], per_topic["kafka://b1:9092/payments"]
    assert orders is not None and payments is not None
    assert (orders.start_offset, orders.end_offset, orders.batch_id) == (
        {"orders": {"0": 2, "1": 1}},
        {"orders": {"0": 4, "1": 3}},
        7,
    )
    assert (payments.start_offset, payments.end_offset) == ({"payments": {"0": 5}}, {"payments": {"0": 5}})
    assert orders.snapshot_id != payments.snapshot_id
    # the same range of a topic has the same id, whichever source (query) read it
    alone = stream_offsets_snapshot(
        "KafkaV2[Assign[orders-0, orders-1]]", {"orders": {"0": 2, "1": 1}}, {"orders": {"0": 4, "1": 3}}, 3
    )
    [(_, from_assign)] = per_dataset(attrs.evolve(relation, paths=("kafka://b1:9092/orders",)), alone)
    assert from_assign is not None and from_assign.snapshot_id == orders.snapshot_id


def test_a_first_batch_has_no_start_and_offsets_of_another_shape_are_kept_whole() -> None:
    relation = _kafka_source().relation
    assert relation is not None
    first = stream_offsets_snapshot("KafkaV2[Subscribe[orders,payments]]", None, {"orders": {"0": 1}}, 0)

    per_topic = {one.paths[0]: snapshot for one, snapshot in per_dataset(relation, first)}

    orders = per_topic["kafka://b1:9092/orders"]
    assert orders is not None and orders.start_offset is None and orders.end_offset == {"orders": {"0": 1}}
    assert per_topic["kafka://b1:9092/payments"] is first  # no offsets of its own in the progress: the source's
    pattern = stream_endpoint(
        "KafkaV2[SubscribePattern[o.*]]", ("kafka", {"kafka.bootstrap.servers": "b1:9092", "subscribepattern": "o.*"})
    )
    assert pattern.relation is not None
    assert per_dataset(pattern.relation, first) == [(pattern.relation, first)]
    unparsed = stream_offsets_snapshot("KafkaV2[Subscribe[orders,payments]]", None, "not json", 0)
    assert [snapshot for _, snapshot in per_dataset(relation, unparsed)] == [unparsed, unparsed]
    assert per_dataset(relation, None) == [(one, None) for one in one_per_path(relation)]


def test_a_batch_read_of_kafka_topics_is_a_dataset_per_topic() -> None:
    leaf = {"class": "LogicalRelation", "key": 0, "relation": "KafkaRelation", "options": {**KAFKA_OPTIONS}}

    relation = described_relation(leaf)

    assert relation is not None
    assert events.dataset_locations(relation, TABLE_NAMESPACE) == [("kafka://b1:9092", "orders"), ("kafka://b1:9092", "payments")]
    assert described_relation({**leaf, "options": {"subscribe": "orders"}}) is None  # no bootstrap servers: no dataset


def test_a_batch_read_has_the_offsets_its_scan_was_planned_with_unless_a_range_is_left_open() -> None:
    relation = described_relation(
        {"class": "LogicalRelation", "key": 0, "relation": "KafkaRelation", "options": {**KAFKA_OPTIONS}}
    )
    assert relation is not None
    ranges = [
        {"topic": "orders", "partition": 0, "from": 5, "until": 9},
        {"topic": "payments", "partition": 1, "from": 0, "until": 3},
    ]

    [(key, snapshot)] = kafka_reads_by_leaf([{"key": 7, "ranges": ranges}, {"key": 8, "ranges": ranges}], {7: relation}).items()

    assert key == 7
    per_topic = {one.paths[0]: part for one, part in per_dataset(relation, snapshot)}
    orders = per_topic["kafka://b1:9092/orders"]
    assert orders is not None
    assert (orders.kind, orders.start_offset, orders.end_offset, orders.batch_id) == (
        "stream-offsets",
        {"orders": {"0": 5}},
        {"orders": {"0": 9}},
        None,
    )
    opened = [*ranges, {"topic": "orders", "partition": 1, "from": -2, "until": -1}]  # earliest to latest: resolved by each task
    assert kafka_reads_by_leaf([{"key": 7, "ranges": opened}], {7: relation}) == {}


def test_a_kafka_sources_start_is_read_as_its_checkpoint_keeps_it() -> None:
    assert parse_initial_offsets('\0v1\n{"orders":{"0":0,"1":5}}') == {"orders": {"0": 0, "1": 5}}
    assert parse_initial_offsets('v1\n{"orders":{"0":3}}') == {"orders": {"0": 3}}
    assert parse_initial_offsets("v2\n{}") is None
    assert parse_initial_offsets("v1\nnot json") is None
