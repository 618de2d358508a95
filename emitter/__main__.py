"""Command line: run an unmodified PySpark script with the emitter attached.

    python -m emitter run job.py [ARGS...]      (also: lineage-emitter run ...)
    python -m emitter pythonpath                 directory to put on PYTHONPATH so that
                                                 `spark-submit job.py` attaches with no code change
    python -m emitter connect-server [--port 15002] [--host 127.0.0.1] [--conf KEY=VALUE ...]
                                                 a Spark Connect server (PySpark 4) emitting the
                                                 lineage of every client session it runs

`run` executes the script as `__main__` with `sys.argv = [job.py, ARGS...]`, every SparkSession
that `SparkSession.builder.getOrCreate()` returns attached; the script's output and exit code
are unchanged, and its events are flushed (bounded) before the process ends.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence

USAGE = (
    "usage: python -m emitter run SCRIPT.py [ARGS...] | python -m emitter pythonpath\n"
    "       python -m emitter connect-server [--port 15002] [--host 127.0.0.1] [--conf KEY=VALUE ...]"
)
DEFAULT_CONNECT_PORT = 15002


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "run" and rest:
        return run_script(rest[0], rest[1:])
    if command == "pythonpath":
        print(autoattach_dir())
        return 0
    if command == "connect-server":
        return connect_server(rest)
    print(USAGE, file=sys.stderr)
    return 2


def autoattach_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "autoattach")


def run_script(script: str, script_args: Sequence[str]) -> int:
    from emitter import listener

    listener.install_auto_attach()
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        listener.close_all()
        listener.uninstall_auto_attach()
    return 0


def connect_server_arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m emitter connect-server",
        description="Run a Spark Connect server with the OpenLineage emitter attached to every client session.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_CONNECT_PORT, help="gRPC port (default %(default)s)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s: this machine only)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark conf entry (repeatable)")
    arguments = parser.parse_args(list(argv))
    malformed = [entry for entry in arguments.conf if "=" not in entry]
    if malformed:
        parser.error(f"--conf takes KEY=VALUE, not {malformed[0]!r}")
    arguments.conf = dict(entry.split("=", 1) for entry in arguments.conf)
    return arguments


def connect_server(argv: Sequence[str]) -> int:
    arguments = connect_server_arguments(argv)
    from emitter.listener import connect_server as server

    try:
        return server.serve(arguments.port, arguments.host, arguments.conf)
    except server.ConnectServerError as error:
        print(f"connect-server: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
