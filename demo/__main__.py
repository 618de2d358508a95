"""`python -m demo`: run the sample pipeline with the emitter attached (file transport into a
temp dir) and print each output column's lineage.

Later steps (a local broker + the consumer, API answers) plug in after `run_pipeline`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from demo import report
from demo.pipeline import build_session, run


def run_pipeline(work_dir: Path) -> Path:
    """Run the sample pipeline under the emitter; returns the file its events were written to."""
    events_path = work_dir / "events.jsonl"
    os.environ.update(
        OPENLINEAGE__TRANSPORT__TYPE="file",
        OPENLINEAGE__TRANSPORT__LOG_FILE_PATH=str(events_path),
        OPENLINEAGE__TRANSPORT__APPEND="true",
    )
    import emitter

    spark = build_session("lineage demo", work_dir / "warehouse")
    spark.sparkContext.setLogLevel("ERROR")
    emitter.attach(spark, {"namespace": "demo"})
    run(spark, work_dir)
    spark.stop()  # completes the application run and flushes the transport
    return events_path


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="lineage-demo-") as tmp:
        events_path = run_pipeline(Path(tmp))
        events = report.read_events(events_path)
        runs = {e["run"]["runId"] for e in events}
        print(f"\n{len(events)} OpenLineage events, {len(runs)} runs (written to {events_path.name})\n")
        print(report.render_table(report.lineage_rows(events)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
