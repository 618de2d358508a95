"""Raw events are stored compressed: a zstd frame (level 3) of the event's UTF-8 text, with a
dictionary trained on the store's own events once it holds enough of them
(consumer.store.raw_dictionaries), else without. zstandard lives only in this module.

Chosen by bytes and CPU against PostgreSQL's own TOAST compression of the text (pglz, lz4),
SQLite's none, higher zstd levels and dictionaries of several sizes (`python -m benchmarks.raw_events`,
figures in benchmarks/README.md). A compressed event is mostly below PostgreSQL's TOAST
threshold, so it is stored inline; a larger one may move out of line but is not compressed again.

A frame names the dictionary it was made with in its header (0: none), so a reader needs no
column to find it: `decompress` asks for that dictionary by id."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs
import zstandard

LEVEL = 3
# 16, 32 and 64 KiB compress these events alike (benchmarks/README.md); 32 KiB leaves room for
# events more varied than the benchmark's.
DICTIONARY_BYTES = 32 * 1024
NO_DICTIONARY = 0  # the dictionary id of a frame made without one

T = TypeVar("T")

_local = threading.local()  # zstd (de)compressors are not to be shared between threads


@attrs.frozen
class Dictionary:
    """A trained zstd dictionary: the id its frames name in their header, and its bytes."""

    id: int
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")


class UnknownDictionary(LookupError):
    """A frame names a dictionary the reader was not given."""


def train(texts: Sequence[str], size: int = DICTIONARY_BYTES) -> Dictionary:
    """A dictionary of `size` bytes trained on `texts` (the same texts give the same dictionary and id).
    ValueError when zstd cannot train one from them (too few, or too small)."""
    try:
        trained = zstandard.train_dictionary(size, [text.encode() for text in texts])
    except zstandard.ZstdError as error:
        raise ValueError(f"cannot train a dictionary on {len(texts)} texts: {error}") from None
    return Dictionary(trained.dict_id(), trained.as_bytes())


def compress(text: str, dictionary: Dictionary | None = None) -> bytes:
    return _compressor(dictionary).compress(text.encode())


def dictionary_id(frame: bytes) -> int:
    """The id of the dictionary `frame` was compressed with; NO_DICTIONARY for none."""
    return int(zstandard.get_frame_parameters(frame).dict_id)


def decompress(frame: bytes, dictionaries: Callable[[int], Dictionary] | None = None) -> str:
    """The text of `frame`; `dictionaries(id)` gives the dictionary a frame names (UnknownDictionary
    when a frame names one and no lookup is given)."""
    wanted = dictionary_id(frame)
    if wanted == NO_DICTIONARY:
        return _decompressor(None).decompress(frame).decode()
    if dictionaries is None:
        raise UnknownDictionary(f"the frame was compressed with dictionary {wanted}, and no dictionaries were given")
    return _decompressor(dictionaries(wanted)).decompress(frame).decode()


# Facets (schema.CompressedJson) are small JSON objects whose bulk is the same few URLs and keys:
# a zstd frame of one alone keeps most of them, so frames are made with this built-in dictionary,
# the URLs of the OpenLineage facets a run and a dataset version carry and the keys of this
# project's own. A value is FACETS_V1 and the frame. The dictionary's text is part of the stored
# format: changing it needs a new version byte (tests/consumer/test_store_migrations.py pins it).
FACETS_V1 = b"\x01"
_FACET_NAMES = (
    "DatasetVersionDatasetFacet",
    "OutputStatisticsOutputDatasetFacet",
    "InputStatisticsInputDatasetFacet",
    "DataQualityMetricsInputDatasetFacet",
    "DataQualityAssertionsDatasetFacet",
    "ProcessingEngineRunFacet",
    "ParentRunFacet",
    "NominalTimeRunFacet",
    "ErrorMessageRunFacet",
    "TagsRunFacet",
    "ExtractionErrorRunFacet",
    "EnvironmentVariablesRunFacet",
)
_OWN_SCHEMAS = "https://raw.githubusercontent.com/spark-lineage/spark-lineage/main/schemas/1-0-0/"
FACETS_DICTIONARY = Dictionary(
    -1,  # not a zstd dictionary id (those are unsigned): the frames do not name it
    "".join(
        [
            *(f'"_schemaURL":"https://openlineage.io/spec/facets/1-0-1/{name}.json#/$defs/{name}"' for name in _FACET_NAMES),
            '"_producer":"https://github.com/OpenLineage/OpenLineage/tree/1.0.0/integration/spark"',
            '"_producer":"https://github.com/spark-lineage/spark-lineage/tree/main/emitter"',
            *(
                f'"_schemaURL":"{_OWN_SCHEMAS}{name}.json#/$defs/{name}"'
                for name in ("SnapshotDatasetFacet", "MicroBatchRunFacet", "SparkConnectSessionRunFacet")
            ),
            '{"snapshot":{"snapshotId":"","kind":"content","batchId":,"partitions":[]},"version":{"datasetVersion":""},'
            '"outputStatistics":{"rowCount":,"size":,"fileCount":}',
            '{"processing_engine":{"version":"","name":"spark","openlineageAdapterVersion":""},'
            '"spark_properties":{"properties":{"spark.master":"","spark.app.name":""}},'
            '"parent":{"run":{"runId":""},"job":{"namespace":"","name":""}},'
            '"nominalTime":{"nominalStartTime":"","nominalEndTime":""}}',
        ]
    ).encode(),
)


def compress_facets(text: str) -> bytes:
    """A facets value as stored: FACETS_V1, then the frame of `text` made with FACETS_DICTIONARY."""
    return FACETS_V1 + compress(text, FACETS_DICTIONARY)


def decompress_facets(value: bytes) -> str:
    """The text of a stored facets value: `compress_facets`'s, or JSON text written by something
    that bypassed the column's type (a bulk COPY)."""
    if value.startswith(FACETS_V1):
        return _decompressor(FACETS_DICTIONARY).decompress(value[len(FACETS_V1) :]).decode()
    return value.decode()


def _compressor(dictionary: Dictionary | None) -> zstandard.ZstdCompressor:
    return _cached("compressors", dictionary, lambda data: zstandard.ZstdCompressor(level=LEVEL, dict_data=data))


def _decompressor(dictionary: Dictionary | None) -> zstandard.ZstdDecompressor:
    return _cached("decompressors", dictionary, lambda data: zstandard.ZstdDecompressor(dict_data=data))


def _cached(kind: str, dictionary: Dictionary | None, make: Callable[[zstandard.ZstdCompressionDict | None], T]) -> T:
    """This thread's (de)compressor of `kind` for `dictionary`, made once per dictionary id (made
    again should another dictionary with that id come: ids are not unique by construction)."""
    cache: dict[int, tuple[bytes, T]] | None = getattr(_local, kind, None)
    if cache is None:
        cache = {}
        setattr(_local, kind, cache)
    key, data = (NO_DICTIONARY, b"") if dictionary is None else (dictionary.id, dictionary.data)
    cached = cache.get(key)
    if cached is None or (cached[0] is not data and cached[0] != data):
        made = make(None if dictionary is None else zstandard.ZstdCompressionDict(data))
        cache[key] = cached = (data, made)
    return cached[1]
