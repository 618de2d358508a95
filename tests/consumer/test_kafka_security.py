"""The consumer against a secured Apache Kafka (tests/support/kafka_server.py): its three Kafka
clients (event consumer, dead-letter producer, changes producer) over SASL_SSL with SCRAM-SHA-512
and over mutual TLS, configured as operators do (environment variables, secrets in files); and each
refusal — a wrong password, a certificate one side does not trust, a missing ACL — as one error
naming its cause, with nothing read, committed or lost, and ingestion resuming once it is allowed.
The client settings themselves (properties files, refused combinations) are checked last."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from sqlalchemy import text

from consumer.ingest.change_publishing import ChangePublisher
from consumer.ingest.kafka_io import ChangeMessages, DeadLetters, EventSource, KafkaRefused
from consumer.ingest.kafka_loop import Ingestor
from consumer.ingest.kafka_security import KafkaSettingsError, client_security, read_properties
from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from consumer.settings import SecretUnreadable, Settings
from consumer.store import open_store, outbox
from tests.consumer.helpers import metric_value, stop_process
from tests.support.broker import free_port, read_topic, unique_topic
from tests.support.events import batch_write, table
from tests.support.kafka_acls import allow, revoke
from tests.support.kafka_server import CLIENT_CN, SecuredKafka
from tests.support.paths import PROJECT_ROOT

WAIT_SECONDS = 60.0
SASL_USER = "User:lineage"
TLS_USER = f"User:{CLIENT_CN}"
SASL_REFUSED = "SASL authentication failed for user lineage (SCRAM-SHA-512)"
BROKER_NOT_TRUSTED = (
    "TLS handshake failed: certificate not trusted: the broker's certificate is not signed by a CA the client trusts"
)
CLIENT_NOT_TRUSTED = "TLS handshake failed: certificate not trusted: the broker does not trust the client's certificate"
NO_CLIENT_CERTIFICATE = "TLS handshake failed: the broker requires a client certificate and the client has none"


@attrs.frozen
class Topics:
    events: str
    dead_letters: str
    changes: str
    group: str


def _topics(kafka: SecuredKafka, prefix: str) -> Topics:
    events = unique_topic(prefix, bootstrap=kafka.plaintext)
    return Topics(
        events,
        unique_topic(f"{events}.dlq", bootstrap=kafka.plaintext),
        unique_topic(f"{events}.changes", bootstrap=kafka.plaintext),
        f"g-{uuid.uuid4().hex[:8]}",
    )


def _secret_file(tmp_path: Path, name: str, secret: str) -> str:
    path = tmp_path / name
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return str(path)


def _sasl_env(kafka: SecuredKafka, tmp_path: Path, *, user: str = "lineage", password: str | None = None) -> dict[str, str]:
    """A SASL_SSL client as an operator configures it: variables, the password in a file."""
    return {
        "KAFKA_BOOTSTRAP_SERVERS": kafka.sasl_ssl,
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": user,
        "KAFKA_SASL_PASSWORD_FILE": _secret_file(tmp_path, "sasl-password", password or kafka.passwords[user]),
        "KAFKA_SSL_CAFILE": str(kafka.files.ca),
    }


def _tls_env(kafka: SecuredKafka, tmp_path: Path, *, certificate: bool = True, rogue: bool = False) -> dict[str, str]:
    """A mutual-TLS client: its certificate, its key encrypted with a password kept in a file."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": kafka.ssl, "KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(kafka.files.ca)}
    if rogue:
        env.update({"KAFKA_SSL_CERTFILE": str(kafka.files.rogue_cert), "KAFKA_SSL_KEYFILE": str(kafka.files.rogue_key)})
    elif certificate:
        env.update(
            {
                "KAFKA_SSL_CERTFILE": str(kafka.files.client_cert),
                "KAFKA_SSL_KEYFILE": str(kafka.files.client_key),
                "KAFKA_SSL_KEY_PASSWORD_FILE": _secret_file(tmp_path, "key-password", kafka.files.key_password),
            }
        )
    return env


def _settings(env: dict[str, str]) -> Settings:
    """What `consumer.settings` reads from these variables."""
    names = {
        "KAFKA_BOOTSTRAP_SERVERS": "bootstrap_servers",
        "KAFKA_SECURITY_PROTOCOL": "kafka_security_protocol",
        "KAFKA_SASL_MECHANISM": "kafka_sasl_mechanism",
        "KAFKA_SASL_USERNAME": "kafka_sasl_username",
        "KAFKA_SASL_PASSWORD_FILE": "kafka_sasl_password_file",
        "KAFKA_SSL_CAFILE": "kafka_ssl_cafile",
        "KAFKA_SSL_CERTFILE": "kafka_ssl_certfile",
        "KAFKA_SSL_KEYFILE": "kafka_ssl_keyfile",
        "KAFKA_SSL_KEY_PASSWORD_FILE": "kafka_ssl_key_password_file",
    }
    return Settings(**{names[name]: value for name, value in env.items()})


