"""The consumer's Kafka security settings reach all three of its clients (event consumer,
dead-letter producer, changes producer), and a real mutual-TLS connection works with them.

The broker is Tansu behind a TLS proxy (tests/support/relay.py says why: Tansu 0.6 offers
neither TLS nor SASL). SASL is checked as far as the client objects' configurations."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import pytest

from consumer.ingest.kafka_io import BrokerUnavailable, ChangeMessages, DeadLetters, EventSource
from consumer.ingest.kafka_security import KafkaSettingsError, client_security, read_properties
from consumer.settings import SecretUnreadable, Settings
from tests.consumer.helpers import stop_process
from tests.support.broker import read_topic, unique_topic
from tests.support.events import batch_write, table
from tests.support.paths import PROJECT_ROOT

SASL_SECRET = "sasl-hunter2"


def _tls_settings(tls_broker, tmp_path: Path, **extra) -> Settings:
    key_password_file = tmp_path / "key-password"
    key_password_file.write_text(tls_broker.files.key_password + "\n")
    return Settings(
        bootstrap_servers=tls_broker.bootstrap,
        kafka_security_protocol="ssl",
        kafka_ssl_cafile=str(tls_broker.files.ca),
        kafka_ssl_certfile=str(tls_broker.files.client_cert),
        kafka_ssl_keyfile=str(tls_broker.files.client_key),
        kafka_ssl_key_password_file=str(key_password_file),
        **extra,
    )


def test_every_client_connects_over_mutual_tls_with_the_settings_and_carries_them(tls_broker, tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", SASL_SECRET)
    settings = _tls_settings(tls_broker, tmp_path, kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username="lineage")
    security = client_security(settings)
    changes_topic, dead_letter_topic = unique_topic("tls-changes"), unique_topic("tls-dlq")
    changes = ChangeMessages(settings.bootstrap_servers, changes_topic, security=security)
    dead_letters = DeadLetters(settings.bootstrap_servers, dead_letter_topic, security=security)
    source = EventSource(
        settings.bootstrap_servers, unique_topic("tls-events"), "tls-group", session_timeout_ms=3000, security=security
    )
    try:
        changes.send(b"key", b"over TLS")
        changes.flush(10)
        dead_letters.send(b"rejected", [("reason", b"test")])
        dead_letters.flush(10)
        source.poll(100)
        assert tls_broker.proxy.handshakes >= 3, "each client went through the TLS proxy"
        configs = [changes._producer.config, dead_letters._producer.config, source._consumer.config]
        for config in configs:
            assert config["security_protocol"] == "SSL"
            assert (config["ssl_cafile"], config["ssl_certfile"]) == (str(tls_broker.files.ca), str(tls_broker.files.client_cert))
            assert (config["ssl_keyfile"], config["ssl_password"]) == (
                str(tls_broker.files.client_key),
                tls_broker.files.key_password,
            )
            assert (config["sasl_mechanism"], config["sasl_plain_username"]) == ("SCRAM-SHA-512", "lineage")
            assert config["sasl_plain_password"] == SASL_SECRET
    finally:
        source.close()
        dead_letters.close()
        changes.close()
    assert [record.value for record in read_topic(tls_broker.bootstrap, changes_topic, 1, security=security)] == [b"over TLS"]


def test_without_the_client_certificate_the_tls_broker_is_unreachable(tls_broker, tmp_path):
    settings = Settings(
        bootstrap_servers=tls_broker.bootstrap, kafka_security_protocol="SSL", kafka_ssl_cafile=str(tls_broker.files.ca)
    )
    with pytest.raises(BrokerUnavailable):
        ChangeMessages(settings.bootstrap_servers, "t", bootstrap_timeout_ms=3000, security=client_security(settings))


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


def test_ingest_reads_dead_letters_and_publishes_changes_over_tls_from_environment_settings(
    tls_broker, tmp_path, sqlite_url, monkeypatch
):
    files = tls_broker.files
    environ = {
        "KAFKA_SECURITY_PROTOCOL": "SSL",
        "KAFKA_SSL_CAFILE": str(files.ca),
        "KAFKA_SSL_CERTFILE": str(files.client_cert),
        "KAFKA_SSL_KEYFILE": str(files.client_key),
        "KAFKA_SSL_KEY_PASSWORD": files.key_password,
    }
    as_read = Settings(
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=str(files.ca),
        kafka_ssl_certfile=str(files.client_cert),
        kafka_ssl_keyfile=str(files.client_key),
    )
    monkeypatch.setenv("KAFKA_SSL_KEY_PASSWORD", files.key_password)
    security = client_security(as_read)
    topic, dead_letters, changes = (unique_topic(kind) for kind in ("tls-in", "tls-dlq", "tls-changes"))
    producer = ChangeMessages(tls_broker.bootstrap, topic, security=security)  # a keyed producer of bytes
    for event in batch_write("app.tls.o", [table("raw", "a", ["id"])], table("mart", "o", ["id"])):
        producer.send(b"k", json.dumps(event).encode())
    producer.send(b"k", b"not json")
    producer.flush(10)
    producer.close()
    command = [sys.executable, "-m", "consumer", "ingest", "--store", sqlite_url, "--bootstrap-servers", tls_broker.bootstrap]
    options = [
        "--topic",
        topic,
        "--dead-letter-topic",
        dead_letters,
        "--changes-topic",
        changes,
        "--group",
        f"g-{uuid.uuid4().hex[:6]}",
    ]
    process = subprocess.Popen(
        [*command, *options, "--session-timeout-ms", "3000", "--max-poll-interval-ms", "3000"],
        cwd=PROJECT_ROOT,
        env={**os.environ, **environ},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        rejected = read_topic(tls_broker.bootstrap, dead_letters, 1, timeout_seconds=60, security=security)
        published = read_topic(tls_broker.bootstrap, changes, 3, timeout_seconds=60, security=security)
    finally:
        logged = stop_process(process)
    assert [record.value for record in rejected] == [b"not json"]
    kinds = {json.loads(record.value)["kind"] for record in published}
    assert {"table_lineage_edge", "run_finished"} <= kinds
    assert files.key_password not in logged
