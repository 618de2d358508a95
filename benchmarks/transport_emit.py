"""How long `emit` keeps the Spark thread: the kafka transport vs a plain no-op call, side by side.

    .venv/bin/python -m benchmarks.transport_emit [--events 2000] [--burst 10]

Each emit is timed next to a call of a no-op function with the same argument, alternating,
so both see the same machine load. Three situations: broker up (an Apache Kafka broker started
here), broker down (nothing listens on the port: events go to the spool), and broker up
with a spool left by the "down" run to drain first. Events are sent in bursts with a short
pause between them (an application emits a few events per action, not a flood); queue
overflows are reported, since they put a disk write on the emitting thread.

The sender thread then serializes each event in the same process: that cost is printed too,
`emitter.transports.records.serialize` next to openlineage-python's `Serde.to_json` (the JSON
document it reproduces), alternating per event.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from openlineage.client import event_v2
from openlineage.client.facet_v2 import column_lineage_dataset, parent_run, schema_dataset
from openlineage.client.serde import Serde

from demo.broker import free_port, start_kafka
from emitter.transports.kafka import KafkaConfig, KafkaTransport
from emitter.transports.records import serialize

PAUSE_BETWEEN_BURSTS_SECONDS = 0.05


def sample_event(app_name: str, index: int) -> event_v2.RunEvent:
    """A write's COMPLETE with a parent, a 20-column schema and column lineage: a typical emitter event."""
    app_run = str(uuid.uuid4())
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=app_run),
        job=parent_run.Job(namespace="bench", name=app_name),
        root=parent_run.Root(run=parent_run.RootRun(runId=app_run), job=parent_run.RootJob(namespace="bench", name=app_name)),
    )
    columns = [f"column_{n}" for n in range(20)]
    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            column: column_lineage_dataset.Fields(
                inputFields=[column_lineage_dataset.InputField(namespace="file", name="/data/source", field=column)],
            )
            for column in columns
        }
    )
    output = event_v2.OutputDataset(
        namespace="file",
        name=f"/data/target_{index}",
        facets={
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name=column, type="string") for column in columns]
            ),
            "columnLineage": lineage,
        },
    )
    return event_v2.RunEvent(
        eventType=event_v2.RunState.COMPLETE,
        eventTime=datetime.now(timezone.utc).isoformat(),
        run=event_v2.Run(runId=str(uuid.uuid4()), facets={"parent": parent}),
        job=event_v2.Job(namespace="bench", name=f"{app_name}.insert.target_{index}"),
        producer="https://github.com/spark-lineage/spark-lineage/benchmarks",
        outputs=[output],
    )


def noop(event: Any) -> None:
    return None


def measure(transport: KafkaTransport, events: list, burst: int) -> tuple[list[int], list[int]]:
    emit_ns: list[int] = []
    noop_ns: list[int] = []
    clock: Callable[[], int] = time.perf_counter_ns
    for index, event in enumerate(events):
        started = clock()
        transport.emit(event)
        between = clock()
        noop(event)
        ended = clock()
        emit_ns.append(between - started)
        noop_ns.append(ended - between)
        if (index + 1) % burst == 0:
            time.sleep(PAUSE_BETWEEN_BURSTS_SECONDS)
    return emit_ns, noop_ns


def percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000


def report(
    label: str, transport: KafkaTransport, emit_ns: list[int], noop_ns: list[int], close_seconds: float, delivered: bool
) -> None:
    print(
        f"{label:<28} emit median {statistics.median(emit_ns) / 1000:7.1f} us  p99 {percentile(emit_ns, 0.99):7.1f} us"
        f"  max {max(emit_ns) / 1000:8.1f} us | no-op median {statistics.median(noop_ns) / 1000:5.2f} us"
        f"  p99 {percentile(noop_ns, 0.99):5.2f} us | queue overflows {transport._sender.queue_overflows:4d}"
        f" | close {close_seconds:5.2f} s, all delivered: {delivered}, left in spool: {len(transport.spool)}"
    )


def run(label: str, bootstrap: str, topic: str, spool_dir: Path, count: int, burst: int, close_timeout: float) -> None:
    config = KafkaConfig.from_dict(
        {"topic": topic, "config": {"bootstrap.servers": bootstrap}, "spoolDir": str(spool_dir), "spoolMaxBytes": 1 << 30}
    )
    transport = KafkaTransport(config)
    events = [sample_event("bench-app", index) for index in range(count)]
    emit_ns, noop_ns = measure(transport, events, burst)
    started = time.monotonic()
    delivered = transport.close(close_timeout)
    report(label, transport, emit_ns, noop_ns, time.monotonic() - started, delivered)


def serialization(count: int) -> None:
    events = [sample_event("bench-app", index) for index in range(count)]
    ours_ns: list[int] = []
    serde_ns: list[int] = []
    clock = time.perf_counter_ns
    for event in events:
        started = clock()
        ours = serialize(event)
        between = clock()
        theirs = Serde.to_json(event).encode("utf-8")
        serde_ns.append(clock() - between)
        ours_ns.append(between - started)
        if json.loads(ours) != json.loads(theirs):
            raise SystemExit("serialize() writes another document than Serde.to_json")
    print(
        f"{'serialization per event':<28} records.serialize median {statistics.median(ours_ns) / 1000:7.1f} us"
        f" | Serde.to_json median {statistics.median(serde_ns) / 1000:7.1f} us"
        f" | ratio {statistics.median(serde_ns) / statistics.median(ours_ns):4.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=10)
    args = parser.parse_args()
    port = free_port()
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    serialization(args.events)
    with tempfile.TemporaryDirectory() as scratch:
        spool_dir = Path(scratch) / "spool"
        run("broker down (spooling)", f"127.0.0.1:{free_port()}", topic, spool_dir, args.events, args.burst, 2)
        broker = start_kafka(Path(scratch) / "kafka", {"PLAINTEXT": port})
        try:
            run("broker up, spool to drain", f"127.0.0.1:{port}", topic, spool_dir, args.events, args.burst, 120)
            run("broker up", f"127.0.0.1:{port}", topic, Path(scratch) / "clean-spool", args.events, args.burst, 120)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
