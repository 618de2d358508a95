"""The kafka transport against a secured Apache Kafka (tests/support/kafka_server.py), configured
as docs/kafka.md says, with librdkafka's setting names: SASL_SSL with SCRAM-SHA-512 from
OPENLINEAGE__* environment variables, mutual TLS from an openlineage.yml. A wrong password, a
certificate one side does not trust or a missing WRITE ACL never fails the emitting application:
its events wait in the spool, one log line names the cause (never a password), and they are
delivered once the cause is gone."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from openlineage.client.serde import Serde
from openlineage.client.transport import get_default_factory

import emitter.transports
from emitter.transports.kafka import KafkaTransport
from tests.support.broker import read_topic, unique_topic
from tests.support.kafka_acls import allow
from tests.support.kafka_server import CLIENT_CN, SecuredKafka
from tests.transports.lineage_events import application_events, identities_of_values, identity, run_emit_app

pytestmark = pytest.mark.kafka

SASL_USER = "User:lineage"
TLS_USER = f"User:{CLIENT_CN}"
SASL_REFUSED = "SASL authentication failed for user lineage (SCRAM-SHA-512)"
BROKER_NOT_TRUSTED = (
    "TLS handshake failed: certificate not trusted: the broker's certificate is not signed by a CA the emitter trusts"
)
CLIENT_NOT_TRUSTED = "TLS handshake failed: certificate not trusted: the broker does not trust the emitter's certificate"


def sasl_config(kafka: SecuredKafka, password: str | None = None, user: str = "lineage") -> dict[str, str]:
    return {
        "bootstrap.servers": kafka.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": kafka.passwords[user] if password is None else password,
        "ssl.ca.location": str(kafka.files.ca),
    }


def tls_config(kafka: SecuredKafka, rogue: bool = False) -> dict[str, str]:
    if rogue:
        certificate, key = (
            {"ssl.certificate.location": str(kafka.files.rogue_cert), "ssl.key.location": str(kafka.files.rogue_key)},
            {},
        )
    else:
        certificate = {"ssl.certificate.location": str(kafka.files.client_cert), "ssl.key.location": str(kafka.files.client_key)}
        key = {"ssl.key.password": kafka.files.key_password}
    return {
        "bootstrap.servers": kafka.ssl,
        "security.protocol": "SSL",
        "ssl.ca.location": str(kafka.files.ca),
        **certificate,
        **key,
    }


def secrets_of(kafka: SecuredKafka) -> list[str]:
    return [*kafka.passwords.values(), kafka.files.key_password]


def env_config(topic: str, config: dict[str, str], spool_dir: Path, cwd: Path) -> dict[str, str]:
    """The transport configured by environment variables only: OPENLINEAGE__TRANSPORT__CONFIG__SASL_PASSWORD ..."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENLINEAGE")}
    env.update(
        {
            "OPENLINEAGE__TRANSPORT__TYPE": "kafka",
            "OPENLINEAGE__TRANSPORT__TOPIC": topic,
            "OPENLINEAGE__TRANSPORT__SPOOLDIR": str(spool_dir),
            "OPENLINEAGE__TRANSPORT__FLUSHTIMEOUTSECONDS": "3",
            "OPENLINEAGE_CONFIG": str(cwd / "absent-openlineage.yml"),
        }
    )
    env.update({f"OPENLINEAGE__TRANSPORT__CONFIG__{name.replace('.', '_').upper()}": value for name, value in config.items()})
    return env


def yaml_config(topic: str, config: dict[str, str], spool_dir: Path, cwd: Path) -> dict[str, str]:
    """The transport configured by an openlineage.yml (OPENLINEAGE_CONFIG)."""
    path = cwd / "openlineage.yml"
    transport = {"type": "kafka", "topic": topic, "config": config, "spoolDir": str(spool_dir), "flushTimeoutSeconds": 3}
    path.write_text(yaml.safe_dump({"transport": transport}))
    path.chmod(0o600)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENLINEAGE")}
    return {**env, "OPENLINEAGE_CONFIG": str(path)}


def run_app(app_name: str, env: dict[str, str], *flags: str) -> tuple[list[tuple[str, str]], str]:
    """An application emitting 2 actions' events; (their identities, its stderr)."""
    return run_emit_app(app_name, 2, env, *flags)


def spooled(spool_dir: Path) -> list[tuple[str, str]]:
    from emitter.transports.spool import Spool

    return identities_of_values([record.record.value for record in Spool(spool_dir, 10**9).oldest(10_000)])


