"""Helpers for graph tests: revise over HTTP, and read edges straight from the database."""

from __future__ import annotations

from typing import Any

from graph.models import GraphEdge


def revise(http, member, document_id: str, content: str) -> dict[str, Any]:
    response = http.as_(member).post(f"/kb/documents/{document_id}/revise", json={"content": content})
    assert response.status_code == 200, response.text
    return response.json()


def references(document_id: str, *, archived: bool | None = False) -> dict[str, GraphEdge]:
    """Outgoing `references` edges of a document, keyed by target document id."""
    edges = GraphEdge.objects.filter(source__document_id=document_id, edge_type="references").select_related("target")
    if archived is not None:
        edges = edges.filter(archived=archived)
    return {str(edge.target.document_id): edge for edge in edges}


def link(http, member, source: Any, target: Any, edge_type: str = "related_to", **fields: Any):
    return http.as_(member).post(
        "/kb/graph/links", json={"source": source, "target": target, "edge_type": edge_type, **fields}
    )
