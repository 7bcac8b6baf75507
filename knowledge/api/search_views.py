"""GET/POST /kb/search: ranked text, semantic and hybrid search over what the caller may read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.db_workers import side_queries
from config.exceptions import Invalid
from knowledge import selectors
from knowledge.api import serializers as s
from knowledge.api.views import parse, responses
from knowledge.embeddings import search as embedding_search
from knowledge.embeddings.pipeline import LoadedPolicy
from knowledge.models import DocumentKind, DocumentStatus, SearchChunk
from knowledge.search import HEADER_ORDINAL, SearchResult, make_snippet, run_search
from knowledge.search_query import parse_query
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
    min_similarity = serializers.FloatField(
        min_value=-1.0, max_value=1.0, default=0.0, help_text="Semantic and hybrid: drop chunks below this cosine."
    )
    rrf_k = serializers.IntegerField(
        min_value=1, max_value=1000, required=False, help_text="Hybrid: the reciprocal rank fusion constant (60)."
    )

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


class MatchedChunkSerializer(serializers.Serializer):
    chunk_id = serializers.UUIDField()
    heading_path = serializers.ListField(child=serializers.CharField())
    anchor = serializers.CharField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    snippet = serializers.CharField()
    score = serializers.FloatField(help_text="Cosine similarity.")


class SearchHitSerializer(serializers.Serializer):
    document = s.DocumentSerializer()
    namespace = NamespaceRefSerializer()
    current_version = VersionTokenSerializer()
    snippet = SnippetSerializer(allow_null=True)
    score = serializers.FloatField()
    coverage = serializers.IntegerField(help_text="How many of the query's words or phrases the document matches.")
    mode = serializers.CharField()
    chunks = MatchedChunkSerializer(many=True, required=False, help_text="Semantic and hybrid: best chunks.")
    text_rank = serializers.IntegerField(required=False, allow_null=True)
    semantic_rank = serializers.IntegerField(required=False, allow_null=True)


class TimingsSerializer(serializers.Serializer):
    embed_ms = serializers.FloatField(help_text="Embedding the query (the provider call).")
    search_ms = serializers.FloatField(help_text="The vector query.")


class SearchPageSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    relaxed = serializers.BooleanField(help_text="True when documents matching only some words are included.")
    total = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    data = SearchHitSerializer(many=True)
    effective_mode = serializers.CharField(help_text="The mode that answered: hybrid falls back to text.")
    fallback_reason = serializers.CharField(allow_null=True, help_text="Why hybrid answered with text only.")
    timings = TimingsSerializer(required=False)


@dataclass
class Ranked:
    """One page of a search leg (or of their fusion), before documents are serialized."""

    order: list[Any] = field(default_factory=list)
    total: int = 0
    relaxed: bool = False
    scores: dict[Any, tuple[float, int]] = field(default_factory=dict)
    text: SearchResult | None = None  # the text leg, which picks snippet chunks for its hits
    semantic: dict[Any, Any] = field(default_factory=dict)
    text_ranks: dict[Any, int] = field(default_factory=dict)
    semantic_ranks: dict[Any, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def _chunk_body(text: str, heading_path: list[str]) -> str:
    """A chunk's text without the heading-path line it was embedded with."""
    return text.split("\n\n", 1)[1] if heading_path and "\n\n" in text else text


def _first_body_chunks(document_ids: list[Any]) -> dict[Any, SearchChunk]:
    chunks = SearchChunk.objects.filter(document_id__in=document_ids, ordinal=0).only(
        "id", "document_id", "ordinal", "start_line", "end_line", "text"
    )
    return {chunk.document_id: chunk for chunk in chunks}


HYBRID_MIN_CANDIDATES = 50
HYBRID_MAX_CANDIDATES = 200