def wait_for(probe: Callable[[], Any], what: str, limit: float = 60.0) -> Any:
    deadline = time.monotonic() + limit
    while not (found := probe()):
        assert time.monotonic() < deadline, f"waited {limit:.0f} s for {what}"
        time.sleep(0.2)
    return found


@pytest.mark.parametrize(("listener", "configured_by"), [("sasl_ssl", env_config), ("mutual_tls", yaml_config)])
def test_an_application_publishes_over_a_secured_listener(kafka, listener, configured_by, tmp_path):
    topic = unique_topic(f"emit-{listener}", bootstrap=kafka.plaintext)
    config = sasl_config(kafka) if listener == "sasl_ssl" else tls_config(kafka)
    allow(kafka, SASL_USER if listener == "sasl_ssl" else TLS_USER, "WRITE", topics=[topic])

    sent, logged = run_app(f"app-{listener}", configured_by(topic, config, tmp_path / "spool", tmp_path), "--close")

    records = read_topic(kafka.plaintext, topic, expected=len(sent))
    assert identities_of_values([record.value for record in records]) == sent
    assert spooled(tmp_path / "spool") == []
    assert not [secret for secret in secrets_of(kafka) if secret in logged]


REFUSALS = {
    "wrong password": (lambda kafka: sasl_config(kafka, password="not-the-password"), SASL_REFUSED),
    "client certificate not trusted": (lambda kafka: tls_config(kafka, rogue=True), CLIENT_NOT_TRUSTED),
    "broker certificate not trusted": (
        lambda kafka: {**sasl_config(kafka), "ssl.ca.location": str(kafka.files.rogue_ca)},
        BROKER_NOT_TRUSTED,
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_login_or_certificate_spools_the_events_and_says_why_once(kafka, case, tmp_path):
    """The application exits normally, its events wait in the spool, its log names the cause in
    one line; the next application, configured right, delivers them before its own, in order."""
    make_config, cause = REFUSALS[case]
    topic = unique_topic("emit-refused", bootstrap=kafka.plaintext)
    allow(kafka, SASL_USER, "WRITE", topics=[topic])
    spool_dir = tmp_path / "spool"

    waiting, logged = run_app("refused-app", env_config(topic, make_config(kafka), spool_dir, tmp_path))
    in_spool = spooled(spool_dir)
    fixed, _ = run_app("fixed-app", env_config(topic, sasl_config(kafka), spool_dir, tmp_path), "--close")

    naming = [line for line in logged.splitlines() if cause in line]
    assert len(naming) == 1, logged
    assert "wait in" in naming[0] and str(spool_dir) in naming[0]
    assert "Traceback" not in logged
    assert not [secret for secret in [*secrets_of(kafka), "not-the-password"] if secret in logged]
    assert in_spool == waiting
    records = read_topic(kafka.plaintext, topic, expected=len(waiting) + len(fixed))
    assert identities_of_values([record.value for record in records]) == waiting + fixed
    assert spooled(spool_dir) == []


def test_without_write_on_the_topic_events_wait_in_the_spool_until_it_is_granted(kafka, tmp_path, caplog):
    """A producer whose principal lacks WRITE on the topic: emit returns, the events are spooled,
    one warning names the missing ACL; once it is granted they are delivered, in order, from the
    same running transport."""
    topic = unique_topic("emit-acl", bootstrap=kafka.plaintext)
    events = application_events("acl-app", 2)
    emitter.transports.register()
    config = {"type": "kafka", "topic": topic, "config": sasl_config(kafka, user="stranger"), "spoolDir": str(tmp_path / "spool")}
    caplog.set_level(logging.DEBUG)  # every logger, kafka-python's too: no password at any level
    transport = get_default_factory().create(config)
    assert isinstance(transport, KafkaTransport)
    try:
        for event in events:
            transport.emit(event)
        wait_for(lambda: len(transport.spool) == len(events), "the events spooled")
        allow(kafka, "User:stranger", "WRITE", topics=[topic])
        records = read_topic(kafka.plaintext, topic, expected=len(events), timeout_seconds=60)
        assert transport.close(10) is True
    finally:
        transport.close(0)

    expected = [identity(json.loads(Serde.to_json(event))) for event in events]
    assert identities_of_values([record.value for record in records]) == expected
    assert transport.spool.is_empty()
    refusal = f"not authorized to write to topic {topic}"
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("emitter") and r.levelno >= logging.WARNING]
    assert len([message for message in warnings if refusal in message]) == 1, warnings
    assert not [secret for secret in secrets_of(kafka) if secret in caplog.text]
