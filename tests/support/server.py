"""A real uvicorn server for tests.

``serving(app) -> Iterator[str]`` (context manager)
    Serves the ASGI `app` on a free loopback port in a thread; yields its base URL
    (``http://127.0.0.1:PORT``) once it accepts requests, and stops it on exit (a server that
    does not stop within its graceful-shutdown time fails the test instead of hanging it).
    `config` goes to uvicorn.Config (e.g. ssl_certfile, ssl_keyfile: then the URL is https).
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

SHUTDOWN_SECONDS = 5


@contextmanager
def serving(app: Any, **config: Any) -> Iterator[str]:
    port = free_port()
    settings = {"log_level": "warning", "timeout_graceful_shutdown": SHUTDOWN_SECONDS, **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:  # startup wait, not a timed assertion
        if not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"{'https' if config.get('ssl_certfile') else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_SECONDS * 3)
        if thread.is_alive():
            pytest.fail(f"uvicorn did not stop within {SHUTDOWN_SECONDS * 3} s")
