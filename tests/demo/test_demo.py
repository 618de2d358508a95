"""`./run demo` end to end: broker, consumer, a real PySpark pipeline under the emitter, API answers."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from demo.broker import free_port
from tests.support.paths import PROJECT_ROOT
from tests.support.spark import require_spark_connect

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def demo(*flags: str) -> str:
    """The output of `python -m demo --exit FLAGS...`, which must succeed."""
    completed = subprocess.run(
        [sys.executable, "-m", "demo", "--exit", *flags, "--port", str(free_port())],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed.stdout


@pytest.fixture(scope="module")
def demo_output() -> str:
    return demo()


@pytest.fixture(scope="module")
def connect_demo_output() -> str:
    require_spark_connect()
    return demo("--connect")


def test_the_connect_variant_stores_and_answers_like_the_classic_one(connect_demo_output: str) -> None:
    """`python -m demo --connect`: the pipeline as a thin Connect client, lineage from the server."""
    test_every_published_event_is_stored_by_the_consumer(connect_demo_output)
    test_column_lineage_table_shows_expressions_in_user_column_names(connect_demo_output)
    test_transitive_answers_reach_the_raw_tables(connect_demo_output)


def test_every_published_event_is_stored_by_the_consumer(demo_output: str) -> None:
    line = next(text for text in demo_output.splitlines() if "OpenLineage events published" in text)
    published = int(line.split()[0])
    stored = int(line.rsplit(";", 1)[1].split()[0])
    assert published >= 10 and stored == published


def test_column_lineage_table_shows_expressions_in_user_column_names(demo_output: str) -> None:
    assert re.search(
        r"default\.revenue_by_country\.total_revenue\s+<-\s+default\.sales\.revenue\s+"
        r"DIRECT/AGGREGATION\s+sum\(revenue\)",
        demo_output,
    )
    assert "explode(split(tags, ',', -1))" in demo_output
    assert "rank() OVER (PARTITION BY country ORDER BY revenue DESC)" in demo_output


def test_transitive_answers_reach_the_raw_tables(demo_output: str) -> None:
    origins = demo_output.split("comes from, transitively", 1)[1].split("==", 1)[0]
    assert "sales.revenue" in origins and "products.price" in origins and "orders.quantity" in origins
    snapshots = demo_output.split("(data-lineage store)", 1)[1].split("==", 1)[0]
    assert "sales@" in snapshots and "orders@" in snapshots
    plan = demo_output.split("what to roll back and restart", 1)[1]
    assert "revenue_by_country" in plan and "ranked_sales" in plan


def test_the_api_address_is_printed(demo_output: str) -> None:
    assert "Lineage API: http://127.0.0.1:" in demo_output
