"""A real uvicorn server for tests.

``serving(app) -> Iterator[str]`` (context manager)
    Serves the ASGI `app` on a free loopback port in a thread; yields its base URL
    (``http://127.0.0.1:PORT``) once it accepts requests, and stops it on exit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from demo.broker import free_port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:  # startup wait, not a timed assertion
        if not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
