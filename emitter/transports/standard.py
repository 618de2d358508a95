"""openlineage-python's own file, HTTP and console transports, with events serialized once by
`records.serialize` (one pass, orjson) instead of `Serde.to_json` (attrs to dict, a copy
without nulls, then `json`): the same JSON document, written several times faster on the
attachment's pipeline thread. Everything else (configuration, file handling, authentication,
compression, retries) is openlineage-python's. `emitter.transports.factory` puts these in
place of the built-in types for the emitter's own client.
"""

from __future__ import annotations

import io
import threading
from typing import Any

from openlineage.client.transport.console import ConsoleTransport as _ConsoleTransport
from openlineage.client.transport.console import log as console_log
from openlineage.client.transport.file import FileTransport as _FileTransport
from openlineage.client.transport.http import HttpTransport as _HttpTransport

from emitter.transports.records import serialize


class FileTransport(_FileTransport):
    """One event per line (or per file), as openlineage-python writes them; its `debug_mode`
    (indented JSON) stays with openlineage-python's serializer."""

    def emit(self, event: Any) -> None:
        if self.config.debug_mode or not hasattr(self, "_file_handler"):
            super().emit(event)
            return
        log_file_path = self._get_file_path(event)
        try:
            with self._file_handler.open_file(log_file_path, "a" if self.config.append else "w") as log_file:
                log_file.write(serialize(event).decode("utf-8") + "\n")
        except (PermissionError, io.UnsupportedOperation) as error:
            raise RuntimeError(f"Log file `{log_file_path}` is not writeable") from error
        except Exception as error:
            raise RuntimeError(f"Failed to write to log file `{log_file_path}`: {error}") from error


class HttpTransport(_HttpTransport):
    """openlineage-python's HTTP transport posting the body `serialize` wrote: its `emit`
    serializes with `Serde` and hands the text to `_prepare_request`, so `emit` passes it an
    empty document to serialize and `_prepare_request` takes this thread's body instead."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._bodies = threading.local()

    def emit(self, event: Any) -> Any:
        self._bodies.text = serialize(event).decode("utf-8")
        try:
            return super().emit({})  # type: ignore[arg-type]  # Serde writes "{}"; the body is ours
        finally:
            self._bodies.text = None

    def _prepare_request(self, event_str: str) -> tuple[bytes | str, dict[str, str]]:
        text = getattr(self._bodies, "text", None)
        return super()._prepare_request(event_str if text is None else text)


class ConsoleTransport(_ConsoleTransport):
    def emit(self, event: Any) -> None:
        console_log.info(serialize(event).decode("utf-8"))


# the built-in transport types these replace in the emitter's client
SERIALIZING_TRANSPORTS = {
    "file": f"{__name__}.FileTransport",
    "http": f"{__name__}.HttpTransport",
    "console": f"{__name__}.ConsoleTransport",
}
