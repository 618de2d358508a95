"""Pure figures of a benchmark run: column-lineage coverage from emitted events, timing statistics.

Coverage rule (what "column lineage for every output column" means here): the output columns
are the fields of the output dataset's `schema` facet; a column has lineage when the output's
`columnLineage` facet lists input fields for it. The events alone cannot tell a source-less
column (`'store' AS channel`, `count(*)`) from one whose inputs were lost: the facet omits both
(or, in older emitter versions, gave both an empty `inputFields`). The report therefore asks the
engine itself about the columns without inputs (see `engine_check`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

TERMINAL_EVENT_TYPES = frozenset({"COMPLETE", "FAIL"})


@attrs.frozen
class Coverage:
    statement: str
    output_columns: tuple[str, ...]
    with_inputs: tuple[str, ...]  # facet entry with at least one input field
    event_type: str

    @property
    def without_inputs(self) -> tuple[str, ...]:
        return tuple(column for column in self.output_columns if column not in self.with_inputs)

    @property
    def complete_strict(self) -> bool:
        return bool(self.output_columns) and not self.without_inputs


@attrs.frozen
class Distribution:
    count: int
    total: float
    median: float
    p95: float
    maximum: float


def read_events(path: Path) -> list[dict[str, Any]]:
    """One JSON event per line (openlineage-python's file transport with append=true)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def statement_of(dataset: Mapping[str, Any], statement_names: Iterable[str]) -> str | None:
    """Which CTAS wrote `dataset`: by its catalog symlink `bench.qNN`, else by the path's last part."""
    names = {name.lower(): name for name in statement_names}
    symlinks = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    candidates = [identifier.get("name", "") for identifier in symlinks]
    candidates.append(str(dataset.get("name", "")).rstrip("/"))
    for candidate in candidates:
        last_part = candidate.replace("/", ".").rsplit(".", 1)[-1].lower()
        if last_part in names:
            return names[last_part]
    return None


def coverage_by_statement(events: Sequence[Mapping[str, Any]], statement_names: Sequence[str]) -> dict[str, Coverage]:
    """The coverage of each statement, read from its run's terminal event (the last one wins)."""
    found: dict[str, Coverage] = {}
    for event in events:
        if event.get("eventType") not in TERMINAL_EVENT_TYPES:
            continue
        for output in event.get("outputs", []):
            statement = statement_of(output, statement_names)
            if statement is not None:
                found[statement] = _coverage(statement, output, event["eventType"])
    return found


def _coverage(statement: str, output: Mapping[str, Any], event_type: str) -> Coverage:
    facets = output.get("facets", {})
    schema_fields = facets.get("schema", {}).get("fields", [])
    lineage_fields = facets.get("columnLineage", {}).get("fields", {})
    with_inputs = tuple(name for name, entry in lineage_fields.items() if entry.get("inputFields"))
    return Coverage(
        statement=statement,
        output_columns=tuple(field["name"] for field in schema_fields),
        with_inputs=with_inputs,
        event_type=event_type,
    )


def distribution(values: Sequence[float]) -> Distribution:
    ordered = sorted(values)
    if not ordered:
        return Distribution(0, 0.0, math.nan, math.nan, math.nan)
    return Distribution(
        count=len(ordered),
        total=sum(ordered),
        median=percentile(ordered, 50),
        p95=percentile(ordered, 95),
        maximum=ordered[-1],
    )


def percentile(ordered: Sequence[float], rank: float) -> float:
    """Nearest-rank percentile of already sorted values (p50 of an even count: the mean of the two)."""
    if rank == 50 and len(ordered) % 2 == 0:
        middle = len(ordered) // 2
        return (ordered[middle - 1] + ordered[middle]) / 2
    index = max(0, math.ceil(rank / 100 * len(ordered)) - 1)
    return ordered[index]
