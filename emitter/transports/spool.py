"""On-disk spool: records that could not be delivered yet, oldest first, shared by applications.

One file per record, named ``{seq:020d}-{writer}.rec`` so a directory listing sorted by
name is the order the events were emitted in (see ``records.Sequence``), across every
process that spooled into the directory. A file holds one JSON header line
(``{"topic": ..., "key": ...}``) followed by the event bytes, and appears atomically
(written aside, then renamed), so a reader never sees half a record.

The directory is bounded (``max_bytes``): when a new record does not fit, the OLDEST
records are deleted and the count is logged — recent lineage is worth more than old.

Whoever delivers spooled records holds :meth:`Spool.drain_lock` (an exclusive ``flock``
on ``.drain.lock`` in the directory) so two applications on one host never send the same
records twice; writers need no lock, since names never collide.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs

from emitter.transports.records import Record

try:
    import fcntl
except ImportError:  # not on Windows: one application per spool directory there
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

RECORD_SUFFIX = ".rec"
LOCK_FILE_NAME = ".drain.lock"
WRITER_ID = f"{os.getpid()}{uuid.uuid4().hex[:6]}"


@attrs.frozen
class SpooledRecord:
    path: Path
    record: Record


def default_spool_dir(bootstrap_servers: str) -> Path:
    """Under the user cache dir, one directory per Kafka cluster (records carry their topic)."""
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cluster_id = hashlib.sha1(bootstrap_servers.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]
    return cache_home / "spark-lineage" / "kafka-spool" / cluster_id


def encode(record: Record) -> bytes:
    header = json.dumps({"topic": record.topic, "key": record.key}, sort_keys=True).encode("utf-8")
    return header + b"\n" + record.value


def decode(seq: int, data: bytes) -> Record:
    header, _, value = data.partition(b"\n")
    fields = json.loads(header)
    return Record(seq=seq, topic=fields["topic"], key=fields["key"], value=value)


class Spool:
    """A bounded FIFO of records in a directory (see the module docstring). Thread-safe."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.dropped = 0
        self._lock = threading.Lock()
        self._known_bytes: int | None = None
        self._dropped_through_seq = 0
        directory.mkdir(parents=True, exist_ok=True)

    def append(self, record: Record) -> None:
        data = encode(record)
        with self._lock:
            if len(data) > self.max_bytes:
                self._log_dropped(1, f"an event of {len(data)} bytes is larger than spool {self.directory}", "")
                return
            if record.seq <= self._dropped_through_seq:  # older than what was dropped already
                self._log_dropped(1, f"spool {self.directory} is full ({self.max_bytes} bytes max)", "oldest ")
                return
            name = f"{record.seq:020d}-{WRITER_ID}{RECORD_SUFFIX}"
            if not self._make_room(name, len(data)):
                return
            self._write(name, data)
            self._known_bytes = (self._known_bytes or 0) + len(data)

    def oldest(self, limit: int) -> list[SpooledRecord]:
        """Up to `limit` records, oldest first (records another process deletes meanwhile are skipped)."""
        found: list[SpooledRecord] = []
        for name in self._names()[:limit]:
            path = self.directory / name
            try:
                found.append(SpooledRecord(path, decode(int(name.split("-", 1)[0]), path.read_bytes())))
            except FileNotFoundError:
                continue
            except (ValueError, KeyError) as error:
                log.warning("Removing unreadable spool file %s: %s", path, error)
                self._unlink(path)
        return found

    def remove(self, spooled: SpooledRecord) -> None:
        with self._lock:
            self._unlink(spooled.path)

    def is_empty(self) -> bool:
        return not self._names()

    def __len__(self) -> int:
        return len(self._names())

    @contextlib.contextmanager
    def drain_lock(self) -> Iterator[bool]:
        """Yields True when this process may deliver the spool now, False when another one is."""
        if fcntl is None:
            yield True
            return
        with open(self.directory / LOCK_FILE_NAME, "a+b") as lock_file:
            try:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _names(self) -> list[str]:
        try:
            return sorted(name for name in os.listdir(self.directory) if name.endswith(RECORD_SUFFIX))
        except FileNotFoundError:
            return []

    def _make_room(self, new_name: str, needed: int) -> bool:
        """Delete the oldest records until `needed` more bytes fit; False when the new record is itself the oldest."""
        if self._known_bytes is not None and self._known_bytes + needed <= self.max_bytes:
            return True
        # other processes write here too: count what is really on disk before deleting anything
        sizes = [(name, self._size(name)) for name in self._names()]
        total = sum(size for _, size in sizes) + needed
        dropped = 0
        keep_new = True
        for name, size in sorted([*sizes, (new_name, needed)]):
            if total <= self.max_bytes:
                break
            if name == new_name:  # a late-spooled record older than all on disk goes first
                keep_new = False
            else:
                self._unlink(self.directory / name)
            self._dropped_through_seq = max(self._dropped_through_seq, int(name.split("-", 1)[0]))
            total -= size
            dropped += 1
        self._known_bytes = total - (needed if keep_new else 0)
        if dropped:
            self._log_dropped(dropped, f"spool {self.directory} is full ({self.max_bytes} bytes max)", "oldest ")
        return keep_new

    def _log_dropped(self, count: int, reason: str, which: str) -> None:
        self.dropped += count
        log.warning("%s: dropped %d %slineage event(s), %d dropped so far", reason, count, which, self.dropped)

    def _size(self, name: str) -> int:
        try:
            return (self.directory / name).stat().st_size
        except FileNotFoundError:
            return 0

    def _write(self, name: str, data: bytes) -> None:
        temporary = self.directory / f".{name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, self.directory / name)

    def _unlink(self, path: Path) -> None:
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        if self._known_bytes is not None:
            self._known_bytes = max(0, self._known_bytes - size)
