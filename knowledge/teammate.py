"""Teammate memory: an agent's home namespace and its append-only daily memory documents."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db import transaction

from config.exceptions import Invalid, PermissionDenied
from knowledge.exceptions import PathTaken, VersionConflict
from knowledge.models import Document, DocumentKind, EditPolicy
from knowledge.services import document_create, document_revise
from workspaces import access
from workspaces.access import Actor
from workspaces.models import Namespace, Permission, TeammateConfig, Visibility
from workspaces.services import namespace_create

CATEGORIES = ("note", "decision", "preference", "project", "learning", "task", "other")
IMPORTANCE = ("low", "normal", "high")
APPEND_ATTEMPTS = 3
BULLET_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
TAG_CLEAN = re.compile(r"[^\w-]+")


GRANT_ACCESS = ("read", "write")
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
CONFIG_FIELDS = ("memory_path_template", "memory_visibility", "memory_edit_policy", "grants")


def teammate_config(actor: Actor) -> TeammateConfig:
    config, _ = TeammateConfig.objects.get_or_create(workspace=actor.workspace, user=actor.user)
    return config


def _clean_template(value: Any) -> str:
    if (
        not isinstance(value, str)
        or len(value) > 200
        or "{{YYYY-MM-DD}}" not in value
        or value.startswith("/")
        or ".." in value.split("/")
    ):
        raise Invalid(
            "Use a relative path of at most 200 characters containing {{YYYY-MM-DD}}.",
            field="memory_path_template",
        )
    return value


def _clean_grants(value: Any) -> list[dict[str, str]]:
    """`[{namespace, access}]`: one entry per namespace slug, access read or write."""
    if not isinstance(value, list) or len(value) > 100:
        raise Invalid("grants must be a list of at most 100 {namespace, access} entries.", field="grants")
    cleaned: dict[str, dict[str, str]] = {}
    for index, grant in enumerate(value):
        slug = grant.get("namespace") if isinstance(grant, dict) else None
        access_level = grant.get("access", "read") if isinstance(grant, dict) else None
        if not isinstance(slug, str) or not SLUG.match(slug) or access_level not in GRANT_ACCESS:
            raise Invalid(
                f"grants[{index}] must be {{namespace: <slug>, access: read|write}}.", field=f"grants[{index}]"
            )
        if isinstance(grant, dict) and set(grant) - {"namespace", "access"}:
            raise Invalid(f"grants[{index}] has unknown fields.", field=f"grants[{index}]")
        cleaned[slug] = {"namespace": slug, "access": access_level}
    return list(cleaned.values())


def config_changes_clean(changes: dict[str, Any]) -> dict[str, Any]:
    """Validated config changes; the first problem raises `Invalid` naming its field."""
    unknown = set(changes) - set(CONFIG_FIELDS)
    if unknown:
        raise Invalid(f"Unknown fields: {', '.join(sorted(unknown))}.", field=sorted(unknown)[0])
    cleaners = {
        "memory_path_template": _clean_template,
        "memory_visibility": lambda v: _choice(v, Visibility.values, "memory_visibility"),
        "memory_edit_policy": lambda v: _choice(v, EditPolicy.values, "memory_edit_policy"),
        "grants": _clean_grants,
    }
    return {field: cleaners[field](value) for field, value in changes.items()}


@transaction.atomic
def teammate_config_update(*, config: TeammateConfig, changes: dict[str, Any]) -> TeammateConfig:
    """The one writer of teammate configs (API and admin): every field validated here."""
    cleaned = config_changes_clean(changes)
    if not cleaned:
        return config
    locked = TeammateConfig.objects.select_for_update().get(pk=config.pk)
    for field, value in cleaned.items():
        setattr(locked, field, value)
    locked.save(update_fields=[*cleaned, "updated_at"])
    return locked


def _choice(value: Any, allowed: list[str], field: str) -> str:
    if value not in allowed:
        raise Invalid(f"{field} must be one of {', '.join(allowed)}.", field=field)
    return value


@transaction.atomic
def teammate_home(actor: Actor) -> Namespace:
    """The teammate's home namespace, created on first use (owned by it, closed to others)."""
    config = TeammateConfig.objects.select_for_update().get(pk=teammate_config(actor).pk)
    home = config.home_namespace
    if home is not None and not home.archived:
        return home
    base = "teammate-" + (re.sub(r"[^a-z0-9._-]+", "-", actor.user.username.lower()).strip("-.") or "agent")
    slug, n = base[:90], 1
    while Namespace.objects.filter(workspace=actor.workspace, slug=slug).exists():
        n += 1
        slug = f"{base[:90]}-{n}"
    home = namespace_create(
        actor=actor,
        slug=slug,
        display_name=f"{actor.user.username} memory",
        visibility_default="private",
        others_can="none",
        metadata={"teammate": {"user": actor.user.username, "memory_path_template": config.memory_path_template}},
    )
    config.home_namespace = home
    config.save(update_fields=["home_namespace", "updated_at"])
    return home


