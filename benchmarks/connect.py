"""The emitter's cost on a Spark Connect server, next to the same statements in a classic session.

    .venv/bin/python -m benchmarks.connect [--statements 30]

This process is the server (`emitter.listener.connect_server.start`, file transport into a
temporary directory) and also runs the classic side: a session of the same SparkContext
(`spark.newSession()`) attached with `emitter.attach`. A client process runs the statements through
Connect in two sessions, one emitted and one with `spark.openlineage.disabled=true` (plain), and the
server process runs them in its classic emitted session; the three alternate per statement, which
starts first rotating. Each statement is a CTAS of a join + aggregate + window over two small
tables, its table dropped after it.

Measured, by wrapping the emitter's own entry points in this process:
- listener-bus time per callback: `BatchListener._on_action` (capture and handing over to the
  attachment's thread) plus the JVM's describing of the action before it called Python, per
  callback, Connect sessions and the classic session apart;
- pipeline-thread time per build: `PipelineWorker.build_actions`;
- all emitter work per statement: both summed over the run, divided by the statements;
- per Connect session, once: attaching at its first operation (`ConnectSessions._attach`);
- wall time per statement as the client sees it, plain and emitted Connect sessions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

TABLES = """
CREATE TABLE bench_orders USING parquet AS
  SELECT id AS order_id, id % 500 AS customer_id, CAST(id % 97 AS DOUBLE) * 1.5 AS amount FROM range(20000);
CREATE TABLE bench_customers USING parquet AS
  SELECT id, concat('c', id) AS name, CASE WHEN id % 3 = 0 THEN 'fr' WHEN id % 3 = 1 THEN 'de' ELSE 'it' END AS country
  FROM range(500)
"""
STATEMENT = """CREATE TABLE {table} USING parquet AS
SELECT country, name, revenue, rank() OVER (PARTITION BY country ORDER BY revenue DESC) AS rank
FROM (SELECT c.country, c.name, sum(o.amount * {factor}) AS revenue
      FROM bench_orders o JOIN bench_customers c ON o.customer_id = c.id
      GROUP BY c.country, c.name)"""

CLIENT = """
import json, sys, time
from pyspark.sql import SparkSession
url, count = sys.argv[1], int(sys.argv[2])
emitted = SparkSession.builder.remote(url).appName("bench_emitted").create()
plain = SparkSession.builder.remote(url).appName("bench_plain").config("spark.openlineage.disabled", "true").create()
sessions = {"connect-emitted": emitted, "connect-plain": plain}
for line in sys.stdin:  # the server says which variant runs which statement, and waits for the answer
    variant, table, statement = json.loads(line)
    spark = sessions[variant]
    started = time.perf_counter()
    spark.sql(statement)
    took = (time.perf_counter() - started) * 1000
    spark.sql(f"DROP TABLE {table}")
    print(json.dumps(took), flush=True)
emitted.stop()
plain.stop()
"""


class Timings:
    """Durations of wrapped calls, by label (`connect` / `classic` and what was timed)."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = defaultdict(list)

    def wrap(
        self, owner: type, name: str, label: Callable[[Any], str], before_ms: Callable[[tuple[Any, ...]], float] | None = None
    ) -> None:
        """Time `owner.name` per call; `before_ms(args)`: what the call's work took before it was
        called (the JVM's describing of an action, handed over with the callback)."""
        original = getattr(owner, name)

        def timed(instance: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(instance, *args, **kwargs)
            finally:
                earlier = before_ms(args) if before_ms is not None else 0.0
                self.ms[label(instance)].append((time.perf_counter() - started) * 1000 + earlier)

        setattr(owner, name, timed)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else 0.0


def distribution(values: list[float]) -> str:
    if not values:
        return "none"
    return f"median {statistics.median(values):.1f} / p95 {percentile(values, 0.95):.1f} / max {max(values):.1f} ms (n={len(values)})"


def install_timers(timings: Timings) -> None:
    from emitter.described import parse_listener_call
    from emitter.listener.batch import BatchListener
    from emitter.listener.connect import ConnectSessions
    from emitter.listener.worker import PipelineWorker

    def kind_of_worker(worker: Any) -> str:
        return "connect" if worker.context.session.connect is not None else "classic"

    timings.wrap(
        BatchListener,
        "_on_action",
        lambda listener: f"{kind_of_worker(listener.sink)} callback",
        lambda args: parse_listener_call(str(args[0])).describe_ms,
    )
    timings.wrap(PipelineWorker, "build_actions", lambda worker: f"{kind_of_worker(worker)} build")
    timings.wrap(ConnectSessions, "_attach", lambda _: "connect session attach")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.connect", description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-connect-") as tmp:
        report = run(Path(tmp), args.statements)
    print(report)
    return 0


