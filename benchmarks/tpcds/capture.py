"""Capture the optimized plan JSON of every TPC-DS CTAS, as the emitter's listener sees it.

Writes `<plans>/<name>.<k>.json` (k = callback order within the CTAS, from 0), an `index.json`
describing each file, and `README.txt`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks.tpcds import generate
from benchmarks.tpcds import spark as spark_io
from benchmarks.tpcds.paths import plans_dir, tables_dir
from benchmarks.tpcds.queries import Ctas, all_ctas, load_query_texts, select_queries

# Root classes of data-writing commands (the ones the emitter turns into a run).
WRITE_COMMANDS = frozenset(
    {
        "CreateDataSourceTableAsSelectCommand",
        "InsertIntoHadoopFsRelationCommand",
        "CreateHiveTableAsSelectCommand",
        "InsertIntoHiveTable",
        "CreateTableAsSelect",
        "ReplaceTableAsSelect",
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "SaveIntoDataSourceCommand",
    }
)

README_TEXT = """\
TPC-DS (SF 0.1) optimized plans captured from Spark {spark_version} by `python -m benchmarks.tpcds capture`.

Each TPC-DS query ran as `CREATE TABLE bench.<name> USING parquet AS <query>` over external
Parquet tables in database `tpcds` (in-memory catalog, local[2], spark.sql.debug.maxToStringFields=10000;
spark.sql.ansi.doubleQuotedIdentifiers=true only for queries with double-quoted aliases).
A Python QueryExecutionListener (py4j) saved `qe.optimizedPlan().toJSON()` for every callback.

Files
  <name>.<k>.json  the plan JSON text exactly as toJSON() returned it (Spark TreeNode JSON: a
                   pre-order list of nodes), k = 0, 1, ... in callback order for that CTAS.
                   <name> is qNN, or qNN_1 / qNN_2 if a query had several statements
                   (duckdb-extension-tpcds ships q14/q23/q24/q39 as one statement each, so
                   there are none today).
  <name>.sql       the CTAS statement that produced it.
  index.json       a list, one entry per plan file:
                   {{"name", "query", "file", "callback", "func_name", "root_class",
                     "is_write", "size_bytes", "failed", "error"}}
                   is_write = root_class is a data-writing command (the one the emitter turns
                   into a run); failed = the callback was onFailure.
  failures.json    CTAS statements that raised in Spark (no plan, or a failure callback).

What Spark 4.3 reports per CTAS (see index.json for the exact list): two callbacks, both writes.
  k=0  func "file source write", InsertIntoHadoopFsRelationCommand: the nested command that
       writes the files; child WriteFiles over the optimized query. This is the run the
       emitter reports (the pipeline drops the wrapper below).
  k=1  func "command", CreateDataSourceTableAsSelectCommand: the CTAS wrapper; it has
       num-children 0 (its query is not serialized as a child) and carries the CatalogTable.
"""


@attrs.frozen
class PlanRecord:
    name: str
    query: str
    file: str
    callback: int
    func_name: str
    root_class: str
    is_write: bool
    size_bytes: int
    failed: bool
    error: str


class _Recorder:
    """Collects the callbacks of the CTAS currently running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._received: list[tuple[str, str, str, str]] = []

    def handle(self, func_name: str, query_execution: Any, exception: Any) -> None:
        plan = query_execution.optimizedPlan()
        entry = (func_name, spark_io.plan_class(plan), plan.toJSON(), spark_io.exception_text(exception))
        with self._lock:
            self._received.append(entry)

    def take(self) -> list[tuple[str, str, str, str]]:
        with self._lock:
            received, self._received = self._received, []
        return received


