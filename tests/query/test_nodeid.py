"""The node-id grammar Marquez Web uses, including URI namespaces with host:port."""

from __future__ import annotations

import pytest

from consumer.query.errors import BadParameter
from consumer.query.nodeid import NodeId, parse_node_id

VERSION = "3fa85f64-5717-4562-b3fc-2c963f66afa6"

CASES = [
    ("dataset:food_delivery:public.orders", NodeId("dataset", "food_delivery", "public.orders")),
    ("job:food_delivery:etl.orders.daily", NodeId("job", "food_delivery", "etl.orders.daily")),
    ("dataset:file:/lake/gold", NodeId("dataset", "file", "/lake/gold")),
    (
        "dataset:postgres://db.example.com:5432:shop.public.orders",
        NodeId("dataset", "postgres://db.example.com:5432", "shop.public.orders"),
    ),
    ("dataset:kafka://b1:9092,b2:9092:orders.v1", NodeId("dataset", "kafka://b1:9092,b2:9092", "orders.v1")),
    ("dataset:s3://bucket:warehouse/orders", NodeId("dataset", "s3://bucket", "warehouse/orders")),
    ("datasetField:hive://localhost:9083:test.xxx:a", NodeId("datasetField", "hive://localhost:9083", "test.xxx", field="a")),
    ("datasetField:file:/lake/gold:total", NodeId("datasetField", "file", "/lake/gold", field="total")),
    (f"dataset:ns:t#{VERSION}", NodeId("dataset", "ns", "t", version=VERSION)),
    (f"run:{VERSION}", NodeId("run", "", VERSION)),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parses_and_prints_back(text, expected):
    assert parse_node_id(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize(
    "text", ["dataset", "dataset:", "dataset:only", "table:ns:x", "run:not-a-uuid", "datasetField:ns:nofield"]
)
def test_malformed_ids_name_themselves(text):
    with pytest.raises(BadParameter, match="malformed nodeId"):
        parse_node_id(text)
