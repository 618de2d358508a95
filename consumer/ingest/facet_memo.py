"""What preparing already derived from a dataset's schema and column-lineage facets, by their JSON.

A scheduled job's runs repeat the same schemas and column lineage, with new run ids, times and
snapshots around them. With a memo, preparing checks such a facet (consumer.ingest.validate) and
turns it into field rows and column edges (consumer.ingest.materialize) once per distinct content,
not once per event; events that repeat one then also share the same row objects, which the fold
compares and pickling writes once.

A memo belongs to one preparing process (a Preparer, or its worker) and holds at most `capacity`
results, the least recently used going first. Only successes are kept: a facet that fails its
check is checked, and refused, every time. What a memo returns is what checking and deriving
again would give: results are keyed by the facet's JSON (and by whatever else the derivation
reads, e.g. the output dataset of an edge), and a facet that cannot be encoded is not memoized.
Events that may hold NaN or infinities (not JSON, but accepted as Python's `json` does) are
prepared without a memo: their JSON key would not tell NaN from null.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from consumer import json_codec

T = TypeVar("T")

DEFAULT_CAPACITY = 4096
# Encodings of the facets of the event being prepared, by object: a facet is checked and then
# derived from, so it is encoded once. Each entry holds its facet, so its id cannot be reused.
_ENCODED_OBJECTS = 64


class FacetMemo:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._results: OrderedDict[Hashable, Any] = OrderedDict()
        self._encoded: dict[int, tuple[Any, bytes | None]] = {}
        self.hits = 0
        self.misses = 0

    def checked(self, kind: str, facet: Any, check: Callable[[], None]) -> None:
        """Run `check` (which raises when `facet` is invalid) unless this content passed it before."""
        self.derived(("checked", kind), facet, functools.partial(_passed, check))

    def derived(self, scope: Hashable, facet: Any, derive: Callable[[], T]) -> T:
        """`derive()`, or what it returned for a facet of the same JSON in the same `scope`."""
        encoded = self._encoding(facet)
        if encoded is None:
            return derive()
        key = (scope, encoded)
        results = self._results
        if key in results:
            results.move_to_end(key)
            self.hits += 1
            value: T = results[key]
            return value
        self.misses += 1
        value = derive()
        results[key] = value
        if len(results) > self.capacity:
            results.popitem(last=False)
        return value

    def _encoding(self, facet: Any) -> bytes | None:
        known = self._encoded.get(id(facet))
        if known is not None and known[0] is facet:
            return known[1]
        encoded = json_codec.content_key(facet)
        if len(self._encoded) >= _ENCODED_OBJECTS:
            self._encoded.clear()
        self._encoded[id(facet)] = (facet, encoded)
        return encoded


def _passed(check: Callable[[], None]) -> bool:
    check()
    return True
