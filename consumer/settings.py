"""Every consumer setting, each with a command-line flag and an environment variable
(the flag wins). `add_arguments` puts them on an argparse parser; `Settings.from_args` reads
them back."""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from pathlib import Path

import attrs

# (attribute, flag, environment variable, default, help)
_OPTIONS: tuple[tuple[str, str, str, str | None, str], ...] = (
    (
        "store_url",
        "--store",
        "LINEAGE_STORE_URL",
        "sqlite:///lineage.db",
        "store URL: sqlite:///path.db or postgresql://user@host/db",
    ),
    (
        "bootstrap_servers",
        "--bootstrap-servers",
        "KAFKA_BOOTSTRAP_SERVERS",
        "localhost:9092",
        "Kafka bootstrap servers, comma separated",
    ),
    (
        "kafka_security_protocol",
        "--kafka-security-protocol",
        "KAFKA_SECURITY_PROTOCOL",
        None,
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, for every Kafka client of the consumer (none: PLAINTEXT)",
    ),
    (
        "kafka_sasl_mechanism",
        "--kafka-sasl-mechanism",
        "KAFKA_SASL_MECHANISM",
        None,
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER (none: PLAIN)",
    ),
    ("kafka_sasl_username", "--kafka-sasl-username", "KAFKA_SASL_USERNAME", None, "SASL user name"),
    (
        "kafka_sasl_password_file",
        "--kafka-sasl-password-file",
        "KAFKA_SASL_PASSWORD_FILE",
        None,
        "file holding the SASL password (or the KAFKA_SASL_PASSWORD environment variable; there is no flag for it)",
    ),
    (
        "kafka_ssl_cafile",
        "--kafka-ssl-cafile",
        "KAFKA_SSL_CAFILE",
        None,
        "PEM file of the CAs the brokers' certificates are checked against",
    ),
    ("kafka_ssl_certfile", "--kafka-ssl-certfile", "KAFKA_SSL_CERTFILE", None, "PEM client certificate (mutual TLS)"),
    ("kafka_ssl_keyfile", "--kafka-ssl-keyfile", "KAFKA_SSL_KEYFILE", None, "PEM private key of the client certificate"),
    (
        "kafka_ssl_key_password_file",
        "--kafka-ssl-key-password-file",
        "KAFKA_SSL_KEY_PASSWORD_FILE",
        None,
        "file holding the client key's password (or the KAFKA_SSL_KEY_PASSWORD environment variable)",
    ),
    (
        "kafka_config",
        "--kafka-config",
        "LINEAGE_KAFKA_CONFIG",
        None,
        "Kafka client properties file (key=value lines: security.protocol, sasl.jaas.config, ssl.ca.location ...); the flags above win",
    ),
    ("topic", "--topic", "LINEAGE_TOPIC", "openlineage.events", "topic the OpenLineage events arrive on"),
    ("group", "--group", "LINEAGE_GROUP", "lineage-consumer", "Kafka consumer group (instances of one group share partitions)"),
    (
        "dead_letter_topic",
        "--dead-letter-topic",
        "LINEAGE_DEAD_LETTER_TOPIC",
        "openlineage.events.dlq",
        "topic bad events are sent to",
    ),
    (
        "changes_topic",
        "--changes-topic",
        "LINEAGE_CHANGES_TOPIC",
        None,
        "publish lineage changes (edges added/retired, runs finished) to this topic after each store transaction (none: off)",
    ),
    (
        "role",
        "--role",
        "LINEAGE_ROLE",
        "kafka",
        "what serve does besides the API: `kafka` (ingest from Kafka and over HTTP), `http` (ingest over HTTP only; no broker needed) or `api` (a read-only API replica)",
    ),
    (
        "host",
        "--host",
        "LINEAGE_HOST",
        "127.0.0.1",
        "HTTP listen address (another than loopback needs a write token, or --insecure-no-token)",
    ),
    ("port", "--port", "LINEAGE_PORT", "5000", "HTTP port (5000, as Marquez)"),
    (
        "token_file",
        "--token-file",
        "LINEAGE_API_TOKEN_FILE",
        None,
        "file holding the write token (ingestion, tags, deletes); or put the token itself in LINEAGE_API_TOKEN",
    ),
    (
        "read_token_file",
        "--read-token-file",
        "LINEAGE_API_READ_TOKEN_FILE",
        None,
        "file holding the read token the other /api routes then require; or LINEAGE_API_READ_TOKEN (none: reads open)",
    ),
    (
        "insecure_no_token",
        "--insecure-no-token",
        "LINEAGE_INSECURE_NO_TOKEN",
        None,
        "serve writes without a token on an address other than loopback (anyone reaching the port can write)",
    ),
    ("ssl_certfile", "--ssl-certfile", "LINEAGE_SSL_CERTFILE", None, "serve HTTPS with this certificate (PEM; none: HTTP)"),
    ("ssl_keyfile", "--ssl-keyfile", "LINEAGE_SSL_KEYFILE", None, "the certificate's private key (PEM)"),
    (
        "web_dir",
        "--web-dir",
        "LINEAGE_WEB_DIR",
        None,
        "serve this built Marquez Web (its dist/ folder) at / beside the API (none: API only)",
    ),
    (
        "concurrent_requests",
        "--concurrent-requests",
        "LINEAGE_CONCURRENT_REQUESTS",
        None,
        "HTTP API requests computed at once, the others wait their turn (none: one per CPU; health checks never wait)",
    ),
    (
        "queued_requests",
        "--queued-requests",
        "LINEAGE_QUEUED_REQUESTS",
        "64",
        "API requests waiting for a computing slot at most; more are answered 503 with Retry-After at once",
    ),
    (
        "queue_timeout",
        "--queue-timeout",
        "LINEAGE_QUEUE_TIMEOUT",
        "10",
        "seconds a request waits for a computing slot before 503",
    ),
    (
        "statement_timeout",
        "--statement-timeout",
        "LINEAGE_STATEMENT_TIMEOUT",
        "30",
        "seconds an API request's database work may take (then 504); also stopped when the client disconnects",
    ),
    (
        "max_body_bytes",
        "--max-body-bytes",
        "LINEAGE_MAX_BODY_BYTES",
        str(64 * 1024),
        "largest request body of every route but ingestion (larger: 413)",
    ),
    ("body_timeout", "--body-timeout", "LINEAGE_BODY_TIMEOUT", "30", "seconds a request body may take to arrive (then 408)"),
    (
        "max_connections",
        "--max-connections",
        "LINEAGE_MAX_CONNECTIONS",
        "1000",
        "open HTTP connections at most (idle or slow ones included); beyond, new requests are answered 503 at once",
    ),
    (
        "retire_after",
        "--retire-after",
        "LINEAGE_RETIRE_AFTER",
        None,
        "retire a finished job's table lineage when unseen this long (e.g. 30d, 12h, 90m; none: never)",
    ),
    (
        "retention",
        "--retention",
        "LINEAGE_RETENTION",
        None,
        "remove raw events, runs and the history they made once older than this (e.g. 30d, 12h; none: keep everything); never the current lineage",
    ),
    ("batch_size", "--batch-size", "LINEAGE_BATCH_SIZE", "500", "most events materialized per store transaction"),
    ("session_timeout_ms", "--session-timeout-ms", "LINEAGE_SESSION_TIMEOUT_MS", "10000", "Kafka group session timeout"),
    (
        "max_poll_interval_ms",
        "--max-poll-interval-ms",
        "LINEAGE_MAX_POLL_INTERVAL_MS",
        "60000",
        "Kafka max poll interval (also bounds a rebalance)",
    ),
    (
        "max_event_bytes",
        "--max-event-bytes",
        "LINEAGE_MAX_EVENT_BYTES",
        str(4 * 1024 * 1024),
        "largest event accepted, in bytes, from Kafka (larger: dead-lettered as too large) and over HTTP (larger: 413)",
    ),
    ("log_format", "--log-format", "LINEAGE_LOG_FORMAT", "text", "log lines as `text` or `json` (one JSON object per line)"),
    (
        "prepare_process",
        "--prepare-process",
        "LINEAGE_PREPARE_PROCESS",
        "auto",
        "prepare each batch (decode, validate, materialize, fold) in a worker process: `auto` (where the machine has a second CPU), `yes` or `no`",
    ),
)

