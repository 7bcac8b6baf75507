"""Navigation endpoints: namespace tree, `@` mentions, and get/put of a document by URL path.

GET /kb/namespaces/{slug}/tree
GET /kb/mentions
GET/PUT /kb/namespaces/{slug}/documents/{doc_path}
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import Conflict, Invalid, NotFound
from knowledge import navigation, selectors, services
from knowledge.api import serializers as s
from knowledge.api.views import parse, responses
from knowledge.models import DocumentKind, DocumentStatus
from knowledge.paths import normalise_folder, normalise_path
from workspaces import services as workspace_services
from workspaces.access import Actor
from workspaces.models import SLUG_PATTERN, Namespace, Visibility

MAX_SLUG_LENGTH = 100

# --- input ---------------------------------------------------------------------------------


class TreeQuerySerializer(serializers.Serializer):
    path_prefix = s.TextField(
        max_length=1024, required=False, allow_blank=True, help_text="A folder; `/guides//` means `guides`."
    )
    depth = serializers.IntegerField(
        min_value=navigation.MIN_DEPTH,
        max_value=navigation.MAX_DEPTH,
        default=navigation.DEFAULT_DEPTH,
        help_text="Folder levels below the prefix; deeper documents are grouped under a `…` folder.",
    )
    kind = serializers.ChoiceField(choices=DocumentKind.values, required=False)
    status = serializers.ChoiceField(choices=DocumentStatus.values, required=False)
    include_my_drafts = serializers.BooleanField(default=True)
    include_other_user_drafts = serializers.BooleanField(default=False)
    archive_filter = serializers.ChoiceField(choices=selectors.ARCHIVE_FILTERS, required=False)
    include_archived = serializers.BooleanField(required=False, help_text="Legacy: true means archive_filter=all.")
    limit = serializers.IntegerField(min_value=1, max_value=navigation.MAX_TREE_LIMIT, default=25)
    offset = serializers.IntegerField(min_value=0, max_value=10**9, default=0)

    def validate_path_prefix(self, value: str) -> str:
        try:
            return normalise_folder(value)
        except Invalid as exc:
            raise serializers.ValidationError(exc.message) from exc

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "archive_filter" not in attrs:
            attrs["archive_filter"] = "all" if attrs.get("include_archived") else "active"
        attrs.pop("include_archived", None)
        return attrs


class MentionQuerySerializer(serializers.Serializer):
    q = s.TextField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="Text in the title or path; empty lists the most recently updated documents.",
    )
    namespace = s.TextField(max_length=100, required=False, help_text="Only this namespace (slug).")
    limit = serializers.IntegerField(min_value=1, max_value=navigation.MAX_MENTION_LIMIT, default=8)


class NamespaceDocumentGetQuerySerializer(s.DocumentGetQuerySerializer):
    archive_filter = serializers.ChoiceField(choices=selectors.ARCHIVE_FILTERS, default="active")


class NamespaceDocumentPutSerializer(s.DocumentUpsertSerializer):
    """The by-path upsert body; namespace and path come from the URL."""

    namespace = None
    path = s.TextField(max_length=1024, required=False, help_text="A different path moves the document there.")
    create_namespace = serializers.BooleanField(
        default=False, help_text="Create the namespace (you own it) when it does not exist."
    )
    namespace_display_name = s.TextField(max_length=200, required=False, allow_blank=True)


# --- output --------------------------------------------------------------------------------


@extend_schema_field({"type": "string", "enum": ["folder"]})
class FolderTypeField(serializers.CharField):
    pass


@extend_schema_field({"type": "string", "enum": ["doc"]})
class DocTypeField(serializers.CharField):
    pass


class TreeNodesField(serializers.ListField):
    """Tree nodes (already shaped dicts); the schema is the folder/document union set below."""

    child = serializers.DictField()


class TreeDocumentNodeSerializer(serializers.Serializer):
    type = DocTypeField()
    icon = serializers.CharField(allow_null=True)
    title = serializers.CharField()
    kind = serializers.ChoiceField(choices=DocumentKind.values)
    path = serializers.CharField()
    uri = serializers.CharField(help_text="agor://kb/<namespace>/<path>")
    reference_uri = serializers.CharField(help_text="agor://kb/document/<id>")
    status = serializers.ChoiceField(choices=DocumentStatus.values)


class TreeFolderNodeSerializer(serializers.Serializer):
    type = FolderTypeField()
    name = serializers.CharField(help_text="`…` for the group of documents deeper than the requested depth.")
    path = serializers.CharField()
    document_count = serializers.IntegerField(help_text="Documents of this page anywhere below the folder.")
    children = TreeNodesField()


# The union refers to the folder node, whose children are the union again (a recursive schema).
extend_schema_field(
    PolymorphicProxySerializer(
        component_name="TreeNode",
        serializers=[TreeFolderNodeSerializer, TreeDocumentNodeSerializer],
        resource_type_field_name=None,
        many=True,
    )
)(TreeNodesField)


class TreePaginationSerializer(serializers.Serializer):
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    has_more = serializers.BooleanField()
    next_offset = serializers.IntegerField(allow_null=True)


class NamespaceTreeSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    path_prefix = serializers.CharField(allow_null=True)
    depth = serializers.IntegerField()
    count = serializers.IntegerField(help_text="Documents on this page.")
    truncated = serializers.BooleanField(help_text="More documents exist beyond this page.")
    total = serializers.IntegerField(help_text="Matching documents in all pages.")
    tree = TreeNodesField()
    pagination = TreePaginationSerializer()


class DocumentMentionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    path = serializers.CharField()
    namespace = serializers.CharField()
    icon = serializers.CharField(allow_null=True)
    reference_uri = serializers.CharField()
    url = serializers.CharField()
    markdown_link = serializers.CharField(help_text="[title](agor://kb/document/<id>), ready to insert.")


class DocumentMentionListSerializer(serializers.Serializer):
    query = serializers.CharField(allow_blank=True)
    namespace = serializers.CharField(allow_null=True)
    limit = serializers.IntegerField()
    count = serializers.IntegerField()
    data = DocumentMentionSerializer(many=True)


# --- helpers -------------------------------------------------------------------------------


def _namespace_for_put(
    actor: Actor, slug: str, *, create: bool, display_name: str, visibility: str | None
) -> Namespace:
    """The namespace to write into, created (owned by the actor) only when no such slug exists.

    A namespace that exists but is invisible, or archived, answers 404 and is never created
    over, so `create_namespace` cannot reveal or shadow it.
    """
    try:
        namespace, _ = selectors.namespace_get(actor=actor, slug=slug)
        return namespace
    except NotFound:
        if not create or Namespace.objects.filter(workspace=actor.workspace, slug=slug).exists():
            raise
    if len(slug) > MAX_SLUG_LENGTH or not re.fullmatch(SLUG_PATTERN, slug):
        raise Invalid(
            "Namespace slugs start with a-z or 0-9, then use a-z 0-9 . _ - (at most 100 characters).",
            code="invalid",
            field="slug",
        )
    try:
        return workspace_services.namespace_create(
            actor=actor, slug=slug, display_name=display_name, visibility_default=visibility or Visibility.PUBLIC
        )
    except Conflict:
        # Created concurrently: use it if visible, otherwise the same 404 as above.
        namespace, _ = selectors.namespace_get(actor=actor, slug=slug)
        return namespace


def _write_response(request: Request, result: services.WriteResult) -> Response:
    document = selectors.document_get(actor=request.actor, document_id=result.document.pk, include_content=False)
    context = {"request": request, "include_content": False}
    data = {
        "document": s.DocumentSerializer(document, context=context).data,
        "created": result.created,
        "changed": result.changed,
    }
    return Response(data, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


# --- views ---------------------------------------------------------------------------------


class NamespaceTreeView(APIView):
    """Folders and documents of a namespace (no content), one page of documents by path."""

    @extend_schema(
        operation_id="kb_namespaces_tree",
        parameters=[TreeQuerySerializer],
        responses=responses(NamespaceTreeSerializer),
    )
    def get(self, request: Request, slug: str) -> Response:
        query = parse(TreeQuerySerializer, request.query_params)
        return Response(navigation.namespace_tree(actor=request.actor, namespace=slug, **query))


class MentionsView(APIView):
    """Documents to `@` mention: title or path matches, exact first, then prefix, then contains."""

    @extend_schema(
        operation_id="kb_mentions_list",
        parameters=[MentionQuerySerializer],
        responses=responses(DocumentMentionListSerializer),
    )
    def get(self, request: Request) -> Response:
        query = parse(MentionQuerySerializer, request.query_params)
        documents = navigation.document_mentions(actor=request.actor, **query)
        data = [
            {
                "id": str(doc.id),
                "title": doc.title,
                "path": doc.path,
                "namespace": doc.namespace.slug,
                "icon": doc.icon or None,
                "reference_uri": doc.reference_uri,
                "url": s.reader_url(request, doc.namespace.slug, doc.path),
                "markdown_link": navigation.markdown_link(doc.title, doc.id),
            }
            for doc in documents
        ]
        return Response(
            {
                "query": query["q"],
                "namespace": query.get("namespace"),
                "limit": query["limit"],
                "count": len(data),
                "data": data,
            }
        )


DOC_PATH = OpenApiParameter(
    "doc_path",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="Document path inside the namespace; may contain slashes.",
)


class NamespaceDocumentView(APIView):
    """A document addressed by namespace and path in the URL: read it, or create/update it."""

    @extend_schema(
        operation_id="kb_namespaces_document_retrieve",
        parameters=[DOC_PATH, NamespaceDocumentGetQuerySerializer],
        responses=responses(s.DocumentSerializer),
    )
    def get(self, request: Request, slug: str, doc_path: str) -> Response:
        query = parse(NamespaceDocumentGetQuerySerializer, request.query_params)
        document = selectors.document_get_by_path(
            actor=request.actor, namespace=slug, path=doc_path, archive_filter=query["archive_filter"]
        )
        context = {"request": request, "include_content": query["include_content"]}
        return Response(s.DocumentSerializer(document, context=context).data)

    @extend_schema(
        operation_id="kb_namespaces_document_put",
        parameters=[DOC_PATH],
        request=NamespaceDocumentPutSerializer,
        responses={**responses(s.DocumentWriteSerializer, 200, 403, 409, 413), 201: s.DocumentWriteSerializer},
    )
    def put(self, request: Request, slug: str, doc_path: str) -> Response:
        """Idempotent upsert: identical content adds no version; `path` in the body moves the document."""
        data = parse(NamespaceDocumentPutSerializer, request.data)
        create = data.pop("create_namespace")
        display_name = data.pop("namespace_display_name", "")
        new_path = data.pop("path", None)
        actor = request.actor
        # One transaction: a failed write or move leaves no namespace or version behind.
        with transaction.atomic():
            namespace = _namespace_for_put(
                actor, slug, create=create, display_name=display_name, visibility=data.get("visibility")
            )
            result = services.document_upsert(actor=actor, namespace=namespace, path=doc_path, **data)
            if new_path is not None and normalise_path(new_path) != result.document.path:
                moved = services.document_update(
                    actor=actor, document_id=result.document.pk, changes={"path": new_path}
                )
                result = services.WriteResult(
                    document=moved.document, created=result.created, changed=result.changed or moved.changed
                )
        return _write_response(request, result)
