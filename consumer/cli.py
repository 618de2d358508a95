"""Command line: serve, ingest, migrate, create-topics, replay, prune, compact-events, delete-table-lineage, delete-data-lineage and
`lineage ...` (the read side's questions, consumer.query.cli). Entry points only parse input and
hand it on; a missing broker or database ends with one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from consumer.settings import Settings, add_arguments, parse_period

EXIT_UNAVAILABLE = 2

_STORE = ("store_url",)
_KAFKA_CLIENT = (
    "bootstrap_servers",
    "kafka_security_protocol",
    "kafka_sasl_mechanism",
    "kafka_sasl_username",
    "kafka_sasl_password_file",
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
    "kafka_ssl_key_password_file",
    "kafka_config",
)
_KAFKA = _KAFKA_CLIENT + (
    "topic",
    "group",
    "dead_letter_topic",
    "changes_topic",
    "batch_size",
    "session_timeout_ms",
    "max_poll_interval_ms",
    "retire_after",
    "retention",
    "max_event_bytes",
    "log_format",
    "prepare_process",
)
_HTTP = (
    "role",
    "host",
    "port",
    "token_file",
    "read_token_file",
    "insecure_no_token",
    "ssl_certfile",
    "ssl_keyfile",
    "max_event_bytes",
    "web_dir",
    "concurrent_requests",
    "queued_requests",
    "queue_timeout",
    "statement_timeout",
    "max_body_bytes",
    "body_timeout",
    "max_connections",
)
# Restarts of serve's ingestion thread after a failure: doubling pauses, reset after a long run.
RESTART_BACKOFF_SECONDS = (1.0, 60.0)
RESTART_RESET_AFTER_SECONDS = 300.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineage-consumer",
        description="Materialize OpenLineage events from Kafka (or HTTP) into table, column and data lineage stores and serve them.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, run: Callable[[argparse.Namespace], int], help_text: str, settings: tuple[str, ...]
    ) -> argparse.ArgumentParser:
        # no abbreviations: `--token SECRET` must be refused, not taken as `--token-file SECRET`
        sub = commands.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        add_arguments(sub, settings)
        sub.set_defaults(run=run)
        return sub

    command(
        "serve",
        _serve,
        "serve the HTTP API (Marquez-compatible) and, by --role, ingest from Kafka and over HTTP, over HTTP only, or nothing (a read-only replica)",
        _STORE + _KAFKA + _HTTP,
    )
    command("ingest", _ingest, "ingest from Kafka only", _STORE + _KAFKA)
    command("migrate", _migrate, "apply pending schema migrations to the store", _STORE)
    replay = command(
        "replay",
        _replay,
        "rebuild every derived store from the stored raw events, in event-time order (after a prune: those that stayed)",
        _STORE + _KAFKA_CLIENT + ("changes_topic", "prepare_process"),
    )
    replay.add_argument(
        "--republish-changes",
        action="store_true",
        help="afterwards publish the whole rebuilt lineage to the changes topic (a replay publishes nothing otherwise)",
    )
    prune = command(
        "prune",
        _prune,
        "remove raw events, runs and the history they made older than --older-than, in short transactions; never the current lineage",
        _STORE,
    )
    prune.add_argument("--older-than", required=True, type=parse_period, help="the horizon: a period like 30d, 12h, 90m")
    command(
        "compact-events",
        _compact_events,
        "rewrite the stored raw events with the store's newest compression dictionary (trained first if the store holds enough events)",
        _STORE,
    )
    for name, help_text in (
        ("delete-table-lineage", "forget which datasets a job read and wrote, and its column lineage"),
        ("delete-data-lineage", "forget the snapshots (and partitions) a job's runs consumed and produced"),
    ):
        sub = command(name, _delete, help_text, _STORE)
        sub.add_argument("--job", required=True, help="job name")
        sub.add_argument("--namespace", help="job namespace (default: every namespace)")
    topics = command(
        "create-topics",
        _create_topics,
        "create the events and dead-letter topics, and the changes topic when one is set (compacted); existing topics are left as they are",
        _KAFKA_CLIENT + ("topic", "dead_letter_topic", "changes_topic"),
    )
    topics.add_argument(
        "--partitions", type=int, default=6, help="partitions of each topic (at least the consumers of the group) [default 6]"
    )
    topics.add_argument("--replication-factor", type=int, default=1, help="copies of each partition [default 1]")
    # Listed for --help only: main() hands `lineage ...` to consumer.query.cli before parsing.
    commands.add_parser("lineage", help="ask the lineage stores (`lineage --help` lists the questions); takes --store too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # kafka-python logs every reconnect attempt; our own lines say what matters.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per migration step otherwise
    argv = list(sys.argv[1:] if argv is None else argv)
    from consumer.ingest.kafka_io import BrokerUnavailable
    from consumer.ingest.kafka_security import KafkaSettingsError
    from consumer.settings import SecretUnreadable
    from consumer.store import StoreUnavailable

    try:
        if argv[:1] == ["lineage"]:
            return _lineage(argv[1:])
        args = _parser().parse_args(argv)
        from consumer.ingest.prepare import tune_garbage_collector

        tune_garbage_collector()
        if getattr(args, "log_format", None):
            from consumer.observability import configure_logging

            configure_logging(args.log_format)
        return args.run(args)
    except (StoreUnavailable, BrokerUnavailable, KafkaSettingsError, SecretUnreadable, UnsafeSetup) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


class UnsafeSetup(ValueError):
    """serve's settings would expose writes to anyone, or its token is a placeholder."""


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from consumer.store import open_store

    return open_store(Settings.from_args(args).store_url)