_CHOICES = {"log_format": ("text", "json"), "prepare_process": ("auto", "yes", "no"), "role": ("kafka", "http", "api")}
# Switches: given on the command line without a value; their environment variable is 1/true/yes or not.
_SWITCHES = {"insecure_no_token"}
# Secrets are read from these environment variables (or a file named by a flag), never from a flag's value.
TOKEN_ENV = "LINEAGE_API_TOKEN"  # noqa: S105 - the name of the variable that holds the token, not a token
READ_TOKEN_ENV = "LINEAGE_API_READ_TOKEN"  # noqa: S105 - the name of the variable that holds the token, not a token
KAFKA_SASL_PASSWORD_ENV = "KAFKA_SASL_PASSWORD"  # noqa: S105 - the name of the variable that holds the password
KAFKA_SSL_KEY_PASSWORD_ENV = "KAFKA_SSL_KEY_PASSWORD"  # noqa: S105 - the name of the variable that holds the password
_SECRET_ENVIRONMENT = (
    (TOKEN_ENV, "the write token (ingestion, tags, deletes); none: writes open (loopback only, see --insecure-no-token)"),
    (READ_TOKEN_ENV, "the read token the other /api routes require; none: reads open"),
    (KAFKA_SASL_PASSWORD_ENV, "the SASL password of every Kafka client of the consumer"),
    (KAFKA_SSL_KEY_PASSWORD_ENV, "the password of the Kafka client key (--kafka-ssl-keyfile)"),
)

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_period(text: str) -> timedelta:
    """'30d', '12h', '90m', '45s', '2w' (a bare number is seconds)."""
    text = text.strip().lower()
    unit = _UNITS.get(text[-1:], None)
    number = text[:-1] if unit else text
    try:
        return timedelta(**{unit or "seconds": float(number)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a period like 30d, 12h, 90m: {text!r}") from None


@attrs.frozen
class Settings:
    store_url: str = "sqlite:///lineage.db"
    bootstrap_servers: str = "localhost:9092"
    kafka_security_protocol: str | None = None
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password_file: str | None = None
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    kafka_ssl_key_password_file: str | None = None
    kafka_config: str | None = None
    topic: str = "openlineage.events"
    group: str = "lineage-consumer"
    dead_letter_topic: str = "openlineage.events.dlq"
    changes_topic: str | None = None
    role: str = "kafka"
    host: str = "127.0.0.1"
    port: int = 5000
    token_file: str | None = None
    read_token_file: str | None = None
    insecure_no_token: bool = False
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    web_dir: str | None = None
    concurrent_requests: int | None = None
    queued_requests: int = 64
    queue_timeout: float = 10.0
    statement_timeout: float = 30.0
    max_body_bytes: int = 64 * 1024
    body_timeout: float = 30.0
    max_connections: int = 1000
    retire_after: timedelta | None = None
    retention: timedelta | None = None
    batch_size: int = 500
    session_timeout_ms: int = 10000
    max_poll_interval_ms: int = 60000
    max_event_bytes: int = 4 * 1024 * 1024
    log_format: str = "text"
    prepare_process: str = "auto"

    @property
    def prepare_in_worker(self) -> bool | None:
        """consumer.ingest.prepare.Preparer's `in_worker` (None: decide by the CPUs)."""
        return {"yes": True, "no": False}.get(self.prepare_process)

    @property
    def api_token(self) -> str | None:
        """The write token: the file --token-file names, else $LINEAGE_API_TOKEN (None: none set)."""
        return _secret(self.token_file, TOKEN_ENV)

    @property
    def read_token(self) -> str | None:
        return _secret(self.read_token_file, READ_TOKEN_ENV)

    @property
    def kafka_sasl_password(self) -> str | None:
        return _secret(self.kafka_sasl_password_file, KAFKA_SASL_PASSWORD_ENV)

    @property
    def kafka_ssl_key_password(self) -> str | None:
        return _secret(self.kafka_ssl_key_password_file, KAFKA_SSL_KEY_PASSWORD_ENV)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        values = {name: getattr(args, name) for name, *_ in _OPTIONS if hasattr(args, name)}
        for name in (
            "port",
            "batch_size",
            "session_timeout_ms",
            "max_poll_interval_ms",
            "max_event_bytes",
            "concurrent_requests",
            "queued_requests",
            "max_body_bytes",
            "max_connections",
        ):
            if values.get(name) is not None:
                values[name] = int(values[name])
        for name in ("queue_timeout", "statement_timeout", "body_timeout"):
            if values.get(name) is not None:
                values[name] = float(values[name])
        if "insecure_no_token" in values:
            values["insecure_no_token"] = _truthy(values["insecure_no_token"])
        for name in ("retire_after", "retention"):
            if values.get(name) is not None:
                values[name] = parse_period(values[name])
        return cls(**values)


def add_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None) -> None:
    """Add the settings called `names` (all when None) as flags defaulting to their env vars."""
    for name, flag, env, default, help_text in _OPTIONS:
        if names is not None and name not in names:
            continue
        if name in _SWITCHES:
            parser.add_argument(
                flag, dest=name, action="store_true", default=_truthy(os.environ.get(env)), help=f"{help_text} [env {env}=1]"
            )
            continue
        parser.add_argument(
            flag,
            dest=name,
            default=os.environ.get(env, default),
            choices=_CHOICES.get(name),
            help=f"{help_text} [env {env}; default {default}]",
        )


def _truthy(value: object) -> bool:
    return value is True or str(value or "").strip().lower() in ("1", "true", "yes", "on")


def _secret(path: str | None, env: str) -> str | None:
    """A secret from the file at `path` (surrounding whitespace dropped), else from `env`."""
    if path:
        try:
            return Path(path).read_text().strip() or None
        except OSError as error:
            raise SecretUnreadable(f"cannot read the secret file {path}: {error.strerror}") from None
    return os.environ.get(env) or None


class SecretUnreadable(ValueError):
    """A secret file named in the settings cannot be read."""


def documented_options() -> list[tuple[str | None, str, str | None, str]]:
    """(flag, environment variable, default, help) of every setting; secrets have no flag."""
    options: list[tuple[str | None, str, str | None, str]] = [
        (flag, env, default, help_text) for _, flag, env, default, help_text in _OPTIONS
    ]
    return options + [(None, env, None, help_text) for env, help_text in _SECRET_ENVIRONMENT]
