"""`python -m demo --connect`: the sample pipeline as a thin Spark Connect client, its lineage from the server.

Starts `python -m emitter connect-server` (the transport set to the demo's broker) and runs
`demo.pipeline.run` through `SparkSession.builder.remote(...)`: the client process attaches
nothing; the server emits every write of the client's session. The client's `spark.stop()`
ends its session (the server completes its application run); stopping the server flushes the
transport and prints how many events it emitted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from demo.broker import free_port
from demo.pipeline import run

SERVER_START_TIMEOUT_S = 180
SERVER_STOP_TIMEOUT_S = 120
_EMITTED = re.compile(r"^(\d+) OpenLineage events emitted", re.MULTILINE)


def run_pipeline_on_connect(work_dir: Path, transport_env: Mapping[str, str], namespace: str) -> int:
    """Run the sample pipeline through a Connect server with the emitter; returns the events it emitted."""
    port = free_port()
    conf = {
        "spark.master": "local[2]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.warehouse.dir": str(work_dir / "warehouse"),
    }
    command = [sys.executable, "-m", "emitter", "connect-server", "--port", str(port)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    server_log = work_dir / "connect-server.log"
    with server_log.open("w") as log_file:
        server = subprocess.Popen(  # noqa: S603 - the project's own program, no shell
            command, cwd=work_dir, env={**os.environ, **transport_env}, stdout=subprocess.PIPE, stderr=log_file, text=True
        )
    try:
        _wait_until_listening(server)
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.remote(f"sc://127.0.0.1:{port}")
            .appName("lineage demo")
            .config("spark.openlineage.namespace", namespace)
            .getOrCreate()
        )
        run(spark, work_dir)
        spark.stop()
    finally:
        output = _stop(server, server_log)
    emitted = _EMITTED.search(output)
    if emitted is None:
        raise RuntimeError(f"the Connect server did not report its events:\n{output[-2000:]}\n{_tail(server_log)}")
    return int(emitted.group(1))


def _stop(server: subprocess.Popen[str], server_log: Path) -> str:
    """SIGTERM, then the server's standard output once it exited."""
    server.send_signal(signal.SIGTERM)
    try:
        output, _ = server.communicate(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()
        raise RuntimeError(f"the Connect server did not stop within {SERVER_STOP_TIMEOUT_S} s:\n{_tail(server_log)}") from None
    return output


def _tail(server_log: Path, characters: int = 6000) -> str:
    return server_log.read_text(errors="replace")[-characters:]


def _wait_until_listening(server: subprocess.Popen[str]) -> None:
    if server.stdout is None:
        raise RuntimeError("the Spark Connect server's output is not readable")
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if "listening at" in line:
            return
        if not line and server.poll() is not None:
            break
    raise RuntimeError("the Spark Connect server did not start (run `python -m emitter connect-server` to see why)")
