"""The on-disk spool on its own: order, the size bound, the drain lock."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from emitter.transports.records import Record, Sequence
from emitter.transports.spool import Spool, encode

SEQUENCE = Sequence()


def record(n: int, size: int = 10) -> Record:
    return Record(seq=SEQUENCE.next(), topic="t", key=f"k{n}", value=str(n).encode().ljust(size, b" "))


def test_records_come_back_oldest_first_across_spool_instances(tmp_path: Path) -> None:
    first, second = Spool(tmp_path, 10_000), Spool(tmp_path, 10_000)
    written = [record(n) for n in range(6)]
    for index, item in enumerate(written):
        (first if index % 2 else second).append(item)
    assert [spooled.record for spooled in first.oldest(100)] == written
    first.remove(first.oldest(1)[0])
    assert [spooled.record for spooled in second.oldest(100)] == written[1:]


def test_a_record_keeps_a_missing_key(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10_000)
    keyless = Record(seq=SEQUENCE.next(), topic="t", key=None, value=b'{"a": 1}\n{"b": 2}')
    spool.append(keyless)
    assert spool.oldest(1)[0].record == keyless


def test_when_full_the_oldest_are_dropped_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    one_record_bytes = len(encode(record(0, size=100)))
    spool = Spool(tmp_path, 3 * one_record_bytes)
    written = [record(n, size=100) for n in range(7)]
    with caplog.at_level(logging.WARNING, logger="emitter.transports.spool"):
        for item in written:
            spool.append(item)
    assert [spooled.record for spooled in spool.oldest(100)] == written[-3:]
    assert spool.dropped == 4
    assert "4 dropped so far" in caplog.text


def test_a_late_record_older_than_everything_is_the_one_dropped(tmp_path: Path) -> None:
    one_record_bytes = len(encode(record(0, size=100)))
    spool = Spool(tmp_path, 2 * one_record_bytes)
    oldest = record(0, size=100)
    newer = [record(n, size=100) for n in (1, 2)]
    for item in newer:
        spool.append(item)
    spool.append(oldest)
    assert [spooled.record for spooled in spool.oldest(100)] == newer
    assert spool.dropped == 1


def test_only_one_process_holds_the_drain_lock(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10_000)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with spool.drain_lock() as acquired:
            assert acquired is False
    finally:
        holder.communicate("release\n", timeout=30)
    with spool.drain_lock() as acquired:
        assert acquired is True


_HOLD_LOCK = """
import sys
from pathlib import Path
from emitter.transports.spool import Spool
with Spool(Path(sys.argv[1]), 10_000).drain_lock() as acquired:
    print("locked" if acquired else "busy", flush=True)
    sys.stdin.readline()
"""


def test_a_record_older_than_one_already_dropped_is_not_kept(tmp_path: Path) -> None:
    one_record_bytes = len(encode(record(0, size=100)))
    spool = Spool(tmp_path, 2 * one_record_bytes)
    late = record(0, size=100)  # emitted first, spooled last (it sat in the queue)
    newer = [record(n, size=100) for n in (1, 2, 3)]
    for item in newer:
        spool.append(item)
    spool.remove(spool.oldest(1)[0])  # delivered: room for one more
    spool.append(late)
    assert [spooled.record for spooled in spool.oldest(100)] == newer[2:]
    assert spool.dropped == 2
