"""Bearer tokens: a write token for what changes the store (ingestion, tags, deletes) and an
optional read token for everything else under /api (health, readiness and metrics stay open).

The write token, when set, is also accepted for reads. With no write token every write is open,
as in Marquez: `serve` allows that only on a loopback address unless told it is insecure on
purpose (consumer.cli). Tokens come from the environment or a file, never from the command line
(visible in `ps`); a placeholder such as CHANGE-ME is refused rather than trusted.
"""

from __future__ import annotations

import hmac
import re

import attrs
from fastapi import HTTPException, Request, status

MIN_TOKEN_CHARACTERS = 16
# Values that sample configuration ships and that must be replaced, not trusted.
_PLACEHOLDER = re.compile(r"change[-_ ]?me|replace[-_ ]?me|placeholder|secret|token|password|example|xxx+|todo", re.I)


class TokenRefused(ValueError):
    """A configured token is a placeholder or too short to be a secret."""


def check_token(token: str, name: str) -> str:
    """`token` if it can be a secret; else TokenRefused naming the setting, never the value."""
    if _PLACEHOLDER.search(token) and len(_PLACEHOLDER.sub("", token)) < MIN_TOKEN_CHARACTERS:
        raise TokenRefused(f"{name} is a placeholder: replace it with a random secret (e.g. `openssl rand -hex 32`)")
    if len(token) < MIN_TOKEN_CHARACTERS:
        raise TokenRefused(f"{name} is shorter than {MIN_TOKEN_CHARACTERS} characters: use a random secret")
    return token


@attrs.frozen(repr=False)
class Tokens:
    write: str | None = None
    read: str | None = None

    def __repr__(self) -> str:  # never the values
        return f"Tokens(write={'set' if self.write else None}, read={'set' if self.read else None})"


def _presented(request: Request) -> bytes | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip().encode() if scheme.lower() == "bearer" else None


def _matches(presented: bytes | None, expected: str | None) -> bool:
    return presented is not None and expected is not None and hmac.compare_digest(presented, expected.encode())


def _refuse() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="a valid bearer token is required",
        headers={"WWW-Authenticate": "Bearer"},
    )


def require_token(request: Request) -> None:
    """Guard of the routes that change the store: the write token, and a member that may write."""
    if request.app.state.read_only:
        raise HTTPException(
            status_code=status.HTTP_403_FORBIDDEN,
            detail="this is a read-only API replica (serve --role api): send writes to an ingesting member",
        )
    tokens: Tokens = request.app.state.tokens
    if tokens.write and not _matches(_presented(request), tokens.write):
        raise _refuse()


def require_read_token(request: Request) -> None:
    """Guard of the read routes when a read token is configured (the write token also reads)."""
    tokens: Tokens = request.app.state.tokens
    if tokens.read:
        presented = _presented(request)
        if not (_matches(presented, tokens.read) or _matches(presented, tokens.write)):
            raise _refuse()
