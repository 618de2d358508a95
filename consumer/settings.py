"""Every consumer setting, each with a command-line flag and an environment variable
(the flag wins). `add_arguments` puts them on an argparse parser; `Settings.from_args` reads
them back."""

from __future__ import annotations

import argparse
import os
from datetime import timedelta

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
    ("host", "--host", "LINEAGE_HOST", "0.0.0.0", "HTTP listen address"),
    ("port", "--port", "LINEAGE_PORT", "5000", "HTTP port (5000, as Marquez)"),
    (
        "web_dir",
        "--web-dir",
        "LINEAGE_WEB_DIR",
        None,
        "serve this built Marquez Web (its dist/ folder) at / beside the API (none: API only)",
    ),
    ("token", "--token", "LINEAGE_API_TOKEN", None, "bearer token required by the HTTP API (none: open)"),
    (
        "concurrent_requests",
        "--concurrent-requests",
        "LINEAGE_CONCURRENT_REQUESTS",
        None,
        "HTTP API requests computed at once, the others wait their turn (none: one per CPU; health checks never wait)",
    ),
    (
        "retire_after",
        "--retire-after",
        "LINEAGE_RETIRE_AFTER",
        None,
        "retire a finished job's table lineage when unseen this long (e.g. 30d, 12h, 90m; none: never)",
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

_CHOICES = {"log_format": ("text", "json"), "prepare_process": ("auto", "yes", "no")}

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
    topic: str = "openlineage.events"
    group: str = "lineage-consumer"
    dead_letter_topic: str = "openlineage.events.dlq"
    changes_topic: str | None = None
    host: str = "0.0.0.0"
    port: int = 5000
    token: str | None = None
    web_dir: str | None = None
    concurrent_requests: int | None = None
    retire_after: timedelta | None = None
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
        """The name consumer.api.create_app reads."""
        return self.token

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
        ):
            if values.get(name) is not None:
                values[name] = int(values[name])
        if values.get("retire_after") is not None:
            values["retire_after"] = parse_period(values["retire_after"])
        return cls(**values)


def add_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None) -> None:
    """Add the settings called `names` (all when None) as flags defaulting to their env vars."""
    for name, flag, env, default, help_text in _OPTIONS:
        if names is not None and name not in names:
            continue
        parser.add_argument(
            flag,
            dest=name,
            default=os.environ.get(env, default),
            choices=_CHOICES.get(name),
            help=f"{help_text} [env {env}; default {default}]",
        )


def documented_options() -> list[tuple[str, str, str | None, str]]:
    return [(flag, env, default, help_text) for _, flag, env, default, help_text in _OPTIONS]
