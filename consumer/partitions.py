"""Partitions as the store and the queries name them: one canonical text per partition, Hive's
partition name (`dt=2024-01-02`, `a=1/b=x`): `column=value` for each partition column in the
order the snapshot facet lists them, joined by `/`. `%`, `/` and `=` inside a column or value are
percent-escaped so the text splits back unambiguously; a null value is Hive's
`__HIVE_DEFAULT_PARTITION__`. Pure functions, shared by the write side and the read side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Longer texts are not stored (the column's size; no directory name is that long).
MAX_PARTITION_NAME = 512
_ESCAPES = str.maketrans({"%": "%25", "/": "%2F", "=": "%3D"})


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)


def _value_text(value: Any) -> str:
    if value is None:
        return HIVE_DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def partition_name(values: Mapping[str, Any]) -> str | None:
    """The canonical text of one partition (a facet's `{column: value}`); None when it names no
    column or is too long to store."""
    name = "/".join(f"{_escape(str(column))}={_escape(_value_text(value))}" for column, value in values.items())
    return name if name and len(name) <= MAX_PARTITION_NAME else None


def partition_names(partitions: Any) -> tuple[str, ...]:
    """The distinct canonical texts of a snapshot facet's `partitions` list, sorted; entries that
    are not objects are skipped."""
    if not isinstance(partitions, list):
        return ()
    names = {partition_name(values) for values in partitions if isinstance(values, Mapping)}
    return tuple(sorted(name for name in names if name is not None))


def parse_partition(text: str) -> str:
    """A partition as a person writes it (`dt=2024-01-02`, `a=1/b=x`, percent-escapes allowed)
    as its canonical text; ValueError naming the problem when it is not `column=value[/...]`."""
    values: dict[str, str | None] = {}
    for segment in text.strip().strip("/").split("/"):
        column, separator, value = segment.partition("=")
        if not separator or not column:
            raise ValueError(f"partition {text!r}: expected column=value, several joined by '/'")
        value = unquote(value)
        values[unquote(column)] = None if value == HIVE_DEFAULT_PARTITION else value
    name = partition_name(values)
    if name is None:
        raise ValueError(f"partition {text!r} is longer than {MAX_PARTITION_NAME} characters")
    return name
