"""A small Spark-like pipeline as OpenLineage events (the shapes our emitter sends: snapshot and version
facets, columnLineage with transformation subtypes, symlinks), built with the shared event factory and
stored through the consumer's own ingestion.

    file:/lake/src --ingest--> bronze --refine--> silver --publish--> gold
                                                   dim ------^
Batch k (k = 1..3) of every job reads snapshot k of its inputs and writes snapshot k. `refine` has run
only twice, `publish` once more than that is impossible, so: silver s1,s2; gold g1,g2; bronze b1..b3.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from tests.support.events import BASE_TIME, batch_write, table, transformation, with_column_lineage

SRC, BRONZE, SILVER, GOLD, DIM = "/lake/src", "/lake/bronze", "/lake/silver", "/lake/gold", "/lake/dim"
COLUMNS = {
    SRC: ["id", "amount", "country"],
    BRONZE: ["id", "amount", "country"],
    SILVER: ["id", "amount_cents", "country"],
    GOLD: ["country", "total", "country_name"],
    DIM: ["country", "name"],
}
SNAP = {SRC: "src-{k}", BRONZE: "b{k}", SILVER: "s{k}", GOLD: "g{k}", DIM: "dim-1"}

# output -> output column -> [(input location, input column, transformation)]
LINEAGE: dict[str, dict[str, list[tuple[str, str, dict[str, Any]]]]] = {
    BRONZE: {c: [(SRC, c, transformation())] for c in COLUMNS[BRONZE]},
    SILVER: {
        "id": [(BRONZE, "id", transformation())],
        "amount_cents": [(BRONZE, "amount", transformation("DIRECT", "TRANSFORMATION", "amount * 100"))],
        "country": [
            (BRONZE, "country", transformation()),
            (BRONZE, "amount", transformation("INDIRECT", "FILTER", "amount > 0")),
        ],
    },
    GOLD: {
        "country": [(SILVER, "country", transformation())],
        "total": [
            (SILVER, "amount_cents", transformation("DIRECT", "AGGREGATION", "sum(amount_cents)")),
            (SILVER, "country", transformation("INDIRECT", "GROUP_BY")),
        ],
        "country_name": [(DIM, "name", transformation(masking=True))],
    },
}
# output -> dataset-level (input location, input column, INDIRECT subtype)
DATASET_LINEAGE = {GOLD: [(SILVER, "country", "JOIN"), (DIM, "country", "JOIN")]}

# job name -> (inputs, output, how many batches it ran)
JOBS = {
    "etl.ingest": ([SRC], BRONZE, 3),
    "etl.refine": ([BRONZE], SILVER, 2),
    "etl.publish": ([SILVER, DIM], GOLD, 2),
}


def lake_table(location: str, batch: int | None = None) -> dict[str, Any]:
    """The table at `location` (symlinked as lake.<name>), at its snapshot of `batch` if given."""
    snapshot = SNAP[location].format(k=batch) if batch is not None else None
    return table("lake", location.rsplit("/", 1)[1], COLUMNS[location], snapshot=snapshot, location=location)


def _written(output: str, read: dict[str, dict[str, Any]], batch: int) -> dict[str, Any]:
    lineage = {
        column: [(read[location], field, how) for location, field, how in sources] for column, sources in LINEAGE[output].items()
    }
    indirect = [(read[location], field, subtype) for location, field, subtype in DATASET_LINEAGE.get(output, [])]
    return with_column_lineage(lake_table(output, batch), lineage, indirect)


def events() -> list[dict[str, Any]]:
    produced: list[dict[str, Any]] = []
    for k in range(1, 4):
        for step, (job, (inputs, output, batches)) in enumerate(JOBS.items()):
            if k > batches:
                continue
            read = {location: lake_table(location, k) for location in inputs}
            produced += batch_write(
                job,
                list(read.values()),
                _written(output, read, k),
                run_id=str(uuid.UUID(int=k * 100 + step)),
                start=BASE_TIME + timedelta(hours=k, minutes=10 * step),
                duration=timedelta(minutes=5),
            )
    return produced


def ingest(store: Any, batch: list[dict[str, Any]]) -> None:
    StoreWrites(store).write([materialize(validate(event)) for event in batch])
