"""A real SparkSession shared by the whole test session, and helpers to run PySpark scripts
under `python -m emitter run` and read back the events they produced.

The machine is small and shared: local[2], no UI, 2 shuffle partitions, warehouse under a
pytest tmp dir. Modules that need their own session settings should build one from
`spark_builder(...)` rather than changing the shared one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import emitter
from tests.support.paths import PROJECT_ROOT
from tests.support.require import skip_or_fail

# The JIT's first tier and the serial collector (see SPARK_TEST_CONF).
DRIVER_JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _driver_java_options() -> str:
    """DRIVER_JIT_OPTIONS, and the class-data-sharing archive `./run tests` made for this
    virtualenv's PySpark when it names one (`tests.support.spark_cds`)."""
    options = DRIVER_JIT_OPTIONS
    archive = os.environ.get("LINEAGE_TEST_SPARK_CDS", "")
    if archive and Path(archive).is_file() and " " not in archive:
        options += f" -XX:SharedArchiveFile={archive}"
    return options


SPARK_TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
    # The tests start many short-lived drivers on two cores: the JIT's first tier and the serial
    # collector spend far less CPU on them than the default optimizing JIT and parallel collector,
    # and the classes shared from an archive need not be loaded and verified again.
    "spark.driver.extraJavaOptions": _driver_java_options(),
}
SCRIPT_TIMEOUT_S = 600


def require_spark() -> None:
    """PySpark importable and a Java runtime on PATH (or JAVA_HOME), else `skip_or_fail`."""
    try:
        import pyspark  # noqa: F401
    except ImportError as error:
        skip_or_fail(f"PySpark is not installed: {error}")
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and (Path(java_home) / "bin" / "java").is_file()):
        skip_or_fail("no Java runtime (java on PATH or JAVA_HOME): Spark needs Java 17+")


def require_spark_connect() -> None:
    """PySpark 4 with its Spark Connect server jar and the client's extras (`pyspark[connect]`), else
    `skip_or_fail`; PySpark 3.5 ships no server: skipped, whatever LINEAGE_REQUIRE_ALL says."""
    require_spark()
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip(f"PySpark {pyspark.__version__} ships no Spark Connect server (4.x does)")
    jars = Path(pyspark.__file__).parent / "jars"
    if not list(jars.glob("spark-connect_*.jar")):
        skip_or_fail(f"no spark-connect jar in {jars}")
    try:
        import grpc  # noqa: F401
        import grpc_status  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        from google.rpc import status_pb2  # noqa: F401
    except ImportError as error:
        skip_or_fail(f"the Spark Connect client extras are missing (pip install 'pyspark[connect]'): {error}")


def spark_builder(app_name: str, warehouse: Path, master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SPARK_TEST_CONF, "spark.sql.warehouse.dir": str(warehouse)}.items():
        builder = builder.config(key, value)
    return builder


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The shared SparkSession (real Spark, local[2])."""
    require_spark()
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = spark_builder("tests", warehouse).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def wait_for_listeners(spark: Any, timeout_ms: int = 30_000) -> None:
    """Block until Spark delivered every pending listener callback (QueryExecutionListener
    included) and every attached emitter handed the events of those actions to its transport."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    assert emitter.settle(), "the emitter's pipeline did not settle"


def file_transport_env(events_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a child process whose OpenLineage events go to `events_path`, one per line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(
        OPENLINEAGE__TRANSPORT__TYPE="file",
        OPENLINEAGE__TRANSPORT__LOG_FILE_PATH=str(events_path),
        OPENLINEAGE__TRANSPORT__APPEND="true",
        PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH", "")])),
    )
    env.update(extra)
    return env


def read_events(events_path: Path) -> list[dict[str, Any]]:
    if not events_path.exists():
        return []
    return [json.loads(line) for line in events_path.read_text().splitlines() if line.strip()]


def run_under_emitter(
    script: Path, events_path: Path, args: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m emitter run script args...` in a child process with the file transport."""
    return subprocess.run(
        [sys.executable, "-m", "emitter", "run", str(script), *args],
        cwd=script.parent,
        env={**file_transport_env(events_path), **(env or {})},
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )


def script_prelude(app_name: str, warehouse: Path) -> str:
    """Source lines that build a small local SparkSession the way an ordinary script would."""
    conf = "".join(f"    .config({k!r}, {v!r})\n" for k, v in SPARK_TEST_CONF.items())
    return (
        "from pyspark.sql import SparkSession\n"
        f"spark = (SparkSession.builder.master('local[2]').appName({app_name!r})\n{conf}"
        f"    .config('spark.sql.warehouse.dir', {str(warehouse)!r})\n    .getOrCreate())\n"
        "spark.sparkContext.setLogLevel('ERROR')\n"
    )
