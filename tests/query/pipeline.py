"""A small Spark-like pipeline as OpenLineage events (the shapes our emitter sends: snapshot and version
facets, columnLineage with transformation subtypes, symlinks), stored through the consumer's own ingestion.

    file:/lake/src --ingest--> bronze --refine--> silver --publish--> gold
                                                   dim ------^
Batch k (k = 1..3) of every job reads snapshot k of its inputs and writes snapshot k. `refine` has run
only twice, `publish` once more than that is impossible, so: silver s1,s2; gold g1,g2; bronze b1..b3.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from consumer.events import validate
from consumer.materialize import materialize

PRODUCER = "https://github.com/spark-lineage/spark-lineage/emitter"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SNAPSHOT_URL = "https://github.com/spark-lineage/spark-lineage/schemas/1-0-0/SnapshotDatasetFacet.json#/$defs/SnapshotDatasetFacet"
NS = "file"
JOB_NS = "spark"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

SRC, BRONZE, SILVER, GOLD, DIM = "/lake/src", "/lake/bronze", "/lake/silver", "/lake/gold", "/lake/dim"
COLUMNS = {SRC: ["id", "amount", "country"], BRONZE: ["id", "amount", "country"], SILVER: ["id", "amount_cents", "country"],
           GOLD: ["country", "total", "country_name"], DIM: ["country", "name"]}


def _facet(url_name: str, **body: Any) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": f"https://openlineage.io/spec/facets/1-0-1/{url_name}.json#/$defs/{url_name}", **body}


def _dataset(name: str, snapshot: str | None, lineage: dict | None = None) -> dict:
    facets: dict[str, Any] = {
        "schema": _facet("SchemaDatasetFacet", fields=[{"name": c, "type": "string"} for c in COLUMNS[name]]),
        "symlinks": _facet("SymlinksDatasetFacet", identifiers=[{"namespace": "spark_catalog", "name": f"lake.{name.rsplit('/', 1)[1]}", "type": "TABLE"}]),
    }
    if snapshot:
        facets["snapshot"] = {"_producer": PRODUCER, "_schemaURL": SNAPSHOT_URL, "snapshotId": snapshot, "kind": "content"}
        facets["version"] = _facet("DatasetVersionDatasetFacet", datasetVersion=snapshot)
    if lineage:
        facets["columnLineage"] = {"_producer": PRODUCER,
                                   "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                                   **lineage}
    return {"namespace": NS, "name": name, "facets": facets}


def _input(dataset: str, field: str, kind: str, subtype: str, description: str = "", masking: bool = False) -> dict:
    return {"namespace": NS, "name": dataset, "field": field,
            "transformations": [{"type": kind, "subtype": subtype, "description": description, "masking": masking}]}


LINEAGE = {
    BRONZE: {"fields": {c: {"inputFields": [_input(SRC, c, "DIRECT", "IDENTITY")]} for c in COLUMNS[BRONZE]}},
    SILVER: {
        "fields": {
            "id": {"inputFields": [_input(BRONZE, "id", "DIRECT", "IDENTITY")]},
            "amount_cents": {"inputFields": [_input(BRONZE, "amount", "DIRECT", "TRANSFORMATION", "amount * 100")]},
            "country": {"inputFields": [_input(BRONZE, "country", "DIRECT", "IDENTITY"),
                                        _input(BRONZE, "amount", "INDIRECT", "FILTER", "amount > 0")]},
        },
    },
    GOLD: {
        "fields": {
            "country": {"inputFields": [_input(SILVER, "country", "DIRECT", "IDENTITY")]},
            "total": {"inputFields": [_input(SILVER, "amount_cents", "DIRECT", "AGGREGATION", "sum(amount_cents)"),
                                      _input(SILVER, "country", "INDIRECT", "GROUP_BY")]},
            "country_name": {"inputFields": [_input(DIM, "name", "DIRECT", "IDENTITY", masking=True)]},
        },
        "dataset": [_input(SILVER, "country", "INDIRECT", "JOIN"), _input(DIM, "country", "INDIRECT", "JOIN")],
    },
}

# job name -> (inputs, output, how many batches it ran)
JOBS = {
    "etl.ingest": ([SRC], BRONZE, 3),
    "etl.refine": ([BRONZE], SILVER, 2),
    "etl.publish": ([SILVER, DIM], GOLD, 2),
}
SNAP = {SRC: "src-{k}", BRONZE: "b{k}", SILVER: "s{k}", GOLD: "g{k}", DIM: "dim-1"}


def events() -> list[dict]:
    produced: list[dict] = []
    for k in range(1, 4):
        for step, (job, (inputs, output, batches)) in enumerate(JOBS.items()):
            if k > batches:
                continue
            start = T0 + timedelta(hours=k, minutes=10 * step)
            run = str(uuid.UUID(int=k * 100 + step))
            base = {"producer": PRODUCER, "schemaURL": CORE, "run": {"runId": run},
                    "job": {"namespace": JOB_NS, "name": job, "facets": {"jobType": _facet(
                        "JobTypeJobFacet", processingType="BATCH", integration="SPARK", jobType="SQL_JOB")}}}
            ins = [_dataset(name, SNAP[name].format(k=k)) for name in inputs]
            outs = [_dataset(output, SNAP[output].format(k=k), LINEAGE[output])]
            produced.append({**base, "eventType": "START", "eventTime": start.isoformat(), "inputs": ins, "outputs": outs})
            produced.append({**base, "eventType": "COMPLETE", "eventTime": (start + timedelta(minutes=5)).isoformat(),
                             "inputs": ins, "outputs": outs})
    return produced


def ingest(store: Any, batch: list[dict]) -> None:
    store.write([materialize(validate(event)) for event in batch])
