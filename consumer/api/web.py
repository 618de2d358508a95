"""Marquez Web served by the API process itself (`serve --web-dir DIR`): a prebuilt bundle's
files at /, its index.html for the client-side routes, the API at the same origin under /api,
as Marquez Web expects of its server."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse


def mount_web(app: FastAPI, directory: str) -> None:
    """Add the catch-all route last, after every API route."""
    root = Path(directory).resolve()
    index = root / "index.html"
    if not index.is_file():
        raise ValueError(f"--web-dir {directory}: no index.html there (expected a built Marquez Web dist/)")

    @app.get("/{path:path}", include_in_schema=False)
    def web(path: str) -> FileResponse:
        if path.startswith("api/"):
            raise HTTPException(status_code=404, detail=f"no route /{path}")
        candidate = (root / path).resolve()
        if candidate.is_relative_to(root) and candidate.is_file():
            return FileResponse(candidate)
        return FileResponse(index)
