"""Durable, caller-bound import receipts: what makes a lost acknowledgement safe to retry."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from knowledge.models import Document
from workspaces.models import Namespace, Workspace


class NamespaceImport(models.Model):
    """A namespace created by an import: which user imported which bundle under which plan.

    Resume is bound to all of them, so a different user, a modified bundle or an unrelated
    namespace with the same slug is refused instead of merged.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    namespace = models.OneToOneField(Namespace, on_delete=models.CASCADE, related_name="knowledge_import")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    bundle = models.CharField(max_length=64, help_text="sha256 of the canonical import plan.")
    plan_digest = models.CharField(max_length=64, help_text="Digest of the planned namespace fields and totals.")
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    documents = models.PositiveIntegerField(help_text="Planned document count.")
    request_bytes = models.PositiveBigIntegerField(help_text="Planned encoded bytes of every document request.")
    imported_documents = models.PositiveIntegerField(default=0, help_text="Receipts so far (limit accounting).")
    imported_bytes = models.PositiveBigIntegerField(default=0, help_text="Encoded request bytes imported so far.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "bundle"], name="nsimport_ws_bundle")]

    def __str__(self) -> str:
        return f"import {self.bundle[:12]} into {self.namespace_id}"


class ImportReceipt(models.Model):
    """One imported document, committed in the same transaction as the document itself."""

    namespace_import = models.ForeignKey(NamespaceImport, on_delete=models.CASCADE, related_name="receipts")
    key = models.CharField(max_length=16, help_text="Plan key, d000001...")
    document = models.OneToOneField(Document, on_delete=models.PROTECT, related_name="import_receipt")
    source_id = models.UUIDField(help_text="The source document id (provenance only).")
    digest = models.CharField(max_length=64, help_text="Digest of the planned document fields and content hash.")
    request_bytes = models.PositiveBigIntegerField()
    reconciled = models.BooleanField(default=False)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace_import", "key"], name="receipt_unique_key")]

    def __str__(self) -> str:
        return f"{self.key} -> {self.document_id}"