def _migrate(args: argparse.Namespace) -> int:
    from consumer.store import open_store
    from consumer.store.migrations import head_revision

    store = open_store(Settings.from_args(args).store_url, migrate=False, claim_writer=True)
    applied = store.migrate()
    print(
        f"schema at revision {head_revision()}"
        + (f" (applied {', '.join(map(str, applied))})" if applied else " (nothing to apply)")
    )
    return 0


def _create_topics(args: argparse.Namespace) -> int:
    from consumer.ingest.kafka_io import TopicSpec, create_topics

    settings = Settings.from_args(args)
    topics = [TopicSpec(settings.topic, args.partitions), TopicSpec(settings.dead_letter_topic, args.partitions)]
    if settings.changes_topic:
        topics.append(TopicSpec(settings.changes_topic, args.partitions, compacted=True))
    for line in create_topics(settings.bootstrap_servers, topics, args.replication_factor, security=_kafka_security(settings)):
        print(line)
    return 0


def _delete(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.command == "delete-table-lineage":
        removed = store.delete_table_lineage(args.job, args.namespace)
    else:
        removed = store.delete_data_lineage(args.job, args.namespace)
    print(json.dumps({"job": args.job, "namespace": args.namespace, "removedRows": removed}))
    return 0


def _prune(args: argparse.Namespace) -> int:
    """Retention once, to the end; on SQLite the store's one writer meanwhile (stop serve/ingest, or
    give them --retention instead)."""
    from datetime import datetime, timezone

    from consumer.ingest.store_writes import StoreWrites
    from consumer.store import open_store

    store = open_store(Settings.from_args(args).store_url, claim_writer=True)
    now = datetime.now(timezone.utc)
    started = time.monotonic()
    try:
        pruned = StoreWrites(store).prune(args.older_than, now)
    finally:
        store.dispose()
    print(
        json.dumps(
            {
                "horizon": (now - args.older_than).isoformat(),
                "removedRows": pruned.rows,
                "seconds": round(time.monotonic() - started, 3),
            }
        )
    )
    return 0


def _compact_events(args: argparse.Namespace) -> int:
    """Shrink a store whose raw events were stored before it had a dictionary (or with an older one);
    on SQLite the store's one writer meanwhile, as `prune`."""
    from consumer.store import open_store

    store = open_store(Settings.from_args(args).store_url, claim_writer=True)
    started = time.monotonic()
    try:
        dictionary, done = store.recompress_raw_events()
    finally:
        store.dispose()
    if dictionary is None:
        print("error: the store has no raw event dictionary yet: it trains one once it holds enough events", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "dictionary": dictionary.id,
                "rewrittenEvents": done.events,
                "bytesBefore": done.bytes_before,
                "bytesAfter": done.bytes_after,
                "seconds": round(time.monotonic() - started, 3),
            }
        )
    )
    return 0


