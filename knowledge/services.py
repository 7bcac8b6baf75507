"""Writes for documents, versions and namespace archive state.

Every content write runs in one transaction: lock the document row, check the caller's
expected version, insert version N+1 and move the current pointer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from config.exceptions import DomainError, Invalid, NotFound
from knowledge import hooks, structure
from knowledge.content import ContentFacts, content_facts
from knowledge.exceptions import ArchiveStateConflict, DocumentArchived, PathTaken, VersionConflict
from knowledge.models import Document, DocumentOutline, DocumentStatus, DocumentVersion, EditPolicy
from knowledge.paths import clean_icon, first_line_is_heading, normalise_path, title_from_content, title_from_path
from knowledge.search import index_document, index_header
from workspaces import access
from workspaces.access import Actor
from workspaces.models import Namespace, Permission

GOVERNANCE_FIELDS = ("visibility", "status", "edit_policy")
METADATA_FIELDS = ("title", "icon", "kind", "metadata", "path")
OUTLINE_BATCH = 8  # versions whose bodies an outline batch holds in memory at once

# Callbacks run after a content write commits (graph upkeep, chunking). Failures are logged
# by the callbacks themselves and never undo the save. A callback may carry a `many` attribute,
# called once with every (document id, version id) of a `batched_content_hooks()` block.
after_content_write: list[Callable[[UUID, UUID], None]] = []
# After commit, when a document takes a path without a content write (a move or a restore).
after_path_change: list[Callable[[UUID], None]] = []
# After commit, when an archived namespace is restored with its documents.
after_namespace_restore: list[Callable[[int], None]] = []


@dataclass
class WriteResult:
    document: Document
    created: bool = False
    changed: bool = True


_content_batch: ContextVar[list[tuple[UUID, UUID]] | None] = ContextVar("content_batch", default=None)


@contextlib.contextmanager
def batched_content_hooks() -> Iterator[None]:
    """Hand the after-commit upkeep of the content writes committed in this block over once, at its
    end: one message per kind of upkeep for a bulk import instead of one per document and kind.

    Writes rolled back inside the block are left out (they are collected on commit).
    """
    writes: list[tuple[UUID, UUID]] = []
    token = _content_batch.set(writes)
    try:
        yield
    finally:
        _content_batch.reset(token)
        if connection.in_atomic_block:
            transaction.on_commit(lambda: _run_content_hooks(writes))
        else:
            _run_content_hooks(writes)


def _run_write_hooks(document_id: UUID, version_id: UUID) -> None:
    """One write's hooks; the tasks they queue go to the broker as one message."""
    with hooks.one_message(f"document {document_id}"):
        for callback in after_content_write:
            callback(document_id, version_id)


def _run_content_hooks(writes: list[tuple[UUID, UUID]]) -> None:
    if not writes:
        return
    for callback in after_content_write:
        many = getattr(callback, "many", None)
        if many is not None:
            many(list(writes))
        else:
            for document_id, version_id in writes:
                callback(document_id, version_id)


def _on_commit_content(document: Document) -> None:
    write = (document.id, document.current_version_id)
    batch = _content_batch.get()
    if batch is not None:
        transaction.on_commit(lambda: batch.append(write))
        return
    transaction.on_commit(lambda: _run_write_hooks(*write))


def _on_commit_path(document: Document) -> None:
    document_id = document.id
    for callback in after_path_change:
        transaction.on_commit(lambda cb=callback: cb(document_id))


def _version_token(document: Document) -> dict[str, Any]:
    version = document.current_version
    return {"id": str(version.id), "number": version.number, "sha256": version.sha256} if version else {}


def _check_expected_version(document: Document, expected: int | str | None) -> None:
    """`expected_version` may be the current version number or the current version id."""
    if expected is None or expected == "":
        return
    current = document.current_version
    matches = str(expected) == str(current.number) or str(expected).lower() == str(current.id)
    if not matches:
        raise VersionConflict(
            f"The document is at version {current.number}, not {expected}. "
            f"Read the current version and retry with expected_version={current.number}.",
            current_version=_version_token(document),
        )


