"""Graph nodes and typed edges between them, plus the links each document's content holds.

Documents are nodes keyed by the rename-proof `agor://kb/document/<id>`, so moving a document
never orphans its edges. An edge is unique per (source, target, type) whether archived or not:
removing a link archives its edge and adding it back un-archives the same row, keeping its id,
confidence and properties.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from knowledge.models import Document
from workspaces.models import Workspace


class NodeType(models.TextChoices):
    DOCUMENT = "document", "Document"
    EXTERNAL = "external", "External"


class EdgeType(models.TextChoices):
    REFERENCES = "references", "References"
    MENTIONS = "mentions", "Mentions"
    IMPLEMENTS = "implements", "Implements"
    DEPENDS_ON = "depends_on", "Depends on"
    SUPERSEDES = "supersedes", "Supersedes"
    DERIVED_FROM = "derived_from", "Derived from"
    TAGGED_WITH = "tagged_with", "Tagged with"
    ABOUT = "about", "About"
    PARENT_OF = "parent_of", "Parent of"
    RELATED_TO = "related_to", "Related to"


def document_node_uri(document_id: object) -> str:
    return f"agor://kb/document/{document_id}"


class GraphNode(models.Model):
    """A vertex of the graph; today every node is a document."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    node_type = models.CharField(max_length=20, choices=NodeType.choices, default=NodeType.DOCUMENT)
    uri = models.CharField(max_length=500)
    document = models.OneToOneField(
        Document, on_delete=models.CASCADE, null=True, blank=True, related_name="graph_node"
    )
    label = models.CharField(max_length=500, blank=True)
    metadata = models.JSONField(default=dict, blank=True, help_text="Reference-sync bookkeeping (`sync`).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    archived = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "uri"], name="graphnode_unique_uri")]

    def __str__(self) -> str:
        return self.uri


class GraphEdge(models.Model):
    """A typed, directed link. `references` edges mirror content; the other types are explicit."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="outgoing_edges")
    target = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="incoming_edges")
    edge_type = models.CharField(max_length=20, choices=EdgeType.choices)
    confidence = models.FloatField(default=1.0)
    properties = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    archived = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "edge_type"], name="graphedge_unique_triple"),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0) & models.Q(confidence__lte=1), name="graphedge_confidence_0_1"
            ),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="graphedge_no_self_loop"),
        ]
        indexes = [
            models.Index(fields=["source", "archived", "edge_type"], name="graphedge_source"),
            models.Index(fields=["target", "archived", "edge_type"], name="graphedge_target"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} -{self.edge_type}-> {self.target_id}"


class LinkForm(models.TextChoices):
    DOCUMENT = "document", "By document id"
    PATH = "path", "By namespace and path"
    INVALID = "invalid", "Not a resolvable document link"


class ContentLink(models.Model):
    """One distinct document link in a document's current version, resolved or not.

    Rows are replaced on every reference sync. A `path` row without a target is pending: it
    becomes an edge as soon as a document appears at that path (created, moved or restored).
    """

    source = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="content_links")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    ordinal = models.PositiveIntegerField()
    href = models.TextField(help_text="The destination as written (first spelling), cut at 2048 characters.")
    form = models.CharField(max_length=10, choices=LinkForm.choices)
    document_ref = models.UUIDField(null=True, blank=True)
    namespace_slug = models.CharField(max_length=100, blank=True)
    path = models.CharField(max_length=1024, blank=True)
    alt_path = models.CharField(max_length=1024, blank=True, help_text="The same path with/without `.md`.")
    fragment = models.CharField(max_length=500, blank=True)
    problem = models.CharField(max_length=200, blank=True)
    target_document = models.ForeignKey(Document, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "ordinal"], name="contentlink_unique_ordinal")]
        indexes = [
            models.Index(fields=["workspace", "namespace_slug", "path"], name="contentlink_path"),
            models.Index(fields=["workspace", "namespace_slug", "alt_path"], name="contentlink_alt_path"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}#{self.ordinal} {self.href[:80]}"
