"""Validation of incoming OpenLineage events: bytes or dicts in, a `ValidEvent` or an
`InvalidEvent` naming the offending field out.

Hand-written checks rather than the full JSON Schema: they cover what materialization reads
(required fields with their types and the facets we store) at a fraction of the cost, and
unknown facets pass through untouched.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import attrs

from consumer import json_codec

if TYPE_CHECKING:
    from consumer.ingest.facet_memo import FacetMemo

RUN_EVENT = "RunEvent"
DATASET_EVENT = "DatasetEvent"
JOB_EVENT = "JobEvent"
EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})
TRANSFORMATION_TYPES = frozenset({"DIRECT", "INDIRECT"})
SNAPSHOT_KINDS = frozenset({"content", "delta", "iceberg", "stream-offsets", "sink-batch"})

# ISO 8601 (a bare date too) with optional fraction of any length (nanoseconds) and optional zone.
# C0 controls, DEL and C1 controls: never part of a dataset, job or field name.
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?)?(Z|[+-]\d{2}:?\d{2})?$")


class InvalidEvent(ValueError):
    """The event cannot be materialized; `field` is the JSON path of the offending part."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


@attrs.frozen
class ValidEvent:
    kind: str
    event: Mapping[str, Any]
    event_time: datetime


def parse_time(value: Any, field: str) -> datetime:
    """An ISO 8601 timestamp as an aware UTC datetime; no zone means UTC, extra digits are cut."""
    if not isinstance(value, str):
        raise InvalidEvent(field, f"expected an ISO 8601 timestamp string, got {type(value).__name__}")
    match = _TIME.match(value.strip())
    if not match:
        raise InvalidEvent(field, f"not an ISO 8601 timestamp: {value!r}")
    day, clock, fraction, zone = match.groups()
    clock = clock or "00:00:00"
    if clock.count(":") == 1:
        clock += ":00"
    micros = (fraction or "0")[:6].ljust(6, "0")
    zone = "+00:00" if zone in (None, "Z") else zone
    if len(zone) == 5:
        zone = zone[:3] + ":" + zone[3:]
    try:
        parsed = datetime.fromisoformat(f"{day}T{clock}.{micros}{zone}")
    except ValueError as error:
        raise InvalidEvent(field, f"not a valid timestamp: {value!r} ({error})") from None
    return parsed.astimezone(timezone.utc)


# Deeper JSON is refused: events are a few levels deep, and every later step (hashing, storing,
# serving) walks the value recursively.
MAX_DEPTH = 64
_TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of objects and arrays)"


def decode(raw: bytes | str) -> Any:
    try:
        decoded = json_codec.loads(raw)
    except RecursionError:
        raise InvalidEvent("", _TOO_DEEP) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidEvent("", f"not JSON: {error}") from None
    if nesting_exceeds(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw, MAX_DEPTH):
        raise InvalidEvent("", _TOO_DEEP)
    return decoded


_ESCAPED_BACKSLASH, _ESCAPED_QUOTE = b"\\\\", b'\\"'
# Depth does not depend on the kind of bracket: arrays' become objects', everything else but quotes goes.
_BRACKETS_AS_BRACES = bytes.maketrans(b"[]", b"{}")
_NOT_BRACKET_OR_QUOTE = bytes(byte for byte in range(256) if byte not in b'{}[]"')


def nesting_exceeds(text: bytes, limit: int) -> bool:
    """Whether the JSON `text` (already known to be valid) nests objects/arrays more than `limit`
    levels, in byte operations only (a walk of the decoded value cost three to four times as much): drop the
    strings, keep the brackets, then strip the innermost pairs once per level."""
    if text.count(b"{") + text.count(b"[") <= limit:
        return False
    if b"\\" in text:  # backslashes only occur in strings: without escapes, every quote opens or closes one
        text = text.replace(_ESCAPED_BACKSLASH, b"").replace(_ESCAPED_QUOTE, b"")
    # Quotes alternate open/close, so dropping two adjacent ones leaves the rest paired: most strings go here.
    brackets = text.translate(_BRACKETS_AS_BRACES, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
    if b'"' in brackets:  # strings with brackets in them
        brackets = b"".join(brackets.split(b'"')[::2])
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"{}", b"")  # one scan: exactly the pairs innermost now
    return bool(brackets)


