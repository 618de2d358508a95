"""Command line: serve, ingest, migrate, replay, delete-table-lineage, delete-data-lineage and
`lineage ...` (the read side's questions, consumer.query.cli). Entry points only parse input and
hand it on; a missing broker or database ends with one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from typing import Callable, Sequence, TextIO

from consumer.settings import Settings, add_arguments

EXIT_UNAVAILABLE = 2

_STORE = ("store_url",)
_KAFKA = ("bootstrap_servers", "topic", "group", "dead_letter_topic", "batch_size", "session_timeout_ms",
          "max_poll_interval_ms", "retire_after")
_HTTP = ("host", "port", "token")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineage-consumer",
        description="Materialize OpenLineage events from Kafka (or HTTP) into table, column and data lineage stores and serve them.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run: Callable[[argparse.Namespace], int], help_text: str, settings: tuple[str, ...]) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        add_arguments(sub, settings)
        sub.set_defaults(run=run)
        return sub

    command("serve", _serve, "ingest from Kafka and serve the HTTP API (Marquez-compatible) in one process", _STORE + _KAFKA + _HTTP)
    command("ingest", _ingest, "ingest from Kafka only", _STORE + _KAFKA)
    command("migrate", _migrate, "apply pending schema migrations to the store", _STORE)
    command("replay", _replay, "rebuild every derived store from the stored raw events, in event-time order", _STORE)
    for name, help_text in (
        ("delete-table-lineage", "forget which datasets a job read and wrote, and its column lineage"),
        ("delete-data-lineage", "forget the snapshots a job's runs consumed and produced"),
    ):
        sub = command(name, _delete, help_text, _STORE)
        sub.add_argument("--job", required=True, help="job name")
        sub.add_argument("--namespace", help="job namespace (default: every namespace)")
    # Listed for --help only: main() hands `lineage ...` to consumer.query.cli before parsing.
    commands.add_parser("lineage", help="ask the lineage stores (`lineage --help` lists the questions); takes --store too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # kafka-python logs every reconnect attempt; our own lines say what matters.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    argv = list(sys.argv[1:] if argv is None else argv)
    from consumer.kafka_io import BrokerUnavailable
    from consumer.store import StoreUnavailable

    try:
        if argv[:1] == ["lineage"]:
            return _lineage(argv[1:])
        args = _parser().parse_args(argv)
        return args.run(args)
    except (StoreUnavailable, BrokerUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from consumer.store import open_store

    return open_store(Settings.from_args(args).store_url)


def _migrate(args: argparse.Namespace) -> int:
    from consumer.store import open_store
    from consumer.store.migrations import LATEST_VERSION

    store = open_store(Settings.from_args(args).store_url, migrate=False)
    applied = store.migrate()
    print(f"schema at version {LATEST_VERSION}" + (f" (applied {', '.join(map(str, applied))})" if applied else " (nothing to apply)"))
    return 0


def _delete(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.command == "delete-table-lineage":
        removed = store.delete_table_lineage(args.job, args.namespace)
    else:
        removed = store.delete_data_lineage(args.job, args.namespace)
    print(json.dumps({"job": args.job, "namespace": args.namespace, "removedRows": removed}))
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
    from consumer.events import InvalidEvent
    from consumer.ingest import prepare

    err = err or sys.stderr
    store = _store(args)
    total = store.raw_event_count()
    saved_tags = store.clear_derived()
    done = skipped = 0
    for chunk in store.raw_payloads():
        prepared = []
        for payload in chunk:
            try:
                prepared.append(prepare(payload))
            except InvalidEvent:
                skipped += 1  # stored under older rules; kept raw, not derived
        store.rebuild(prepared)
        done += len(chunk)
        _progress(err, done, total)
    store.restore_tags(saved_tags)
    err.write("\n")
    print(f"replayed {done} events" + (f" ({skipped} no longer valid, kept raw only)" if skipped else ""))
    return 0


def _progress(err: TextIO, done: int, total: int, width: int = 40) -> None:
    filled = width * done // total if total else width
    percent = 100 * done // total if total else 100
    err.write(f"\rreplay [{'#' * filled}{' ' * (width - filled)}] {percent:3d}% {done}/{total}")
    err.flush()


def _ingestor(settings: Settings):  # type: ignore[no-untyped-def]
    from consumer.ingest import Ingestor
    from consumer.kafka_io import DeadLetters, EventSource
    from consumer.store import open_store

    store = open_store(settings.store_url)
    source = EventSource(settings.bootstrap_servers, settings.topic, settings.group, max_records=settings.batch_size,
                         session_timeout_ms=settings.session_timeout_ms, max_poll_interval_ms=settings.max_poll_interval_ms)
    dead_letters = DeadLetters(settings.bootstrap_servers, settings.dead_letter_topic)
    return store, source, dead_letters, Ingestor(store, source, dead_letters, retire_after=settings.retire_after)


def _ingest(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    _, source, dead_letters, ingestor = _ingestor(settings)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    logging.getLogger(__name__).info("ingesting %s from %s into %s", settings.topic, settings.bootstrap_servers, settings.store_url)
    try:
        stats = ingestor.run(stop.is_set)
    finally:
        source.close()
        dead_letters.close()
    logging.getLogger(__name__).info("stopped: %s", stats)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from consumer.api import create_app

    settings = Settings.from_args(args)
    store, source, dead_letters, ingestor = _ingestor(settings)
    stop = threading.Event()
    failure: list[BaseException] = []

    def ingest_until_stopped() -> None:
        try:
            ingestor.run(stop.is_set)
        except BaseException as error:  # reported by the main thread
            failure.append(error)
        finally:
            source.close()
            dead_letters.close()

    worker = threading.Thread(target=ingest_until_stopped, name="ingest", daemon=True)
    worker.start()
    try:
        uvicorn.run(create_app(store, settings), host=settings.host, port=settings.port, log_level="info")
    finally:
        stop.set()
        worker.join(timeout=30)
    if failure:
        print(f"error: ingestion stopped: {failure[0]}", file=sys.stderr)
        return 1
    return 0