def run(work_dir: Path, count: int) -> str:
    os.environ.update(
        OPENLINEAGE__TRANSPORT__TYPE="file",
        OPENLINEAGE__TRANSPORT__LOG_FILE_PATH=str(work_dir / "events.jsonl"),
        OPENLINEAGE__TRANSPORT__APPEND="true",
    )
    import socket

    import emitter
    from emitter.listener import connect_server

    timings = Timings()
    install_timers(timings)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    conf = {
        "spark.master": "local[2]",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.warehouse.dir": str(work_dir / "warehouse"),
    }
    spark, sessions = connect_server.start(port, "127.0.0.1", conf)
    spark.sparkContext.setLogLevel("ERROR")
    for statement in TABLES.split(";"):
        spark.sql(statement)
    classic = spark.newSession()
    emitter.attach(classic, {"namespace": "bench"})
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, f"sc://127.0.0.1:{port}", str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},  # a thin client: nothing of this project
    )
    assert client.stdin is not None and client.stdout is not None
    wall: dict[str, list[float]] = defaultdict(list)
    variants = ["connect-emitted", "connect-plain", "classic-emitted"]
    for index in range(-1, count):  # -1: one untimed warm-up round
        order = variants[index % 3 :] + variants[: index % 3]
        for variant in order:
            table = f"bench_out_{variant.replace('-', '_')}_{index + 1}"
            statement = STATEMENT.format(table=table, factor=index + 2)
            if variant == "classic-emitted":
                started = time.perf_counter()
                classic.sql(statement)
                took = (time.perf_counter() - started) * 1000
                classic.sql(f"DROP TABLE {table}")
            else:
                client.stdin.write(json.dumps([variant, table, statement]) + "\n")
                client.stdin.flush()
                took = float(client.stdout.readline())
            if index >= 0:
                wall[variant].append(took)
        if index == -1:
            emitter.settle()
            sessions.settle()
            for label in [label for label in timings.ms if label != "connect session attach"]:
                del timings.ms[label]  # the warm-up's callbacks and builds are not counted
    client.stdin.close()
    try:
        client.wait(120)
    except subprocess.TimeoutExpired:
        client.kill()
    emitter.settle()
    sessions.settle()
    lines = [f"Spark Connect server overhead, {count} CTAS (join + aggregate + window) per variant, alternating"]
    for kind in ("connect", "classic"):
        callbacks, builds = timings.ms[f"{kind} callback"], timings.ms[f"{kind} build"]
        lines.append(f"{kind}: listener-bus time per callback {distribution(callbacks)}")
        lines.append(f"{kind}: pipeline thread per build {distribution(builds)}")
        lines.append(f"{kind}: all emitter work per statement {(sum(callbacks) + sum(builds)) / count:.1f} ms (mean)")
    lines.append(f"connect: attaching a session at its first operation {distribution(timings.ms['connect session attach'])}")
    for variant in variants:
        lines.append(f"wall per statement, {variant}: {distribution(wall[variant])}, sum {sum(wall[variant]) / 1000:.1f} s")
    plain, emitted = sum(wall["connect-plain"]), sum(wall["connect-emitted"])
    lines.append(f"wall ratio connect emitted / plain (sums): {emitted / plain:.3f}")
    emitter.detach(classic)
    connect_server.stop(spark, sessions)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
