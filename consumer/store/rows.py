"""What a store write takes: one batch of events as plain rows by natural key (`Folded`, built by
the write side's fold, in this process or another), and the rules under which those rows merge
into what the store holds. The store imports nothing of the write side: this module is the
contract between them.

The rules: `created_at`/`first_seen` are the earliest event time, `updated_at`/`last_seen` the
latest; values and facets of jobs, datasets and runs merge key by key, each key holding the
value of the newest event that carried it (`Merged`); a run's state follows `next_state`."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, NamedTuple

from consumer import json_codec

TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "ABORTED"})
STATE_RANK = {"NEW": 0, "RUNNING": 1, "COMPLETED": 2, "FAILED": 2, "ABORTED": 2}
# Of two terminal states the worse outcome wins, in whatever order they came: a run that failed did
# not succeed because a later event of it said COMPLETE (the OpenLineage Spark agent sends a failed
# job's FAIL, then COMPLETE when its SQL execution ends).
TERMINAL_RANK = {"COMPLETED": 0, "ABORTED": 1, "FAILED": 2}

DatasetKey = tuple[str, str]  # (namespace, name)
JobKey = tuple[str, str]  # (namespace, name)
# Facet name -> the facet's JSON (json_codec.NULL for a null facet).
Facets = Mapping[str, bytes]


def lock_id(kind: str, key: Any) -> int:
    """PostgreSQL advisory lock id of a job (`"job"`, (namespace, name)), dataset (`"dataset"`,
    (namespace, name)) or run (`"run"`, uuid): every transaction that writes or deletes its rows
    takes it first (consumer.store.writer, consumer.store.retention)."""
    digest = hashlib.blake2b(f"{kind}\x00{key!r}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# Taken shared by every writer and exclusively by the retention's deletion of version contents
# nobody points to: a writer that found a content's id is never left pointing at a deleted row.
CONTENTS_LOCK = lock_id("dataset_version_contents", "retention")


class RawEvent(NamedTuple):
    content_hash: str
    kind: str
    event_type: str | None
    event_time: datetime
    run_uuid: str | None
    job_namespace: str | None
    job_name: str | None
    payload: str


# The facets that change from one dataset version to the next. A version's fields and its other
# facets are its content, stored once per distinct content (dataset_version_contents) under
# `version_content_hash`; a facet missing here only makes fewer versions share a content.
PER_VERSION_FACETS = frozenset(
    {"version", "snapshot", "inputStatistics", "outputStatistics", "dataQualityMetrics", "dataQualityAssertions"}
)


def version_content(facets: Facets) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """A version's facets split into (its content's, its own)."""
    content = {name: value for name, value in facets.items() if name not in PER_VERSION_FACETS}
    own = {name: value for name, value in facets.items() if name in PER_VERSION_FACETS}
    return content, own


def version_content_hash(fields: bytes | None, facets: Facets) -> str:
    """The hash a version's content is stored under: its fields' JSON and its content facets (each
    facet's JSON), in facet-name order. No run id, time or snapshot is in it."""
    digest = hashlib.sha256(b"null" if fields is None else fields)
    for name in sorted(facets):
        digest.update(b"\0" + name.encode() + b"\0" + facets[name])
    return digest.hexdigest()


DATASET_VALUES = ("type", "source_name", "source_uri", "description", "database_name", "table_name", "current_version")
JOB_VALUES = ("type", "integration", "job_type", "description", "location", "current_version")
RUN_VALUES = (
    "nominal_start_time",
    "nominal_end_time",
    "parent_run_uuid",
    "parent_job_namespace",
    "parent_job_name",
    "job_version",
)

# A facet's key in `Merged.times` (values' keys are their column names).
FACET = "facets."
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width: stamps compare as text in time order


@lru_cache(maxsize=8192)  # a batch stamps each event's time once per entity it touches
def stamp(time: datetime) -> str:
    return time.astimezone(timezone.utc).strftime(STAMP)


def unstamp(text: str) -> datetime:
    return datetime.strptime(text, STAMP).replace(tzinfo=timezone.utc)


class Merged:
    """Values merged key by key, each key holding the newest event's non-null value; `times`
    (stamps, the `merged_at` column) record which event time each key came from. Facets are
    encoded members (materialize.Facets)."""

    def __init__(self, values: Mapping[str, Any], facets: Facets, times: Mapping[str, str]) -> None:
        self.values = dict(values)
        self.facets = dict(facets)
        self.times = dict(times)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Merged) and (self.values, self.facets, self.times) == (other.values, other.facets, other.times)

    def __repr__(self) -> str:
        return f"Merged({self.values!r}, {self.facets!r}, {self.times!r})"

    __hash__ = None  # type: ignore[assignment]  # mutable

    def add(self, time: datetime, values: Mapping[str, Any], facets: Facets) -> None:
        at = stamp(time)
        for key, value in values.items():
            if value is not None and at >= self.times.get(key, ""):
                self.values[key], self.times[key] = value, at
        for key, value in facets.items():
            if value != json_codec.NULL and at >= self.times.get(f"{FACET}{key}", ""):
                self.facets[key], self.times[f"{FACET}{key}"] = value, at

    def absorb(self, later: Merged) -> None:
        """Merge in `later`, the merge of events applied after this one's: on equal times `later` wins."""
        for key, at in later.times.items():
            if at >= self.times.get(key, ""):
                self.times[key] = at
                if key.startswith(FACET):
                    self.facets[key[len(FACET) :]] = later.facets[key[len(FACET) :]]
                else:
                    self.values[key] = later.values[key]

    def newest(self) -> datetime | None:
        newest = max(self.times.values(), default=None)
        return None if newest is None else unstamp(newest)

    def state(self) -> int:
        """state_hash of the merged values and facets."""
        return state_hash(self.values, self.facets)