def validate(event: Any, memo: FacetMemo | None = None) -> ValidEvent:
    """Check `event` (a decoded JSON value) and tell which kind of event it is. With a `memo`, a
    schema or column-lineage facet whose content passed before is not checked again."""
    if not isinstance(event, dict):
        raise InvalidEvent("", f"an event must be a JSON object, got {type(event).__name__}")
    kind = event_kind(event)
    _require_str(event, "producer", "producer")
    schema_url = event.get("schemaURL")
    if schema_url is not None and not isinstance(schema_url, str):
        raise InvalidEvent("schemaURL", "must be a string")
    event_time = parse_time(event.get("eventTime"), "eventTime")
    if kind == RUN_EVENT:
        _check_run(event)
    if kind in (RUN_EVENT, JOB_EVENT):
        _check_named(event.get("job"), "job")
        _check_facets(event["job"], "job")
        for direction in ("inputs", "outputs"):
            _check_datasets(event.get(direction), direction, memo)
    else:
        _check_dataset(event.get("dataset"), "dataset", memo)
    return ValidEvent(kind=kind, event=event, event_time=event_time)


def event_kind(event: Mapping[str, Any]) -> str:
    """RunEvent / DatasetEvent / JobEvent by schemaURL, falling back to the event's shape."""
    schema_url = event.get("schemaURL")
    if isinstance(schema_url, str):
        for kind in (RUN_EVENT, DATASET_EVENT, JOB_EVENT):
            if schema_url.endswith("/" + kind):
                return kind
    if "run" in event:
        return RUN_EVENT
    if "dataset" in event:
        return DATASET_EVENT
    if "job" in event:
        return JOB_EVENT
    raise InvalidEvent("", "neither a RunEvent (run), a DatasetEvent (dataset) nor a JobEvent (job)")


def _check_run(event: Mapping[str, Any]) -> None:
    run = event.get("run")
    if not isinstance(run, dict):
        raise InvalidEvent("run", "missing or not an object")
    run_id = run.get("runId")
    if not isinstance(run_id, str):
        raise InvalidEvent("run.runId", "missing or not a string")
    try:
        uuid.UUID(run_id)
    except ValueError:
        raise InvalidEvent("run.runId", f"not a UUID: {run_id!r}") from None
    event_type = event.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise InvalidEvent("eventType", f"must be one of {sorted(EVENT_TYPES)}, got {event_type!r}")
    _check_facets(run, "run")
    facets = run.get("facets") or {}
    for key in ("nominalTime",):
        if key in facets:
            _check_nominal_time(facets[key], f"run.facets.{key}")
    if "parent" in facets:
        _check_parent(facets["parent"], "run.facets.parent")
    if "microBatch" in facets:
        _check_micro_batch(facets["microBatch"], "run.facets.microBatch")


def _check_nominal_time(facet: Any, path: str) -> None:
    _require_object(facet, path)
    parse_time(facet.get("nominalStartTime"), f"{path}.nominalStartTime")
    if facet.get("nominalEndTime") is not None:
        parse_time(facet["nominalEndTime"], f"{path}.nominalEndTime")


def _check_parent(facet: Any, path: str) -> None:
    _require_object(facet, path)
    parent_run = facet.get("run")
    if parent_run is not None:
        _require_object(parent_run, f"{path}.run")
        _require_str(parent_run, "runId", f"{path}.run.runId")
    _check_named(facet.get("job"), f"{path}.job")


def _check_micro_batch(facet: Any, path: str) -> None:
    _require_object(facet, path)
    _require_int(facet, "batchId", f"{path}.batchId")
    _require_str(facet, "queryId", f"{path}.queryId")
    _require_str(facet, "runId", f"{path}.runId")
    _require_int(facet, "numInputRows", f"{path}.numInputRows")
    for optional_int in ("durationMs",):
        if facet.get(optional_int) is not None:
            _require_int(facet, optional_int, f"{path}.{optional_int}")


def _check_datasets(datasets: Any, path: str, memo: FacetMemo | None) -> None:
    if datasets is None:
        return
    if not isinstance(datasets, list):
        raise InvalidEvent(path, "must be a list")
    for index, dataset in enumerate(datasets):
        _check_dataset(dataset, f"{path}[{index}]", memo)


# The facets a scheduled job repeats run after run, and the costliest to check.
_MEMOIZED_CHECKS = frozenset({"schema", "columnLineage"})


def _check_dataset(dataset: Any, path: str, memo: FacetMemo | None) -> None:
    _check_named(dataset, path)
    for facet_key in ("facets", "inputFacets", "outputFacets"):
        _check_facets(dataset, path, facet_key)
    facets = dataset.get("facets") or {}
    checks = {
        "schema": _check_schema,
        "symlinks": _check_symlinks,
        "version": _check_version,
        "columnLineage": _check_column_lineage,
        "snapshot": _check_snapshot,
    }
    for name, check in checks.items():
        facet = facets.get(name)
        if facet is None:
            continue
        facet_path = f"{path}.facets.{name}"
        if memo is not None and name in _MEMOIZED_CHECKS:
            memo.checked(name, facet, functools.partial(check, facet, facet_path))
        else:
            check(facet, facet_path)


