"""The ``kafka`` transport, on kafka-python (the only module of the emitter importing it).

Configured like openlineage-python's own Kafka transport (``topic``, ``config`` with the
producer settings, optional ``messageKey``; ``flush`` is accepted and ignored, because
``emit`` never waits for the broker here) plus our spool settings: ``spoolDir``,
``spoolMaxBytes``, ``flushTimeoutSeconds``, ``queueSize``. docs/kafka.md is the reference.

Producer settings may use librdkafka's dotted names (``bootstrap.servers``,
``sasl.username``, ``ssl.ca.location`` ...) or kafka-python's (``bootstrap_servers`` — the
form ``OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS`` arrives in); both are translated
to kafka-python arguments, values coerced to the type kafka-python expects.

A broker that refuses the emitter says why (:class:`KafkaRefused`, logged once by the sender
while the events wait in the spool): a secured producer first makes one connection of its own,
because kafka-python reports refused credentials or certificates only as a bootstrap that timed
out; a record refused for want of an ACL fails its delivery with the topic named.
"""

from __future__ import annotations

import atexit
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from openlineage.client.transport.transport import Config, Transport

from emitter.transports.records import Pending, Record, Sequence, message_key
from emitter.transports.sender import BackgroundSender, SenderSettings
from emitter.transports.spool import Spool, default_spool_dir

log = logging.getLogger(__name__)

DEFAULT_SPOOL_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_FLUSH_TIMEOUT_SECONDS = 10.0
DEFAULT_QUEUE_SIZE = 1000

# Our defaults, each overridable: fail fast so events move to the spool instead of
# waiting in kafka-python's buffers for its 30-120 s defaults.
DEFAULT_PRODUCER_SETTINGS: dict[str, Any] = {
    "client_id": "spark-lineage-emitter",
    "bootstrap_timeout_ms": 2000,
    "max_block_ms": 2000,
    "request_timeout_ms": 5000,
    "delivery_timeout_ms": 10000,
    "reconnect_backoff_max_ms": 1000,
    "linger_ms": 5,
    # per-partition order even across retries, whatever idempotence the broker offers
    "max_in_flight_requests_per_connection": 1,
}

# librdkafka names (dots already turned into underscores) whose kafka-python name differs
RENAMED_PRODUCER_SETTINGS = {
    "sasl_mechanisms": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_kerberos_principal": "sasl_kerberos_name",
    "ssl_ca_location": "ssl_cafile",
    "ssl_certificate_location": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_key_password": "ssl_password",
    "ssl_crl_location": "ssl_crlfile",
    "ssl_cipher_suites": "ssl_ciphers",
    "message_max_bytes": "max_request_size",
    "queue_buffering_max_ms": "linger_ms",
    "message_timeout_ms": "delivery_timeout_ms",
    "compression_codec": "compression_type",
    "socket_connection_setup_timeout_ms": "request_timeout_ms",
}
UPPERCASE_PRODUCER_SETTINGS = {"security_protocol", "sasl_mechanism"}
# an environment variable's value arrives JSON-decoded: a password of digits would be a number
TEXT_PRODUCER_SETTINGS = {"sasl_plain_username", "sasl_plain_password", "ssl_password"}
# we send bytes we serialized ourselves; a serializer from the config would double-encode
IGNORED_PRODUCER_SETTINGS = {"key_serializer", "value_serializer"}

# config keys as they arrive: YAML camelCase, env vars lower-cased, snake_case
_CONFIG_ALIASES = {
    "topic": "topic",
    "config": "config",
    "flush": "flush",
    "messagekey": "messageKey",
    "message_key": "messageKey",
    "spooldir": "spoolDir",
    "spool_dir": "spoolDir",
    "spoolmaxbytes": "spoolMaxBytes",
    "spool_max_bytes": "spoolMaxBytes",
    "flushtimeoutseconds": "flushTimeoutSeconds",
    "flush_timeout_seconds": "flushTimeoutSeconds",
    "queuesize": "queueSize",
    "queue_size": "queueSize",
}
_FACTORY_KEYS = {"type", "name", "priority"}


class KafkaConfigError(ValueError):
    """The kafka transport configuration is missing something or has a wrong value."""


