"""GET/POST /kb/search: ranked text search (semantic and hybrid arrive with embeddings)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import Invalid
from knowledge import selectors
from knowledge.api import serializers as s
from knowledge.api.views import parse, responses
from knowledge.models import DocumentKind, DocumentStatus, SearchChunk
from knowledge.search import HEADER_ORDINAL, make_snippet, run_search
from knowledge.search_query import parse_query
from workspaces import semantic
from workspaces.models import Visibility

MAX_SEARCH_OFFSET = 10_000


class SearchQuerySerializer(serializers.Serializer):
    q = s.TextField(max_length=1000, required=False, allow_blank=True, default="")
    mode = serializers.ChoiceField(choices=["text", "semantic", "hybrid"], default="text")
    namespace = s.TextField(max_length=100, required=False)
    path_prefix = s.TextField(max_length=1024, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=DocumentKind.values, required=False)
    visibility = serializers.ChoiceField(choices=Visibility.values, required=False)
    status = serializers.ChoiceField(choices=DocumentStatus.values, required=False)
    include_my_drafts = serializers.BooleanField(default=True)
    include_other_user_drafts = serializers.BooleanField(default=False)
    archive_filter = serializers.ChoiceField(choices=selectors.ARCHIVE_FILTERS, required=False)
    include_archived = serializers.BooleanField(required=False, help_text="Legacy: true means archive_filter=all.")
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    offset = serializers.IntegerField(min_value=0, max_value=MAX_SEARCH_OFFSET, default=0)
    content_mode = serializers.ChoiceField(
        choices=["none", "snippet", "full"], required=False, help_text="Default: snippet with a query, none without."
    )
    snippet_lines = serializers.IntegerField(min_value=1, max_value=20, default=3)
    include_content = serializers.BooleanField(required=False, help_text="Legacy: true means content_mode=full.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "archive_filter" not in attrs:
            attrs["archive_filter"] = "all" if attrs.get("include_archived") else "active"
        if "content_mode" not in attrs:
            if attrs.get("include_content"):
                attrs["content_mode"] = "full"
            else:
                attrs["content_mode"] = "snippet" if attrs["q"].strip() else "none"
        return attrs


class SnippetSerializer(serializers.Serializer):
    text = serializers.CharField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()


class NamespaceRefSerializer(serializers.Serializer):
    slug = serializers.CharField()
    display_name = serializers.CharField()


class VersionTokenSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.IntegerField()
    sha256 = serializers.CharField()


class SearchHitSerializer(serializers.Serializer):
    document = s.DocumentSerializer()
    namespace = NamespaceRefSerializer()
    current_version = VersionTokenSerializer()
    snippet = SnippetSerializer(allow_null=True)
    score = serializers.FloatField()
    coverage = serializers.IntegerField(help_text="How many of the query's words or phrases the document matches.")
    mode = serializers.CharField()


class SearchPageSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    relaxed = serializers.BooleanField(help_text="True when documents matching only some words are included.")
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    data = SearchHitSerializer(many=True)


def _first_body_chunks(document_ids: list[Any]) -> dict[Any, SearchChunk]:
    chunks = SearchChunk.objects.filter(document_id__in=document_ids, ordinal=0).only(
        "id", "document_id", "ordinal", "start_line", "end_line", "text"
    )
    return {chunk.document_id: chunk for chunk in chunks}


class SearchView(APIView):
    """Ranked full-text search over every document the caller may read."""

    def _search(self, request: Request, data: Any) -> Response:
        query = parse(SearchQuerySerializer, data)
        actor = request.actor
        if query["mode"] != "text":
            reason = semantic.public_policy(semantic.policy_row(actor))["unavailable_reason"]
            raise Invalid(
                f"{query['mode'].capitalize()} search is unavailable: {reason} Use mode=text.",
                code="semantic_unavailable",
                reason=reason,
            )
        filters = selectors.DocumentFilters(
            namespace=query.get("namespace"),
            path_prefix=query.get("path_prefix"),
            kind=query.get("kind"),
            visibility=query.get("visibility"),
            status=query.get("status"),
            include_my_drafts=query["include_my_drafts"],
            include_other_user_drafts=query["include_other_user_drafts"],
            archive_filter=query["archive_filter"],
        )
        content_mode = query["content_mode"]
        documents = selectors.document_list(actor=actor, filters=filters, include_content=content_mode == "full")
        limit, offset = query["limit"], query["offset"]
        parsed = parse_query(query["q"])
        scores: dict[Any, tuple[float, int]] = {}
        chunks: dict[Any, SearchChunk] = {}
        relaxed = False
        if not query["q"].strip():
            total = documents.count()
            page = list(documents[offset : offset + limit])
        else:
            scope_sql, scope_params = documents.order_by().values("id").query.sql_with_params()
            result = run_search(
                query=parsed, scope_sql=scope_sql, scope_params=list(scope_params), limit=limit, offset=offset
            )
            total, relaxed = result.total, result.relaxed
            by_id = documents.in_bulk([r.document_id for r in result.ranked])
            page = [by_id[r.document_id] for r in result.ranked if r.document_id in by_id]
            scores = {r.document_id: (r.score, r.coverage) for r in result.ranked}
            chunks = {k: v for k, v in result.best_chunks.items() if v.ordinal != HEADER_ORDINAL}
        if content_mode == "snippet":
            missing = [doc.pk for doc in page if doc.pk not in chunks]
            chunks.update(_first_body_chunks(missing) if missing else {})
        context = {"request": request, "include_content": content_mode == "full"}
        hits = []
        for document in page:
            chunk = chunks.get(document.pk)
            snippet = None
            if content_mode == "snippet" and chunk is not None:
                snippet = make_snippet(chunk.text, chunk.start_line, parsed.words, query["snippet_lines"])
            score, coverage = scores.get(document.pk, (0.0, 0))
            version = document.current_version
            hits.append(
                {
                    "document": s.DocumentSerializer(document, context=context).data,
                    "namespace": {"slug": document.namespace.slug, "display_name": document.namespace.display_name},
                    "current_version": {"id": str(version.id), "number": version.number, "sha256": version.sha256},
                    "snippet": snippet,
                    "score": score,
                    "coverage": coverage,
                    "mode": "text",
                }
            )
        body = {
            "query": query["q"],
            "mode": "text",
            "relaxed": relaxed,
            "total": total,
            "limit": limit,
            "offset": offset,
            "data": hits,  # already serialized; SearchHitSerializer documents the shape
        }
        return Response(body)

    @extend_schema(parameters=[SearchQuerySerializer], responses=responses(SearchPageSerializer))
    def get(self, request: Request) -> Response:
        return self._search(request, request.query_params)

    @extend_schema(
        operation_id="kb_search_query", request=SearchQuerySerializer, responses=responses(SearchPageSerializer)
    )
    def post(self, request: Request) -> Response:
        """The same search with the parameters in a JSON body."""
        return self._search(request, request.data)
