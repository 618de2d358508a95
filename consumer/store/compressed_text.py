"""Raw events are stored compressed: a zstd frame (level 3, no dictionary) of the event's UTF-8
text. zstandard lives only in this module.

Chosen by bytes and CPU against PostgreSQL's own TOAST compression of the text (pglz, lz4),
SQLite's none, higher zstd levels and trained dictionaries (`python -m benchmarks.raw_events`,
figures in benchmarks/README.md). A compressed event is mostly below PostgreSQL's TOAST
threshold, so it is stored inline; a larger one may move out of line but is not compressed again."""

from __future__ import annotations

import threading

import zstandard

LEVEL = 3

_local = threading.local()  # zstd (de)compressors are not to be shared between threads


def compress(text: str) -> bytes:
    compressor = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstandard.ZstdCompressor(level=LEVEL)
    return compressor.compress(text.encode())


def decompress(data: bytes) -> str:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor.decompress(data).decode()