@attrs.define
class KafkaConfig(Config):
    config: dict[str, Any]
    topic: str
    messageKey: str | None = None  # noqa: N815 - the official transport's spelling
    flush: bool = True
    spoolDir: str | None = None  # noqa: N815
    spoolMaxBytes: int = DEFAULT_SPOOL_MAX_BYTES  # noqa: N815
    flushTimeoutSeconds: float = DEFAULT_FLUSH_TIMEOUT_SECONDS  # noqa: N815
    queueSize: int = DEFAULT_QUEUE_SIZE  # noqa: N815

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> KafkaConfig:
        fields: dict[str, Any] = {}
        for key, value in params.items():
            canonical = _CONFIG_ALIASES.get(key.lower()) or _CONFIG_ALIASES.get(key)
            if canonical is not None:
                fields[canonical] = value
            elif key.lower() not in _FACTORY_KEYS:
                log.warning("kafka transport: ignoring unknown setting %r", key)
        if not fields.get("topic"):
            raise KafkaConfigError("kafka transport: `topic` is required (OPENLINEAGE__TRANSPORT__TOPIC)")
        producer = fields.get("config")
        if not isinstance(producer, Mapping):
            raise KafkaConfigError(
                "kafka transport: `config` must be a mapping of producer settings with bootstrap servers "
                "(OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS=host:port)"
            )
        return cls(
            config=dict(producer),
            topic=str(fields["topic"]),
            messageKey=str(fields["messageKey"]) if fields.get("messageKey") else None,
            flush=_as_bool(fields.get("flush", True)),
            spoolDir=str(fields["spoolDir"]) if fields.get("spoolDir") else None,
            spoolMaxBytes=int(fields.get("spoolMaxBytes", DEFAULT_SPOOL_MAX_BYTES)),
            flushTimeoutSeconds=float(fields.get("flushTimeoutSeconds", DEFAULT_FLUSH_TIMEOUT_SECONDS)),
            queueSize=int(fields.get("queueSize", DEFAULT_QUEUE_SIZE)),
        )


