"""`python -m benchmarks.tpcds generate | capture [--queries q1,q5] | run [--queries q1,q5] [--master local[1]] | compare LANDED THIS
| agent [--queries q1,q5] [--master local[1]]`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from benchmarks.tpcds.queries import parse_query_list
from benchmarks.tpcds.spark import DEFAULT_MASTER


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tpcds", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate", help="TPC-DS SF 0.1 Parquet tables and the 99 queries")
    for name, help_text in (
        ("capture", "save the optimized plan JSON of every CTAS"),
        ("run", "time every CTAS without and with the emitter"),
        ("agent", "the OpenLineage Spark agent beside the emitter: lineage against sqlglot, cost per action"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--queries", help="comma-separated subset, e.g. q1,q5,q14")
    for name in ("run", "agent"):
        commands.choices[name].add_argument(
            "--master",
            default=DEFAULT_MASTER,
            help=f"Spark master (default {DEFAULT_MASTER}); local[1] runs the tasks on one core and leaves the other to "
            "the driver and the emitter, as on a cluster, where the driver runs no tasks",
        )
    compare = commands.add_parser("compare", help="two runs' summary.json side by side (the landed code's, then this code's)")
    compare.add_argument("landed", help="summary.json of a run of the landed code")
    compare.add_argument("this", help="summary.json of a run of this code, on the same statements")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    wanted = parse_query_list(getattr(arguments, "queries", None))
    if arguments.command == "generate":
        from benchmarks.tpcds import generate

        generate.write_tables()
        generate.write_queries()
        return 0
    if arguments.command == "compare":
        from benchmarks.tpcds.report import format_side_by_side

        with open(arguments.landed, encoding="utf-8") as landed, open(arguments.this, encoding="utf-8") as this:
            print(format_side_by_side(json.load(landed), json.load(this)))
        return 0
    if arguments.command == "capture":
        from benchmarks.tpcds import capture

        print(capture.summarize(capture.capture(wanted)))
        return 0
    if arguments.command == "agent":
        from benchmarks.tpcds import agent

        return agent.main(wanted, arguments.master)
    from benchmarks.tpcds import runner

    return runner.main(wanted, arguments.master)


if __name__ == "__main__":
    sys.exit(main())