def _lock_document(document_id: UUID | str) -> Document:
    """The document under a row lock, without its current content (writes compare hashes; a
    10 MiB body read back for nothing costs more than the write)."""
    try:
        document_id = UUID(str(document_id))
    except ValueError as exc:
        raise NotFound("Document not found.") from exc
    # Lock first, then read: a join in the locking query would be evaluated against the
    # snapshot from before the wait and could miss the version a concurrent writer just added.
    if not Document.objects.select_for_update().filter(pk=document_id).values_list("pk", flat=True):
        raise NotFound("Document not found.")
    document = (
        Document.objects.select_related("namespace", "current_version", "created_by")
        .defer("current_version__content")
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise NotFound("Document not found.")
    return document


def _derive_title(*, content: str, path: str, title: str | None, first_line_is_title: bool | None) -> tuple[str, bool]:
    """Returns (title, title_from_content)."""
    if first_line_is_title is None:
        first_line_is_title = not title and first_line_is_heading(content)
    if first_line_is_title:
        return title_from_content(content), True
    if title:
        return title.strip()[:500], False
    return title_from_path(path), False


def _new_version(
    *,
    document: Document,
    actor: Actor,
    content: str,
    number: int,
    change_summary: str,
    metadata: dict[str, Any],
    facts: ContentFacts | None = None,
    version_id: UUID | None = None,
) -> DocumentVersion:
    facts = facts or content_facts(content)
    return DocumentVersion.objects.create(
        id=version_id or uuid4(),
        document=document,
        number=number,
        content=content,
        sha256=facts.sha256,
        md5=facts.md5,
        byte_length=facts.byte_length,
        char_length=facts.char_length,
        frontmatter=facts.frontmatter,
        metadata=metadata,
        change_summary=change_summary[:1000],
        author=actor.user,
    )


def _path_holders(namespace: Namespace, path: str) -> tuple[Document | None, Document | None]:
    """(active document, newest archived document) at this path."""
    active = archived = None
    for doc in Document.objects.filter(namespace=namespace, path=path).order_by("archived", "-archived_at"):
        if not doc.archived and active is None:
            active = doc
        elif doc.archived and archived is None:
            archived = doc
    return active, archived


def _path_taken(actor: Actor, holder: Document, message: str) -> PathTaken:
    extra = {"document_id": str(holder.id)} if access.can_read_document(actor, holder) else {}
    return PathTaken(message, **extra)


def document_create(
    *,
    actor: Actor,
    namespace: Namespace,
    path: str,
    content: str,
    title: str | None = None,
    icon: str | None = None,
    kind: str = "doc",
    visibility: str | None = None,
    status: str = DocumentStatus.PUBLISHED,
    edit_policy: str = EditPolicy.OWNER,
    metadata: dict[str, Any] | None = None,
    first_line_is_title: bool | None = None,
    change_summary: str = "",
    version_metadata: dict[str, Any] | None = None,
) -> Document:
    """Create a document with version 1. Archived paths stay reserved (restore them instead)."""
    access.require_namespace(actor, namespace, Permission.WRITE)
    path = normalise_path(path)
    facts = content_facts(content)  # size check before any write
    active, archived = _path_holders(namespace, path)
    if active is not None:
        raise _path_taken(actor, active, f"A document already exists at '{path}'.")
    if archived is not None:
        raise DocumentArchived(
            f"An archived document holds '{path}'. Restore it, or choose another path.",
            **({"document_id": str(archived.id)} if access.can_read_document(actor, archived) else {}),
        )
    resolved_title, from_content = _derive_title(
        content=content, path=path, title=title, first_line_is_title=first_line_is_title
    )
    metadata = dict(metadata or {})
    if from_content:
        metadata["title_from_content"] = True
    now = timezone.now()
    version_id = uuid4()
    try:
        with transaction.atomic():
            # The document points at its first version from the start (the foreign key is checked
            # at commit): one statement fewer than inserting, then updating.
            document = Document.objects.create(
                current_version_id=version_id,
                namespace=namespace,
                path=path,
                title=resolved_title,
                icon=clean_icon(icon),
                kind=kind,
                visibility=visibility or namespace.visibility_default,
                status=status,
                edit_policy=edit_policy,
                metadata=metadata,
                created_by=actor.user,
                updated_by=actor.user,
                updated_at=now,
            )
            version = _new_version(
                document=document,
                actor=actor,
                content=content,
                number=1,
                change_summary=change_summary,
                metadata=version_metadata or {},
                facts=facts,
                version_id=version_id,
            )
            document.current_version = version
            index_document(document, content, new=True)
    except IntegrityError as exc:
        # A concurrent create won the partial unique index on (namespace, path).
        raise PathTaken(f"A document already exists at '{path}'.") from exc
    _on_commit_content(document)
    return document


@transaction.atomic
def document_revise(
    *,
    actor: Actor,
    document_id: UUID | str,
    content: str,
    expected_version: int | str | None = None,
    change_summary: str = "",
    title: str | None = None,
    first_line_is_title: bool | None = None,
    version_metadata: dict[str, Any] | None = None,
) -> Document:
    """Add exactly one version with new content, under a row lock and the expected-version check."""
    document = _lock_document(document_id)
    access.require_document_write(actor, document)
    if document.archived:
        raise DocumentArchived("The document is archived. Restore it before editing.")
    _check_expected_version(document, expected_version)
    facts = content_facts(content)
    if first_line_is_title is None and not title and document.metadata.get("title_from_content"):
        first_line_is_title = True
    if title or first_line_is_title is not None:
        document.title, from_content = _derive_title(
            content=content,
            path=document.path,
            title=title or document.title,
            first_line_is_title=first_line_is_title,
        )
        document.metadata = {**document.metadata, "title_from_content": from_content}
        if not from_content:
            document.metadata.pop("title_from_content")
    version = _new_version(
        document=document,
        actor=actor,
        content=content,
        number=document.current_version.number + 1,
        change_summary=change_summary,
        metadata=version_metadata or {},
        facts=facts,
    )
    document.current_version = version
    document.updated_by = actor.user
    document.updated_at = timezone.now()
    document.save(update_fields=["current_version", "updated_by", "updated_at", "title", "metadata"])
    index_document(document, content)
    _on_commit_content(document)
    return document


def _clean_changes(changes: dict[str, Any]) -> dict[str, Any]:
    clean = dict(changes)
    if "icon" in clean:
        clean["icon"] = clean_icon(clean["icon"])
    if "path" in clean:
        clean["path"] = normalise_path(clean["path"])
    if "title" in clean:
        title = (clean["title"] or "").strip()
        if not title:
            raise Invalid("title cannot be blank.", code="invalid", field="title")
        clean["title"] = title[:500]
    return clean


@transaction.atomic
def document_update(
    *,
    actor: Actor,
    document_id: UUID | str,
    changes: dict[str, Any],
    expected_version: int | str | None = None,
    expected_archived: bool | None = None,
) -> WriteResult:
    """Metadata-only changes (title, icon, kind, governance, path move) and archive state.

    Content never changes here. A change that is already in place is a no-op that touches
    no timestamp, so retries are safe.
    """
    changes = dict(changes)
    archived = changes.pop("archived", None)
    document = _lock_document(document_id)
    access.require_document_read(actor, document)
    if archived is not None and not changes:
        return _set_archived(
            actor, document, archived=archived, expected_version=expected_version, expected_archived=expected_archived
        )
    if any(field in changes for field in GOVERNANCE_FIELDS):
        access.require_document_governance(actor, document)
    else:
        access.require_document_write(actor, document)
    if document.archived and archived is not False:
        raise DocumentArchived("The document is archived. Restore it before changing it.")
    changes = _clean_changes(changes)
    result = WriteResult(document=document, changed=False)
    if archived is False:
        result = _set_archived(
            actor, document, archived=False, expected_version=expected_version, expected_archived=expected_archived
        )
    else:
        _check_expected_version(document, expected_version)
    updates = {field: value for field, value in changes.items() if getattr(document, field) != value}
    if "path" in updates:
        active, _ = _path_holders(document.namespace, updates["path"])
        if active is not None and active.pk != document.pk:
            raise _path_taken(actor, active, f"A document already exists at '{updates['path']}'.")
    if "title" in updates:
        document.metadata = {k: v for k, v in document.metadata.items() if k != "title_from_content"}
        if "metadata" in updates:
            updates["metadata"] = {k: v for k, v in updates["metadata"].items() if k != "title_from_content"}
        updates.setdefault("metadata", document.metadata)
    if updates:
        for field, value in updates.items():
            setattr(document, field, value)
        document.updated_by = actor.user
        document.updated_at = timezone.now()
        try:
            with transaction.atomic():
                document.save(update_fields=[*updates, "updated_by", "updated_at"])
        except IntegrityError as exc:
            raise PathTaken(f"A document already exists at '{document.path}'.") from exc
        if "title" in updates or "path" in updates:
            index_header(document)
        if "path" in updates:
            _on_commit_path(document)
        result.changed = True
    if archived is True:
        result = _set_archived(actor, document, archived=True, expected_version=None, expected_archived=None)
        result.changed = True
    return result


def _set_archived(
    actor: Actor,
    document: Document,
    *,
    archived: bool,
    expected_version: int | str | None,
    expected_archived: bool | None,
) -> WriteResult:
    access.require_document_governance(actor, document)
    if document.archived == archived:
        return WriteResult(document=document, changed=False)
    if expected_archived is not None and expected_archived != document.archived:
        raise ArchiveStateConflict(
            f"The document is {'archived' if document.archived else 'active'}, not "
            f"{'archived' if expected_archived else 'active'}.",
            archived=document.archived,
        )
    _check_expected_version(document, expected_version)
    if not archived:
        active, _ = _path_holders(document.namespace, document.path)
        if active is not None:
            raise _path_taken(
                actor,
                active,
                f"Another active document now holds '{document.path}'. Rename or move that document first, "
                "then restore this one.",
            )
    document.archived = archived
    document.archived_at = timezone.now() if archived else None
    document.archived_with_namespace = False
    document.updated_at = timezone.now()
    try:
        with transaction.atomic():
            document.save(update_fields=["archived", "archived_at", "archived_with_namespace", "updated_at"])
    except IntegrityError as exc:
        raise PathTaken(f"Another active document now holds '{document.path}'.") from exc
    if not archived:
        _on_commit_path(document)
    return WriteResult(document=document, changed=True)


def document_set_archived(
    *,
    actor: Actor,
    document_id: UUID | str,
    archived: bool,
    expected_version: int | str | None = None,
    expected_archived: bool | None = None,
) -> WriteResult:
    """Archive (soft delete) or restore one document. Restore creates no version."""
    return document_update(
        actor=actor,
        document_id=document_id,
        changes={"archived": archived},
        expected_version=expected_version,
        expected_archived=expected_archived,
    )


def document_bulk_set_archived(*, actor: Actor, archived: bool, targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Archive or restore up to 50 documents, each authorized and committed on its own.

    A target the actor cannot see reports `not_found`, exactly like a missing one.
    """
    results = []
    for index, target in enumerate(targets):
        entry: dict[str, Any] = {"index": index, "document_id": str(target["document_id"])}
        try:
            result = document_set_archived(
                actor=actor,
                document_id=target["document_id"],
                archived=archived,
                expected_version=target.get("expected_version"),
                expected_archived=target.get("expected_archived"),
            )
        except DomainError as exc:
            if isinstance(exc, NotFound):
                exc = NotFound("Document not found.")
            entry.update(ok=False, status="error", code=exc.code, detail=exc.message)
        else:
            entry.update(
                ok=True,
                status=("archived" if archived else "restored") if result.changed else "unchanged",
                archived=result.document.archived,
            )
        results.append(entry)
    return results


def document_upsert(
    *,
    actor: Actor,
    namespace: Namespace,
    path: str,
    content: str | None = None,
    expected_version: int | str | None = None,
    change_summary: str = "",
    first_line_is_title: bool | None = None,
    **fields: Any,
) -> WriteResult:
    """Create or update the document at a path. Identical content adds no version.

    An archived document at the path is never replaced or restored here.
    """
    access.require_namespace(actor, namespace, Permission.READ)
    normalised = normalise_path(path)
    active, archived = _path_holders(namespace, normalised)
    if active is None:
        if archived is not None and access.can_read_document(actor, archived):
            raise DocumentArchived(
                f"The document at '{normalised}' is archived. Restore it before writing to it.",
                document_id=str(archived.id),
            )
        if archived is not None:
            raise DocumentArchived(f"An archived document holds '{normalised}'. Choose another path.")
        if expected_version not in (None, "", 0, "0"):
            raise VersionConflict(
                f"No document exists at '{normalised}', but expected_version={expected_version} was given.",
                current_version=None,
            )
        if content is None:
            raise Invalid("content is required to create a document.", code="invalid", field="content")
        document = document_create(
            actor=actor,
            namespace=namespace,
            path=normalised,
            content=content,
            change_summary=change_summary,
            first_line_is_title=first_line_is_title,
            **{k: v for k, v in fields.items() if v is not None},
        )
        return WriteResult(document=document, created=True)

    with transaction.atomic():
        document = _lock_document(active.pk)
        access.require_document_write(actor, document)
        _check_expected_version(document, expected_version)
        changed = False
        title = fields.pop("title", None)
        if content is not None and (
            first_line_is_title or content_facts(content).sha256 != document.current_version.sha256
        ):
            document = document_revise(
                actor=actor,
                document_id=document.pk,
                content=content,
                change_summary=change_summary,
                title=title,
                first_line_is_title=first_line_is_title,
            )
            changed = True
        elif title:
            fields["title"] = title
        meta_changes = {k: v for k, v in fields.items() if v is not None}
        if meta_changes:
            update = document_update(actor=actor, document_id=document.pk, changes=meta_changes)
            document = update.document
            changed = changed or update.changed
        document.refresh_from_db()
    return WriteResult(document=document, created=False, changed=changed)


@transaction.atomic
def namespace_set_archived(*, actor: Actor, namespace: Namespace, archived: bool) -> bool:
    """Archive a namespace with its documents, or restore both. Needs `own`; returns whether it changed."""
    access.require_namespace(actor, namespace, Permission.OWN, ignore_archive=True)
    namespace = Namespace.objects.select_for_update().get(pk=namespace.pk)
    if namespace.archived == archived:
        return False
    now = timezone.now()
    if archived:
        Document.objects.filter(namespace=namespace, archived=False).update(
            archived=True, archived_at=now, archived_with_namespace=True
        )
    else:
        Document.objects.filter(namespace=namespace, archived=True, archived_with_namespace=True).update(
            archived=False, archived_at=None, archived_with_namespace=False
        )
    namespace.archived = archived
    namespace.archived_at = now if archived else None
    namespace.save(update_fields=["archived", "archived_at", "updated_at"])
    actor.forget_permissions()
    if not archived:
        namespace_id = namespace.pk
        for callback in after_namespace_restore:
            transaction.on_commit(lambda cb=callback: cb(namespace_id))
    return True


def version_outline_store(*, version: DocumentVersion) -> structure.Outline:
    """Compute a version's outline and store it (idempotent: versions are immutable).

    Called after commit by `knowledge.tasks.store_outline_task`, off the saving request, and on
    a first read that finds none (the task failed or has not run yet). About 250 ms for a 10 MiB
    document with 5,000 headings, well under 1 ms for an ordinary page.
    """
    found = structure.outline(version.content)
    DocumentOutline.objects.bulk_create([_outline_row(version.pk, found)], ignore_conflicts=True)
    return found


def version_outlines_store(*, version_ids: list[Any]) -> int:
    """`version_outline_store` for many versions (a bulk write's): bodies read a few at a time,
    outlines inserted together; returns how many of the versions exist."""
    rows: list[DocumentOutline] = []
    found = 0
    versions = DocumentVersion.objects.filter(pk__in=version_ids).only("id", "content")
    for version in versions.iterator(chunk_size=OUTLINE_BATCH):
        rows.append(_outline_row(version.pk, structure.outline(version.content)))
        found += 1
        if len(rows) == OUTLINE_BATCH:
            DocumentOutline.objects.bulk_create(rows, ignore_conflicts=True)
            rows = []
    DocumentOutline.objects.bulk_create(rows, ignore_conflicts=True)
    return found


def _outline_row(version_id: Any, found: structure.Outline) -> DocumentOutline:
    data = structure.outline_data(found)
    return DocumentOutline(version_id=version_id, line_count=data["line_count"], headings=data["headings"])
