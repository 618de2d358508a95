"""One Spark session for the streaming tests (the active one when the suite already has it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def streaming_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    spark = active or (
        SparkSession.builder.master("local[2]")
        .appName("streaming-lineage")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.debug.maxToStringFields", "10000")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    yield spark
    if active is None:
        spark.stop()


def drain_listener_bus(spark: Any, timeout_ms: int = 30_000) -> None:
    """Streaming and batch callbacks run on Spark's listener bus: wait until it delivered all."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