def _lineage(argv: list[str]) -> int:
    """`--store` may stand anywhere; everything else belongs to consumer.query.cli."""
    from consumer.query.cli import main as query_main

    store_parser = argparse.ArgumentParser(add_help=False)
    add_arguments(store_parser, _STORE)
    store_args, query_argv = store_parser.parse_known_args(argv)
    if not query_argv or {"-h", "--help"} & set(query_argv):
        return query_main(query_argv or ["--help"], None)
    return query_main(query_argv, _store(store_args))


def _replay(args: argparse.Namespace, err: TextIO | None = None) -> int:
    import time
    from concurrent.futures import Future, ThreadPoolExecutor

    from consumer.ingest.fold import fold
    from consumer.ingest.prepare import Preparer
    from consumer.store import open_store

    err = err or sys.stderr
    store = open_store(Settings.from_args(args).store_url, claim_writer=True)  # before any migration
    total = store.raw_event_count()
    saved_tags = store.clear_derived()
    done = skipped = 0
    started = time.monotonic()

    def stored(chunk_stored: Future[None], chunk_size: int) -> None:
        nonlocal done
        chunk_stored.result()
        done += chunk_size
        _progress(err, done, total, done / max(time.monotonic() - started, 1e-9))

    # Pipelined as ingestion is: the next chunk is prepared (in a worker process) while the last one is being stored.
    preparer = Preparer(None, in_worker=Settings.from_args(args).prepare_in_worker, by_hash=False)
    in_flight: tuple[Future[None], int] | None = None
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-store") as store_thread:
            for chunk in store.raw_payloads():
                preparing = preparer.submit(chunk)
                if in_flight is not None:
                    stored(*in_flight)
                prepared = preparing()
                skipped += len(prepared.refused)  # stored under older rules; kept raw, not derived
                # A batch that could not be folded is folded again here, which raises what went wrong.
                batch = prepared.folded if prepared.folded is not None else fold(prepared.events or [], by_hash=False)
                in_flight = (store_thread.submit(store.rebuild, batch), len(chunk))
            if in_flight is not None:
                stored(*in_flight)
    finally:
        preparer.close()
    store.restore_tags(saved_tags)
    err.write("\n")
    rate = done / max(time.monotonic() - started, 1e-9)
    print(f"replayed {done} events ({rate:.0f} events/s)" + (f" ({skipped} no longer valid, kept raw only)" if skipped else ""))
    if args.republish_changes:
        _republish_changes(Settings.from_args(args), store)
    return 0


def _republish_changes(settings: Settings, store) -> None:  # type: ignore[no-untyped-def]
    from consumer.ingest.change_publishing import ChangePublisher
    from consumer.ingest.kafka_io import ChangeMessages

    if not settings.changes_topic:
        raise SystemExit("error: --republish-changes needs --changes-topic (or LINEAGE_CHANGES_TOPIC)")
    sink = ChangeMessages(settings.bootstrap_servers, settings.changes_topic, security=_kafka_security(settings))
    try:
        published = ChangePublisher(store, sink).publish_everything()
    finally:
        sink.close()
    print(f"published {published} lineage changes to {settings.changes_topic}")


def _progress(err: TextIO, done: int, total: int, rate: float, width: int = 40) -> None:
    filled = width * done // total if total else width
    percent = 100 * done // total if total else 100
    err.write(f"\rreplay [{'#' * filled}{' ' * (width - filled)}] {percent:3d}% {done}/{total} {rate:.0f} events/s")
    err.flush()


def _kafka_security(settings: Settings) -> dict[str, Any]:
    """The protocol, SASL and TLS settings every Kafka client of the consumer uses."""
    from consumer.ingest.kafka_security import client_security

    return client_security(settings)


