"""Bytes and CPU of storing raw events compressed: zstd (levels 3 and 9, with and without a
dictionary trained on earlier events) against PostgreSQL's TOAST compression of the text
(pglz, lz4), on the ingest benchmark's events (both workloads).

    .venv/bin/python -m benchmarks.raw_events [--events 6000] [--postgres URL]

The first third of the events trains the dictionaries; the rest are measured: bytes per event,
and CPU microseconds per event to compress and to decompress (zstd, this process), or to insert
and read back (PostgreSQL, wall clock of the client, server work included)."""

from __future__ import annotations

import argparse
import json
import time
import uuid

import zstandard
from sqlalchemy import create_engine, text

from benchmarks.ingest import WORKLOADS


def zstd_figures(train: list[bytes], test: list[bytes], level: int, dictionary_size: int | None) -> tuple[float, float, float]:
    dictionary = (
        zstandard.train_dictionary(dictionary_size, list[bytes | bytearray | memoryview](train)) if dictionary_size else None
    )
    compressor = zstandard.ZstdCompressor(level=level, dict_data=dictionary)
    decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
    started = time.process_time()
    frames = [compressor.compress(payload) for payload in test]
    compressed = time.process_time()
    for frame in frames:
        decompressor.decompress(frame)
    done = time.process_time()
    per_event = 1e6 / len(test)
    return sum(map(len, frames)) / len(test), (compressed - started) * per_event, (done - compressed) * per_event


def toast_figures(admin_url: str, test: list[bytes], method: str) -> tuple[float, float, float]:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"raw_events_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine = create_engine(admin_url.rsplit("/", 1)[0] + f"/{name}")
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE TABLE raw (id serial PRIMARY KEY, payload text COMPRESSION {method})"))
            started = time.perf_counter()
            connection.execute(text("INSERT INTO raw (payload) VALUES (:payload)"), [{"payload": p.decode()} for p in test])
            inserted = time.perf_counter()
        with engine.connect() as connection:
            size = connection.execute(text("SELECT pg_total_relation_size('raw')")).scalar_one()
            read_from = time.perf_counter()
            connection.execute(text("SELECT payload FROM raw")).all()
            read = time.perf_counter()
        per_event = 1e6 / len(test)
        return size / len(test), (inserted - started) * per_event, (read - read_from) * per_event
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    for workload, events in WORKLOADS.items():
        payloads = [json.dumps(event).encode() for event in events(args.events // 2)]
        train, test = payloads[: len(payloads) // 3], payloads[len(payloads) // 3 :]
        print(f"workload {workload}: {sum(map(len, test)) / len(test):.0f} B of JSON per event")
        for level in (3, 9):
            for dictionary_size in (None, 32 * 1024):
                size, compress_us, decompress_us = zstd_figures(train, test, level, dictionary_size)
                how = f"dictionary {dictionary_size // 1024} KiB" if dictionary_size else "no dictionary"
                print(
                    f"  zstd {level} {how:<18} {size:7.0f} B/event   compress {compress_us:6.1f} us   decompress {decompress_us:5.1f} us"
                )
        for method in ("pglz", "lz4"):
            size, insert_us, read_us = toast_figures(args.postgres, test, method)
            print(f"  PostgreSQL TOAST {method:<13} {size:7.0f} B/event   insert {insert_us:6.1f} us   read {read_us:5.1f} us")


if __name__ == "__main__":
    main()