def _check_schema(facet: Any, path: str) -> None:
    _require_object(facet, path)
    fields = facet.get("fields", [])
    if not isinstance(fields, list):
        raise InvalidEvent(f"{path}.fields", "must be a list")
    for index, field in enumerate(fields):
        _require_object(field, f"{path}.fields[{index}]")
        _require_name(field, "name", f"{path}.fields[{index}].name")


def _check_symlinks(facet: Any, path: str) -> None:
    _require_object(facet, path)
    identifiers = facet.get("identifiers", [])
    if not isinstance(identifiers, list):
        raise InvalidEvent(f"{path}.identifiers", "must be a list")
    for index, identifier in enumerate(identifiers):
        _check_named(identifier, f"{path}.identifiers[{index}]")


def _check_version(facet: Any, path: str) -> None:
    _require_object(facet, path)
    _require_str(facet, "datasetVersion", f"{path}.datasetVersion")


def _check_column_lineage(facet: Any, path: str) -> None:
    _require_object(facet, path)
    fields = facet.get("fields", {})
    _require_object(fields, f"{path}.fields")
    for output_field, entry in fields.items():
        _refuse_control_characters(output_field, f"{path}.fields")
        entry_path = f"{path}.fields.{output_field}"
        _require_object(entry, entry_path)
        _check_input_fields(entry.get("inputFields"), f"{entry_path}.inputFields")
    if facet.get("dataset") is not None:
        _check_input_fields(facet["dataset"], f"{path}.dataset")


def _check_input_fields(input_fields: Any, path: str) -> None:
    if not isinstance(input_fields, list):
        raise InvalidEvent(path, "missing or not a list")
    for index, input_field in enumerate(input_fields):
        field_path = f"{path}[{index}]"
        _check_named(input_field, field_path)
        _require_name(input_field, "field", f"{field_path}.field")
        transformations = input_field.get("transformations", [])
        if not isinstance(transformations, list):
            raise InvalidEvent(f"{field_path}.transformations", "must be a list")
        for t_index, transformation in enumerate(transformations):
            t_path = f"{field_path}.transformations[{t_index}]"
            _require_object(transformation, t_path)
            if transformation.get("type") not in TRANSFORMATION_TYPES:
                raise InvalidEvent(f"{t_path}.type", f"must be DIRECT or INDIRECT, got {transformation.get('type')!r}")
            if "masking" in transformation and not isinstance(transformation["masking"], bool):
                raise InvalidEvent(f"{t_path}.masking", "must be a boolean")


def _check_snapshot(facet: Any, path: str) -> None:
    _require_object(facet, path)
    _require_str(facet, "snapshotId", f"{path}.snapshotId")
    if facet.get("kind") not in SNAPSHOT_KINDS:
        raise InvalidEvent(f"{path}.kind", f"must be one of {sorted(SNAPSHOT_KINDS)}, got {facet.get('kind')!r}")
    if facet.get("batchId") is not None:
        _require_int(facet, "batchId", f"{path}.batchId")
        if facet["batchId"] < 0:
            raise InvalidEvent(f"{path}.batchId", "must not be negative")
    partitions = facet.get("partitions")
    if partitions is not None and not (isinstance(partitions, list) and all(_is_partition(p) for p in partitions)):
        raise InvalidEvent(f"{path}.partitions", "must be a list of objects of strings or nulls")


def _is_partition(value: Any) -> bool:
    """One partition of the snapshot facet: partition column -> its value (null: Hive's default)."""
    return isinstance(value, dict) and all(item is None or isinstance(item, str) for item in value.values())


def _check_facets(owner: Mapping[str, Any], path: str, key: str = "facets") -> None:
    facets = owner.get(key)
    if facets is not None and not isinstance(facets, dict):
        raise InvalidEvent(f"{path}.{key}", "must be an object")


def _check_named(value: Any, path: str) -> None:
    _require_object(value, path)
    _require_name(value, "namespace", f"{path}.namespace")
    _require_name(value, "name", f"{path}.name")


def _require_name(owner: Mapping[str, Any], key: str, path: str) -> None:
    """A non-empty string without control characters: names end up in log lines, terminals,
    URLs and the lineage graph, where a newline or an escape sequence would forge or hide text."""
    _require_str(owner, key, path)
    _refuse_control_characters(owner[key], path)


def _refuse_control_characters(name: str, path: str) -> None:
    found = _CONTROL_CHARACTER.search(name)
    if found is not None:
        raise InvalidEvent(
            path,
            f"contains control character U+{ord(found.group()):04X} at position {found.start()}; names may not hold control characters",
        )


def _require_object(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise InvalidEvent(path, "missing or not an object")


def _require_str(owner: Mapping[str, Any], key: str, path: str) -> None:
    value = owner.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidEvent(path, "missing or not a non-empty string")


def _require_int(owner: Mapping[str, Any], key: str, path: str) -> None:
    value = owner.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidEvent(path, "missing or not an integer")
