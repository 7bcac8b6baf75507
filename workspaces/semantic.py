"""Workspace semantic-search policy: defaults, strict validation, and the encrypted provider key."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from django.db import connection, transaction

from config.exceptions import Invalid, PermissionDenied
from workspaces.access import Actor
from workspaces.models import SemanticPolicy
from workspaces.secrets import SecretError, needs_reseal, seal, unseal

DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "provider": "openai",
    "model": "text-embedding-3-small",
    "dimensions": 1536,
    "base_url": None,
    "chunking": {"target_tokens": 850, "max_tokens": 1200, "overlap_tokens": 100, "min_tokens": 80},
    "indexing": {"paused": False, "batch_size": 32},
}
SECTIONS = ("chunking", "indexing")
OPENAI_MODELS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}
LOCAL_MODEL = ("all-MiniLM-L6-v2", 384)
SPACE_FIELDS = ("provider", "model", "dimensions", "base_url")

# After-commit listeners (workspace id, policy before, policy after, key changed): the embedding
# pipeline re-queues affected chunks. Registered by knowledge, which depends on workspaces.
after_policy_change: list[Callable[[int, dict[str, Any], dict[str, Any], bool], None]] = []


def vector_store_problem() -> str | None:
    """Why the vector store cannot serve queries (None when it can); replaced by knowledge's embeddings."""
    return "No embedding index is available in this deployment yet."


def _fail(errors: dict[str, str]) -> Invalid:
    return Invalid("Invalid semantic search policy.", code="invalid", errors=errors)


def _int(value: Any, name: str, low: int, high: int, errors: dict[str, str]) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        errors[name] = f"must be an integer from {low} to {high}."


def validate(policy: dict[str, Any]) -> None:
    errors: dict[str, str] = {}
    if not isinstance(policy["enabled"], bool):
        errors["enabled"] = "must be true or false."
    provider, model, dims = policy["provider"], policy["model"], policy["dimensions"]
    if provider == "openai":
        if model not in OPENAI_MODELS:
            errors["model"] = f"must be one of {', '.join(OPENAI_MODELS)}."
        else:
            _int(dims, "dimensions", 1, OPENAI_MODELS[model], errors)
    elif provider == "openai-compatible":
        if not isinstance(model, str) or not model.strip() or len(model) > 200:
            errors["model"] = "must be a model name."
        _int(dims, "dimensions", 1, 4096, errors)
        base = policy["base_url"]
        parsed = urlparse(base) if isinstance(base, str) else None
        if not parsed or parsed.scheme not in ("http", "https") or not parsed.netloc:
            errors["base_url"] = "an http(s) base URL is required for openai-compatible providers."
    elif provider == "local":
        if model != LOCAL_MODEL[0]:
            errors["model"] = f"the local provider offers {LOCAL_MODEL[0]}."
        if dims != LOCAL_MODEL[1]:
            errors["dimensions"] = f"the local model has {LOCAL_MODEL[1]} dimensions."
    else:
        errors["provider"] = "must be openai, openai-compatible or local."
    chunking = policy["chunking"]
    for name in ("target_tokens", "max_tokens", "overlap_tokens", "min_tokens"):
        _int(chunking[name], f"chunking.{name}", 0, 8000, errors)
    if not errors:
        if chunking["min_tokens"] <= 0 or chunking["target_tokens"] <= 0:
            errors["chunking"] = "min_tokens and target_tokens must be positive."
        elif chunking["max_tokens"] < chunking["min_tokens"]:
            errors["chunking.max_tokens"] = "must be at least min_tokens."
        elif chunking["target_tokens"] > chunking["max_tokens"]:
            errors["chunking.target_tokens"] = "must not exceed max_tokens."
        elif chunking["overlap_tokens"] >= chunking["max_tokens"]:
            errors["chunking.overlap_tokens"] = "must be less than max_tokens."
    if not isinstance(policy["indexing"]["paused"], bool):
        errors["indexing.paused"] = "must be true or false."
    _int(policy["indexing"]["batch_size"], "indexing.batch_size", 1, 128, errors)
    if errors:
        raise _fail(errors)


