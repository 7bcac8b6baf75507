"""`document_edit`: line-precise edit ops as at most one new version.

The ops are planned against the caller's base version outside any lock; the write then goes
through `document_revise` with that base as `expected_version`, which locks the row and
rechecks, so a concurrent change answers 409 instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from config.exceptions import Invalid
from knowledge import selectors
from knowledge.content import check_size
from knowledge.edits import ChangedRange, EditOp, plan_edit
from knowledge.exceptions import DocumentArchived
from knowledge.models import Document, DocumentVersion
from knowledge.services import _check_expected_version, document_revise
from workspaces import access
from workspaces.access import Actor

EDIT_SOURCE = "api:document_edit"


@dataclass
class EditResult:
    document: Document
    base_version: DocumentVersion
    new_version: DocumentVersion | None
    dry_run: bool
    changed: bool
    diff: str
    content: str
    changed_ranges: list[ChangedRange] = field(default_factory=list)


def document_edit(
    *,
    actor: Actor,
    document_id: UUID | str,
    ops: Sequence[EditOp],
    expected_version: int | str | None = None,
    dry_run: bool = False,
    change_summary: str = "",
) -> EditResult:
    """Apply ops in order; a dry run only reports the diff. No-op results create no version.

    Edit permission is required even for a dry run: a preview is the first half of an edit.
    """
    document = selectors.document_get(actor=actor, document_id=document_id)
    access.require_document_write(actor, document)
    if document.archived:
        raise DocumentArchived("The document is archived. Restore it before editing.")
    if not ops:
        raise Invalid("ops must contain at least one op.", code="invalid", field="ops")
    if not dry_run and expected_version in (None, ""):
        raise Invalid("expected_version is required unless dry_run is true.", code="invalid", field="expected_version")
    _check_expected_version(document, expected_version)
    base = document.current_version
    plan = plan_edit(base.content, ops, path=document.path)
    result = EditResult(
        document=document,
        base_version=base,
        new_version=None,
        dry_run=dry_run,
        changed=plan.changed,
        diff=plan.diff,
        content=plan.content,
        changed_ranges=plan.changed_ranges,
    )
    if not plan.changed:
        return result
    check_size(plan.content)  # a dry run that could never be saved says so (413)
    if dry_run:
        return result
    result.document = document_revise(
        actor=actor,
        document_id=document.pk,
        content=plan.content,
        expected_version=base.number,
        change_summary=change_summary,
        version_metadata={
            "edit_source": EDIT_SOURCE,
            "base_version_id": str(base.id),
            "base_version_number": base.number,
            "op_types": [op.type for op in ops],
        },
    )
    result.new_version = result.document.current_version
    return result
