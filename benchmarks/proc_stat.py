"""Processes' CPU time from /proc/<pid>/stat (Linux), as the benchmarks' CPU figures read it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessStat(NamedTuple):
    pid: int
    name: str  # the command name (/proc/<pid>/comm)
    parent: int
    cpu_seconds: float  # user + system, all its threads
    reaped_cpu_seconds: float  # user + system of the children it waited for after they ended


def process_stat(pid: int) -> ProcessStat:
    """The CPU figures of process `pid` (OSError when it does not exist)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may contain spaces and parentheses; the fields after it are fixed.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 1 :].split()
    ticks = [int(value) for value in fields[11:15]]  # utime, stime, cutime, cstime
    return ProcessStat(pid, name, int(fields[1]), (ticks[0] + ticks[1]) / CLOCK_TICKS, (ticks[2] + ticks[3]) / CLOCK_TICKS)


def live_processes() -> Iterator[ProcessStat]:
    """Every process of the machine that is still there when its turn to be read comes."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield process_stat(int(entry.name))
            except OSError:
                continue