def merge(stored: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply a patch: unknown fields are refused, `null` resets a field to its default."""
    result = copy.deepcopy(DEFAULTS)
    for key, value in stored.items():
        if key in SECTIONS and isinstance(value, dict):
            result[key].update({k: v for k, v in value.items() if k in DEFAULTS[key]})
        elif key in DEFAULTS:
            result[key] = value
    unknown = [k for k in patch if k not in DEFAULTS and k != "api_key"]
    if unknown:
        raise _fail({k: "unknown field." for k in unknown})
    for key, value in patch.items():
        if key == "api_key":
            continue
        if key in SECTIONS:
            if value is None:
                result[key] = copy.deepcopy(DEFAULTS[key])
                continue
            if not isinstance(value, dict):
                raise _fail({key: "must be an object."})
            bad = [f"{key}.{k}" for k in value if k not in DEFAULTS[key]]
            if bad:
                raise _fail({k: "unknown field." for k in bad})
            for field, item in value.items():
                result[key][field] = DEFAULTS[key][field] if item is None else item
        else:
            result[key] = DEFAULTS[key] if value is None else value
    validate(result)
    return result


def _require_admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise PermissionDenied("Only workspace admins can manage the semantic search policy.")


def unavailable_reason(policy: dict[str, Any], key_configured: bool) -> str | None:
    if connection.vendor != "postgresql":
        return "This deployment runs on SQLite, which supports text search only."
    if not policy["enabled"]:
        return "Semantic search is disabled in this workspace's policy."
    if policy["provider"] != "local" and not key_configured:
        return "No embedding provider API key is configured for this workspace."
    return vector_store_problem()


def public_policy(row: SemanticPolicy) -> dict[str, Any]:
    policy = merge(row.policy, {})
    configured = bool(row.api_key_sealed)
    return {
        **policy,
        "api_key_configured": configured,
        "generation": row.generation,
        "unavailable_reason": unavailable_reason(policy, configured),
    }


def policy_row(actor: Actor) -> SemanticPolicy:
    row, _ = SemanticPolicy.objects.get_or_create(workspace=actor.workspace)
    return row


def policy_get(*, actor: Actor) -> dict[str, Any]:
    _require_admin(actor)
    return public_policy(policy_row(actor))


@transaction.atomic
def policy_update(*, actor: Actor, patch: dict[str, Any]) -> dict[str, Any]:
    """Validate and store a patch; the key is sealed to the workspace and never echoed."""
    _require_admin(actor)
    row = SemanticPolicy.objects.select_for_update().get(pk=policy_row(actor).pk)
    before = merge(row.policy, {})
    after = merge(row.policy, patch)
    key_changed = False
    if "api_key" in patch:
        key = patch["api_key"]
        if key is None:
            key_changed = bool(row.api_key_sealed)
            row.api_key_sealed = ""
        elif not isinstance(key, str) or len(key) > 4096:
            raise _fail({"api_key": "must be a string (blank keeps the stored key, null removes it)."})
        elif key.strip():
            row.api_key_sealed = seal(key.strip(), workspace_id=actor.workspace.pk)
            key_changed = True
    if row.api_key_sealed and needs_reseal(row.api_key_sealed):
        row.api_key_sealed = seal(provider_key(row), workspace_id=actor.workspace.pk)
    if key_changed or any(before[f] != after[f] for f in SPACE_FIELDS):
        row.generation += 1
    row.policy = after
    row.save()
    workspace_id = actor.workspace.pk
    for callback in after_policy_change:
        transaction.on_commit(lambda cb=callback: cb(workspace_id, before, after, key_changed))
    return public_policy(row)


def provider_key(row: SemanticPolicy) -> str:
    """The decrypted key, for the embedding client only; raises SecretError when it cannot be read."""
    if not row.api_key_sealed:
        raise SecretError("No API key is configured.")
    return unseal(row.api_key_sealed, workspace_id=row.workspace_id)
