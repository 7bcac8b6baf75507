"""REST endpoints under /kb/: views parse input, call one service or selector, serialize."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from config.exceptions import Conflict, Invalid
from knowledge import selectors, services
from knowledge.api import serializers as s
from knowledge.embeddings.pipeline import document_indexing, empty_indexing
from knowledge.models import Document
from workspaces import access
from workspaces import services as workspace_services
from workspaces.access import Actor
from workspaces.models import Membership, Namespace, Permission

ERRORS = {
    400: OpenApiResponse(s.ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(s.ErrorSerializer, description="Missing or invalid token"),
    403: OpenApiResponse(s.ErrorSerializer, description="Visible but not allowed"),
    404: OpenApiResponse(s.ErrorSerializer, description="Missing or not visible"),
    409: OpenApiResponse(s.ErrorSerializer, description="State is not what the caller assumed"),
    413: OpenApiResponse(s.ErrorSerializer, description="Body too large"),
}


def responses(ok: Any, code: int = 200, *errors: int) -> dict[int, Any]:
    return {code: ok, **{e: ERRORS[e] for e in (400, 401, 404, *errors)}}


def parse(serializer_class: type[s.serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def page(queryset: Any, limit: int, offset: int, load: Callable[[Any], list[Any]] = list) -> tuple[int, list[Any]]:
    """Total plus one page, read by `load`: two queries, whatever the page size."""
    total = queryset.count()
    return total, load(queryset[offset : offset + limit]) if offset < total else []


class KnowledgeViewSet(viewsets.ViewSet):
    """Base for /kb/ views: `request.actor` is set by the workspace-member permission."""

    lookup_value_regex = "[^/]+"

    @property
    def actor(self) -> Actor:
        return self.request.actor

    def document_response(
        self,
        document: Document,
        *,
        include_content: bool = True,
        include_indexing: bool = False,
        status_code: int = 200,
    ) -> Response:
        context = {"request": self.request, "include_content": include_content}
        data = s.DocumentSerializer(document, context=context).data
        if include_indexing:
            data["indexing"] = document_indexing([document.pk]).get(str(document.pk), empty_indexing())
        return Response(data, status=status_code)

    def write_response(self, result: services.WriteResult, *, status_code: int | None = None) -> Response:
        document = selectors.document_get(actor=self.actor, document_id=result.document.pk, include_content=False)
        context = {"request": self.request, "include_content": False}
        data = {
            "document": s.DocumentSerializer(document, context=context).data,
            "created": result.created,
            "changed": result.changed,
        }
        code = status_code or (status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)
        return Response(data, status=code)


class NamespaceViewSet(KnowledgeViewSet):
    """Namespaces by slug, with their ACL. Management needs `own`."""

    lookup_field = "slug"

    def _render(self, namespace: Namespace, permission: str, code: int = 200) -> Response:
        context = {"permissions": {namespace.pk: permission}}
        return Response(s.NamespaceSerializer(namespace, context=context).data, status=code)

    def _fresh(self, namespace: Namespace) -> Response:
        namespace.refresh_from_db()
        self.actor.forget_permissions()
        permission = access.permission_on(self.actor, namespace, ignore_archive=True)
        return self._render(namespace, permission)

    @extend_schema(parameters=[s.NamespaceListQuerySerializer], responses=responses(s.NamespacePageSerializer))
    def list(self, request: Request) -> Response:
        query = parse(s.NamespaceListQuerySerializer, request.query_params)
        archive_filter = query["archive_filter"]
        if query.get("include_archived") and "archive_filter" not in request.query_params:
            archive_filter = "all"
        rows = selectors.namespace_list(actor=self.actor, archive_filter=archive_filter, kind=query.get("kind"))
        window = rows[query["offset"] : query["offset"] + query["limit"]]
        context = {"permissions": {ns.pk: perm for ns, perm in window}}
        data = s.NamespaceSerializer([ns for ns, _ in window], many=True, context=context).data
        return Response({"total": len(rows), "limit": query["limit"], "offset": query["offset"], "data": data})

    @extend_schema(request=s.NamespaceCreateSerializer, responses=responses(s.NamespaceSerializer, 201, 409))
    def create(self, request: Request) -> Response:
        data = parse(s.NamespaceCreateSerializer, request.data)
        namespace = workspace_services.namespace_create(actor=self.actor, **data)
        return self._render(namespace, Permission.OWN, status.HTTP_201_CREATED)

    @extend_schema(responses=responses(s.NamespaceSerializer))
    def retrieve(self, request: Request, slug: str) -> Response:
        namespace, permission = selectors.namespace_get(actor=self.actor, slug=slug, allow_archived=True)
        return self._render(namespace, permission)

    @extend_schema(request=s.NamespacePatchSerializer, responses=responses(s.NamespaceSerializer, 200, 403, 409))
    def partial_update(self, request: Request, slug: str) -> Response:
        data = parse(s.NamespacePatchSerializer, request.data)
        namespace, _ = selectors.namespace_get(actor=self.actor, slug=slug, minimum=Permission.OWN, allow_archived=True)
        archived = data.pop("archived", None)
        if archived is False:
            services.namespace_set_archived(actor=self.actor, namespace=namespace, archived=False)
            namespace.refresh_from_db()
        if "owner" in data:
            owner = get_user_model().objects.filter(username=data["owner"]).first()
            if owner is None or not Membership.objects.filter(user=owner, workspace=self.actor.workspace).exists():
                raise Invalid("The new owner is not a member of this workspace.", code="invalid", field="owner")
            data["owner"] = owner
        if data:
            if namespace.archived:
                raise Conflict("The namespace is archived. Restore it before changing it.", code="namespace_archived")
            namespace = workspace_services.namespace_update(actor=self.actor, namespace=namespace, changes=data)
        if archived is True:
            services.namespace_set_archived(actor=self.actor, namespace=namespace, archived=True)
        return self._fresh(namespace)

    @extend_schema(responses=responses(s.NamespaceSerializer, 200, 403))
    def destroy(self, request: Request, slug: str) -> Response:
        """Archive the namespace and its documents (nothing is deleted)."""
        namespace, _ = selectors.namespace_get(actor=self.actor, slug=slug, minimum=Permission.OWN, allow_archived=True)
        services.namespace_set_archived(actor=self.actor, namespace=namespace, archived=True)
        return self._fresh(namespace)

    def _acl_response(self, namespace: Namespace) -> Response:
        entries = [
            {
                "subject_type": entry.subject_type,
                "subject": entry.user.username if entry.user_id else entry.group.name,
                "permission": entry.permission,
            }
            for entry in namespace.acl.select_related("user", "group").order_by("id")
        ]
        return Response(s.AclSerializer({"others_can": namespace.others_can, "entries": entries}).data)

    @extend_schema(methods=["GET"], responses=responses(s.AclSerializer))
    @extend_schema(methods=["PUT"], request=s.AclReplaceSerializer, responses=responses(s.AclSerializer, 200, 403))
    @action(detail=True, methods=["get", "put"])
    def acl(self, request: Request, slug: str) -> Response:
        """Read the ACL (any reader) or replace it (needs `own`)."""
        if request.method == "GET":
            namespace, _ = selectors.namespace_get(actor=self.actor, slug=slug)
            return self._acl_response(namespace)
        data = parse(s.AclReplaceSerializer, request.data)
        namespace, _ = selectors.namespace_get(actor=self.actor, slug=slug, minimum=Permission.OWN)
        namespace = workspace_services.namespace_acl_replace(
            actor=self.actor, namespace=namespace, entries=data["entries"], others_can=data.get("others_can")
        )
        return self._acl_response(namespace)


class DocumentViewSet(KnowledgeViewSet):
    """Documents: list, create, get, metadata patch, soft delete, revise, history, archive."""

    @extend_schema(parameters=[s.DocumentListQuerySerializer], responses=responses(s.DocumentPageSerializer))
    def list(self, request: Request) -> Response:
        query = parse(s.DocumentListQuerySerializer, request.query_params)
        include_content = query.pop("include_content")
        limit, offset = query.pop("limit"), query.pop("offset")
        query.pop("include_archived", None)
        query.pop("archived", None)
        filters = selectors.DocumentFilters(**query)
        queryset = selectors.document_list(actor=self.actor, filters=filters, include_content=include_content)
        total, rows = page(queryset, limit, offset, partial(selectors.listed, include_content=include_content))
        context = {"request": request, "include_content": include_content}
        data = s.DocumentSerializer(rows, many=True, context=context).data
        return Response({"total": total, "limit": limit, "offset": offset, "data": data})

    @extend_schema(request=s.DocumentCreateSerializer, responses=responses(s.DocumentSerializer, 201, 403, 409, 413))
    def create(self, request: Request) -> Response:
        data = parse(s.DocumentCreateSerializer, request.data)
        namespace, _ = selectors.namespace_get(actor=self.actor, slug=data.pop("namespace"))
        # The service's instance holds everything the response shows: no read back.
        document = services.document_create(actor=self.actor, namespace=namespace, **data)
        return self.document_response(document, status_code=status.HTTP_201_CREATED)

    @extend_schema(parameters=[s.DocumentGetQuerySerializer], responses=responses(s.DocumentSerializer))
    def retrieve(self, request: Request, pk: str) -> Response:
        query = parse(s.DocumentGetQuerySerializer, request.query_params)
        document = selectors.document_get(actor=self.actor, document_id=pk)
        return self.document_response(
            document, include_content=query["include_content"], include_indexing=query["include_indexing"]
        )

    @extend_schema(request=s.DocumentPatchSerializer, responses=responses(s.DocumentWriteSerializer, 200, 403, 409))
    def partial_update(self, request: Request, pk: str) -> Response:
        """Metadata only: archive state, title, icon, kind, status, visibility, edit policy, path."""
        data = parse(s.DocumentPatchSerializer, request.data)
        document = selectors.document_get(actor=self.actor, document_id=pk, include_content=False)
        expected_version = data.pop("expected_version", None)
        expected_archived = data.pop("expected_archived", None)
        result = services.document_update(
            actor=self.actor,
            document_id=document.pk,
            changes=data,
            expected_version=expected_version,
            expected_archived=expected_archived,
        )
        return self.write_response(result)

    @extend_schema(responses=responses(s.DocumentWriteSerializer, 200, 403, 409))
    def destroy(self, request: Request, pk: str) -> Response:
        """Soft delete: archives the document. Restore with PATCH {"archived": false}."""
        document = selectors.document_get(actor=self.actor, document_id=pk, include_content=False)
        result = services.document_set_archived(actor=self.actor, document_id=document.pk, archived=True)
        return self.write_response(result)

    @extend_schema(request=s.DocumentReviseSerializer, responses=responses(s.DocumentSerializer, 200, 403, 409, 413))
    @action(detail=True, methods=["post"])
    def revise(self, request: Request, pk: str) -> Response:
        """Replace the content, creating exactly one version; a stale expected_version is 409."""
        data = parse(s.DocumentReviseSerializer, request.data)
        # The service locks the row and answers 404 for a document this actor cannot read.
        document = services.document_revise(actor=self.actor, document_id=pk, **data)
        return self.document_response(document, include_content=False)

    @extend_schema(parameters=[s.VersionListQuerySerializer], responses=responses(s.VersionPageSerializer))
    @action(detail=True, methods=["get"])
    def versions(self, request: Request, pk: str) -> Response:
        """History, newest first."""
        query = parse(s.VersionListQuerySerializer, request.query_params)
        document = selectors.document_get(actor=self.actor, document_id=pk)
        queryset = selectors.version_list(actor=self.actor, document=document, include_content=query["include_content"])
        total, rows = page(queryset, query["limit"], query["offset"])
        data = s.VersionSerializer(rows, many=True).data
        return Response({"total": total, "limit": query["limit"], "offset": query["offset"], "data": data})

    @extend_schema(operation_id="kb_documents_version_retrieve", responses=responses(s.VersionSerializer))
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version>[^/]+)")
    def version(self, request: Request, pk: str, version: str) -> Response:
        """One version by number (or id), with its content."""
        document = selectors.document_get(actor=self.actor, document_id=pk)
        found = selectors.version_get(actor=self.actor, document=document, version=version)
        return Response(s.VersionSerializer(found).data)

    @extend_schema(request=s.BulkArchiveSerializer, responses=responses(s.BulkArchiveResponseSerializer))
    @action(detail=False, methods=["post"], url_path="archive")
    def archive_bulk(self, request: Request) -> Response:
        """Archive or restore 1–50 documents; each target succeeds or fails on its own."""
        data = parse(s.BulkArchiveSerializer, request.data)
        results = services.document_bulk_set_archived(
            actor=self.actor, archived=data["archived"], targets=data["targets"]
        )
        return Response({"archived": data["archived"], "results": results})

    @extend_schema(
        methods=["GET"], parameters=[s.DocumentByPathQuerySerializer], responses=responses(s.DocumentSerializer)
    )
    @extend_schema(
        methods=["PUT"],
        request=s.DocumentUpsertSerializer,
        responses={**responses(s.DocumentWriteSerializer, 200, 403, 409, 413), 201: s.DocumentWriteSerializer},
    )
    @action(detail=False, methods=["get", "put"], url_path="by-path")
    def by_path(self, request: Request) -> Response:
        """Get the document at namespace + path, or create/update it (idempotent upsert)."""
        if request.method == "GET":
            query = parse(s.DocumentByPathQuerySerializer, request.query_params)
            document = selectors.document_get_by_path(
                actor=self.actor,
                namespace=query["namespace"],
                path=query["path"],
                archive_filter=query["archive_filter"],
            )
            return self.document_response(
                document, include_content=query["include_content"], include_indexing=query["include_indexing"]
            )
        data = parse(s.DocumentUpsertSerializer, request.data)
        namespace, _ = selectors.namespace_get(actor=self.actor, slug=data.pop("namespace"))
        result = services.document_upsert(actor=self.actor, namespace=namespace, **data)
        return self.write_response(result)
