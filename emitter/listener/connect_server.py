"""`python -m emitter connect-server`: a Spark Connect server whose JVM the emitter lives in.

Starts a classic SparkSession in this process (PySpark's own JVM, with the server's `--conf`),
registers `ConnectSessions` on its listener bus, and only then starts Spark's Connect service,
so that no client session can begin before the emitter hears of it. Runs until SIGINT or
SIGTERM; then stops the service, completes the application run of every session still open,
flushes the transport and stops Spark (within STOP_TIMEOUT_S, else it prints every thread's stack
and exits with status 1).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from emitter.listener.connect import DEFAULT_APP_NAME, ConnectSessions

log = logging.getLogger(__name__)

SERVICE_CLASS = "org.apache.spark.sql.connect.service.SparkConnectService"
PORT_CONF = "spark.connect.grpc.binding.port"
ADDRESS_CONF = "spark.connect.grpc.binding.address"
PYTHON_ENV = "PYSPARK_PYTHON"
TOKEN_CONF = "spark.connect.authenticate.token"  # noqa: S105 - the key's name, not a secret
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # noqa: S105 - the variable's name, not a secret
# A stop that takes longer than this (a stuck step of Spark's or the transport's) prints every
# thread's stack to stderr and ends the process with status 1: SIGTERM always ends the server.
STOP_TIMEOUT_S = 90
SIGNAL_POLL_S = 0.5


class ConnectServerError(Exception):
    """The server cannot start as asked (the message says why)."""


def server_conf(port: int, host: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The Spark conf of the server: `conf`, with the binding and an app name."""
    if TOKEN_CONF in conf:
        raise ConnectServerError(f"{TOKEN_CONF} is a secret: set {TOKEN_ENV} in the server's environment instead")
    return {"spark.app.name": DEFAULT_APP_NAME, **conf, PORT_CONF: str(port), ADDRESS_CONF: host}


def start(port: int, host: str, conf: Mapping[str, str]) -> tuple[Any, ConnectSessions]:
    """The server's session and the attachment of its Connect sessions, the service listening."""
    import pyspark
    from pyspark.sql import SparkSession

    if int(pyspark.__version__.split(".")[0]) < 4:
        raise ConnectServerError(f"PySpark {pyspark.__version__} has no Spark Connect server: PySpark 4.x ships it")
    # the Python workers the server starts (a client's UDFs, `foreachBatch` functions) run the
    # interpreter Spark Connect reads from PYSPARK_PYTHON: this one, which has PySpark
    os.environ.setdefault(PYTHON_ENV, sys.executable)
    builder = SparkSession.builder
    for key, value in server_conf(port, host, conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    jvm: Any = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(SERVICE_CLASS)
    except Exception as error:
        spark.stop()
        raise ConnectServerError(
            f"PySpark {spark.version} has no Spark Connect server (PySpark 4.x ships it): {error}"
        ) from error
    sessions = ConnectSessions(spark)
    sessions.register()
    getattr(jvm, SERVICE_CLASS).start(spark.sparkContext._jsc.sc())
    return spark, sessions


def stop(spark: Any, sessions: ConnectSessions) -> None:
    jvm = spark.sparkContext._jvm
    try:
        getattr(jvm, SERVICE_CLASS).stop(jvm.scala.Option.empty(), jvm.scala.Option.empty())
    except Exception as error:  # noqa: BLE001 - stopping anyway
        log.warning("Spark Connect service not stopped cleanly: %s", error)
    sessions.close()
    spark.stop()


def stop_requested() -> threading.Event:
    """An event SIGINT and SIGTERM set (installed before the server starts: neither is missed)."""
    stopping = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stopping.set())
    return stopping


def wait_until_set(stopping: threading.Event) -> None:
    """Wait for `stopping` in short slices. The kernel may deliver SIGTERM to any thread of the
    process (py4j's, the JVM gateway's); Python then runs the handler only when the main thread
    next runs bytecode, which a wait without a timeout would never let it do."""
    while not stopping.wait(SIGNAL_POLL_S):
        pass


def serve(port: int, host: str, conf: Mapping[str, str]) -> int:
    """Run the server until SIGINT / SIGTERM."""
    stopping = stop_requested()
    spark, sessions = start(port, host, conf)
    print(f"Spark Connect server with OpenLineage listening at sc://{host}:{port}", flush=True)
    wait_until_set(stopping)
    faulthandler.dump_traceback_later(STOP_TIMEOUT_S, exit=True)
    stop(spark, sessions)
    faulthandler.cancel_dump_traceback_later()
    print(f"{sessions.emitted_events} OpenLineage events emitted for Spark Connect sessions", flush=True)
    return 0
