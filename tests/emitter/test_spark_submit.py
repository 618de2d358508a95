"""Zero-code attach under spark-submit: `PYTHONPATH=$(python -m emitter pythonpath) spark-submit job.py`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.require import skip_or_fail
from tests.support.spark import SCRIPT_TIMEOUT_S, SPARK_TEST_CONF, file_transport_env, read_events
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

JOB = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.appName("Submitted Job").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.range(3).write.mode("overwrite").parquet(sys.argv[1])
print("submitted ok")
"""


def test_spark_submit_attaches_with_no_code_change(tmp_path: Path):
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        spark_submit = Path(shutil.which("spark-submit") or "")
    if not spark_submit.is_file():
        skip_or_fail("spark-submit not installed (it ships with PySpark)")
    hook_dir = subprocess.run(
        [sys.executable, "-m", "emitter", "pythonpath"], capture_output=True, text=True, check=True
    ).stdout.strip()
    script = tmp_path / "job.py"
    script.write_text(JOB)
    events_path = tmp_path / "events.jsonl"
    env = file_transport_env(events_path, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([hook_dir, env["PYTHONPATH"]])
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            "--driver-java-options",
            SPARK_TEST_CONF["spark.driver.extraJavaOptions"],
            str(script),
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "submitted ok" in result.stdout
    events = read_events(events_path)
    for event in events:
        assert_valid_event(event)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("submitted_job", "START"),
        (events[1]["job"]["name"], "START"),
        (events[1]["job"]["name"], "COMPLETE"),
        ("submitted_job", "COMPLETE"),
    ]
    assert events[1]["job"]["name"].startswith("submitted_job.insert_into_hadoop_fs_relation_command.")
    assert events[1]["outputs"][0]["name"] == str(tmp_path / "out")