def _secrets(kafka: SecuredKafka) -> list[str]:
    return [*kafka.passwords.values(), kafka.files.key_password]


def _events(job: str) -> list[bytes]:
    return [json.dumps(event).encode() for event in batch_write(job, [table("raw", "a", ["id"])], table("mart", job, ["id"]))]


def _produce(kafka: SecuredKafka, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka.plaintext)
    for value in values:
        producer.send(topic, key=b"k", value=value)
    producer.flush()
    producer.close()


def _committed(kafka: SecuredKafka, group: str) -> dict[int, int]:
    """The group's committed offset per partition (read as the broker's super user)."""
    admin = KafkaAdminClient(bootstrap_servers=kafka.plaintext, request_timeout_ms=10_000)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
        return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}
    finally:
        admin.close()


def _allow_consumer(kafka: SecuredKafka, principal: str, topics: Topics) -> None:
    """The ACLs docs/operations.md lists, no more: READ on the events topic and the group, WRITE on
    the dead-letter and changes topics."""
    allow(kafka, principal, "READ", topics=[topics.events], groups=[topics.group])
    allow(kafka, principal, "WRITE", topics=[topics.dead_letters, topics.changes])


def _stored(store_url: str) -> int:
    store = open_store(store_url)
    try:
        with store.engine.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM lineage_events")).scalar_one())
    finally:
        store.dispose()


