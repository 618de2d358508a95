"""The streaming listener as `emitter.listener.attach` wires it: events go through the
pipeline's openlineage-python client (file transport here), under the application run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.streaming.conftest import drain_listener_bus
from tests.streaming.test_streaming_runs import _write_json_lines
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark


@pytest.fixture()
def attached(streaming_spark: Any, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    from emitter.listener import attach, close_session

    close_session(streaming_spark)
    log = tmp_path / "events.jsonl"
    attachment = attach(streaming_spark, {"transport": {"type": "file", "log_file_path": str(log), "append": True}})
    assert attachment is not None
    yield streaming_spark, log
    close_session(streaming_spark)


def _events(spark: Any, log: Path) -> list[dict[str, Any]]:
    drain_listener_bus(spark)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for event in events:
        assert_valid_event(event)
    return events


def test_attach_emits_the_streaming_run_through_the_client(attached: tuple[Any, Path], tmp_path: Path) -> None:
    spark, log = attached
    source = tmp_path / "clicks"
    _write_json_lines(source, "part-0.json", [{"user": "a", "n": 1}])
    query = (
        spark.readStream.schema("user string, n int")
        .json(str(source))
        .selectExpr("user", "n + 1 AS n1")
        .writeStream.format("json")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "clicks_out"))
    )
    query.awaitTermination()
    events = _events(spark, log)

    application = next(e for e in events if e["eventType"] == "START" and not e["inputs"] and not e["outputs"])
    run = [e for e in events if e["run"]["runId"] == str(query.runId)]
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "COMPLETE"]
    assert all(e["run"]["facets"]["parent"]["run"]["runId"] == application["run"]["runId"] for e in run)
    running = run[1]
    assert running["run"]["facets"]["microBatch"]["batchId"] == 0
    [output] = running["outputs"]
    assert output["name"] == str(tmp_path / "clicks_out")
    assert output["facets"]["snapshot"]["kind"] == "content"
    assert output["facets"]["columnLineage"]["fields"]["n1"]["inputFields"][0]["field"] == "n"


def test_foreach_batch_write_events_have_the_streaming_run_as_parent(attached: tuple[Any, Path], tmp_path: Path) -> None:
    spark, log = attached
    source = tmp_path / "orders"
    _write_json_lines(source, "part-0.json", [{"id": 1}])
    target = tmp_path / "orders_copy"
    query = (
        spark.readStream.schema("id int")
        .json(str(source))
        .writeStream.foreachBatch(lambda batch, batch_id: batch.write.mode("append").parquet(str(target)))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    events = _events(spark, log)

    streaming_start = next(e for e in events if e["run"]["runId"] == str(query.runId))
    writes = [e for e in events if [o["name"] for o in e["outputs"]] == [str(target)]]
    assert writes
    for write in writes:
        parent = write["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == str(query.runId)
        assert parent["job"]["name"] == streaming_start["job"]["name"]


def test_reattaching_a_session_replaces_its_streaming_listener(attached: tuple[Any, Path], tmp_path: Path) -> None:
    from emitter.listener import attach, close_session

    spark, _ = attached
    before = len(spark._jsparkSession.streams().listListeners())
    close_session(spark)
    assert attach(spark, {"transport": {"type": "file", "log_file_path": str(tmp_path / "again.jsonl")}}) is not None
    assert len(spark._jsparkSession.streams().listListeners()) == before


def test_closing_a_session_removes_its_streaming_listener(attached: tuple[Any, Path]) -> None:
    from emitter.listener import close_session

    spark, _ = attached
    before = len(spark._jsparkSession.streams().listListeners())
    close_session(spark)
    assert len(spark._jsparkSession.streams().listListeners()) == before - 1, "no emitting through a closed client"
