"""Configuration the openlineage-python way, the registry, and producer setting translation."""

from __future__ import annotations

from pathlib import Path

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.transport import get_default_factory

import emitter.transports
from emitter.transports import TransportRegistryError, transport_class
from emitter.transports.kafka import KafkaConfig, KafkaConfigError, KafkaTransport, producer_settings
from tests.support.broker import free_port
from tests.transports.lineage_events import application_events


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith("OPENLINEAGE"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(tmp_path / "absent.yml"))
    return monkeypatch


def test_env_vars_configure_our_kafka_transport_over_the_official_one(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    clean_env.setenv("OPENLINEAGE__TRANSPORT__TYPE", "kafka")
    clean_env.setenv("OPENLINEAGE__TRANSPORT__TOPIC", "lineage")
    clean_env.setenv("OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS", bootstrap)
    clean_env.setenv("OPENLINEAGE__TRANSPORT__MESSAGEKEY", "fixed-key")
    clean_env.setenv("OPENLINEAGE__TRANSPORT__SPOOLDIR", str(tmp_path / "spool"))
    clean_env.setenv("OPENLINEAGE__TRANSPORT__SPOOLMAXBYTES", "123456")
    clean_env.setenv("OPENLINEAGE__TRANSPORT__FLUSHTIMEOUTSECONDS", "1")
    emitter.transports.register()

    client = OpenLineageClient()  # the official transport would need confluent-kafka, which is not installed
    transport = client.transport
    assert isinstance(transport, KafkaTransport)
    assert transport.config.topic == "lineage"
    assert transport.message_key == "fixed-key"
    assert transport.spool.directory == tmp_path / "spool"
    assert transport.spool.max_bytes == 123456

    client.emit(application_events("app", 0)[0])  # no broker there: accepted, then spooled at close
    assert client.close(1) is False
    [spooled] = transport.spool.oldest(10)
    assert (spooled.record.topic, spooled.record.key) == ("lineage", "fixed-key")


def test_yaml_shaped_config_with_librdkafka_names() -> None:
    config = KafkaConfig.from_dict(
        {
            "type": "kafka",
            "topic": "lineage",
            "messageKey": "k",
            "flush": True,
            "config": {
                "bootstrap.servers": "a:9092, b:9092",
                "security.protocol": "sasl_ssl",
                "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": "user",
                "sasl.password": "secret",
                "ssl.ca.location": "/etc/ca.pem",
                "acks": "all",
                "linger.ms": "20",
                "enable.idempotence": "false",
                "message.timeout.ms": 30000,
            },
        }
    )
    settings = producer_settings(config.config)
    assert settings["bootstrap_servers"] == ["a:9092", "b:9092"]
    assert settings["security_protocol"] == "SASL_SSL"
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (settings["sasl_plain_username"], settings["sasl_plain_password"]) == ("user", "secret")
    assert settings["ssl_cafile"] == "/etc/ca.pem"
    assert settings["acks"] == "all"
    assert settings["linger_ms"] == 20
    assert settings["enable_idempotence"] is False
    assert settings["delivery_timeout_ms"] == 30000


def test_kafka_python_names_pass_through_and_unknown_ones_are_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = producer_settings({"bootstrap_servers": "h:1", "client_id": "me", "no.such.setting": 1})
    assert settings["bootstrap_servers"] == ["h:1"]
    assert settings["client_id"] == "me"
    assert "no_such_setting" not in settings and "no.such.setting" not in settings
    assert "no.such.setting" in caplog.text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"config": {"bootstrap.servers": "h:1"}}, "`topic` is required"),
        ({"topic": "t"}, "`config` must be a mapping"),
    ],
)
def test_missing_settings_are_named(params: dict, message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message):
        KafkaConfig.from_dict(params)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(KafkaConfigError, match="bootstrap servers"):
        producer_settings({"acks": "all"})


def test_register_puts_dotted_paths_in_the_factory_and_resolves_lazily() -> None:
    emitter.transports.register()
    assert get_default_factory().transports["kafka"] == "emitter.transports.kafka.KafkaTransport"
    assert transport_class("kafka") is KafkaTransport


def test_an_unknown_or_broken_registration_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TransportRegistryError, match="no transport registered under type 'carrier-pigeon'"):
        transport_class("carrier-pigeon")
    monkeypatch.setitem(emitter.transports.TRANSPORTS, "broken", "emitter.transports.no_such_module.Transport")
    with pytest.raises(TransportRegistryError, match="cannot import module 'emitter.transports.no_such_module'"):
        transport_class("broken")
