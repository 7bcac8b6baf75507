"""API token format and hashing: tokens are shown once and stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "kb_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()
