"""Readable column lineage from OpenLineage events: one row per (output column, input column)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import frozen


@frozen
class LineageRow:
    output: str  # table.column
    source: str  # table.column
    kind: str  # TYPE/SUBTYPE
    expression: str


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dataset_label(dataset: dict[str, Any]) -> str:
    """The catalog table name when there is one, else the last path element."""
    identifiers = (dataset.get("facets") or {}).get("symlinks", {}).get("identifiers") or []
    if identifiers:
        return identifiers[0]["name"]
    return dataset["name"].rstrip("/").rsplit("/", 1)[-1]


def lineage_rows(events: Iterable[dict[str, Any]]) -> list[LineageRow]:
    rows: dict[tuple[str, str, str], LineageRow] = {}
    labels: dict[tuple[str, str], str] = {}
    completed = [e for e in events if e.get("eventType") == "COMPLETE"]
    for event in completed:
        for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
            labels[(dataset["namespace"], dataset["name"])] = dataset_label(dataset)
    for event in completed:
        for output in event.get("outputs", []):
            facet = (output.get("facets") or {}).get("columnLineage") or {}
            for column, field in sorted(facet.get("fields", {}).items()):
                for source in field.get("inputFields", []):
                    source_label = labels.get((source["namespace"], source["name"]), source["name"])
                    for transformation in source.get("transformations") or [{}]:
                        row = LineageRow(
                            output=f"{dataset_label(output)}.{column}",
                            source=f"{source_label}.{source['field']}",
                            kind=f"{transformation.get('type', '?')}/{transformation.get('subtype', '?')}",
                            expression=transformation.get("description") or "",
                        )
                        rows[(row.output, row.source, row.kind)] = row
    return list(rows.values())


def render_table(rows: list[LineageRow]) -> str:
    header = ("output column", "", "input column", "type/subtype", "expression")
    return format_table(header, [(r.output, "<-", r.source, r.kind, r.expression) for r in rows])


def format_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    """Plain-text columns, a dashed line under the header."""
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