def split_bullets(bullets: str | list[str]) -> list[str]:
    """A string is split on newlines; bullet markers are stripped; blanks dropped."""
    items = bullets.splitlines() if isinstance(bullets, str) else list(bullets)
    cleaned = [BULLET_MARKER.sub("", item).strip() for item in items]
    return [item for item in cleaned if item]


@dataclass(frozen=True)
class MemoryEntry:
    text: str
    hash: str
    block: str


def _entries(
    bullets: list[str], *, category: str, tags: list[str], importance: str | None, idempotency_key: str | None
) -> list[MemoryEntry]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries = []
    for index, text in enumerate(bullets):
        key = f"{idempotency_key}:{index}" if idempotency_key else f"{category}:{text}"
        digest = hashlib.sha256(key.encode()).hexdigest()
        if idempotency_key:
            entry_id = hashlib.sha256(f"{idempotency_key}:{index}".encode()).hexdigest()[:24]
        else:
            entry_id = uuid.uuid4().hex
        label = category + (f" ({importance})" if importance and importance != "normal" else "")
        tag_text = "".join(" #" + TAG_CLEAN.sub("-", tag).strip("-") for tag in tags if tag.strip())
        block = (
            f'<!-- agor-memory-entry id="{entry_id}" hash="sha256:{digest}" -->\n'
            f"- [{now}] {label}: {text}{tag_text}\n"
            f"<!-- /agor-memory-entry -->"
        )
        entries.append(MemoryEntry(text=text, hash=f"sha256:{digest}", block=block))
    return entries


def memory_append(
    *,
    actor: Actor,
    bullets: str | list[str],
    day: date | None = None,
    category: str = "note",
    tags: list[str] | None = None,
    importance: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Append bullets to today's memory document; duplicates (by hash) are not written again."""
    items = split_bullets(bullets)
    if not items:
        raise Invalid("No memory bullets provided.", code="invalid", field="bullets")
    if category not in CATEGORIES:
        raise Invalid(f"category must be one of {', '.join(CATEGORIES)}.", code="invalid", field="category")
    config = teammate_config(actor)
    home = teammate_home(actor)
    actor.forget_permissions()
    if access.rank(access.permission_on(actor, home)) < access.rank(Permission.WRITE):
        raise PermissionDenied(f"You don't have write access to namespace {home.slug}.")
    day = day or datetime.now(UTC).date()
    path = config.memory_path_template.replace("{{YYYY-MM-DD}}", day.isoformat())
    entries = _entries(
        items, category=category, tags=tags or [], importance=importance, idempotency_key=idempotency_key
    )
    for attempt in range(APPEND_ATTEMPTS):
        document = (
            Document.objects.filter(namespace=home, path=path, archived=False).select_related("current_version").first()
        )
        existing = document.current_version.content if document else ""
        fresh = [e for e in entries if e.hash not in existing]
        appended = [{"text": e.text, "hash": e.hash, "deduped": e not in fresh} for e in entries]
        if not fresh:
            return {"namespace": home.slug, "path": path, "appended": appended, "document_id": _id(document)}
        addition = "\n\n".join(e.block for e in fresh) + "\n"
        metadata = {"teammate_memory": True, "memory_date": day.isoformat()}
        try:
            if document is None:
                document = document_create(
                    actor=actor,
                    namespace=home,
                    path=path,
                    content=f"# {day.isoformat()}\n\n{addition}",
                    title=day.isoformat(),
                    kind=DocumentKind.MEMORY,
                    visibility=config.memory_visibility,
                    edit_policy=config.memory_edit_policy,
                    metadata=metadata,
                    first_line_is_title=False,
                )
            else:
                separator = "" if existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
                document = document_revise(
                    actor=actor,
                    document_id=document.pk,
                    content=existing + separator + addition,
                    expected_version=document.current_version.number,
                    change_summary=f"Memory: {len(fresh)} entr{'y' if len(fresh) == 1 else 'ies'}",
                    version_metadata=metadata,
                )
        except VersionConflict:
            if attempt == APPEND_ATTEMPTS - 1:
                raise
            continue
        except PathTaken:  # a concurrent first write created the document
            if attempt == APPEND_ATTEMPTS - 1:
                raise
            continue
        return {"namespace": home.slug, "path": path, "appended": appended, "document_id": _id(document)}
    raise VersionConflict("The memory document changed concurrently; retry.")  # pragma: no cover


def _id(document: Document | None) -> str | None:
    return str(document.pk) if document else None


def memory_recent(*, actor: Actor, home: Namespace, limit: int) -> list[Document]:
    """The teammate's newest memory documents (with content) that it can read."""
    return list(
        Document.objects.filter(namespace=home, kind=DocumentKind.MEMORY, archived=False)
        .filter(access.document_read_filter(actor))
        .select_related("current_version", "namespace")
        .order_by("-updated_at")[:limit]
    )
