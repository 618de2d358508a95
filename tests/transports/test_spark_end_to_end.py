"""A real PySpark job whose Kafka broker is down for its whole life: it succeeds, and its
events reach Kafka later, from the spool, complete and in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.broker import free_port, read_topic, unique_topic
from tests.support.spark import SCRIPT_TIMEOUT_S, file_transport_env, script_prelude
from tests.support.spec import assert_valid_event
from tests.transports.test_kafka_transport import make_transport

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

JOB = """
import sys
spark.range(5).selectExpr("id", "id * 2 AS doubled").write.mode("overwrite").parquet(sys.argv[1])
print("job done")
"""


def kafka_env(events_path: Path, bootstrap: str, topic: str, spool_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in file_transport_env(events_path).items() if not key.startswith("OPENLINEAGE")}
    env.update(
        OPENLINEAGE__TRANSPORT__TYPE="kafka",
        OPENLINEAGE__TRANSPORT__TOPIC=topic,
        OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS=bootstrap,
        OPENLINEAGE__TRANSPORT__SPOOLDIR=str(spool_dir),
        OPENLINEAGE__TRANSPORT__FLUSHTIMEOUTSECONDS="2",
    )
    return env


def test_a_job_with_the_broker_down_succeeds_and_its_events_arrive_later(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("spark-offline", bootstrap=kafka_bootstrap)
    spool_dir = tmp_path / "spool"
    output = tmp_path / "out"
    script = tmp_path / "job.py"
    script.write_text(script_prelude("Offline Job", tmp_path / "warehouse") + JOB)
    env = kafka_env(tmp_path / "unused.jsonl", f"127.0.0.1:{free_port()}", topic, spool_dir)

    completed = subprocess.run(
        [sys.executable, "-m", "emitter", "run", str(script), str(output)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith("job done")
    spooled_count = len(list(spool_dir.glob("*.rec")))
    assert spooled_count >= 4  # application START/COMPLETE around the write's START/COMPLETE

    next_application = make_transport(kafka_bootstrap, topic, spool_dir)
    assert next_application.close(60) is True

    events = [json.loads(record.value) for record in read_topic(kafka_bootstrap, topic, expected=spooled_count)]
    assert len(events) == spooled_count
    for event in events:
        assert_valid_event(event)
    application_run = events[0]["run"]["runId"]
    assert events[0]["eventType"] == "START" and events[-1]["eventType"] == "COMPLETE"
    assert events[-1]["run"]["runId"] == application_run
    writes = [event for event in events if event["run"]["runId"] != application_run]
    assert [event["eventType"] for event in writes] == ["START", "COMPLETE"]
    assert any(dataset["name"] == str(output) for dataset in writes[-1]["outputs"])
    assert not list(spool_dir.glob("*.rec"))
