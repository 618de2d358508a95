"""A local Apache Kafka broker: one KRaft node (broker and controller in one JVM) from the pinned
Maven artifacts (`python -m jars classpath kafka`), its data in a folder of the caller's.

Used by the demo (`./run demo`) and by the test fixtures (tests/support/kafka_server.py, which adds
the secured listeners). `start_kafka` formats the folder on first use and starts the broker;
`KafkaBroker.stop()` and `start()` again keep the data, as a restarted broker does. A broker started
here gets SIGTERM when the process that started it dies.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import attrs

BROKER_START_TIMEOUT_SECONDS = 90.0
BROKER_STOP_TIMEOUT_SECONDS = 30.0
PR_SET_PDEATHSIG = 1
JVM_OPTIONS = ("-Xms128m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = warn
"""


class BrokerFailed(RuntimeError):
    """The broker did not start; the message ends with its log's last lines."""


@attrs.define
class KafkaBroker:
    """A single-node Apache Kafka broker in `directory`. `listeners` maps a listener name (also its
    security protocol unless `properties` maps it otherwise) to its loopback port; PLAINTEXT is
    always there and is the inter-broker listener."""

    directory: Path
    listeners: dict[str, int]
    properties: dict[str, str] = attrs.field(factory=dict)
    process: subprocess.Popen[bytes] | None = None
    controller_port: int = attrs.field(factory=lambda: free_port())
    # False for a broker that outlives the short command starting it (tests/support/kafka_server.py)
    dies_with_starter: bool = True

    @property
    def port(self) -> int:
        return self.listeners["PLAINTEXT"]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> None:
        """Start the broker (formatting its storage the first time) and wait until it serves."""
        if self.process is not None and self.process.poll() is None:
            return
        from jars import classpath  # only a started broker needs the jars (free_port's users do not)

        jars = classpath("kafka")
        config = self._write_config()
        if not (self.directory / "data" / "meta.properties").is_file():
            _run_java(jars, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config), "--ignore-formatted")
        with (self.directory / "stdout.log").open("ab") as output:
            self.process = subprocess.Popen(  # noqa: S603 - java with the pinned jars, no shell
                [
                    _java(),
                    *JVM_OPTIONS,
                    f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
                    "-cp",
                    jars,
                    "kafka.Kafka",
                    str(config),
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if self.dies_with_starter else None,
                start_new_session=not self.dies_with_starter,
            )
        self._wait_until_serving()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(BROKER_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open and nothing answers."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def _write_config(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.properties").write_text(LOG4J2.format(log=self.log_path))
        names = {name: name for name in self.listeners}
        protocol_map = ",".join(f"{name}:{protocol}" for name, protocol in {**names, "CONTROLLER": "PLAINTEXT"}.items())
        listeners = [f"{name}://127.0.0.1:{port}" for name, port in self.listeners.items()]
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{self.controller_port}"]),
            "advertised.listeners": ",".join(listeners),
            "listener.security.protocol.map": protocol_map,
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # a single-member group's first join need not wait for others
            "group.initial.rebalance.delay.ms": "0",
            **self.properties,
        }
        config = self.directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return config

    def _wait_until_serving(self) -> None:
        if self.process is None:
            raise BrokerFailed("the broker was not started")
        deadline = time.monotonic() + BROKER_START_TIMEOUT_SECONDS
        while not _serves(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BrokerFailed(f"Apache Kafka on port {self.port} did not start:\n{self._log_tail()}")
            time.sleep(0.1)

    def _log_tail(self) -> str:
        lines: list[str] = []
        for path in (self.directory / "stdout.log", self.log_path):
            if path.is_file():
                lines += path.read_text(errors="replace").splitlines()[-20:]
        return "\n".join(lines)


def start_kafka(
    directory: Path, listeners: Mapping[str, int] | None = None, properties: Mapping[str, str] | None = None
) -> KafkaBroker:
    """Start a broker in `directory` with a PLAINTEXT listener (on a free port unless given) and
    whatever other `listeners` and server `properties` the caller adds."""
    ports = {"PLAINTEXT": free_port(), **(listeners or {})}
    broker = KafkaBroker(directory=directory, listeners=ports, properties=dict(properties or {}))
    broker.start()
    return broker


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serves(port: int) -> bool:
    """The broker answers a metadata request on `port` (a port that merely accepts is not enough:
    the socket server opens before the broker has joined its own quorum)."""
    try:
        from kafka import KafkaAdminClient
    except ImportError:  # the demo's services never lack kafka-python; a bare check still helps
        return _accepts(port)
    if not _accepts(port):
        return False
    try:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=3000)
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False
    try:
        return bool(admin.describe_cluster().get("brokers"))
    except Exception:  # noqa: BLE001
        return False
    finally:
        admin.close()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _cluster_id() -> str:
    """A random cluster id as Kafka makes them: URL-safe base64 of a UUID, never starting with "-"
    (the storage tool would read it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _run_java(jars: str, main_class: str, *arguments: str) -> None:
    completed = subprocess.run(  # noqa: S603 - java with the pinned jars, no shell
        [_java(), "-Xmx256m", "-cp", jars, main_class, *arguments], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise BrokerFailed(f"{main_class} {arguments[0]} failed:\n{(completed.stdout + completed.stderr)[-2000:]}")


def _java() -> str:
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("java: Apache Kafka needs a Java runtime (17 or later) on PATH")
    return found


def _die_with_parent() -> None:
    """In the broker child: get SIGTERM when the starting process dies, even if killed before its finalizers."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the owner's own finalizer still stops it
        pass
