"""The transfer protocol under /kb/transfers/: each request bounded, each write its own transaction.

Export (workspace admins): a cursor-paged inventory without bodies, then bodies in bounded
batches with checksum verification. Import (any member): create the destination namespace,
create documents with receipts, reconcile references, and read receipts back to resume.
Invalid requests answer 400 naming the route and the invalid fields, never echoing values.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import Invalid
from knowledge.api.views import responses
from transfer import services
from transfer.api import serializers as t
from workspaces.access import Actor

TAG = ["transfer"]


def _codes(detail: Any) -> Any:
    """DRF's error tree with every message replaced by its code: no submitted value is echoed."""
    if isinstance(detail, dict):
        return {str(key): _codes(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_codes(value) for value in detail]
    return getattr(detail, "code", None) or "invalid"


def parse(serializer_class: type[serializers.Serializer], data: Any, route: str) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        errors = _codes(serializer.errors)
        fields = ", ".join(sorted(errors)) if isinstance(errors, dict) else "body"
        raise Invalid(f"Invalid Knowledge transfer request ({route}): invalid {fields}.", code="invalid", errors=errors)
    return dict(serializer.validated_data)


class TransferView(APIView):
    @property
    def actor(self) -> Actor:
        return self.request.actor


class InventoryView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_inventory",
        tags=TAG,
        parameters=[t.InventoryQuerySerializer],
        responses=responses(t.InventorySerializer, 200, 403),
    )
    def get(self, request: Request) -> Response:
        """Source inventory: active documents by id, stored hashes and metadata, no bodies (admins)."""
        query = parse(t.InventoryQuerySerializer, request.query_params, "GET /kb/transfers/inventory")
        data = services.inventory_page(
            actor=self.actor, slug=query["namespace"], cursor=query.get("cursor"), limit=query["limit"]
        )
        return Response(data)


class BodiesView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_bodies",
        tags=TAG,
        request=t.BodiesRequestSerializer,
        responses=responses(t.BodiesSerializer, 200, 403),
    )
    def post(self, request: Request) -> Response:
        """Bodies of up to 100 versions, verified against their stored sha256; ~9 MiB per answer."""
        data = parse(t.BodiesRequestSerializer, request.data, "POST /kb/transfers/bodies")
        items = services.bodies(actor=self.actor, slug=data["namespace"], items=data["items"])
        return Response({"items": items})


class ReceiptsView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_receipts",
        tags=TAG,
        parameters=[t.ReceiptsQuerySerializer],
        responses=responses(t.ReceiptsSerializer, 200, 409),
    )
    def get(self, request: Request) -> Response:
        """Destination receipts of the caller's import of one bundle (empty when the slug is free)."""
        query = parse(t.ReceiptsQuerySerializer, request.query_params, "GET /kb/transfers/receipts")
        data = services.import_status(
            actor=self.actor,
            slug=query["namespace"],
            bundle=query["bundle"],
            cursor=query.get("cursor"),
            limit=query["limit"],
        )
        return Response(data)


class NamespaceImportView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_namespace_create",
        tags=TAG,
        request=t.NamespaceImportRequestSerializer,
        responses={**responses(t.NamespaceImportSerializer, 201, 409, 413), 200: t.NamespaceImportSerializer},
    )
    def post(self, request: Request) -> Response:
        """Create the private destination namespace owned by the importer (200 when resuming)."""
        data = parse(t.NamespaceImportRequestSerializer, request.data, "POST /kb/transfers/namespace")
        record, created = services.import_namespace(actor=self.actor, **data)
        namespace = record.namespace
        body = {
            "created": created,
            "namespace": {
                "slug": namespace.slug,
                "display_name": namespace.display_name,
                "description": namespace.description or None,
                "documents": record.documents,
                "request_bytes": record.request_bytes,
            },
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class DocumentImportView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_documents_create",
        tags=TAG,
        request=t.DocumentImportRequestSerializer,
        responses=responses(t.DocumentImportSerializer, 200, 409, 413),
    )
    def post(self, request: Request) -> Response:
        """Create up to 100 planned documents, each with its receipt in one transaction."""
        data = parse(t.DocumentImportRequestSerializer, request.data, "POST /kb/transfers/documents")
        results = services.import_documents(
            actor=self.actor, bundle=data["bundle"], slug=data["namespace"], items=data["documents"]
        )
        return Response({"results": results})


class ReconcileView(TransferView):
    @extend_schema(
        operation_id="kb_transfers_reconcile",
        tags=TAG,
        request=t.ReconcileRequestSerializer,
        responses=responses(t.ReconcileSerializer, 200, 409),
    )
    def post(self, request: Request) -> Response:
        """Reconcile references of up to 100 imported documents once all of them exist."""
        data = parse(t.ReconcileRequestSerializer, request.data, "POST /kb/transfers/reconcile")
        results = services.import_reconcile(
            actor=self.actor, bundle=data["bundle"], slug=data["namespace"], keys=data["keys"]
        )
        return Response({"results": results})
