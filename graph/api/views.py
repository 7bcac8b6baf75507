"""Graph endpoints: neighbours, the namespace graph, one document's links, explicit link/unlink.

Invisible documents answer 404 exactly like missing ones; edges touching a document the caller
cannot read are left out of every answer.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from graph import selectors, services
from graph.api import serializers as gs
from graph.models import GraphEdge
from knowledge import selectors as knowledge_selectors
from knowledge.api.views import parse, responses
from knowledge.models import Document
from workspaces.access import Actor


def _ref_document(actor: Actor, ref: dict[str, Any]) -> Document:
    return selectors.document_from_ref(
        actor=actor,
        document_id=ref.get("document_id"),
        uri=ref.get("uri"),
        namespace=ref.get("namespace"),
        path=ref.get("path"),
    )


class GraphView(APIView):
    @property
    def actor(self) -> Actor:
        return self.request.actor

    def context(self) -> dict[str, Any]:
        return {"request": self.request}

    def _result(self, result: services.LinkResult, code: int) -> Response:
        edge = (
            GraphEdge.objects.select_related("source__document__namespace", "target__document__namespace", "created_by")
            .filter(pk=result.edge.pk)
            .get()
        )
        body = {
            "edge": gs.GraphEdgeDetailSerializer(edge, context=self.context()).data,
            "created": result.created,
            "changed": result.changed,
        }
        return Response(body, status=code)


class GraphNeighborsView(GraphView):
    """Documents linked to one document, walked breadth-first up to three hops."""

    @extend_schema(
        operation_id="kb_graph_neighbors",
        parameters=[gs.GraphNeighborsQuerySerializer],
        responses=responses(gs.GraphNeighborsSerializer),
    )
    def get(self, request: Request) -> Response:
        query = parse(gs.GraphNeighborsQuerySerializer, request.query_params)
        center = _ref_document(self.actor, query)
        result = selectors.neighbors(
            actor=self.actor,
            document=center,
            direction=query["direction"],
            edge_types=query.get("edge_types"),
            depth=query["depth"],
            limit=query["limit"],
        )
        nodes = []
        for document, depth in result.nodes:
            node = gs.GraphDocumentSerializer(document, context=self.context()).data
            nodes.append({**node, "depth": depth})
        data = {
            "center": gs.GraphDocumentSerializer(center, context=self.context()).data,
            "nodes": nodes,
            "edges": gs.GraphEdgeSerializer(result.edges, many=True).data,
            "truncated": result.truncated,
        }
        return Response(data)


class GraphLinksView(GraphView):
    """Explicit typed links: an upsert by (source, target, edge type)."""

    @extend_schema(
        operation_id="kb_graph_link",
        request=gs.GraphLinkInputSerializer,
        responses={**responses(gs.GraphLinkResultSerializer, 200, 403, 409), 201: gs.GraphLinkResultSerializer},
    )
    def post(self, request: Request) -> Response:
        """Create, update or restore a link (201 when new). Needs write on the source and read
        on the target. `archived: true` unlinks instead. `references` links made here are
        replaced by the source's content on its next save."""
        data = parse(gs.GraphLinkInputSerializer, request.data)
        source = _ref_document(self.actor, data["source"])
        target = _ref_document(self.actor, data["target"])
        if data["archived"]:
            result = services.link_archive_by_triple(
                actor=self.actor, source=source, target=target, edge_type=data["edge_type"]
            )
        else:
            result = services.link_upsert(
                actor=self.actor,
                source=source,
                target=target,
                edge_type=data["edge_type"],
                confidence=data.get("confidence"),
                properties=data.get("properties"),
            )
        return self._result(result, status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class GraphLinkDetailView(GraphView):
    """One link by edge id."""

    @extend_schema(
        operation_id="kb_graph_unlink",
        parameters=[OpenApiParameter("edge_id", str, OpenApiParameter.PATH, description="Edge id.")],
        responses=responses(gs.GraphLinkResultSerializer, 200, 403),
    )
    def delete(self, request: Request, edge_id: str) -> Response:
        """Archive (unlink) the edge; needs write on its source. Re-linking restores it with its id."""
        result = services.link_archive(actor=self.actor, edge_id=edge_id)
        return self._result(result, status.HTTP_200_OK)


class NamespaceGraphView(GraphView):
    """The document graph of one namespace."""

    @extend_schema(
        operation_id="kb_namespace_graph",
        parameters=[
            OpenApiParameter("slug", str, OpenApiParameter.PATH, description="Namespace slug."),
            gs.NamespaceGraphQuerySerializer,
        ],
        responses=responses(gs.NamespaceGraphSerializer),
    )
    def get(self, request: Request, slug: str) -> Response:
        """Readable active documents as nodes (by path, at most `limit`) and the edges among them;
        cross-namespace edges and edges to unreadable documents are dropped."""
        query = parse(gs.NamespaceGraphQuerySerializer, request.query_params)
        namespace, _ = knowledge_selectors.namespace_get(actor=self.actor, slug=slug)
        result = selectors.namespace_graph(
            actor=self.actor, namespace=namespace, edge_types=query.get("edge_types"), limit=query["limit"]
        )
        data = {
            "namespace": namespace.slug,
            "nodes": gs.GraphDocumentSerializer(result.nodes, many=True, context=self.context()).data,
            "edges": gs.GraphEdgeSerializer(result.edges, many=True).data,
            "truncated": result.truncated,
        }
        return Response(data)


class DocumentLinksView(GraphView):
    """One document's links: outgoing, backlinks, unresolved."""

    @extend_schema(
        operation_id="kb_document_links",
        parameters=[
            OpenApiParameter("id", str, OpenApiParameter.PATH, description="Document id."),
            gs.DocumentLinksQuerySerializer,
        ],
        responses=responses(gs.DocumentLinksSerializer),
    )
    def get(self, request: Request, id: str) -> Response:
        """Outgoing edges of any type and backlinks, to/from readable active documents; and the
        content's links that lead nowhere visible (missing and unreadable look the same)."""
        query = parse(gs.DocumentLinksQuerySerializer, request.query_params)
        document = knowledge_selectors.document_get(actor=self.actor, document_id=id)
        result = selectors.document_links(actor=self.actor, document=document, limit=query["limit"])
        context = self.context()

        def linked(items: list[tuple[dict[str, Any], Document]]) -> list[dict[str, Any]]:
            return [
                {**edge, "id": str(edge["id"]), "document": gs.GraphDocumentSerializer(doc, context=context).data}
                for edge, doc in items
            ]

        data = {
            "outgoing": linked(result.outgoing),
            "backlinks": linked(result.backlinks),
            "unresolved": gs.GraphUnresolvedSerializer(result.unresolved, many=True).data,
            "truncated": result.truncated,
        }
        return Response(data)
