"""Two sessions of one SparkContext attached with different namespaces and transports: each
write's events go only to its own session's output, also when both write at once; closing one
attachment leaves the other emitting, and a closed attachment emits nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import emitter
from emitter import listener as listener_module
from tests.support.spark import read_events, wait_for_listeners
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark


def _outputs(events: list[dict[str, Any]]) -> list[str]:
    return sorted({o["name"] for e in events if e["eventType"] == "COMPLETE" for o in e["outputs"]})


def _attach(session: Any, namespace: str, log: Path) -> Any:
    config = {"namespace": namespace, "transport": {"type": "file", "log_file_path": str(log), "append": True}}
    attachment = emitter.attach(session, config)
    assert attachment is not None
    return attachment


def test_two_sessions_each_emit_only_their_own_writes(spark: Any, tmp_path: Path) -> None:
    alpha, beta = spark.newSession(), spark.newSession()
    alpha_log, beta_log = tmp_path / "alpha.jsonl", tmp_path / "beta.jsonl"
    alpha_attachment = _attach(alpha, "alpha", alpha_log)
    beta_attachment = _attach(beta, "beta", beta_log)
    assert alpha_attachment is not beta_attachment
    try:
        alpha.range(3).write.parquet(str(tmp_path / "alpha_files"))
        beta.range(4).write.parquet(str(tmp_path / "beta_files"))
        errors: list[BaseException] = []

        def create_table(session: Any, name: str, source: Path) -> None:
            try:
                session.sql(f"CREATE TABLE {name} USING parquet AS SELECT id, id * 2 AS twice FROM parquet.`{source}`")
            except BaseException as error:
                errors.append(error)

        threads = [
            threading.Thread(target=create_table, args=(alpha, "sessions_alpha", tmp_path / "alpha_files")),
            threading.Thread(target=create_table, args=(beta, "sessions_beta", tmp_path / "beta_files")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        wait_for_listeners(spark)

        emitter.detach(alpha)
        assert alpha_attachment.closed
        alpha.range(2).write.parquet(str(tmp_path / "alpha_after_close"))
        beta.range(2).write.parquet(str(tmp_path / "beta_after_close"))
        wait_for_listeners(spark)
    finally:
        listener_module.close_session(alpha)
        listener_module.close_session(beta)

    alpha_events, beta_events = read_events(alpha_log), read_events(beta_log)
    for event in alpha_events + beta_events:
        assert_valid_event(event)
    assert {e["job"]["namespace"] for e in alpha_events} == {"alpha"}
    assert {e["job"]["namespace"] for e in beta_events} == {"beta"}
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert _outputs(alpha_events) == sorted([str(tmp_path / "alpha_files"), str(warehouse / "sessions_alpha")])
    assert _outputs(beta_events) == sorted(
        [str(tmp_path / "beta_files"), str(warehouse / "sessions_beta"), str(tmp_path / "beta_after_close")]
    )
    for events, table, source in ((alpha_events, "sessions_alpha", "alpha_files"), (beta_events, "sessions_beta", "beta_files")):
        [table_run] = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(f"default_{table}")]
        assert table_run["outputs"][0]["facets"]["symlinks"]["identifiers"][0]["name"] == f"default.{table}"
        fields = table_run["outputs"][0]["facets"]["columnLineage"]["fields"]
        assert {(column, f["name"], f["field"]) for column, field in fields.items() for f in field["inputFields"]} == {
            ("id", str(tmp_path / source), "id"),
            ("twice", str(tmp_path / source), "id"),
        }
        assert [i["name"] for i in table_run["inputs"]] == [str(tmp_path / source)]
        application = next(e for e in events if e["eventType"] == "START" and not e["outputs"] and not e["inputs"])
        assert table_run["run"]["facets"]["parent"]["run"]["runId"] == application["run"]["runId"]
    assert [e["eventType"] for e in alpha_events if not e["outputs"] and not e["inputs"]] == ["START", "COMPLETE"]
