"""Documents and their immutable versions."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models

from workspaces.models import Namespace, Visibility


class DocumentKind(models.TextChoices):
    DOC = "doc", "Document"
    MEMORY = "memory", "Memory"
    SKILL = "skill", "Skill"
    PROMPT = "prompt", "Prompt"
    GUIDE = "guide", "Guide"
    DECISION = "decision", "Decision"
    BUNDLE = "bundle", "Bundle"
    EXTERNAL = "external", "External"


class DocumentStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published"


class EditPolicy(models.TextChoices):
    OWNER = "owner", "Owner"
    PUBLIC = "public", "Public"
    ADMINS = "admins", "Admins"


class Document(models.Model):
    """A markdown document at a path in a namespace; its content lives in versions."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="documents")
    path = models.CharField(max_length=1024)
    title = models.CharField(max_length=500)
    icon = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=10, choices=DocumentKind.choices, default=DocumentKind.DOC)
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC)
    status = models.CharField(max_length=10, choices=DocumentStatus.choices, default=DocumentStatus.PUBLISHED)
    edit_policy = models.CharField(max_length=10, choices=EditPolicy.choices, default=EditPolicy.OWNER)
    metadata = models.JSONField(default=dict, blank=True)
    current_version = models.ForeignKey(
        "DocumentVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField()
    archived = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    archived_with_namespace = models.BooleanField(
        default=False, help_text="Archived because its namespace was; restored with it."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "path"],
                condition=models.Q(archived=False),
                name="document_unique_active_path",
            )
        ]
        indexes = [
            models.Index(fields=["namespace", "archived", "-updated_at"], name="document_ns_updated"),
            models.Index(fields=["namespace", "path"], name="document_ns_path"),
            models.Index(fields=["archived", "-updated_at"], name="document_updated"),
            # PostgreSQL answers a search's access scope and a list's count from this index alone,
            # without reading the table (10,000 documents: 0.9 ms instead of 2.8). SQLite has no
            # INCLUDE and gets the two key columns only.
            models.Index(
                fields=["namespace", "archived"],
                include=["id", "status", "visibility", "created_by", "kind", "current_version"],
                name="document_scope",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace_id}:{self.path}"

    @property
    def reference_uri(self) -> str:
        return document_reference_uri(self.id)


def document_reference_uri(document_id: Any) -> str:
    """The stable link to a document, whatever its path: what mentions and agents cite."""
    return f"agor://kb/document/{document_id}"


class VersionQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise ImmutableVersionError("Document versions are immutable.")


class ImmutableVersionError(Exception):
    pass


class DocumentVersion(models.Model):
    """One immutable snapshot of a document's content; only `document_revise` adds them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    document = models.ForeignKey(Document, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    content = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64)
    md5 = models.CharField(max_length=32)
    byte_length = models.PositiveBigIntegerField()
    char_length = models.PositiveBigIntegerField()
    frontmatter = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    change_summary = models.CharField(max_length=1000, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VersionQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="version_unique_number")]
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"{self.document_id} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableVersionError("Document versions are immutable.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ImmutableVersionError("Document versions are immutable.")


class SearchChunk(models.Model):
    """A slice of a document's current version, the unit of full-text search and snippets.

    Ordinal -1 is the document's header (title and path words), ranked above body text.
    The text index lives beside it: an FTS5 table on SQLite, a tsvector column with a GIN index
    on PostgreSQL (migrations 0003 and 0013), which `knowledge.search` writes with the row.
    """

    # No index of its own: (document, ordinal) below serves every lookup by document.
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="search_chunks", db_index=False)
    ordinal = models.IntegerField()
    start_line = models.PositiveIntegerField(default=1)
    end_line = models.PositiveIntegerField(default=1)
    title = models.TextField(blank=True)
    path_text = models.TextField(blank=True)
    text = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["document", "ordinal"], name="searchchunk_doc_ordinal")]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"


class SearchTerm(models.Model):
    """One stemmed term of one document with its frequencies: PostgreSQL's inverted index for ranking.

    GIN answers "which chunks match" but ranking or counting a common term then reads every
    matching tsvector. These narrow rows, read through a covering index, give document
    frequency, term frequency and length, so BM25 over every match costs an index-only scan.
    """

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.CharField(max_length=255)
    body_tf = models.PositiveIntegerField(default=0)
    title_tf = models.PositiveIntegerField(default=0)
    doc_length = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(
                fields=["lexeme"],
                name="searchterm_lexeme",
                opclasses=["text_pattern_ops"],
                include=["document", "body_tf", "title_tf", "doc_length"],
            ),
        ]
        # One row per term of a document; the index also finds the rows a revision changes.
        constraints = [models.UniqueConstraint(fields=["document", "lexeme"], name="searchterm_document_lexeme")]

    def __str__(self) -> str:
        return f"{self.lexeme}@{self.document_id}"


class EmbeddingSpace(models.Model):
    """One (provider, model, dimensions, base URL) of a workspace: vectors are only comparable inside it.

    Several spaces coexist; the workspace policy selects the active one. Vectors live in the
    `knowledge_chunkvector` table, created only where pgvector is available (embeddings/store.py),
    with one partial HNSW index per space.
    """

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    base_url = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "provider", "model", "dimensions", "base_url"], name="embeddingspace_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}:{self.dimensions}"


class ChunkState(models.TextChoices):
    PENDING = "pending", "pending"
    CLAIMED = "claimed", "claimed"
    EMBEDDED = "embedded", "embedded"
    FAILED = "failed", "failed"


class EmbeddingChunk(models.Model):
    """A heading-aware chunk of a document's current version and its indexing state in the active space.

    Rows are replaced when the content changes, so a worker still holding a claim on a replaced
    row commits nothing. A claim is (claim_token, generation, lease_until from database time);
    every later transition checks all three.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="embedding_chunks")
    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="+")
    ordinal = models.PositiveIntegerField()
    heading_path = models.JSONField(default=list, blank=True)
    anchor = models.CharField(max_length=300, blank=True)
    start_line = models.PositiveIntegerField(default=1)
    end_line = models.PositiveIntegerField(default=1)
    text = models.TextField()
    content_hash = models.CharField(max_length=64)
    tokens = models.PositiveIntegerField(default=0)
    space = models.ForeignKey(EmbeddingSpace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=10, choices=ChunkState.choices, default=ChunkState.PENDING)
    claim_token = models.CharField(max_length=64, blank=True)
    generation = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    available_at = models.DateTimeField(null=True, blank=True, help_text="Retry not before (provider backoff).")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)
    embedded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["document", "ordinal"], name="embchunk_doc_ordinal"),
            models.Index(fields=["state", "workspace"], name="embchunk_state_ws"),
            models.Index(fields=["workspace", "content_hash"], name="embchunk_ws_hash"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal} ({self.state})"


class ChunkSyncFailure(models.Model):
    """A document whose chunk sync failed for good: the error status shows and the sweep's cool-down.

    Its own row because a document's first sync has no chunks to carry the failure; a successful
    sync deletes it.
    """

    document = models.OneToOneField(Document, on_delete=models.CASCADE, primary_key=True, related_name="+")
    last_error = models.CharField(max_length=300)
    available_at = models.DateTimeField(help_text="The sweep chunks the document again from then on.")

    def __str__(self) -> str:
        return f"chunk sync of {self.document_id} failed: {self.last_error}"


class DocumentOutline(models.Model):
    """The stored outline of one immutable version: headings and line count, computed once."""

    version = models.OneToOneField(DocumentVersion, on_delete=models.CASCADE, primary_key=True, related_name="outline")
    line_count = models.PositiveIntegerField()
    headings = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"outline of {self.version_id}"