def _connect(settings: Settings, store, observability=None):  # type: ignore[no-untyped-def]
    """A Kafka ingestion loop on `store` (consumer.ingest.store_writes.StoreWrites): the composition
    root of the write side. Whatever must accompany each store transaction is one of its hooks."""
    from consumer.ingest.kafka_io import DeadLetters, EventSource
    from consumer.ingest.kafka_loop import Ingestor
    from consumer.ingest.prepare import Preparer

    source = EventSource(
        settings.bootstrap_servers,
        settings.topic,
        settings.group,
        max_records=settings.batch_size,
        session_timeout_ms=settings.session_timeout_ms,
        max_poll_interval_ms=settings.max_poll_interval_ms,
        max_event_bytes=settings.max_event_bytes,
        security=_kafka_security(settings),
    )
    try:
        dead_letters = DeadLetters(settings.bootstrap_servers, settings.dead_letter_topic, security=_kafka_security(settings))
    except BaseException:
        source.close()
        raise
    return Ingestor(
        store,
        source,
        dead_letters,
        retire_after=settings.retire_after,
        retention=settings.retention,
        max_event_bytes=settings.max_event_bytes,
        metrics=observability,
        preparer=Preparer(settings.max_event_bytes, in_worker=settings.prepare_in_worker),
    )


def _write_store(settings: Settings):  # type: ignore[no-untyped-def]
    """The writes ingestion makes to the store, claimed as SQLite's one writer before any migration
    runs (or one clear line and exit status 2). With --changes-topic, each transaction records what
    it changed in the store's change outbox, and a publisher sends the outbox to the topic, starting
    with what an earlier process left there (consumer.ingest.change_publishing)."""
    from consumer.ingest.store_writes import StoreWrites
    from consumer.store import open_store

    store = open_store(settings.store_url, claim_writer=True)
    if not settings.changes_topic:
        return StoreWrites(store)
    from consumer.ingest.change_publishing import ChangePublisher
    from consumer.ingest.kafka_io import ChangeMessages

    sink = ChangeMessages(settings.bootstrap_servers, settings.changes_topic, security=_kafka_security(settings))
    publisher = ChangePublisher(store, sink)
    publisher.start()
    return StoreWrites(store, [publisher])


def _disconnect(ingestor) -> None:  # type: ignore[no-untyped-def]
    try:
        ingestor.close()
    finally:
        ingestor.source.close()
        ingestor.dead_letters.close()


