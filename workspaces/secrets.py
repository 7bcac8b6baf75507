"""Authenticated encryption for secrets stored per workspace (provider API keys).

AES-256-GCM with the workspace id as associated data: a ciphertext copied into another
workspace's row fails to decrypt. Keys come from KNOWLEDGE_SECRET_KEYS (newest first); old
keys still decrypt, and `needs_reseal` tells writers to re-encrypt under the newest key.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

FORMAT = "v1"


class SecretError(Exception):
    """A stored secret could not be decrypted (wrong workspace, unknown key, tampering)."""


def _keys() -> list[bytes]:
    configured = [base64.b64decode(k) for k in settings.KNOWLEDGE_SECRET_KEYS if k.strip()]
    for key in configured:
        if len(key) != 32:
            raise SecretError("Each KNOWLEDGE_SECRET_KEYS entry must be 32 bytes, base64-encoded.")
    if configured:
        return configured
    # Development default: derived from SECRET_KEY, so a deployment without its own key still
    # encrypts at rest. Production should set KNOWLEDGE_SECRET_KEYS.
    return [hashlib.sha256(b"knowledge-secrets:" + settings.SECRET_KEY.encode()).digest()]


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"key-id:" + key).hexdigest()[:12]


def _aad(workspace_id: int, purpose: str) -> bytes:
    return f"workspace:{workspace_id}:{purpose}".encode()


def seal(plaintext: str, *, workspace_id: int, purpose: str = "embedding-api-key") -> str:
    key = _keys()[0]
    nonce = os.urandom(12)
    ciphertext = AESGCM(key).encrypt(nonce, plaintext.encode("utf-8"), _aad(workspace_id, purpose))
    return ":".join([FORMAT, _key_id(key), base64.b64encode(nonce).decode(), base64.b64encode(ciphertext).decode()])


def unseal(token: str, *, workspace_id: int, purpose: str = "embedding-api-key") -> str:
    try:
        version, key_id, nonce, ciphertext = token.split(":")
    except ValueError as exc:
        raise SecretError("Malformed stored secret.") from exc
    if version != FORMAT:
        raise SecretError("Unknown stored secret format.")
    for key in _keys():
        if _key_id(key) == key_id:
            try:
                plain = AESGCM(key).decrypt(
                    base64.b64decode(nonce), base64.b64decode(ciphertext), _aad(workspace_id, purpose)
                )
            except (InvalidTag, ValueError) as exc:
                raise SecretError("The stored secret does not belong to this workspace or was altered.") from exc
            return plain.decode("utf-8")
    raise SecretError("The stored secret was sealed with a key that is no longer configured.")


def needs_reseal(token: str) -> bool:
    parts = token.split(":")
    return len(parts) != 4 or parts[1] != _key_id(_keys()[0])
