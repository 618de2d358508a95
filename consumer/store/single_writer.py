"""SQLite has one writer: an exclusive lock file next to the database says which process it is.

A writer command (`ingest`, `serve`, `replay`) claims it for its lifetime and a second one fails
at once with a readable error; a plain `Store.write` from a library user takes it per transaction,
waiting a while for it. The operating system drops the lock when its process ends, however it ends."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


class LockHeld(RuntimeError):
    """Another process holds the lock; `holder` is its pid as it wrote it."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"held by pid {holder}")
        self.holder = holder


class WriterLock:
    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".writer-lock")
        self._file: int | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, wait_seconds: float = 0.0) -> None:
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
                    os.close(descriptor)
                    raise LockHeld(holder) from None
                time.sleep(0.05)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, str(os.getpid()).encode(), 0)
        self._file = descriptor

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            os.close(self._file)
            self._file = None