def state_hash(values: Mapping[str, Any], facets: Facets) -> int:
    """A job's non-null values and facets as a signed 64-bit number (`jobs.state_hash`,
    `runs.job_state`): equal states, equal numbers, whatever the order of their keys."""
    digest = hashlib.blake2b(digest_size=8)
    for key in sorted(values):
        if values[key] is not None:
            digest.update(repr((key, values[key])).encode())
    for key in sorted(facets):
        if facets[key] != json_codec.NULL:
            digest.update(repr((key, len(facets[key]))).encode())
            digest.update(facets[key])
    return int.from_bytes(digest.digest(), "big", signed=True)


def keeps_stored_facets(stored_times: Mapping[str, str] | None, batch: Merged) -> bool:
    """Whether a stored facet survives merging `batch` into its row: one the batch does not carry
    at the same or a later time (Merged's rule). Without stored times (rows written before
    `merged_at` existed) every stored facet may."""
    if stored_times is None:
        return True
    return any(batch.times.get(key, "") < at for key, at in stored_times.items() if key.startswith(FACET))


class EntityFold(NamedTuple):
    """A dataset or job in the batch: its own events' merged values, and the first and last time
    an event named it (its own events, or, for a dataset, column-lineage edges naming it). A job's
    `state`: the state_hash every one of its events asserted, when each belongs to a run whose
    events all asserted it (RunFold.job_state); else None."""

    merged: Merged
    first_named: datetime
    last_named: datetime
    state: int | None = None


class RunFold(NamedTuple):
    job: JobKey  # of the run's first event in the batch
    state: str
    started_at: datetime | None
    ended_at: datetime | None
    merged: Merged
    created_at: datetime
    updated_at: datetime
    # The state_hash of the job values and facets every event of the run asserted, when all
    # named the run's job and asserted the same; else None.
    job_state: int | None = None


# The many-row tables' rows are plain tuples: a batch has thousands, and a worker process pickles
# plain tuples several times faster than named ones.

# (dataset, name, type, description, tags, from_schema, created_at, updated_at)
FieldFold = tuple[DatasetKey, str, "str | None", "str | None", Any, bool, datetime, datetime]
# A column-lineage edge of a job version: (output dataset, output field (None: a dataset-level
# input), input dataset, input field, type, subtype, description, masking)
LineageEdge = tuple[DatasetKey, "str | None", DatasetKey, str, str, str, "str | None", bool]


# A dataset's schema in a job version: (dataset, ((field, type), ...) in schema order)
LineageSchema = tuple[DatasetKey, tuple[tuple[str, "str | None"], ...]]


