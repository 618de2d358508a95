"""Serves a prebuilt Marquez Web bundle and proxies /api to the Marquez API, as the
marquezproject/marquez-web image does (its web/setupProxy.js): static files at /, index.html for
the client routes, /api/... forwarded to MARQUEZ_HOST:MARQUEZ_PORT. Standard library only.

    python marquez_web_server.py DIST_DIR      (WEB_HOST, WEB_PORT, MARQUEZ_HOST, MARQUEZ_PORT)
"""

from __future__ import annotations

import functools
import os
import sys
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROXY_TIMEOUT_SECONDS = 60
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}


class MarquezWebHandler(SimpleHTTPRequestHandler):
    def __init__(self, *args, api_base: str, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.api_base = api_base
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if self.path.startswith("/api/"):
            self._proxy()
            return
        if not (Path(self.directory) / self.path.split("?")[0].lstrip("/")).is_file():
            self.path = "/index.html"  # a client-side route
        super().do_GET()

    do_POST = do_PUT = do_DELETE = lambda self: self._proxy()  # noqa: N815 - http.server's handler names

    def _proxy(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        request = urllib.request.Request(self.api_base + self.path, data=body, headers=headers, method=self.command)  # noqa: S310 - the consumer's http(s) URL given on the command line
        try:
            with urllib.request.urlopen(request, timeout=PROXY_TIMEOUT_SECONDS) as response:  # noqa: S310 - the consumer's http(s) URL given on the command line
                self._reply(response.status, response.headers.items(), response.read())
        except urllib.error.HTTPError as error:
            self._reply(error.code, error.headers.items(), error.read())
        except OSError as error:
            self._reply(502, [("Content-Type", "text/plain")], f"Marquez API unreachable: {error}\n".encode())

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(dist_dir: str) -> None:
    api_base = f"http://{os.environ.get('MARQUEZ_HOST', '127.0.0.1')}:{os.environ.get('MARQUEZ_PORT', '5000')}"
    handler = functools.partial(MarquezWebHandler, directory=dist_dir, api_base=api_base)
    address = (os.environ.get("WEB_HOST", "127.0.0.1"), int(os.environ.get("WEB_PORT", "3000")))
    print(f"Marquez Web on http://{address[0]}:{address[1]}, API at {api_base}", flush=True)
    ThreadingHTTPServer(address, handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
