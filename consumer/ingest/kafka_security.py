"""How the consumer's Kafka clients (the event consumer, the dead-letter producer and the
changes producer) authenticate and encrypt: one set of kafka-python keyword arguments for all
three, from (lowest precedence first)

- a client properties file (`--kafka-config`), the form Kafka's own tools take: `key=value`
  lines with Java (`security.protocol`, `sasl.jaas.config`), librdkafka (`sasl.username`,
  `ssl.ca.location`) or kafka-python (`sasl_plain_username`, `ssl_cafile`) names;
- the `--kafka-*` flags and `KAFKA_*` environment variables (consumer.settings);
- secrets from files (`--kafka-sasl-password-file`, `--kafka-ssl-key-password-file`) or the
  environment (`KAFKA_SASL_PASSWORD`, `KAFKA_SSL_KEY_PASSWORD`): never from a flag.

A key this module does not know is warned about by name (never its value) and left out. Pure
but for reading the files named."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
# Client property names (lowercase, dots and dashes as underscores) -> kafka-python argument.
CLIENT_NAMES = {
    "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_mechanisms": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_plain_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_plain_password": "sasl_plain_password",
    "sasl_kerberos_service_name": "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name": "sasl_kerberos_domain_name",
    "ssl_ca_location": "ssl_cafile",
    "ssl_cafile": "ssl_cafile",
    "ssl_certificate_location": "ssl_certfile",
    "ssl_certfile": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_keyfile": "ssl_keyfile",
    "ssl_key_password": "ssl_password",
    "ssl_password": "ssl_password",
    "ssl_crl_location": "ssl_crlfile",
    "ssl_crlfile": "ssl_crlfile",
    "ssl_cipher_suites": "ssl_ciphers",
    "ssl_ciphers": "ssl_ciphers",
    "ssl_check_hostname": "ssl_check_hostname",
}
UPPERCASE = frozenset({"security_protocol", "sasl_mechanism"})
FILE_SETTINGS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile")
SECRETS = frozenset({"sasl_plain_password", "ssl_password"})
_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:]\s*(.*)")
_JAAS_VALUE = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
# Settings attribute -> kafka-python argument (the flags and plain environment variables).
_FROM_SETTINGS = {
    "kafka_security_protocol": "security_protocol",
    "kafka_sasl_mechanism": "sasl_mechanism",
    "kafka_sasl_username": "sasl_plain_username",
    "kafka_ssl_cafile": "ssl_cafile",
    "kafka_ssl_certfile": "ssl_certfile",
    "kafka_ssl_keyfile": "ssl_keyfile",
}


class KafkaSettingsError(ValueError):
    """The Kafka security settings are contradictory, incomplete or name a missing file."""


def client_security(settings: Any) -> dict[str, Any]:
    """kafka-python keyword arguments for every client of the consumer, from `settings`
    (consumer.settings.Settings: its `kafka_*` fields, its secrets from their files or
    environment variables; the write side does not import the settings module)."""
    config: dict[str, Any] = {}
    if settings.kafka_config:
        config.update(read_properties(Path(settings.kafka_config)))
    for attribute, name in _FROM_SETTINGS.items():
        if (value := getattr(settings, attribute)) is not None:
            config[name] = value
    for name, secret in (
        ("sasl_plain_password", settings.kafka_sasl_password),
        ("ssl_password", settings.kafka_ssl_key_password),
    ):
        if secret is not None:
            config[name] = secret
    return validated(config)


def read_properties(path: Path) -> dict[str, Any]:
    """A client properties file as kafka-python arguments; unknown keys warned about by name."""
    try:
        text = path.read_text()
    except OSError as error:
        raise KafkaSettingsError(f"cannot read the Kafka client properties {path}: {error.strerror}") from None
    raw: dict[str, str] = {}
    for line in text.splitlines():
        if (match := _PROPERTY.match(line.strip())) is not None and not line.strip().startswith(("#", "!")):
            raw[match.group(1)] = match.group(2)
    return translate(raw, source=str(path))


def translate(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in raw.items():
        normalized = key.strip().lower().replace(".", "_").replace("-", "_")
        if normalized == "sasl_jaas_config":
            config.update(_from_jaas(str(value)))
        elif normalized == "ssl_endpoint_identification_algorithm":
            config["ssl_check_hostname"] = bool(str(value).strip())
        elif normalized in CLIENT_NAMES:
            config[CLIENT_NAMES[normalized]] = value
        else:
            log.warning("Kafka setting %r from %s is not a security setting the consumer knows; ignored", key, source)
    return config


def _from_jaas(jaas: str) -> dict[str, str]:
    """username and password of a `sasl.jaas.config` (PLAIN and SCRAM login modules)."""
    names = {"username": "sasl_plain_username", "password": "sasl_plain_password"}
    return {names[key]: value.replace('\\"', '"') for key, value in _JAAS_VALUE.findall(jaas)}


def validated(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with values of the types kafka-python expects; KafkaSettingsError naming the
    setting (never a secret's value) when something cannot work."""
    checked = dict(config)
    for name in UPPERCASE & checked.keys():
        checked[name] = str(checked[name]).strip().upper()
    if isinstance(checked.get("ssl_check_hostname"), str):
        checked["ssl_check_hostname"] = checked["ssl_check_hostname"].strip().lower() in {"1", "true", "yes", "on"}
    protocol = checked.get("security_protocol", "PLAINTEXT")
    if protocol not in SECURITY_PROTOCOLS:
        raise KafkaSettingsError(f"Kafka security protocol {protocol!r} is none of {', '.join(sorted(SECURITY_PROTOCOLS))}")
    if protocol.startswith("SASL_") and checked.get("sasl_mechanism", "PLAIN") in {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}:
        missing = [
            what
            for what, name in (("a SASL user name", "sasl_plain_username"), ("a SASL password", "sasl_plain_password"))
            if not checked.get(name)
        ]
        if missing:
            raise KafkaSettingsError(f"Kafka security protocol {protocol} needs {' and '.join(missing)}")
    for name in FILE_SETTINGS:
        if checked.get(name) and not Path(checked[name]).is_file():
            raise KafkaSettingsError(f"Kafka setting {name}: no file {checked[name]}")
    return checked


def described(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` fit for a log line: secrets replaced by `***`."""
    return {name: "***" if name in SECRETS else value for name, value in config.items()}
