"""`python -m consumer lineage ...`: the lineage-store questions on the command line, printed as tables.

    lineage upstream TABLE [--depth N] [--as-of T]  tables a table is derived from, with the jobs between
    lineage downstream TABLE [--depth N] [--as-of T]  tables derived from a table
    lineage columns TABLE COLUMN [--downstream] [--direct-only] [--depth N] [--as-of T]
    lineage snapshots TABLE SNAPSHOT [--downstream] [--depth N] [--as-of T]
    lineage correction-plan TABLE SNAPSHOT        what to roll back and restart after a bad snapshot
    lineage partitions TABLE PARTITION [--downstream] [--depth N]
    lineage partition-correction-plan TABLE PARTITION   what to recompute and rerun after a bad partition
    lineage aligned-start TABLE [TABLE ...]       newest mutually consistent snapshots to start a job from
    lineage graph NODE_ID [--format svg|dot] [--depth N] [--output FILE] [--as-of T]
    lineage versions JOB                          the job's lineage versions: first and last run, runs, current
    lineage diff JOB --from X --to Y              what changed in the job's lineage between two versions
    lineage field-history TABLE                   per field: the job version changes that changed what flows into it

TABLE is dataset:NAMESPACE:NAME, NAMESPACE:NAME, or an unambiguous name / database.table; PARTITION is
column=value, several joined by '/' (dt=2024-01-02, a=1/b=x); JOB is job:NAMESPACE:NAME, NAMESPACE:NAME or an
unambiguous name; a version (X, Y) is a hash, a unique prefix of one (7 characters or more) or an ISO-8601
instant (the version current then). --as-of T (ISO 8601, e.g. 2026-03-01T12:00:00Z; no offset: UTC)
answers with each job's version current at T instead of today's (snapshots: the runs created by T).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from consumer.query import history
from consumer.query import lineage_store as ls
from consumer.query.as_of import parse_as_of
from consumer.query.errors import NotFound, QueryError
from consumer.query.render import to_dot, to_svg


def main(argv: Sequence[str], store: Any, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(list(argv))
    try:
        parse_as_of(getattr(args, "as_of", None), "--as-of")  # a bad instant named as the user typed it
        args.run(args, store, out)
    except (QueryError, NotFound) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m consumer lineage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer instead of tables")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("upstream", "downstream"):
        command = commands.add_parser(name, help=f"{name} tables of TABLE")
        command.add_argument("table")
        command.add_argument("--depth", type=int, default=20)
        _as_of_option(command)
        command.set_defaults(run=_tables, direction=name)
    command = commands.add_parser("columns", help="where a column comes from (or goes with --downstream)")
    command.add_argument("table")
    command.add_argument("column")
    command.add_argument("--downstream", action="store_true")
    command.add_argument("--direct-only", action="store_true")
    command.add_argument("--depth", type=int, default=20)
    _as_of_option(command)
    command.set_defaults(run=_columns)
    command = commands.add_parser("snapshots", help="snapshots TABLE@SNAPSHOT derives from (or --downstream)")
    command.add_argument("table")
    command.add_argument("snapshot")
    command.add_argument("--downstream", action="store_true")
    command.add_argument("--depth", type=int, default=20)
    _as_of_option(command, "only the steps of runs created at or before T (ISO 8601; no offset: UTC)")
    command.set_defaults(run=_snapshots)
    command = commands.add_parser("correction-plan", help="what to roll back and restart after a bad snapshot")
    command.add_argument("table")
    command.add_argument("snapshot")
    command.add_argument("--depth", type=int, default=30)
    command.set_defaults(run=_correction)
    command = commands.add_parser("partitions", help="partitions TABLE PARTITION derives from (or --downstream)")
    command.add_argument("table")
    command.add_argument("partition")
    command.add_argument("--downstream", action="store_true")
    command.add_argument("--depth", type=int, default=20)
    command.set_defaults(run=_partitions)
    command = commands.add_parser("partition-correction-plan", help="what to recompute and rerun after a bad partition")
    command.add_argument("table")
    command.add_argument("partition")
    command.add_argument("--depth", type=int, default=30)
    command.set_defaults(run=_partition_correction)
    command = commands.add_parser("aligned-start", help="newest mutually consistent snapshots of the tables")
    command.add_argument("tables", nargs="+")
    command.set_defaults(run=_aligned)
    command = commands.add_parser("graph", help="a node's lineage as SVG or DOT")
    command.add_argument("node_id")
    command.add_argument("--format", choices=("svg", "dot"), default="dot")
    command.add_argument("--depth", type=int, default=5)
    command.add_argument("--output", help="write to this file instead of stdout")
    _as_of_option(command)
    command.set_defaults(run=_graph)
    command = commands.add_parser("versions", help="the job's lineage versions, oldest first")
    command.add_argument("job")
    command.add_argument("--limit", type=int, default=100)
    command.set_defaults(run=_versions)
    command = commands.add_parser("diff", help="what changed in the job's lineage between two versions")
    command.add_argument("job")
    command.add_argument("--from", dest="older", required=True, help="version hash (or prefix) or ISO-8601 instant")
    command.add_argument("--to", dest="newer", required=True, help="version hash (or prefix) or ISO-8601 instant")
    command.set_defaults(run=_diff)
    command = commands.add_parser(
        "field-history", help="per field of TABLE: the job version changes that changed what flows into it"
    )
    command.add_argument("table")
    command.set_defaults(run=_field_history)
    return parser


def _as_of_option(command: argparse.ArgumentParser, help_text: str = "") -> None:
    command.add_argument(
        "--as-of",
        metavar="T",
        help=help_text or "answer with each job's version current at T (ISO 8601, e.g. 2026-03-01T12:00:00Z; no offset: UTC)",
    )


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _emit(args: argparse.Namespace, out: TextIO, answer: dict, title: str, rows: list, headers: list[str]) -> None:
    if args.json:
        print(json.dumps(answer, indent=2), file=out)
        return
    print(title, file=out)
    print(table(rows, headers) if rows else "(none)", file=out)


def _name(ref: dict | None) -> str:
    return "" if ref is None else f"{ref['namespace']}:{ref['name']}"


def _tables(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    answer = ls.table_lineage(store, args.table, args.direction, args.depth, args.as_of)
    rows = [(e["depth"], _name(e["from"]), _name(e["job"]), _name(e["to"])) for e in answer["edges"]]
    title = f"{args.direction} of {_name(answer['table'])} ({len(answer['tables'])} tables, depth {args.depth})"
    title += _as_of_title(answer)
    _emit(args, out, answer, title, rows, ["depth", "from table", "job", "to table"])


def _as_of_title(answer: dict) -> str:
    return f" as of {answer['asOf']}" if "asOf" in answer else ""


def _field(ref: dict) -> str:
    return f"{ref['namespace']}:{ref['dataset']}.{ref['field']}"


def _columns(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    direction = "downstream" if args.downstream else "upstream"
    answer = ls.column_lineage(store, args.table, args.column, direction, args.depth, args.direct_only, args.as_of)
    rows = [
        (
            e["depth"],
            _field(e["from"]),
            _field(e["to"]),
            e["transformation"]["type"],
            e["transformation"]["subtype"],
            e["transformation"]["description"],
            "yes" if e["transformation"]["masking"] else "",
            e["job"]["name"],
        )
        for e in answer["edges"]
    ]
    title = f"{direction} of column {_field(answer['column'])}" + (" (DIRECT only)" if args.direct_only else "")
    title += _as_of_title(answer)
    _emit(
        args, out, answer, title, rows, ["depth", "from column", "to column", "type", "subtype", "description", "masking", "job"]
    )


def _snapshots(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    direction = "downstream" if args.downstream else "upstream"
    answer = ls.snapshot_lineage(store, args.table, args.snapshot, direction, args.depth, args.as_of)
    rows = [
        (x["depth"], _name(x["from"]), x["from"]["snapshot"], x["job"]["name"], x["batchId"], _name(x["to"]), x["to"]["snapshot"])
        for x in answer["steps"]
    ]
    title = f"{direction} snapshots of {_name(answer['table'])} @ {args.snapshot}" + _as_of_title(answer)
    _emit(args, out, answer, title, rows, ["depth", "from table", "snapshot", "job", "batch", "to table", "snapshot"])


def _correction(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    answer = ls.correction_plan(store, args.table, args.snapshot, args.depth)
    if args.json:
        print(json.dumps(answer, indent=2), file=out)
        return
    print(
        f"bad snapshot {args.snapshot} of {_name(answer['table'])}; roll it back to: {answer['rollBackTableTo'] or '(nothing older)'}",
        file=out,
    )
    print(
        table(
            [(_name(t), ", ".join(t["derivedSnapshots"]), t["rollBackTo"] or "(nothing older)") for t in answer["tables"]],
            ["downstream table", "derived (bad) snapshots", "roll back to"],
        )
        if answer["tables"]
        else "(no downstream tables)",
        file=out,
    )
    print(file=out)
    print(
        table([(_name(j), j["restartFromBatch"], j["runId"]) for j in answer["jobs"]], ["job", "restart from batch", "run"])
        if answer["jobs"]
        else "(no jobs to restart)",
        file=out,
    )
    statements = [answer["rollBackTableStatement"], *(t["rollBackStatement"] for t in answer["tables"])]
    if any(statements):
        print("\nroll back with (Spark SQL):", file=out)
        for statement in filter(None, statements):
            print(f"  {statement};", file=out)


def _partition(ref: dict) -> str:
    return f"{_name(ref)} {ref['partition'] or '(whole table)'}"


def _partitions(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    direction = "downstream" if args.downstream else "upstream"
    answer = ls.partition_lineage(store, args.table, args.partition, direction, args.depth)
    rows = [
        (x["depth"], _partition(x["from"]), x["job"]["name"], x["batchId"], x["runId"], _partition(x["to"]))
        for x in answer["steps"]
    ]
    title = f"{direction} partitions of {_name(answer['table'])} {answer['partition']}"
    _emit(args, out, answer, title, rows, ["depth", "from partition", "job", "batch", "run", "to partition"])


def _partition_correction(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    answer = ls.partition_correction_plan(store, args.table, args.partition, args.depth)
    if args.json:
        print(json.dumps(answer, indent=2), file=out)
        return
    print(f"bad partition {answer['badPartition']} of {_name(answer['table'])}", file=out)
    recompute = [(_partition(p), ", ".join(sorted({w["job"]["name"] for w in p["writtenBy"]}))) for p in answer["partitions"]]
    print(table(recompute, ["partition to recompute", "written by"]) if recompute else "(no downstream partitions)", file=out)
    print(file=out)
    reruns = [(_name(j), b["batchId"], b["runId"]) for j in answer["jobs"] for b in j["batches"]]
    print(table(reruns, ["job", "rerun batch", "run"]) if reruns else "(no jobs to rerun)", file=out)


def _aligned(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    answer = ls.aligned_start(store, args.tables)
    title = "aligned start" + ("" if answer["consistent"] else ": no mutually consistent set of snapshots")
    _emit(
        args,
        out,
        answer,
        title,
        [(_name(x), x["snapshot"], x["createdAt"]) for x in answer["snapshots"]],
        ["table", "start from snapshot", "created at"],
    )


def _graph(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    picture = ls.picture(store, args.node_id, args.depth, as_of=args.as_of)
    text = to_svg(picture) if args.format == "svg" else to_dot(picture)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
        print(f"wrote {len(picture.nodes)} nodes to {args.output}", file=out)
    else:
        out.write(text)


SHORT_HASH = 12  # characters of a version hash printed in tables


def _short(version: str | None) -> str:
    return "(none)" if version is None else version[:SHORT_HASH]


def _versions(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    namespace, name = history.job_named(store, args.job)
    answer = history.job_versions(store, namespace, name, args.limit)
    rows = [
        (_short(v["version"]), v["firstRunAt"] or "(never run)", v["lastRunAt"], v["runCount"], "yes" if v["current"] else "")
        for v in answer["versions"]
    ]
    title = f"lineage versions of {namespace}:{name} ({answer['totalCount']})"
    _emit(args, out, answer, title, rows, ["version", "first run", "last run", "runs", "current"])


def _diff(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    namespace, name = history.job_named(store, args.job)
    answer = history.job_version_diff(store, namespace, name, args.older, args.newer)
    title = f"{namespace}:{name}: {_short(answer['from']['version'])} -> {_short(answer['to']['version'])}"
    _emit(args, out, answer, title, diff_rows(answer["diff"]), ["change", "what", "detail"])


def diff_rows(diff: dict) -> list[tuple[str, str, str]]:
    """A job-version diff (consumer.store.version_diff) as (change, what, detail) rows."""
    rows: list[tuple[str, str, str]] = []
    for side, label in (("inputs", "reads"), ("outputs", "writes")):
        for how in ("added", "removed"):
            rows += [(f"{label} {how}", _name(d), "") for d in diff[side][how]]
    for how in ("added", "removed"):
        rows += [(f"field {how}", _field(f), f["type"] or "") for f in diff["fields"][how]]
    rows += [("field retyped", _field(f), f"{f['from']} -> {f['to']}") for f in diff["fields"]["retyped"]]
    for how in ("added", "removed"):
        rows += [(f"edge {how}", _edge(e), _how(e["transformation"])) for e in diff["edges"][how]]
    rows += [("edge changed", _edge(e), f"{_how(e['from'])} -> {_how(e['to'])}") for e in diff["edges"]["changed"]]
    return rows


def _edge(edge: dict) -> str:
    target = edge["output"]
    into = _field(target) if target["field"] is not None else f"{target['namespace']}:{target['dataset']} (whole table)"
    return f"{into} <- {_field(edge['input'])}"


def _how(transformation: dict) -> str:
    text = f"{transformation['type']}/{transformation['subtype']}"
    if transformation["description"]:
        text += f" {transformation['description']!r}"
    return text + (" masking" if transformation["masking"] else "")


def _field_history(args: argparse.Namespace, store: Any, out: TextIO) -> None:
    namespace, name = history.dataset_named(store, args.table)
    answer = history.field_history(store, namespace, name)
    rows = [
        (
            entry["field"] or "(whole table)",
            change["at"],
            _name(change["job"]),
            f"{_short(change['fromVersion'])} -> {_short(change['toVersion'])}",
            how,
            edge.split(" <- ", 1)[1],
            detail,
        )
        for entry in answer["fields"]
        for change in entry["changes"]
        for how, edge, detail in diff_rows({**_NO_TABLE_CHANGES, "edges": change})
    ]
    headers = ["field", "at", "job", "versions", "change", "from column", "transformation"]
    _emit(args, out, answer, f"field history of {namespace}:{name}", rows, headers)


_NO_TABLE_CHANGES: dict = {
    "inputs": {"added": [], "removed": []},
    "outputs": {"added": [], "removed": []},
    "fields": {"added": [], "removed": [], "retyped": []},
}
