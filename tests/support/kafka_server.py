"""Apache Kafka for the test suite: one single-node KRaft broker (demo/broker.py) with three client
listeners, as users run it secured.

- PLAINTEXT: open (its principal ANONYMOUS is a super user), what most tests use;
- SASL_SSL: SCRAM-SHA-512 over TLS; the users ``lineage`` and ``stranger`` exist, and their
  rights come from ACLs only (the authorizer is on and a resource without ACLs is denied);
- SSL: TLS that requires a client certificate signed by the test CA; the principal is the
  certificate's CN (``lineage-client``), whose rights also come from ACLs.

Certificates are made by the tests with the ``openssl`` command; the SCRAM users are created through
the admin API (passwords never appear on a command line).

``./run tests`` starts one broker before pytest (``python -m tests.support.kafka_server start DIR``),
names it in ``$LINEAGE_TEST_KAFKA`` and stops it afterwards; without that variable each pytest process
starts its own for its session.

Fixtures: ``kafka`` (session) -> ``SecuredKafka``; ``kafka_bootstrap`` (session) -> its PLAINTEXT
``host:port``; ``start_broker`` (function) -> ``start(port=None) -> KafkaBroker``, a separate plain
broker of the test's own (to stop, restart or freeze with ``pause()``), stopped when the test ends.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from demo.broker import BrokerFailed, KafkaBroker, free_port, start_kafka
from jars import JarsUnavailable
from tests.support.require import skip_or_fail

KAFKA_ENV = "LINEAGE_TEST_KAFKA"
USERS = ("lineage", "stranger")
CLIENT_CN = "lineage-client"
SCRAM = "SCRAM-SHA-512"


@attrs.frozen
class Certificates:
    ca: Path
    client_cert: Path  # CN=lineage-client, signed by the test CA
    client_key: Path  # encrypted with key_password
    key_password: str
    rogue_ca: Path  # a CA the broker does not trust, and a client certificate it signed
    rogue_cert: Path
    rogue_key: Path


@attrs.frozen
class SecuredKafka:
    plaintext: str
    sasl_ssl: str
    ssl: str
    files: Certificates
    passwords: dict[str, str]  # SCRAM user -> password
    directory: Path
    pid: int

    def sasl_client(self, user: str = "lineage", password: str | None = None) -> dict[str, object]:
        """kafka-python keyword arguments for the SASL_SSL listener as `user`."""
        return {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": SCRAM,
            "sasl_plain_username": user,
            "sasl_plain_password": self.passwords[user] if password is None else password,
            "ssl_cafile": str(self.files.ca),
        }

    def tls_client(self, rogue: bool = False) -> dict[str, object]:
        """kafka-python keyword arguments for the mutual-TLS listener (`rogue`: a certificate the
        broker does not trust)."""
        if rogue:
            return {"security_protocol": "SSL", "ssl_cafile": str(self.files.ca),
                    "ssl_certfile": str(self.files.rogue_cert), "ssl_keyfile": str(self.files.rogue_key)}  # fmt: skip
        return {
            "security_protocol": "SSL",
            "ssl_cafile": str(self.files.ca),
            "ssl_certfile": str(self.files.client_cert),
            "ssl_keyfile": str(self.files.client_key),
            "ssl_password": self.files.key_password,
        }

    def to_json(self) -> str:
        return json.dumps(
            attrs.asdict(self, value_serializer=lambda _i, _f, value: str(value) if isinstance(value, Path) else value)
        )

    @classmethod
    def from_json(cls, text: str) -> SecuredKafka:
        data = json.loads(text)
        files = Certificates(**{key: value if key == "key_password" else Path(value) for key, value in data.pop("files").items()})
        return cls(files=files, directory=Path(data.pop("directory")), **data)


def grant(kafka: SecuredKafka, principal: str, *, topics: Iterable[str] = (), groups: Iterable[str] = ()) -> None:
    """Allow `principal` (e.g. ``User:lineage``) everything on these topics and consumer groups."""
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    patterns = [ResourcePattern(ResourceType.TOPIC, topic) for topic in topics]
    patterns += [ResourcePattern(ResourceType.GROUP, group) for group in groups]
    acls = [ACL(principal, "*", ACLOperation.ALL, ACLPermissionType.ALLOW, pattern) for pattern in patterns]
    with _admin(kafka.plaintext) as admin:
        result = admin.create_acls(acls)
    if result["failed"]:
        raise RuntimeError(f"ACLs not created: {result['failed']}")


def make_certificates(directory: Path) -> tuple[Certificates, Path]:
    """The test CA, the broker's certificate for 127.0.0.1 (returned as one PEM key store), a client
    certificate it signed, and a rogue CA with a client certificate of its own."""
    if shutil.which("openssl") is None:
        skip_or_fail("the openssl command is needed to make test certificates")
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    def signed(name: str, subject: str, ca: str, extensions: list[str]) -> None:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *extensions)  # fmt: skip

    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                "-days", "2", "-subj", f"/CN={ca}")  # fmt: skip
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    signed("broker", "/CN=broker", "ca", ["-extfile", "server.ext"])
    signed("client", f"/CN={CLIENT_CN}", "ca", [])
    signed("rogue", "/CN=rogue-client", "rogue-ca", [])
    key_password = secrets.token_hex(8)
    (directory / "key-password").write_text(key_password + "\n")
    openssl("pkey", "-in", "client.key", "-out", "client-encrypted.key", "-aes256", "-passout", "file:key-password")
    # the broker's PEM key store: its unencrypted PKCS#8 key followed by its certificate
    openssl("pkcs8", "-topk8", "-nocrypt", "-in", "broker.key", "-out", "broker-pkcs8.key")
    keystore = directory / "broker-keystore.pem"
    keystore.write_text((directory / "broker-pkcs8.key").read_text() + (directory / "broker.pem").read_text())
    certificates = Certificates(
        ca=directory / "ca.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-encrypted.key",
        key_password=key_password,
        rogue_ca=directory / "rogue-ca.pem",
        rogue_cert=directory / "rogue.pem",
        rogue_key=directory / "rogue.key",
    )
    return certificates, keystore


def start_secured(directory: Path, *, detached: bool = False) -> tuple[KafkaBroker, SecuredKafka]:
    """Start the secured broker in `directory`; `detached`: it outlives the starting process."""
    files, keystore = make_certificates(directory / "tls")
    listeners = {"PLAINTEXT": free_port(), "SASL_SSL": free_port(), "SSL": free_port()}
    properties = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        "sasl.enabled.mechanisms": SCRAM,
        f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
        # the tests that kill group members give them short sessions, so the group moves on in seconds
        "group.min.session.timeout.ms": "1000",
    }
    broker = KafkaBroker(
        directory=directory / "broker", listeners=listeners, properties=properties, dies_with_starter=not detached
    )
    broker.start()
    passwords = {user: secrets.token_urlsafe(18) for user in USERS}
    try:
        _create_scram_users(broker.bootstrap, passwords)
    except Exception:
        broker.stop()
        raise
    assert broker.pid is not None
    kafka = SecuredKafka(
        plaintext=broker.bootstrap,
        sasl_ssl=f"127.0.0.1:{listeners['SASL_SSL']}",
        ssl=f"127.0.0.1:{listeners['SSL']}",
        files=files,
        passwords=passwords,
        directory=directory,
        pid=broker.pid,
    )
    return broker, kafka


def _create_scram_users(bootstrap: str, passwords: dict[str, str]) -> None:
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    upserts = [UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, password) for user, password in passwords.items()]
    with _admin(bootstrap) as admin:
        failed = {user: error for user, error in admin.alter_user_scram_credentials(upserts).items() if error}
    if failed:
        raise BrokerFailed(f"SCRAM users not created: {failed}")


@contextmanager
def _admin(bootstrap: str) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        yield client
    finally:
        client.close()


def _started(start: Callable[[], object]) -> object:
    try:
        return start()
    except (JarsUnavailable, BrokerFailed) as error:
        skip_or_fail(f"no Apache Kafka: {error}")
    except FileNotFoundError as error:  # no java
        skip_or_fail(f"no Apache Kafka: Java is needed to run it ({error})")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """The run's shared broker ($LINEAGE_TEST_KAFKA) or one of this session's own."""
    shared = os.environ.get(KAFKA_ENV)
    if shared:
        yield SecuredKafka.from_json(Path(shared).read_text())
        return
    broker, secured = _started(lambda: start_secured(tmp_path_factory.mktemp("kafka")))  # type: ignore[misc]
    try:
        yield secured
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka: SecuredKafka) -> str:
    return kafka.plaintext


@pytest.fixture
def start_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., KafkaBroker]]:
    """Factory starting separate plain brokers for one test; all are stopped when it ends."""
    started: list[KafkaBroker] = []

    def start(port: int | None = None) -> KafkaBroker:
        listeners = {"PLAINTEXT": port} if port else None
        broker = _started(lambda: start_kafka(tmp_path_factory.mktemp("kafka-own"), listeners))
        assert isinstance(broker, KafkaBroker)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


def _stop_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.kafka_server")
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    info = args.directory / "broker.json"
    if args.action == "stop":
        if info.is_file():
            _stop_pid(SecuredKafka.from_json(info.read_text()).pid)
            info.unlink()
        return 0
    if info.is_file():
        _stop_pid(SecuredKafka.from_json(info.read_text()).pid)
    shutil.rmtree(args.directory, ignore_errors=True)
    try:
        _, secured = start_secured(args.directory, detached=True)
    except (JarsUnavailable, BrokerFailed, FileNotFoundError) as error:
        print(f"Apache Kafka did not start: {error}", file=sys.stderr)
        return 1
    info.write_text(secured.to_json())
    print(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