def producer_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python ``KafkaProducer`` keyword arguments for a librdkafka- or kafka-python-style config."""
    from kafka import KafkaProducer

    known = KafkaProducer.DEFAULT_CONFIG
    settings = dict(DEFAULT_PRODUCER_SETTINGS)
    for key, value in config.items():
        name = key.lower().replace(".", "_").replace("-", "_")
        name = RENAMED_PRODUCER_SETTINGS.get(name, name)
        if name in IGNORED_PRODUCER_SETTINGS:
            continue
        if name not in known:
            log.warning("kafka transport: producer setting %r has no kafka-python equivalent; ignored", key)
            continue
        settings[name] = _coerce(value, known[name], name)
    bootstrap = settings.get("bootstrap_servers")
    if not bootstrap:
        raise KafkaConfigError(
            "kafka transport: `config` needs bootstrap servers "
            "(`bootstrap.servers` / OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS)"
        )
    return settings


def _coerce(value: Any, default: Any, name: str) -> Any:
    if name in UPPERCASE_PRODUCER_SETTINGS and isinstance(value, str):
        return value.upper()
    if name in TEXT_PRODUCER_SETTINGS and value is not None:
        return str(value)
    if name == "bootstrap_servers" and isinstance(value, str):
        return [server.strip() for server in value.split(",") if server.strip()]
    if isinstance(value, str):
        if isinstance(default, bool):
            return _as_bool(value)
        if isinstance(default, (int, float)) and _is_number(value):  # not "all" for acks
            number = float(value)
            return int(number) if number.is_integer() else number
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


class KafkaRefused(ConnectionError):
    """The broker answered and refused the emitter: its SASL credentials, a certificate one side
    does not trust, or a missing ACL. The message names the cause, never a secret."""


# A broker that fails a SASL login answers why and closes the connection; kafka-python drops an
# answer that arrives with the close, so a login the broker closed is tried again for the answer.
ACCESS_CHECK_ATTEMPTS = 3
# What OpenSSL says when the client does not trust the broker's certificate -> what it means
_UNTRUSTED_BROKER = (
    (
        ("unable to get local issuer", "self-signed", "self signed", "unknown ca"),
        "is not signed by a CA the emitter trusts (ssl.ca.location)",
    ),
    (("hostname mismatch", "ip address mismatch"), "does not name the address the emitter connected to"),
    (("certificate has expired",), "has expired"),
)
# TLS alerts a broker sends when it does not accept the client's certificate (or got none)
_REFUSED_CLIENT = ("ALERT_CERTIFICATE_UNKNOWN", "ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA", "CERTIFICATE_REQUIRED")


def check_access(settings: Mapping[str, Any]) -> None:
    """KafkaRefused when the first bootstrap broker that answers refuses the producer's credentials
    or certificates; nothing when one accepts them or none answers. Only SSL and SASL connections
    can be refused this early."""
    if str(settings.get("security_protocol", "PLAINTEXT")) == "PLAINTEXT":
        return
    deadline = time.monotonic() + int(settings.get("bootstrap_timeout_ms", 2000)) / 1000
    for server in settings["bootstrap_servers"]:
        for attempt in range(1, ACCESS_CHECK_ATTEMPTS + 1):
            failure, logging_in = _first_connection(server, settings, max(1, int((deadline - time.monotonic()) * 1000)))
            if failure is None:
                return
            if (cause := refusal_cause(failure, settings)) is not None:
                raise KafkaRefused(cause)
            if not logging_in:  # nobody there, or no answer in time: the next server
                break
            if attempt == ACCESS_CHECK_ATTEMPTS or time.monotonic() >= deadline:
                raise KafkaRefused(
                    f"{_sasl_failed(settings)}: the broker closed the connection at login "
                    "(a wrong user name or password, or a mechanism it does not enable)"
                )


def _first_connection(server: str, settings: Mapping[str, Any], timeout_ms: int) -> tuple[BaseException | None, bool]:
    """Why one connection to `server` (TLS handshake, API versions, SASL login) failed, or None;
    and whether it failed during the SASL login. kafka-python's connection layer, because its
    producer retries such failures until it times out."""
    from kafka.errors import KafkaError, KafkaTimeoutError
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(**{**settings, "bootstrap_servers": [server]})
    try:
        manager = client._manager
        (broker, *_) = manager.cluster.bootstrap_brokers()
        connection = manager.get_connection(broker.node_id, timeout_ms=timeout_ms)
        client._net.poll(timeout_ms=timeout_ms, future=connection.init_future)
        if connection.init_future.succeeded():
            return None, False
        failure = connection.init_future.exception or KafkaTimeoutError("no answer in time")
        logging_in = connection.broker_version_data is not None and str(settings["security_protocol"]).startswith("SASL")
        return failure, logging_in
    except KafkaError as error:
        return error, False
    finally:
        client.close()


def refusal_cause(failure: BaseException, settings: Mapping[str, Any]) -> str | None:
    """The cause of a refused connection in a few words (no secret), or None when `failure` is no
    refusal (nobody listening, a timeout)."""
    from kafka.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError

    if isinstance(failure, SaslAuthenticationFailedError):
        return f"{_sasl_failed(settings)}: wrong user name or password"
    if isinstance(failure, UnsupportedSaslMechanismError):
        return f"{_sasl_failed(settings)}: the broker does not offer this mechanism"
    text = str(failure)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        lowered = text.lower()
        why = next((means for signs, means in _UNTRUSTED_BROKER if any(sign in lowered for sign in signs)), "failed verification")
        return f"TLS handshake failed: certificate not trusted: the broker's certificate {why}"
    if any(alert in text for alert in _REFUSED_CLIENT):
        if not settings.get("ssl_certfile"):
            return "TLS handshake failed: the broker requires a client certificate and the emitter has none (ssl.certificate.location)"
        return "TLS handshake failed: certificate not trusted: the broker does not trust the emitter's certificate"
    return None


def _sasl_failed(settings: Mapping[str, Any]) -> str:
    return (
        f"SASL authentication failed for user {settings.get('sasl_plain_username')} ({settings.get('sasl_mechanism', 'PLAIN')})"
    )


def _write_refusal(error: BaseException | None, topic: str) -> KafkaRefused | None:
    """A missing ACL said as such (kafka-python names only the error class and the topic)."""
    from kafka.errors import AuthorizationError

    if isinstance(error, AuthorizationError):
        return KafkaRefused(f"not authorized to write to topic {topic} ({type(error).__name__})")
    return None


class _FutureDelivery:
    def __init__(self, future: Any, topic: str) -> None:
        self._future = future
        self._topic = topic

    def done(self) -> bool:
        return bool(self._future.is_done)

    def error(self) -> BaseException | None:
        if not (self._future.is_done and self._future.failed()):
            return None
        return _write_refusal(self._future.exception, self._topic) or self._future.exception


class KafkaSink:
    """A kafka-python producer seen as a Sink: records in, deliveries out."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        check_access(settings)  # waits for the broker: only ever on the sender thread, as the bootstrap below
        try:
            self._producer = KafkaProducer(**settings)
        except KafkaTimeoutError:
            raise ConnectionError(f"no Kafka broker answers at {','.join(settings['bootstrap_servers'])}") from None
        # kafka-python closes its producers at exit; registered after ours, its hook would run
        # first and close the producer under the emitter's final events. Our exit hook closes it.
        unregister_exit_hook = getattr(self._producer, "_unregister_cleanup", None)
        if unregister_exit_hook is not None:
            unregister_exit_hook()

    def send(self, record: Record) -> _FutureDelivery:
        from kafka.errors import AuthorizationError

        key = record.key.encode("utf-8") if record.key is not None else None
        try:
            return _FutureDelivery(self._producer.send(record.topic, key=key, value=record.value), record.topic)
        except AuthorizationError as error:
            raise _write_refusal(error, record.topic) or error from None

    def flush(self, timeout_seconds: float) -> None:
        self._producer.flush(timeout=timeout_seconds)

    def rejects(self, error: BaseException) -> bool:
        from kafka import errors

        return isinstance(
            error,
            (
                errors.MessageSizeTooLargeError,
                errors.RecordListTooLargeError,
                errors.InvalidRecordError,
                errors.CorruptRecordError,
            ),
        )

    def close(self) -> None:
        """Close now, failing whatever is still pending (the sender has spooled or will spool it)."""
        from kafka.errors import KafkaTimeoutError

        producer = self._producer
        flush = producer.flush

        def flush_tolerating_pending(timeout: float | None = None) -> None:
            try:
                flush(timeout)
            except KafkaTimeoutError:
                pass

        # kafka-python's close() flushes first and raises when records are still pending, which
        # would skip its force close and leak its I/O thread; let close() go on to the force close
        producer.flush = flush_tolerating_pending
        producer.close(timeout=0)


