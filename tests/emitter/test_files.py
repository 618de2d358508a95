"""What the emitter leaves on disk is the user's alone: the spool directory (0700, never one
another user owns), its records (0600, no temporary file left by a failed write), the plan-dump
temp files of the JVM helpers (0600); and a spooled record goes to the configured topic
whatever its file says."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emitter.listener import janino
from emitter.transports import spool as spool_module
from emitter.transports.records import Record, Sequence
from emitter.transports.spool import Spool, SpoolUnsafe

SEQUENCE = Sequence()


def _record(topic: str = "lineage", value: bytes = b"{}") -> Record:
    return Record(seq=SEQUENCE.next(), topic=topic, key="k", value=value)


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # group and others may read new files, as on most systems
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_spool_directory_and_its_records_are_the_users_alone(tmp_path: Path) -> None:
    directory = tmp_path / "cache" / "spool"
    spool = Spool(directory, 10_000, topic="lineage")
    spool.append(_record())
    [record_file] = [path for path in directory.iterdir() if path.suffix == ".rec"]
    assert (_mode(directory), _mode(record_file)) == (0o700, 0o600)
    directory.chmod(0o755)  # made by an older version, or by hand
    Spool(directory, 10_000, topic="lineage")
    assert _mode(directory) == 0o700


def test_a_spool_directory_another_user_owns_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)  # as if another user made it
    with pytest.raises(SpoolUnsafe, match="belongs to another user"):
        Spool(tmp_path, 10_000, topic="lineage")


def test_a_spooled_record_goes_to_the_configured_topic_whatever_its_file_says(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 10_000, topic="lineage")
    spool.append(_record("lineage", b'{"n": 1}'))
    planted = tmp_path / f"{SEQUENCE.next():020d}-other.rec"
    planted.write_bytes(json.dumps({"topic": "payments", "key": "k"}).encode() + b"\n" + b'{"n": 2}')
    [only] = spool.oldest(10)
    assert (only.record.topic, only.record.value) == ("lineage", b'{"n": 1}')
    assert planted.exists(), "another topic's record is left for its own application"


def test_a_failed_write_leaves_no_temporary_file_and_stale_ones_are_removed(tmp_path: Path) -> None:
    # A real failed write: the file size limit stands for a full disk (EFBIG instead of ENOSPC).
    failing = subprocess.run([sys.executable, "-c", _WRITE_OVER_THE_LIMIT, str(tmp_path)], capture_output=True, text=True)
    assert failing.stdout.strip() == "write failed", failing.stderr
    assert [path.name for path in tmp_path.iterdir() if path.name != ".drain.lock"] == []
    stale = tmp_path / f".{SEQUENCE.next():020d}-dead.rec.tmp"
    stale.write_bytes(b"half a record")
    old = os.stat(stale).st_mtime - spool_module.STALE_TEMPORARY_SECONDS - 1
    os.utime(stale, (old, old))
    Spool(tmp_path, 10_000, topic="lineage")
    assert not stale.exists()


_WRITE_OVER_THE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from emitter.transports.records import Record
from emitter.transports.spool import Spool
spool = Spool(Path(sys.argv[1]), 1_000_000, topic="lineage")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.RLIM_INFINITY))
try:
    spool.append(Record(seq=1, topic="lineage", key="k", value=b"x" * 10_000))
except OSError:
    print("write failed")
"""


def test_a_long_helper_result_is_a_temp_file_only_its_owner_reads(spark) -> None:
    helper = janino.new_instance(spark.sparkContext._gateway, "SparkLineageResult")
    reference = helper.of("x" * 5000)
    assert reference.startswith(janino.FILE_REFERENCE)
    assert _mode(Path(reference[1:])) == 0o600
    assert janino.read_result(reference) == "x" * 5000