class LineageFold(NamedTuple):
    """What one run did (the union of its events) or one JobEvent declared: a job version's content."""

    job: JobKey
    inputs: frozenset[DatasetKey]
    outputs: frozenset[DatasetKey]
    edges: frozenset[LineageEdge]
    time: datetime  # a JobEvent's time (the newest declaration wins); a run's earliest event in the batch
    schemas: frozenset[LineageSchema] = frozenset()  # of its inputs and outputs, as its events sent them

    def union(self, other: LineageFold) -> LineageFold:
        return LineageFold(
            self.job,
            self.inputs | other.inputs,
            self.outputs | other.outputs,
            self.edges | other.edges,
            min(self.time, other.time),
            self.schemas | other.schemas,
        )

    def key(self) -> tuple[frozenset[Any], ...]:
        """What makes its content (lineage_content), without the time."""
        return (self.inputs, self.outputs, self.edges, frozenset(_one_schema_each(self.schemas).items()))


def _one_schema_each(schemas: frozenset[LineageSchema]) -> dict[DatasetKey, tuple[tuple[str, str | None], ...]]:
    """One schema per dataset: where a run's events sent it two ways, the larger (any fixed choice
    keeps a version a function of the set of events)."""
    chosen: dict[DatasetKey, tuple[tuple[str, str | None], ...]] = {}
    for dataset, fields in schemas:
        if dataset not in chosen or _schema_order(fields) > _schema_order(chosen[dataset]):
            chosen[dataset] = fields
    return chosen


