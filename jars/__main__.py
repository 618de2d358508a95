"""python -m jars classpath SET | python -m jars copy SET DIR (see jars/__init__.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jars import SETS, JarsUnavailable, classpath, copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jars", description="Resolve the project's pinned Maven jar sets.")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("classpath", help="print a set's classpath, resolving it first")
    show.add_argument("set", choices=SETS)
    copy_to = commands.add_parser("copy", help="copy a set's jars into a folder")
    copy_to.add_argument("set", choices=SETS)
    copy_to.add_argument("destination", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "classpath":
            print(classpath(args.set))
        else:
            print(f"{len(copy(args.set, args.destination))} jars in {args.destination}")
    except JarsUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
