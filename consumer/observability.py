"""What an operator watches: Prometheus metrics (prometheus-client lives only here), the state
readiness is judged on, and one-JSON-object-per-line logging.

One `Observability` per process, with its own registry: the ingest loop reports to it (it is an
`consumer.ingest.IngestMetrics`), the HTTP app counts requests in it and serves `/metrics`,
`/readyz` and `/healthz` from it."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from consumer.ingest.kafka_loop import SourceState, StoredBatch

BATCH_SIZE_BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
STORE_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Observability:
    """Metrics and ingestion state. `ingesting`: whether this process consumes Kafka (readiness
    then also reports the ingestion thread, the broker and the partitions assigned)."""

    def __init__(self, ingesting: bool = False) -> None:
        self.ingesting = ingesting
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._ingestion_running = False
        self._ingestion_error: str | None = None
        self._source = SourceState(broker_reachable=False)
        self._lag_labels: set[tuple[str, str]] = set()
        registry = self.registry
        self.events_stored = Counter("lineage_events_stored", "Events stored (new raw events)", registry=registry)
        self.dead_letters = Counter(
            "lineage_events_dead_lettered", "Records sent to the dead-letter topic", ["reason"], registry=registry
        )
        self.batch_size = Histogram(
            "lineage_store_batch_size", "Events per store transaction", buckets=BATCH_SIZE_BUCKETS, registry=registry
        )
        self.store_seconds = Histogram(
            "lineage_store_transaction_seconds",
            "Duration of one store transaction",
            buckets=STORE_SECONDS_BUCKETS,
            registry=registry,
        )
        self.lag = Gauge(
            "lineage_consumer_lag", "Records behind the partition's end offset", ["topic", "partition"], registry=registry
        )
        self.partitions = Gauge("lineage_partitions_assigned", "Partitions assigned to this member", registry=registry)
        self.broker_up = Gauge(
            "lineage_broker_reachable", "1 when the consumer group's coordinator answers, else 0", registry=registry
        )
        self.ingestion_up = Gauge("lineage_ingestion_running", "1 while the ingestion loop runs, else 0", registry=registry)
        self.ingestion_restarts = Counter(
            "lineage_ingestion_restarts", "Restarts of the ingestion loop after a failure", registry=registry
        )
        self.rows_pruned = Counter(
            "lineage_rows_pruned", "Rows retention removed, by table (--retention)", ["table"], registry=registry
        )
        self.http_requests = Counter(
            "lineage_http_requests",
            "HTTP requests by route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.http_seconds = Histogram("lineage_http_request_seconds", "HTTP request duration", ["route"], registry=registry)

    # --- the ingest loop (consumer.ingest.IngestMetrics) ---
    def batch_stored(self, batch: StoredBatch) -> None:
        self.events_stored.inc(batch.new_events)
        self.batch_size.observe(batch.events)
        self.store_seconds.observe(batch.seconds)

    def pruned(self, rows: Mapping[str, int]) -> None:
        for table, count in rows.items():
            self.rows_pruned.labels(table=table).inc(count)

    def dead_lettered(self, reason_class: str) -> None:
        self.dead_letters.labels(reason=reason_class).inc()

    def source_state(self, state: SourceState) -> None:
        with self._lock:
            self._source = state
            labels = {(topic, str(partition)) for topic, partition in state.assigned}
            for gone in self._lag_labels - labels:
                self.lag.remove(*gone)
            self._lag_labels = labels
        for (topic, partition), lag in state.lag.items():
            self.lag.labels(topic=topic, partition=str(partition)).set(lag)
        self.partitions.set(len(state.assigned))
        self.broker_up.set(1 if state.broker_reachable else 0)

    # --- the supervisor of the ingestion thread ---
    def ingestion_started(self) -> None:
        with self._lock:
            self._ingestion_running, self._ingestion_error = True, None
        self.ingestion_up.set(1)

    def ingestion_stopped(self, error: str | None, *, broker_unreachable: bool = False, refused: str | None = None) -> None:
        """`broker_unreachable`: the loop stopped (or could not start) because no broker answered;
        `refused`: because the broker answered and refused it (consumer.ingest.kafka_io.KafkaRefused's
        message); otherwise the broker is reported as the loop last saw it."""
        with self._lock:
            self._ingestion_running, self._ingestion_error = False, error
            reachable = refused is not None or (self._source.broker_reachable and not broker_unreachable)
            self._source = SourceState(broker_reachable=reachable, refused=refused)
        self.ingestion_up.set(0)
        self.partitions.set(0)
        self.broker_up.set(1 if reachable else 0)
        if error is not None:
            self.ingestion_restarts.inc()

    # --- the HTTP app ---
    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.http_requests.labels(method=method, route=route, status=str(status)).inc()
        self.http_seconds.labels(route=route).observe(seconds)

    def ingestion_checks(self) -> dict[str, Any]:
        """Readiness checks of the ingestion side (empty when not ingesting)."""
        if not self.ingesting:
            return {}
        with self._lock:
            running, error, source = self._ingestion_running, self._ingestion_error, self._source
        checks: dict[str, Any] = {
            "ingestion": _ingestion(running, error, source.refused),
            "broker": "reachable" if source.broker_reachable else "unreachable",
            "partitions": [f"{topic}[{partition}]" for topic, partition in source.assigned],
            "lag": sum(source.lag.values()) if source.lag else None,
        }
        checks["consuming"] = running and source.broker_reachable and bool(source.assigned) and source.refused is None
        return checks

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _ingestion(running: bool, error: str | None, refused: str | None) -> str:
    if refused is not None:
        return f"refused: {refused}"
    return "running" if running else f"down: {error}" if error else "down"


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and the exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(log_format: str = "text") -> None:
    """Root logging to stderr as `text` or `json`, replacing earlier handlers."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
