"""Read-only admin for documents and versions, plus archive/restore actions.

Content is never edited here: versions are created only by the services, so the admin shows
documents and history and changes nothing but archive state (through `document_set_archived`).
Access follows namespace `own` (see `workspaces.admin.NamespaceScopedAdmin`), not Django
model permissions.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.db.models.functions import Substr
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from config.exceptions import DomainError
from knowledge.models import Document, DocumentVersion
from knowledge.services import document_set_archived
from workspaces.admin import NamespaceScopedAdmin, access_for

PREVIEW_CHARS = 2000
SNIPPET_CHARS = 80


def _with_preview(queryset: QuerySet[DocumentVersion]) -> QuerySet[DocumentVersion]:
    """Load only the head of the content: a version may hold 10 MiB."""
    return queryset.defer("content").annotate(content_head=Substr("content", 1, PREVIEW_CHARS))


def _head(version: DocumentVersion, limit: int) -> str:
    head = getattr(version, "content_head", None)
    if head is None:
        head = version.content[:PREVIEW_CHARS]
    text = head[:limit]
    return text + "…" if version.char_length > len(text) else text


class VersionPreviewMixin:
    @admin.display(description="content")
    def content_snippet(self, version: DocumentVersion) -> str:
        return _head(version, SNIPPET_CHARS).replace("\n", " ")

    @admin.display(description="content (preview)")
    def content_preview(self, version: DocumentVersion) -> SafeString:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', _head(version, PREVIEW_CHARS))


class DocumentVersionInline(VersionPreviewMixin, admin.TabularInline):
    """History on the document page; read-only, links to each version."""

    model = DocumentVersion
    fk_name = "document"
    fields = ("number", "author", "created_at", "change_summary", "byte_length", "content_snippet")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[DocumentVersion]:
        return _with_preview(super().get_queryset(request)).select_related("author")

    def has_view_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        """Without a parent (the inline's queryset), the document admin has already gated access."""
        reach = access_for(request)
        return reach.has_any() if obj is None else reach.can_view_namespace_id(obj.namespace_id)

    def has_add_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Document | None = None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(NamespaceScopedAdmin):
    """Documents in namespaces the user owns (all, for superusers): read-only plus archive actions."""

    list_display = ("namespace", "path", "title", "kind", "visibility", "status", "archived", "updated_at")
    list_filter = (
        ("namespace", admin.RelatedOnlyFieldListFilter),
        "kind",
        "visibility",
        "status",
        "archived",
    )
    search_fields = ("path", "title")
    list_select_related = ("namespace",)
    ordering = ("-updated_at",)
    fields = (
        "namespace",
        "path",
        "title",
        "icon",
        "kind",
        "visibility",
        "status",
        "edit_policy",
        "metadata",
        "current_version",
        "created_by",
        "updated_by",
        "created_at",
        "updated_at",
        "archived",
        "archived_at",
        "archived_with_namespace",
    )
    readonly_fields = fields
    inlines = (DocumentVersionInline,)
    actions = ("archive_documents", "restore_documents")

    @admin.action(description="Archive selected documents", permissions=["archive"])
    def archive_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._set_archived(request, queryset, archived=True)

    @admin.action(description="Restore selected documents", permissions=["archive"])
    def restore_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        self._set_archived(request, queryset, archived=False)

    def _set_archived(self, request: HttpRequest, queryset: QuerySet[Document], *, archived: bool) -> None:
        """Each document authorized and committed on its own; errors (e.g. path_taken) are reported."""
        reach = access_for(request)
        changed = unchanged = 0
        for document in queryset.select_related("namespace__workspace"):
            label = f"{document.namespace.slug}/{document.path}"
            try:
                actor = reach.require_actor(document.namespace.workspace)
                result = document_set_archived(actor=actor, document_id=document.pk, archived=archived)
            except DomainError as exc:
                messages.error(request, f"{label}: {exc.message} ({exc.code})")
                continue
            if result.changed:
                changed += 1
            else:
                unchanged += 1
        verb = "Archived" if archived else "Restored"
        if changed:
            messages.success(request, f"{verb} {changed} document(s).")
        if unchanged:
            messages.info(request, f"{unchanged} document(s) were already {'archived' if archived else 'active'}.")


@admin.register(DocumentVersion)
class DocumentVersionAdmin(VersionPreviewMixin, NamespaceScopedAdmin):
    """Immutable history: view only, never added, changed or deleted here."""

    namespace_lookup = "document__namespace_id"
    list_display = ("document_path", "number", "author", "created_at", "byte_length", "content_snippet")
    list_filter = (("document__namespace", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("document__path", "document__title")
    list_select_related = ("document__namespace", "author")
    ordering = ("-created_at",)
    fields = (
        "document",
        "number",
        "author",
        "created_at",
        "change_summary",
        "sha256",
        "md5",
        "byte_length",
        "char_length",
        "frontmatter",
        "metadata",
        "content_preview",
    )
    readonly_fields = fields
    actions = None

    def namespace_id_of(self, obj: DocumentVersion) -> int:
        return obj.document.namespace_id

    def get_queryset(self, request: HttpRequest) -> QuerySet[DocumentVersion]:
        return _with_preview(super().get_queryset(request))

    def has_archive_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="document", ordering="document__path")
    def document_path(self, version: DocumentVersion) -> str:
        return f"{version.document.namespace.slug}/{version.document.path}"


from knowledge import teammate_admin  # noqa: E402,F401  (registers the teammate config page)
