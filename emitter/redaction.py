"""Secrets masked: the one place that knows what a secret looks like. Every string that ends up
in an event from Spark options, conf, error messages or storage locations passes through here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***"
SECRET_KEY = re.compile(r"password|passwd|pwd|secret|token|credential|key|auth", re.IGNORECASE)
# user:password@ after a scheme (jdbc:postgresql://u:p@host, s3a://AKIA:secret@bucket)
_URL_USERINFO = re.compile(r"(?<=//)([^/@:\s]+):([^/@\s]+)@")
# user/password@ after a colon (Oracle thin: jdbc:oracle:thin:scott/tiger@//host:1521/service)
_SLASH_USERINFO = re.compile(r"(?<=:)([^/@:\s]+)/([^/@\s]+)@")
# key=value pairs in query strings, JDBC properties (;password=), Teradata (,PASSWORD=), MySQL (password=)
_INLINE_SECRET = re.compile(
    r"((?:password|passwd|pwd|secret|token|credential|key|auth)[a-z_.-]*\s*=\s*)([^;&,\s)]+)", re.IGNORECASE
)


def redact(value: Any, key: str = "") -> Any:
    """`value` with every secret masked: values under secret-looking keys, and credentials in
    strings (URLs, JDBC properties, `key=value` lists), at any depth. The input is not changed."""
    if key and SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item) for item in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_text(text: str) -> str:
    # Both userinfo patterns need an "@" and the inline one an "=": most texts (column lineage
    # descriptions, paths) have neither and skip the regular expressions.
    if "@" in text:
        text = _URL_USERINFO.sub(rf"\1:{REDACTED}@", text)
        text = _SLASH_USERINFO.sub(rf"\1/{REDACTED}@", text)
    if "=" not in text:
        return text
    return _INLINE_SECRET.sub(lambda match: match.group(1) + REDACTED, text)
