"""CPU accounting read from /proc."""

from __future__ import annotations

import os
import time

from benchmarks.tpcds.cpu import process_cpu_seconds


def test_process_cpu_seconds_grows_with_work_done_and_matches_the_process_clock() -> None:
    before = process_cpu_seconds(os.getpid())
    own_before = time.process_time()
    total = 0
    while time.process_time() - own_before < 0.3:
        total += sum(range(1000))

    spent = process_cpu_seconds(os.getpid()) - before

    assert total > 0
    assert spent >= 0.2  # /proc ticks are coarser than process_time, never far below it