class SearchView(APIView):
    """Ranked search over every document the caller may read: text, semantic or hybrid."""

    def _search(self, request: Request, data: Any) -> Response:
        query = parse(SearchQuerySerializer, data)
        actor = request.actor
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
        mode = query["mode"]
        workspace_id = actor.workspace.pk
        fallback_reason = None
        loaded = None
        if mode != "text":
            loaded = embedding_search.pipeline.workspace_policy(workspace_id)  # read once per request
            fallback_reason = embedding_search.pipeline.unavailable_reason(workspace_id, loaded)
            if fallback_reason and mode == "semantic":
                raise embedding_search.unavailable(workspace_id, mode)
        effective = "text" if fallback_reason else mode
        content_mode = query["content_mode"]
        documents = selectors.document_list(actor=actor, filters=filters, include_content=content_mode == "full")
        limit, offset = query["limit"], query["offset"]
        parsed = parse_query(query["q"])
        share = selectors.readable_share(actor=actor, filters=filters)
        ranked = Ranked()
        scope = selectors.search_scope(documents) if query["q"].strip() else None
        if scope is None:
            ranked.total = documents.count()
            ranked.order = list(documents[offset : offset + limit].values_list("id", flat=True))
        elif effective == "text":
            ranked = self._text(scope, parsed, limit, offset, share)
        elif effective == "semantic":
            ranked = self._semantic(workspace_id, scope, query, limit, offset, share, loaded)
        else:
            try:
                ranked = self._hybrid(workspace_id, scope, parsed, query, limit, offset, share, loaded)
            except Invalid as exc:  # the provider could not embed the query: text still answers
                if exc.code != "semantic_unavailable":
                    raise
                effective, fallback_reason = "text", exc.extra.get("reason") or exc.message
                ranked = self._text(scope, parsed, limit, offset, share)
        by_id = selectors.ranked_page(actor=actor, document_ids=ranked.order, include_content=content_mode == "full")
        page = [by_id[pk] for pk in ranked.order if pk in by_id]
        chunks: dict[Any, SearchChunk] = {}
        if content_mode == "snippet":
            if ranked.text is not None:
                text_hits = {r.document_id for r in ranked.text.ranked}
                found = ranked.text.best_chunks([doc.pk for doc in page if doc.pk in text_hits])
                chunks = {pk: chunk for pk, chunk in found.items() if chunk.ordinal != HEADER_ORDINAL}
            missing = [doc.pk for doc in page if doc.pk not in chunks and doc.pk not in ranked.semantic]
            chunks.update(_first_body_chunks(missing) if missing else {})
        context = {"request": request, "include_content": content_mode == "full"}
        hits = []
        for document in page:
            semantic_match = ranked.semantic.get(document.pk)
            snippet = None
            if content_mode == "snippet":
                chunk = chunks.get(document.pk)
                if chunk is not None:
                    snippet = make_snippet(chunk.text, chunk.start_line, parsed.words, query["snippet_lines"])
                elif semantic_match is not None and semantic_match.chunks:
                    best = semantic_match.chunks[0]
                    snippet = make_snippet(
                        _chunk_body(best["snippet"], best["heading_path"]),
                        best["start_line"],
                        parsed.words,
                        query["snippet_lines"],
                    )
            score, coverage = ranked.scores.get(document.pk, (0.0, 0))
            version = document.current_version
            hit = {
                "document": s.DocumentSerializer(document, context=context).data,
                "namespace": {"slug": document.namespace.slug, "display_name": document.namespace.display_name},
                "current_version": {"id": str(version.id), "number": version.number, "sha256": version.sha256},
                "snippet": snippet,
                "score": score,
                "coverage": coverage,
                "mode": effective,
            }
            if effective != "text":
                hit["chunks"] = semantic_match.chunks if semantic_match else []
            if effective == "hybrid":
                hit["text_rank"] = ranked.text_ranks.get(document.pk)
                hit["semantic_rank"] = ranked.semantic_ranks.get(document.pk)
            hits.append(hit)
        body = {
            "query": query["q"],
            "mode": mode,
            "effective_mode": effective,
            "fallback_reason": fallback_reason,
            "relaxed": ranked.relaxed,
            "total": ranked.total,
            "limit": limit,
            "offset": offset,
            "data": hits,  # already serialized; SearchHitSerializer documents the shape
        }
        if ranked.timings:
            body["timings"] = ranked.timings
        return Response(body)

    @staticmethod
    def _text(scope: selectors.Scope, parsed: Any, limit: int, offset: int, share: float) -> Ranked:
        scope_sql, scope_params = scope
        result = run_search(
            query=parsed, scope_sql=scope_sql, scope_params=scope_params, limit=limit, offset=offset, scope_share=share
        )
        return Ranked(
            order=[r.document_id for r in result.ranked],
            total=result.total,
            relaxed=result.relaxed,
            scores={r.document_id: (r.score, r.coverage) for r in result.ranked},
            text=result,
        )

    @staticmethod
    def _semantic(
        workspace_id: int,
        scope: selectors.Scope,
        query: dict[str, Any],
        limit: int,
        offset: int,
        share: float,
        loaded: LoadedPolicy | None,
    ) -> Ranked:
        scope_sql, scope_params = scope
        result = embedding_search.semantic_search(
            workspace_id=workspace_id,
            text=query["q"],
            scope_sql=scope_sql,
            scope_params=scope_params,
            limit=limit,
            offset=offset,
            min_similarity=query["min_similarity"],
            share=share,
            loaded=loaded,
        )
        return Ranked(
            order=[m.document_id for m in result.matches],
            total=result.total,
            scores={m.document_id: (m.score, 0) for m in result.matches},
            semantic={m.document_id: m for m in result.matches},
            timings={"embed_ms": round(result.embed_ms, 2), "search_ms": round(result.search_ms, 2)},
        )

    def _hybrid(
        self,
        workspace_id: int,
        scope: selectors.Scope,
        parsed: Any,
        query: dict[str, Any],
        limit: int,
        offset: int,
        share: float,
        loaded: LoadedPolicy | None,
    ) -> Ranked:
        """Reciprocal rank fusion of the two legs' top candidates.

        The text leg runs on a second database connection while this one embeds the query and
        finds the nearest vectors (see config.db_workers)."""
        depth = min(HYBRID_MAX_CANDIDATES, max(HYBRID_MIN_CANDIDATES, (offset + limit) * 2))
        text_leg = side_queries.submit(lambda: self._text(scope, parsed, depth, 0, share))
        try:
            semantic_leg = self._semantic(workspace_id, scope, query, depth, 0, share, loaded)
        except BaseException:
            text_leg.exception()  # waits: the leg never outlives the request
            raise
        text = text_leg.result()
        fused = embedding_search.reciprocal_rank_fusion([text.order, semantic_leg.order], k=query.get("rrf_k"))
        window = fused[offset : offset + limit]
        text_ranks = {pk: rank for rank, pk in enumerate(text.order, start=1)}
        semantic_ranks = {pk: rank for rank, pk in enumerate(semantic_leg.order, start=1)}
        return Ranked(
            order=[pk for pk, _ in window],
            total=max(text.total, len(fused)),
            relaxed=text.relaxed,
            scores={pk: (round(score, 6), text.scores.get(pk, (0.0, 0))[1]) for pk, score in window},
            text=text.text,
            semantic=semantic_leg.semantic,
            text_ranks=text_ranks,
            semantic_ranks=semantic_ranks,
            timings=semantic_leg.timings,
        )

    @extend_schema(parameters=[SearchQuerySerializer], responses=responses(SearchPageSerializer))
    def get(self, request: Request) -> Response:
        return self._search(request, request.query_params)

    @extend_schema(
        operation_id="kb_search_query", request=SearchQuerySerializer, responses=responses(SearchPageSerializer)
    )
    def post(self, request: Request) -> Response:
        """The same search with the parameters in a JSON body."""
        return self._search(request, request.data)
