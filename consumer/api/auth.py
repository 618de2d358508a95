"""Bearer-token guard for the endpoints that change the store (ingestion, delete).

Read endpoints stay open. With no token configured the guard lets everything through, as Marquez does.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


def require_token(request: Request) -> None:
    expected: str | None = request.app.state.api_token
    if not expected:
        return
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected.encode()):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="a valid bearer token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
