"""`python -m demo` (what `./run demo` runs): the whole product on embedded defaults.

1. starts a local Apache Kafka broker (single KRaft node) and the lineage consumer on a SQLite file,
2. runs the sample PySpark pipeline (demo/pipeline.py) with the emitter attached, publishing to Kafka,
3. waits until the consumer has stored every event, then prints lineage answers from its API:
   every output column's inputs, the upstream tables and columns of a table (transitively),
   the snapshots a table snapshot was derived from, and what to roll back if an input snapshot is bad,
4. prints the API address and keeps serving until Ctrl-C (when run from a terminal; `--exit` to stop at once).

With `--connect`, step 2 runs the same pipeline as a thin Spark Connect client of
`python -m emitter connect-server`, which emits its lineage (demo/connect.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from demo import answers
from demo.connect import run_pipeline_on_connect
from demo.pipeline import build_session, run
from demo.stack import Stack, running_stack

REPORT_TABLE = "default.revenue_by_country"
REPORT_COLUMN = "total_revenue"
UPSTREAM_TABLE = "default.sales"


def transport_env(work_dir: Path, stack: Stack) -> dict[str, str]:
    """The emitter's transport: the stack's broker."""
    return {
        "OPENLINEAGE__TRANSPORT__TYPE": "kafka",
        "OPENLINEAGE__TRANSPORT__TOPIC": stack.topic,
        "OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS": stack.bootstrap,
        "OPENLINEAGE__TRANSPORT__SPOOLDIR": str(work_dir / "spool"),
    }


def run_pipeline(work_dir: Path, stack: Stack) -> int:
    """Run the sample pipeline under the emitter, publishing to the stack's broker; returns the events emitted."""
    os.environ.update(transport_env(work_dir, stack))
    import emitter

    spark = build_session("lineage demo", work_dir / "warehouse")
    spark.sparkContext.setLogLevel("ERROR")
    attachment = emitter.attach(spark, {"namespace": "demo"})
    if attachment is None:
        raise RuntimeError("the emitter did not attach (disabled by OPENLINEAGE_DISABLED?); see the log")
    run(spark, work_dir)
    spark.stop()  # completes the application run and flushes the transport
    return attachment.worker.emitted_events


def print_answers(api_url: str) -> None:
    sections = [
        ("Column lineage of every output column (column-lineage store)", lambda: answers.column_lineage_table(api_url)),
        (
            f"Tables upstream of {REPORT_TABLE}, with the jobs between (table-lineage store)",
            lambda: answers.upstream_tables(api_url, REPORT_TABLE),
        ),
        (
            f"Where {REPORT_TABLE}.{REPORT_COLUMN} comes from, transitively",
            lambda: answers.column_origins(api_url, REPORT_TABLE, REPORT_COLUMN),
        ),
        (
            f"Snapshots the latest snapshot of {REPORT_TABLE} was derived from (data-lineage store)",
            lambda: answers.snapshot_origins(api_url, REPORT_TABLE),
        ),
        (
            f"If the latest snapshot of {UPSTREAM_TABLE} were bad: what to roll back and restart",
            lambda: answers.correction_plan(api_url, UPSTREAM_TABLE),
        ),
    ]
    for title, answer in sections:
        print(f"\n== {title}\n")
        try:
            print(answer())
        except Exception as error:  # noqa: BLE001 - one failed question must not hide the others
            print(f"(no answer: {error})")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=None, help="API port (default 5000, or a free one if taken)")
    parser.add_argument("--exit", action="store_true", help="stop the services after printing (default when not on a terminal)")
    parser.add_argument(
        "--connect", action="store_true", help="run the pipeline as a Spark Connect client of `python -m emitter connect-server`"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    # Spark's Python workers (the pipeline's UDF) run this interpreter, which has PySpark's extras
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="lineage-demo-") as tmp:
        work_dir = Path(tmp)
        print("Starting a local broker and the lineage consumer (SQLite)...", flush=True)
        with running_stack(work_dir, args.port) as stack:
            print(f"Broker {stack.bootstrap}, consumer API {stack.api_url}, store {stack.store_url}", flush=True)
            if args.connect:
                print("Running the sample PySpark pipeline as a Spark Connect client of a server with the emitter...", flush=True)
                emitted = run_pipeline_on_connect(work_dir, transport_env(work_dir, stack), "demo")
            else:
                print("Running the sample PySpark pipeline with the emitter attached...", flush=True)
                emitted = run_pipeline(work_dir, stack)
            stored = answers.wait_for_ingestion(stack.api_url, emitted)
            print(f"\n{emitted} OpenLineage events published to Kafka topic {stack.topic}; {stored} stored by the consumer.")
            print_answers(stack.api_url)
            print(
                f"\nLineage API: {stack.api_url}  (OpenAPI docs: {stack.api_url}/docs; Marquez Web and "
                f"marquez-python can point at it; picture: {stack.api_url}/api/v1/lineage-store/graph.svg?nodeId=...)"
            )
            if args.exit or not sys.stdin.isatty():
                return 0
            print("Serving until Ctrl-C.", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