def _wait_for(probe: Callable[[], Any], what: str, limit: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + limit
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {limit:.0f} s for {what}"
        time.sleep(0.2)


def _consumer_command(command: str, store_url: str, topics: Topics, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "consumer", command, "--store", store_url, "--topic", topics.events, "--group", topics.group,
        "--dead-letter-topic", topics.dead_letters, "--session-timeout-ms", "6000", *extra,
    ]  # fmt: skip


def _environment(env: dict[str, str]) -> dict[str, str]:
    """This test's Kafka settings only: nothing from the runner's environment decides them."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("KAFKA_", "LINEAGE_"))}
    return {**inherited, **env}


@contextmanager
def _running(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=_environment(env), stdout=subprocess.DEVNULL, stderr=stderr, text=True
        )
        try:
            yield process
        finally:
            stop_process(process)


@contextmanager
def _serving(store_url: str, topics: Topics, env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    with _running(_consumer_command("serve", store_url, topics, "--port", str(port)), env, log):
        base = f"http://127.0.0.1:{port}"
        _wait_for(lambda: _answers(f"{base}/healthz"), "serve to answer /healthz")
        yield base


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ready(base: str) -> dict[str, Any]:
    answer = httpx.get(f"{base}/readyz", timeout=10)
    assert answer.status_code == 200, "the store answers: the API stays in service whatever Kafka says"
    return answer.json()


# --- working configurations ------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["sasl_ssl", "mutual_tls"])
def test_ingest_reads_dead_letters_and_publishes_changes_over_a_secured_listener(kafka, listener, tmp_path, sqlite_url):
    """`ingest` configured by environment variables and secret files: its consumer reads the
    events, its dead-letter producer takes the bad record, its changes producer publishes; with
    exactly the ACLs docs/operations.md lists (READ on topic and group, WRITE on the other two)."""
    topics = _topics(kafka, f"in-{listener}")
    env = _sasl_env(kafka, tmp_path) if listener == "sasl_ssl" else _tls_env(kafka, tmp_path)
    _allow_consumer(kafka, SASL_USER if listener == "sasl_ssl" else TLS_USER, topics)
    values = [*_events(f"app.{listener}"), b"not json"]
    _produce(kafka, topics.events, values)

    command = _consumer_command("ingest", sqlite_url, topics, "--changes-topic", topics.changes)
    with _running(command, env, tmp_path / "ingest.log"):
        rejected = read_topic(kafka.plaintext, topics.dead_letters, 1, timeout_seconds=WAIT_SECONDS)
        published = read_topic(kafka.plaintext, topics.changes, 3, timeout_seconds=WAIT_SECONDS)
        _wait_for(lambda: _committed(kafka, topics.group) == {0: len(values)}, "the offsets committed")
    logged = (tmp_path / "ingest.log").read_text()

    assert [record.value for record in rejected] == [b"not json"]
    assert {"table_lineage_edge", "run_finished"} <= {json.loads(record.value)["kind"] for record in published}
    assert _stored(sqlite_url) == 2
    assert not [secret for secret in _secrets(kafka) if secret in logged]


# --- refused logins and certificates ------------------------------------------------------------

REFUSALS = {
    "wrong password": (lambda kafka, tmp: _sasl_env(kafka, tmp, password="not-the-password"), SASL_REFUSED),
    "client certificate not trusted": (lambda kafka, tmp: _tls_env(kafka, tmp, rogue=True), CLIENT_NOT_TRUSTED),
    "broker certificate not trusted": (
        lambda kafka, tmp: {**_sasl_env(kafka, tmp), "KAFKA_SSL_CAFILE": str(kafka.files.rogue_ca)},
        BROKER_NOT_TRUSTED,
    ),
    "no client certificate": (lambda kafka, tmp: _tls_env(kafka, tmp, certificate=False), NO_CLIENT_CERTIFICATE),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_login_or_certificate_is_one_error_naming_it_and_nothing_is_read(kafka, case, tmp_path, sqlite_url):
    """Each client refuses to start with the cause, at once (kafka-python alone would only time out
    bootstrapping); `ingest` ends with that one line and status 2, having read and committed nothing."""
    make_env, cause = REFUSALS[case]
    env = make_env(kafka, tmp_path)
    topics = _topics(kafka, "refused")
    _allow_consumer(kafka, SASL_USER, topics)
    _allow_consumer(kafka, TLS_USER, topics)
    _produce(kafka, topics.events, _events("app.refused"))
    security = client_security(_settings(env))
    bootstrap = env["KAFKA_BOOTSTRAP_SERVERS"]

    started = time.monotonic()
    for connect in (
        lambda: EventSource(bootstrap, topics.events, topics.group, security=security),
        lambda: DeadLetters(bootstrap, topics.dead_letters, security=security),
        lambda: ChangeMessages(bootstrap, topics.changes, security=security),
    ):
        with pytest.raises(KafkaRefused, match=re.escape(cause)):
            connect()
    refused_within = time.monotonic() - started

    ingest = subprocess.run(
        _consumer_command("ingest", sqlite_url, topics, "--changes-topic", topics.changes),
        cwd=PROJECT_ROOT,
        env=_environment(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in ingest.stderr.splitlines() if line.startswith("error:")]
    assert ingest.returncode == 2, ingest.stderr
    assert len(errors) == 1 and cause in errors[0], ingest.stderr
    assert refused_within < 10, "told at once, not after three bootstrap timeouts"
    assert not [secret for secret in _secrets(kafka) if secret in ingest.stderr]
    assert _committed(kafka, topics.group) == {}
    assert _stored(sqlite_url) == 0


def test_serve_says_why_its_login_is_refused_and_keeps_serving(kafka, tmp_path, sqlite_url):
    """`serve --role kafka` with a wrong password: readiness names the cause (the API stays in
    service), the log says it in one line without a traceback or the password, and the process
    keeps trying instead of exiting."""
    topics = _topics(kafka, "serve-refused")
    env = _sasl_env(kafka, tmp_path, password="wrong-hunter2")
    log = tmp_path / "serve.log"
    with _serving(sqlite_url, topics, env, log) as base:
        ready = _wait_for(lambda: (body := _ready(base))["ingestion"].startswith("refused") and body, "a refusal in /readyz")
        api = httpx.get(f"{base}/api/v1/namespaces", timeout=10).status_code
    logged = log.read_text()

    assert ready["ingestion"].startswith(f"refused: {SASL_REFUSED}")
    assert ready["consuming"] is False and ready["broker"] == "reachable" and ready["partitions"] == []
    assert api == 200
    stopped = [line for line in logged.splitlines() if "ingestion stopped" in line]
    assert stopped and all(SASL_REFUSED in line for line in stopped), logged
    assert "Traceback" not in logged
    assert "wrong-hunter2" not in logged and not [secret for secret in _secrets(kafka) if secret in logged]


def test_serve_with_a_changes_topic_ends_at_once_on_a_refused_login(kafka, tmp_path, sqlite_url):
    """Its changes producer starts before the API: a refused login ends `serve` as it ends `ingest`."""
    topics = _topics(kafka, "serve-changes-refused")
    env = _sasl_env(kafka, tmp_path, password="wrong-hunter2")
    command = _consumer_command("serve", sqlite_url, topics, "--changes-topic", topics.changes, "--port", str(free_port()))
    serve = subprocess.run(command, cwd=PROJECT_ROOT, env=_environment(env), capture_output=True, text=True, timeout=120)

    errors = [line for line in serve.stderr.splitlines() if line.startswith("error:")]
    assert serve.returncode == 2 and len(errors) == 1 and SASL_REFUSED in errors[0], serve.stderr
    assert "wrong-hunter2" not in serve.stderr


# --- missing ACLs -----------------------------------------------------------------------------


def test_a_member_without_acls_says_which_is_missing_and_resumes_where_it_stopped(kafka, tmp_path, sqlite_url):
    """User `stranger` over SASL_SSL: without READ on the group, then without READ on the topic,
    `serve` reads and commits nothing and /readyz says which ACL is missing; granted, it stores
    what waited; when the topic's ACL is taken away and given back mid-run, it resumes at its
    committed offset: every record handled once, none lost."""
    topics = _topics(kafka, "acl")
    first, second = _events("app.acl.first"), _events("app.acl.second")
    _produce(kafka, topics.events, first)
    env = _sasl_env(kafka, tmp_path, user="stranger")
    log = tmp_path / "serve.log"
    with _serving(sqlite_url, topics, env, log) as base:
        no_group = _wait_for(lambda: (body := _ready(base))["ingestion"].startswith("refused") and body, "a refusal")
        allow(kafka, "User:stranger", "READ", groups=[topics.group])
        no_topic = _wait_for(lambda: "read topic" in (body := _ready(base))["ingestion"] and body, "the topic refused")
        committed_while_refused = _committed(kafka, topics.group)
        allow(kafka, "User:stranger", "READ", topics=[topics.events])
        allow(kafka, "User:stranger", "WRITE", topics=[topics.dead_letters])
        _wait_for(lambda: _stored(sqlite_url) == len(first), "the waiting events stored")
        consuming = _wait_for(lambda: (body := _ready(base))["consuming"] and body.get("lag") == 0 and body, "caught up")
        _wait_for(lambda: _committed(kafka, topics.group) == {0: len(first)}, "their offsets committed")

        revoke(kafka, "User:stranger", topics.events)
        revoked = _wait_for(lambda: "read topic" in (body := _ready(base))["ingestion"] and body, "the topic refused again")
        _produce(kafka, topics.events, second)
        time.sleep(2)  # what the member would have read meanwhile
        stored_while_revoked = _stored(sqlite_url)
        allow(kafka, "User:stranger", "READ", topics=[topics.events])
        _wait_for(lambda: _stored(sqlite_url) == len(first) + len(second), "the later events stored")
        _wait_for(lambda: _committed(kafka, topics.group) == {0: len(first) + len(second)}, "every offset committed")
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
    logged = log.read_text()

    assert no_group["ingestion"] == f"refused: not authorized to use consumer group {topics.group}"
    assert no_topic["ingestion"] == f"refused: not authorized to read topic {topics.events}"
    assert revoked["ingestion"] == f"refused: not authorized to read topic {topics.events}"
    assert not no_group["consuming"] and not no_topic["consuming"] and not revoked["consuming"]
    assert committed_while_refused == {} and stored_while_revoked == len(first)
    assert consuming["ingestion"] == "running" and consuming["partitions"] == [f"{topics.events}[0]"]
    # each record went through one store transaction: none was read twice, none skipped
    assert metric_value(metrics, "lineage_store_batch_size_sum") == len(first) + len(second)
    assert metric_value(metrics, "lineage_events_stored_total") == len(first) + len(second)
    assert logged.count(f"not authorized to use consumer group {topics.group}") == 1, "said once, not per poll"
    assert not [secret for secret in _secrets(kafka) if secret in logged]


def test_dead_letters_wait_for_write_on_their_topic_and_nothing_is_committed_meanwhile(kafka, tmp_path, sqlite_store, caplog):
    """The dead-letter producer without WRITE on its topic: the batch is not committed and is read
    again, the log naming the missing ACL; granted, the record is dead-lettered once and committed."""
    topics = _topics(kafka, "dlq-acl")
    allow(kafka, SASL_USER, "READ", topics=[topics.events], groups=[topics.group])
    _produce(kafka, topics.events, [b"not json"])
    security = client_security(_settings(_sasl_env(kafka, tmp_path)))
    source = EventSource(kafka.sasl_ssl, topics.events, topics.group, security=security)
    dead_letters = DeadLetters(kafka.sasl_ssl, topics.dead_letters, security=security)
    ingestor = Ingestor(sqlite_store, source, dead_letters, poll_timeout_ms=200, retry_backoff_seconds=0.2)
    try:
        with caplog.at_level(logging.ERROR, logger="consumer.ingest"):
            _wait_for(lambda: ingestor.run_once() is not None and "not authorized to write" in caplog.text, "the refusal")
            committed_while_refused = _committed(kafka, topics.group)
            allow(kafka, SASL_USER, "WRITE", topics=[topics.dead_letters])
            _wait_for(lambda: ingestor.run_once() is not None and ingestor.stats.dead_lettered == 1, "the dead letter")
    finally:
        ingestor.close()
        source.close()
        dead_letters.close()

    assert (
        f"dead-letter topic unavailable, will read the batch again: not authorized to write to topic {topics.dead_letters}"
        in caplog.text
    )
    assert committed_while_refused == {}
    assert _committed(kafka, topics.group) == {0: 1}
    assert [record.value for record in read_topic(kafka.plaintext, topics.dead_letters, None)] == [b"not json"]


def test_lineage_changes_wait_in_the_outbox_for_write_on_their_topic(kafka, tmp_path, sqlite_store, caplog):
    """Change messages the topic refuses are not taken for sent (kafka-python's flush does not fail
    for them): they stay in the store's outbox, the log naming the missing ACL; granted, they go."""
    topics = _topics(kafka, "changes-acl")
    security = client_security(_settings(_tls_env(kafka, tmp_path)))
    sink = ChangeMessages(kafka.ssl, topics.changes, security=security)
    publisher = ChangePublisher(sqlite_store, sink)
    try:
        with caplog.at_level(logging.WARNING, logger="consumer.ingest.change_publishing"):
            StoreWrites(sqlite_store, [publisher]).write(
                [materialize(validate(json.loads(value))) for value in _events("app.changes.acl")]
            )
        waiting = _outbox(sqlite_store)
        allow(kafka, TLS_USER, "WRITE", topics=[topics.changes])
        _wait_for(lambda: publisher.publish() >= 0 and _outbox(sqlite_store) == 0, "the outbox published")
    finally:
        sink.close()

    assert waiting > 0
    refused = f"lineage changes not published yet (kept in the store's outbox): not authorized to write to topic {topics.changes}"
    assert refused in caplog.text
    published = read_topic(kafka.plaintext, topics.changes, None)
    assert len(published) == waiting
    assert {"table_lineage_edge", "run_finished"} <= {json.loads(record.value)["kind"] for record in published}


def _outbox(store: Any) -> int:
    with store.engine.connect() as connection:
        return outbox.count(connection)


# --- the settings ----------------------------------------------------------------------------


def test_a_client_properties_file_in_java_or_librdkafka_names_and_unknown_keys_named_not_shown(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# as given to kafka-console-consumer --command-config\n"
        "security.protocol = sasl_ssl\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" password="jaas-hunter2";\n'
        "ssl.endpoint.identification.algorithm=\n"
        "ssl.truststore.password=truststore-hunter2\n"
    )
    with caplog.at_level(logging.WARNING):
        config = client_security(Settings(kafka_config=str(properties)))
    assert config == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "etl",
        "sasl_plain_password": "jaas-hunter2",
        "ssl_check_hostname": False,
    }
    assert "ssl.truststore.password" in caplog.text and "hunter2" not in caplog.text
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "env")
    overridden = client_security(Settings(kafka_config=str(properties), kafka_sasl_username="other"))
    assert (overridden["sasl_plain_username"], overridden["sasl_plain_password"]) == ("other", "env")
    assert read_properties(properties)["sasl_mechanism"] == "SCRAM-SHA-256"


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        (Settings(kafka_security_protocol="TLS"), "security protocol 'TLS'"),
        (Settings(kafka_security_protocol="SASL_SSL", kafka_sasl_username="u"), "needs a SASL password"),
        (Settings(kafka_security_protocol="SSL", kafka_ssl_cafile="/nonexistent/ca.pem"), "ssl_cafile: no file"),
    ],
)
def test_settings_that_cannot_work_are_refused_by_name(settings, complaint, monkeypatch):
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)
    with pytest.raises(KafkaSettingsError, match=complaint):
        client_security(settings)
    with pytest.raises(SecretUnreadable, match="/nonexistent/password"):
        client_security(Settings(kafka_sasl_password_file="/nonexistent/password"))


def test_no_security_setting_leaves_kafka_python_defaults(monkeypatch):
    for secret in ("KAFKA_SASL_PASSWORD", "KAFKA_SSL_KEY_PASSWORD"):
        monkeypatch.delenv(secret, raising=False)
    assert client_security(Settings()) == {}
    assert attrs.fields(Settings).kafka_config.default is None
