"""CPU seconds of this Python process plus the driver JVM: a contention-robust cost measure.

On a shared machine wall time mostly measures the neighbours; CPU time spent by our two
processes does not. Linux only (reads /proc/<pid>/stat).
"""

from __future__ import annotations

import os
import time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as stat_file:
        # The command name (field 2) may contain spaces; the fields after it are fixed.
        fields = stat_file.read().rsplit(")", 1)[1].split()
    user_ticks, system_ticks = int(fields[11]), int(fields[12])
    return (user_ticks + system_ticks) / _CLOCK_TICKS


class CpuClock:
    """CPU seconds used by this process and the JVM since the clock was made."""

    def __init__(self, jvm_pid: int) -> None:
        self._jvm_pid = jvm_pid

    def now(self) -> float:
        return time.process_time() + process_cpu_seconds(self._jvm_pid)
