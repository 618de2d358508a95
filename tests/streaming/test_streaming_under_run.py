"""An unmodified streaming script under `python -m emitter run`: one streaming run with a
RUNNING event per micro-batch, and the script's exit code unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.spark import read_events, run_under_emitter, script_prelude
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

SCRIPT = """
import json, os, sys
source, sink = sys.argv[1], sys.argv[2]
os.makedirs(source)
for n in range(3):
    with open(os.path.join(source, f"part-{n}.json"), "w") as f:
        f.write(json.dumps({"n": n}) + "\\n")
query = (spark.readStream.schema("n int").option("maxFilesPerTrigger", 1).json(source)
         .selectExpr("n * 10 AS n10")
         .writeStream.format("parquet").option("checkpointLocation", sink + "_checkpoint")
         .trigger(availableNow=True).start(sink))
query.awaitTermination()
print("batches", query.lastProgress["batchId"] + 1)
"""


def test_streaming_script_under_emitter_run(tmp_path: Path) -> None:
    script = tmp_path / "stream_job.py"
    script.write_text(script_prelude("stream-job", tmp_path / "warehouse") + SCRIPT)
    events_path = tmp_path / "events.jsonl"
    source, sink = tmp_path / "in", tmp_path / "out"

    result = run_under_emitter(script, events_path, (str(source), str(sink)))

    assert result.returncode == 0, result.stderr[-3000:]
    assert "batches 3" in result.stdout
    events = read_events(events_path)
    for event in events:
        assert_valid_event(event)
    streaming = [e for e in events if e["job"]["facets"].get("jobType", {}).get("processingType") == "STREAMING"]
    assert [e["eventType"] for e in streaming] == ["START", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"]
    assert [e["run"]["facets"]["microBatch"]["batchId"] for e in streaming[1:4]] == [0, 1, 2]
    sink_ids = [e["outputs"][0]["facets"]["snapshot"]["snapshotId"] for e in streaming[1:4]]
    assert len(set(sink_ids)) == 3
    lineage = streaming[0]["outputs"][0]["facets"]["columnLineage"]["fields"]["n10"]["inputFields"]
    assert [(f["name"], f["field"]) for f in lineage] == [(str(source), "n")]
    assert json.dumps(streaming[0]["inputs"]).count(str(source)) >= 1
