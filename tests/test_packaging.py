"""The release as a user installs it: the wheel built from a copy of the repository, installed with
each extra into a clean virtualenv (pip's cache keeps that quick). The emitter's install holds none
of the consumer's dependencies and runs a PySpark job under `python -m emitter run`; the consumer's
holds no Spark and answers `python -m consumer --help`. Both report the version pyproject.toml sets,
and the wheel carries the licence and the notice."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.checkout import clean_environment, repository_copy
from tests.support.paths import PROJECT_ROOT

# pyproject.toml is the one place the version is written
VERSION = re.search(r'^version = "([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(), re.MULTILINE)[1]  # type: ignore[index]
CONSUMER_ONLY = {"fastapi", "uvicorn", "sqlalchemy", "psycopg", "alembic", "prometheus-client", "zstandard"}
EMITTER_ONLY = {"pyspark", "openlineage-python", "py4j"}
INSTALL_TIMEOUT_SECONDS = 600
TINY_JOB = """
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("packaged").getOrCreate()
spark.range(3).selectExpr("id", "id * 2 AS doubled").write.mode("overwrite").parquet("out/doubled")
"""


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**clean_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = repository_copy(tmp_path_factory.mktemp("source"))
    built = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(built), str(source)], source)
    (found,) = built.glob("spark_lineage-*.whl")
    return found


def _installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path, extra: str) -> tuple[Path, set[str]]:
    """A fresh virtualenv with `wheel[extra]`: its python and the distributions in it."""
    venv = tmp_path_factory.mktemp(f"venv-{extra}")
    _run([sys.executable, "-m", "venv", str(venv)], venv)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[{extra}]"], venv)
    listed = json.loads(_run([str(python), "-m", "pip", "list", "--format", "json"], venv).stdout)
    return python, {item["name"].lower() for item in listed}


def test_the_wheel_carries_the_licence_the_notice_and_the_version(wheel: Path) -> None:
    assert wheel.name == f"spark_lineage-{VERSION}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"spark_lineage-{VERSION}.dist-info/licenses/{name}" for name in ("LICENSE", "NOTICE")} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(f"spark_lineage-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata


@pytest.mark.spark
def test_the_emitter_installs_without_the_consumers_dependencies_and_runs_a_job(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path
) -> None:
    python, installed = _installed(tmp_path_factory, wheel, "emitter")
    assert not CONSUMER_ONLY & installed, f"the emitter's install holds consumer dependencies: {CONSUMER_ONLY & installed}"
    job_dir = tmp_path_factory.mktemp("job")
    (job_dir / "job.py").write_text(TINY_JOB)
    file_transport = {
        "OPENLINEAGE__TRANSPORT__TYPE": "file",
        "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(job_dir / "events.jsonl"),
        "OPENLINEAGE__TRANSPORT__APPEND": "true",
    }
    _run([str(python), "-m", "emitter", "run", "job.py"], job_dir, file_transport)
    events = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    write = next(event for event in events if event["eventType"] == "COMPLETE" and event["outputs"])
    assert write["outputs"][0]["name"] == str(job_dir / "out" / "doubled")
    assert write["run"]["facets"]["processing_engine"]["openlineageAdapterVersion"] == VERSION


def test_the_consumer_installs_without_spark_and_answers_help(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> None:
    python, installed = _installed(tmp_path_factory, wheel, "consumer")
    assert not EMITTER_ONLY & installed, f"the consumer's install holds emitter dependencies: {EMITTER_ONLY & installed}"
    usage = _run([str(python), "-m", "consumer", "--help"], python.parent).stdout
    assert all(command in usage for command in ("serve", "ingest", "migrate", "create-topics", "replay"))
    api_version = _run(
        [str(python), "-c", "from consumer.api import create_app; print(create_app(None).version)"], python.parent
    ).stdout.strip()
    assert api_version == VERSION
