"""CPU seconds of this Python process plus the driver JVM: a contention-robust cost measure.

On a shared machine wall time mostly measures the neighbours; CPU time spent by our two
processes does not. Linux only (reads /proc/<pid>/stat).
"""

from __future__ import annotations

import time

from benchmarks.proc_stat import process_stat


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads), in seconds."""
    return process_stat(pid).cpu_seconds


class CpuClock:
    """CPU seconds used by this process and the JVM since the clock was made."""

    def __init__(self, jvm_pid: int) -> None:
        self._jvm_pid = jvm_pid

    def now(self) -> float:
        return time.process_time() + process_cpu_seconds(self._jvm_pid)