def _schema_order(fields: tuple[tuple[str, str | None], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((name, kind or "") for name, kind in fields)


def lineage_content(lineage: LineageFold) -> dict[str, Any]:
    """A version's content as stored (JSON): its inputs, outputs, their schemas and its edges, each sorted."""
    return {
        "inputs": sorted([list(key) for key in lineage.inputs]),
        "outputs": sorted([list(key) for key in lineage.outputs]),
        "schemas": sorted(
            [*dataset, [list(field) for field in fields]] for dataset, fields in _one_schema_each(lineage.schemas).items()
        ),
        "edges": sorted(
            (
                [*out, out_field, *source, in_field, kind, subtype, description, masking]
                for out, out_field, source, in_field, kind, subtype, description, masking in lineage.edges
            ),
            key=_edge_order,
        ),
    }


def _edge_order(edge: list[Any]) -> list[Any]:
    return ["" if value is None else value for value in edge]


def lineage_from_content(job: JobKey, content: Mapping[str, Any], time: datetime) -> LineageFold:
    return LineageFold(
        job,
        frozenset((ns, name) for ns, name in content["inputs"]),
        frozenset((ns, name) for ns, name in content["outputs"]),
        frozenset(((e[0], e[1]), e[2], (e[3], e[4]), e[5], e[6], e[7], e[8], bool(e[9])) for e in content["edges"]),
        time,
        frozenset(((ns, name), tuple((f[0], f[1]) for f in fields)) for ns, name, fields in content.get("schemas", ())),
    )


def lineage_hash(content: Mapping[str, Any]) -> str:
    """The hash a version is stored under: of its content alone (no run id, time or snapshot)."""
    return encoded_lineage(content)[0]


def encoded_lineage(content: Mapping[str, Any]) -> tuple[str, bytes]:
    """A version's content as JSON and the hash it is stored under (the one place it is taken)."""
    encoded = json_codec.dumps_bytes(content)
    return hashlib.sha256(encoded).hexdigest(), encoded


def lineage_version(lineage: LineageFold) -> tuple[str, dict[str, Any]]:
    """The hash and the content (lineage_content) of the job version `lineage` is."""
    content = lineage_content(lineage)
    return lineage_hash(content), content


class RunVersion(NamedTuple):
    """The job version one run of a batch ran, as the batch's events say (the union of them): its
    content (lineage_content) as JSON, which the store writes as it is. A batch crosses from the
    preparing worker to the writer as plain bytes here: the same content as frozensets and nested
    lists took the writer's process ten times longer to unpickle than to decode."""

    job: JobKey
    time: datetime  # the run's earliest event in the batch
    lineage_hash: str
    content: bytes

    def lineage(self) -> LineageFold:
        return lineage_from_content(self.job, json_codec.loads(self.content), self.time)


# A job version's content: decoded, or as the JSON RunVersion carries it
VersionContent = dict[str, Any] | bytes


def decoded_content(content: VersionContent) -> dict[str, Any]:
    return json_codec.loads(content) if isinstance(content, bytes) else content


def run_version(lineage: LineageFold) -> RunVersion:
    return RunVersion(lineage.job, lineage.time, *encoded_lineage(lineage_content(lineage)))


# (dataset, version, run (of the earliest event, when it wrote the dataset), content hash, fields (JSON),
#  facets of its content, facets of the version itself (PER_VERSION_FACETS), created_at)
VersionFold = tuple[DatasetKey, str, "str | None", str, "bytes | None", Facets, Facets, datetime]
# (run, job, batch id, dataset, direction, snapshot id, kind, partitions, start offset, end offset,
#  created_at, position). Batch id None: the run's number (runs.run_seq) is its barrier id.
# Position: the event's place in the batch, which breaks ties of created_at once barrier ids are known.
SnapshotFold = tuple[str, JobKey, "int | None", DatasetKey, str, str, "str | None", Any, Any, Any, datetime, int]
# (content hash, kind, event type, event time, run, job namespace, job name, payload): RawEvent's fields,
# the payload compressed (consumer.store.compressed_text)
RawFold = tuple[str, str, "str | None", datetime, "str | None", "str | None", "str | None", bytes]


class Folded(NamedTuple):
    """One batch's rows by natural key, in the order the store writes them."""

    events: int  # events folded (duplicates by hash counted once)
    hashes: tuple[str, ...]
    lock_ids: tuple[int, ...]  # advisory lock ids of every job, dataset and run, ascending
    raw: tuple[RawFold, ...]
    namespaces: dict[str, tuple[datetime, datetime]]
    datasets: dict[DatasetKey, EntityFold]
    fields: tuple[FieldFold, ...]
    jobs: dict[JobKey, EntityFold]
    runs: dict[str, RunFold]
    versions: tuple[VersionFold, ...]
    lineage: dict[str, RunVersion]  # by run: what the batch's events of each run read, wrote and derived
    declared: dict[JobKey, LineageFold]  # by job: what its newest JobEvent of the batch declared
    snapshots: tuple[SnapshotFold, ...]
    partitions: dict[tuple[str, int | None, DatasetKey, str], frozenset[str]]


def next_state(state: str, ended_at: datetime | None, event_state: str, time: datetime) -> tuple[str, datetime | None]:
    """A run's (state, ended_at) after an event in state `event_state` at `time`: terminal states
    beat NEW/RUNNING, of two terminal ones the worse outcome (`TERMINAL_RANK`: FAILED, then ABORTED,
    then COMPLETED); `ended_at` is the latest terminal event's time."""
    if event_state in TERMINAL_STATES:
        if state not in TERMINAL_STATES or TERMINAL_RANK[event_state] > TERMINAL_RANK[state]:
            state = event_state
        return state, max(filter(None, (ended_at, time)))
    if STATE_RANK[event_state] > STATE_RANK[state]:
        state = event_state
    return state, ended_at


def current_rows(
    contents: Mapping[int, Mapping[str, Any]],
    dataset_ids: Mapping[DatasetKey, int],
    field_ids: Mapping[tuple[int, str], int],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The job_io and column_lineage rows of each job's version content (by job id), their names
    resolved by `dataset_ids` and `field_ids` (dataset id, field name): the rows the store holds
    while that version is current. One edge said two ways by one version keeps the larger
    (description, masking)."""
    io_rows: list[dict[str, Any]] = []
    edge_rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for job_id, content in sorted(contents.items()):
        for direction in ("input", "output"):
            for namespace, name in content[f"{direction}s"]:
                io_rows.append({"job_id": job_id, "dataset_id": dataset_ids[(namespace, name)], "direction": direction})
        for out_ns, out_name, out_field, in_ns, in_name, in_field, kind, subtype, description, masking in content["edges"]:
            output_id, input_id = dataset_ids[(out_ns, out_name)], dataset_ids[(in_ns, in_name)]
            output_field_id = None if out_field is None else field_ids[(output_id, out_field)]
            # sortable as it is: no None (field ids are positive, kind and subtype always strings)
            key = (
                job_id,
                output_id,
                -1 if output_field_id is None else output_field_id,
                field_ids[(input_id, in_field)],
                kind,
                subtype,
            )
            known = edge_rows.get(key)
            if known is None or (description or "", bool(masking)) > (
                known["transformation_description"] or "",
                known["masking"],
            ):
                edge_rows[key] = {
                    "job_id": job_id,
                    "output_dataset_id": output_id,
                    "output_field_id": output_field_id,
                    "input_dataset_id": input_id,
                    "input_field_id": key[3],
                    "transformation_type": kind,
                    "transformation_subtype": subtype,
                    "transformation_description": description,
                    "masking": bool(masking),
                }
    return io_rows, [edge_rows[key] for key in sorted(edge_rows)]
