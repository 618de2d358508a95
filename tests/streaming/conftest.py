"""The streaming tests run on the suite's shared Spark session (tests/support/spark.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.spark import wait_for_listeners


@pytest.fixture(scope="module")
def streaming_spark(spark: Any) -> Any:
    spark.conf.set("spark.sql.debug.maxToStringFields", "10000")
    return spark


def drain_listener_bus(spark: Any, timeout_ms: int = 30_000) -> None:
    """Streaming and batch callbacks run on Spark's listener bus: wait until it delivered all."""
    wait_for_listeners(spark, timeout_ms)