def _ingest(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    ingestor = _connect(settings, _write_store(settings))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    from consumer.store import redacted_url

    logging.getLogger(__name__).info(
        "ingesting %s from %s into %s", settings.topic, settings.bootstrap_servers, redacted_url(settings.store_url)
    )
    try:
        stats = ingestor.run(stop.is_set)
    finally:
        _disconnect(ingestor)
    logging.getLogger(__name__).info("stopped: %s", stats)
    return 0


def _supervise(first, settings: Settings, store, observability, stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    """serve's ingestion thread: run the loop; when it fails, log it, report it (not ready) and
    start a new one after a pause, until `stop`."""
    from consumer.ingest.kafka_io import BrokerUnavailable, KafkaRefused

    log = logging.getLogger(__name__)
    ingestor, pause = first, RESTART_BACKOFF_SECONDS[0]
    while not stop.is_set():
        started = time.monotonic()
        error: str | None = None
        broker_unreachable = False
        refused: str | None = None
        try:
            if ingestor is None:
                ingestor = _connect(settings, store, observability)
            observability.ingestion_started()
            ingestor.run(stop.is_set)
        except KafkaRefused as refusal:  # its message names the cause, nothing secret: no traceback needed
            error, refused = type(refusal).__name__, str(refusal)
            log.error("ingestion stopped: %s; restarting it in %.0f s", refusal, pause)
        except Exception as failure:
            error = type(failure).__name__  # readiness shows this; the message (hosts...) goes to the log only
            broker_unreachable = isinstance(failure, BrokerUnavailable)
            log.exception("ingestion stopped; restarting it in %.0f s", pause)
        finally:
            if ingestor is not None:
                _disconnect_quietly(ingestor)
            ingestor = None
            observability.ingestion_stopped(error, broker_unreachable=broker_unreachable, refused=refused)
        if time.monotonic() - started > RESTART_RESET_AFTER_SECONDS:
            pause = RESTART_BACKOFF_SECONDS[0]
        stop.wait(pause)
        pause = min(pause * 2, RESTART_BACKOFF_SECONDS[1])


def _retain(writes, retention, observability, stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    """serve --role http's retention (the Kafka loop prunes otherwise): at start and every minute, a
    second of pruning at a time, through the one writer as HTTP ingestion, until `stop`."""
    from consumer.ingest.kafka_loop import PRUNE_STEP_SECONDS

    log = logging.getLogger(__name__)
    resume_at = None
    while True:
        try:
            pruned = writes.prune(retention, budget_seconds=PRUNE_STEP_SECONDS, resume_at=resume_at)
        except Exception:
            log.exception("retention failed; trying again in a minute")
            resume_at = None
        else:
            resume_at = pruned.resume_at
            observability.pruned(pruned.rows)
            if pruned.total:
                log.info("retention removed %d rows older than %s", pruned.total, retention)
        if stop.wait(0.1 if resume_at is not None else 60.0):
            return


def _disconnect_quietly(ingestor) -> None:  # type: ignore[no-untyped-def]
    try:
        _disconnect(ingestor)
    except Exception:
        logging.getLogger(__name__).exception("closing the failed ingestion loop")


def _serve(args: argparse.Namespace) -> int:
    """The API, and by role: Kafka and HTTP ingestion (`kafka`, the ingestion loop restarted on
    failure and reported by /readyz, never a reason to stop serving), HTTP ingestion alone
    (`http`: no broker) or nothing (`api`: a read-only replica that neither migrates nor writes)."""
    import uvicorn

    from consumer.api import create_app
    from consumer.observability import Observability

    settings = Settings.from_args(args)
    _check_exposure(settings)
    ingests_kafka = settings.role == "kafka"
    if settings.role == "api":
        from consumer.store import open_store

        store = open_store(settings.store_url, migrate=False)
    else:
        store = _write_store(settings)
    observability = Observability(ingesting=ingests_kafka)
    app = create_app(store, settings, observability)
    stop = threading.Event()
    worker = None
    if ingests_kafka:
        worker = threading.Thread(
            target=_supervise, args=(None, settings, store, observability, stop), name="ingest", daemon=True
        )
        worker.start()
    elif settings.role == "http" and settings.retention is not None:
        worker = threading.Thread(
            target=_retain, args=(store, settings.retention, observability, stop), name="retention", daemon=True
        )
        worker.start()
    logging.getLogger(__name__).info(
        "serving the API on %s://%s:%d as role %s",
        "https" if settings.ssl_certfile else "http",
        settings.host,
        settings.port,
        settings.role,
    )
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            ssl_certfile=settings.ssl_certfile,
            ssl_keyfile=settings.ssl_keyfile,
            limit_concurrency=settings.max_connections,
            log_level="info",
            log_config=None,  # our handlers (text or JSON)
            timeout_graceful_shutdown=10,
        )
    finally:
        stop.set()
        if worker is not None:
            worker.join(timeout=30)
    return 0


def _check_exposure(settings: Settings) -> None:
    """Refuse a placeholder token, and writes open to anyone beyond this machine unless asked for."""
    import ipaddress

    from consumer.api import tokens_of
    from consumer.api.auth import TokenRefused

    try:
        tokens = tokens_of(settings)
    except TokenRefused as refused:
        raise UnsafeSetup(str(refused)) from None
    if bool(settings.ssl_certfile) != bool(settings.ssl_keyfile):
        raise UnsafeSetup("--ssl-certfile and --ssl-keyfile go together")
    if tokens.write or settings.role == "api" or settings.insecure_no_token:
        return
    try:
        loopback = settings.host == "localhost" or ipaddress.ip_address(settings.host).is_loopback
    except ValueError:  # a host name: may resolve anywhere
        loopback = False
    if not loopback:
        raise UnsafeSetup(
            f"--host {settings.host} without a write token would let anyone who reaches the port write and delete lineage: "
            "set LINEAGE_API_TOKEN or --token-file, serve on 127.0.0.1, or pass --insecure-no-token"
        )