def capture(
    wanted: Sequence[str] | None = None,
    target: Path | None = None,
    tables_root: Path | None = None,
    query_texts: dict[str, str] | None = None,
    scratch: Path | None = None,
) -> list[PlanRecord]:
    """Run the wanted CTAS statements (all when None) and save their plans into `target`;
    the Spark warehouse is a temporary directory (under `scratch` when given), removed after."""
    if tables_root is None or query_texts is None:
        generate.ensure_generated()
    tables_root = tables_root or tables_dir()
    target = target or plans_dir()
    target.mkdir(parents=True, exist_ok=True)
    statements = all_ctas(select_queries(query_texts or load_query_texts(), wanted))
    warehouse = Path(tempfile.mkdtemp(prefix="tpcds-capture-", dir=scratch))
    session = spark_io.build_session(warehouse, "tpcds-capture")
    try:
        spark_io.register_tables(session, tables_root, generate.table_names(tables_root))
        records, failures = _capture_all(session, statements, target)
        spark_version = session.version
    finally:
        session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    _write_index(target, records, failures, spark_version, merge=bool(wanted))
    return records


def _capture_all(session: Any, statements: list[Ctas], target: Path) -> tuple[list[PlanRecord], dict[str, str]]:
    recorder = _Recorder()
    records: list[PlanRecord] = []
    failures: dict[str, str] = {}
    with spark_io.query_execution_listener(session, recorder.handle):
        for statement in statements:
            spark_io.drop_table(session, statement.table)
            spark_io.wait_for_listener_bus(session)
            recorder.take()  # only the CTAS's own callbacks are kept
            error = _run_one(session, statement)
            spark_io.wait_for_listener_bus(session)
            if error:
                failures[statement.name] = error
            records.extend(_save(statement, recorder.take(), target))
            print(f"{statement.name}: {'FAILED ' + error[:200] if error else 'ok'}", flush=True)
    return records, failures


def _run_one(session: Any, statement: Ctas) -> str:
    try:
        spark_io.run_ctas(session, statement)
    except Exception as error:  # noqa: BLE001 - a query Spark rejects is reported, not fatal
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return ""


def _save(statement: Ctas, callbacks: list[tuple[str, str, str, str]], target: Path) -> list[PlanRecord]:
    for stale in target.glob(f"{statement.name}.*.json"):
        stale.unlink()
    (target / f"{statement.name}.sql").write_text(statement.sql + "\n")
    records = []
    for index, (func_name, root_class, plan_json, error) in enumerate(callbacks):
        file_name = f"{statement.name}.{index}.json"
        (target / file_name).write_text(plan_json)
        records.append(
            PlanRecord(
                name=statement.name,
                query=statement.query_name,
                file=file_name,
                callback=index,
                func_name=func_name,
                root_class=root_class,
                is_write=root_class in WRITE_COMMANDS,
                size_bytes=len(plan_json.encode()),
                failed=bool(error),
                error=error,
            )
        )
    return records


def _write_index(target: Path, records: list[PlanRecord], failures: dict[str, str], spark_version: str, merge: bool) -> None:
    index_path, failures_path = target / "index.json", target / "failures.json"
    entries = [attrs.asdict(record) for record in records]
    if merge and index_path.exists():
        names = {record.name for record in records}
        kept = [entry for entry in json.loads(index_path.read_text()) if entry["name"] not in names]
        entries = sorted(kept + entries, key=lambda entry: (entry["name"], entry["callback"]))
        old_failures = json.loads(failures_path.read_text()) if failures_path.exists() else {}
        failures = {**{k: v for k, v in old_failures.items() if k not in names}, **failures}
    index_path.write_text(json.dumps(entries, indent=1) + "\n")
    failures_path.write_text(json.dumps(failures, indent=1, sort_keys=True) + "\n")
    (target / "README.txt").write_text(README_TEXT.format(spark_version=spark_version))


def summarize(records: list[PlanRecord]) -> str:
    writes = [record for record in records if record.is_write and not record.failed]
    sizes = sorted(record.size_bytes / 1024 for record in writes)
    if not sizes:
        return "no write plans captured"
    median = sizes[len(sizes) // 2] if len(sizes) % 2 else (sizes[len(sizes) // 2 - 1] + sizes[len(sizes) // 2]) / 2
    statements = {record.name for record in writes}
    return (
        f"{len(statements)} CTAS statements captured a write plan; "
        f"plan size KB min {sizes[0]:.1f} / median {median:.1f} / max {sizes[-1]:.1f}; "
        f"callbacks {len(records)} ({sorted({r.root_class for r in records})})"
    )