class KafkaTransport(Transport):
    """OpenLineage events to Kafka without ever making the Spark job wait (see the package docs)."""

    kind = "kafka"
    config_class = KafkaConfig

    def __init__(self, config: KafkaConfig) -> None:
        _require_kafka_python()
        # kafka-python logs every refused connection at ERROR; a script with no logging set up
        # does not print them, as kafka-python's package adds a NullHandler to its own logger
        self._sequence = Sequence()
        self.config = config
        self.topic = config.topic
        self.message_key = config.messageKey
        settings = producer_settings(config.config)
        spool_dir = Path(config.spoolDir) if config.spoolDir else default_spool_dir(",".join(settings["bootstrap_servers"]))
        self._sender = BackgroundSender(
            connect=lambda: KafkaSink(settings),
            spool=Spool(spool_dir, config.spoolMaxBytes, topic=config.topic),
            settings=SenderSettings(queue_size=config.queueSize, flush_timeout_seconds=config.flushTimeoutSeconds),
            name=f"openlineage-kafka-{config.topic}",
        )
        self._sender.start()
        # a script that never closes its client still gets its events delivered or spooled
        atexit.register(self._sender.close, None)
        log.debug("kafka transport to topic %s via %s, spool %s", self.topic, settings["bootstrap_servers"], spool_dir)

    @property
    def spool(self) -> Spool:
        return self._sender.spool

    def emit(self, event: Any) -> None:
        try:
            key = self.message_key or message_key(event)
            self._sender.submit(Pending(seq=self._sequence.next(), topic=self.topic, key=key, event=event))
        except Exception:  # the Spark job must never see a lineage failure
            log.exception("kafka transport: could not accept a lineage event")

    def close(self, timeout: float = -1) -> bool:
        atexit.unregister(self._sender.close)
        return self._sender.close(timeout)


def _require_kafka_python() -> None:
    try:
        import kafka  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "the kafka transport needs kafka-python: pip install 'spark-lineage[emitter]' (or kafka-python)"
        ) from error
