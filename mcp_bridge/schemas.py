"""Output schemas of the MCP tools.

They mirror the REST API's response shapes (tests compare them with the server's OpenAPI
components) and publish the fields an agent relies on; anything else the API returns passes
through unchanged (`extra="allow"`), so a newer server never breaks an older bridge. The bridge
adds camelCase paging fields (`hasMore`, `nextOffset`) and `contentTruncation` where it cuts text.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Out(BaseModel):
    """Open to fields this bridge does not know yet."""

    model_config = ConfigDict(extra="allow")


class Truncation(Out):
    truncated: bool
    nextLine: int = Field(description="Pass as startLine to agor_kb_get_range to read on.")  # noqa: N815
    totalLines: int  # noqa: N815


class VersionToken(Out):
    id: str
    number: int = Field(description="Pass as expectedVersion when writing.")
    sha256: str


class Document(Out):
    id: str
    reference_uri: str = Field(description="Cite the document with this uri: agor://kb/document/<id>.")
    uri: str
    url: str = Field(description="Reader page for people.")
    namespace: str
    path: str
    title: str
    archived: bool
    current_version: VersionToken | None = None
    content: str | None = None
    contentTruncation: Truncation | None = None  # noqa: N815


class Namespace(Out):
    slug: str
    display_name: str
    description: str
    kind: str
    owner: str
    others_can: str
    effective_permission: Literal["read", "write", "own"]
    archived: bool


class Snippet(Out):
    text: str
    start_line: int
    end_line: int


class SearchHit(Out):
    document: Document
    current_version: VersionToken
    snippet: Snippet | None = None
    score: float
    mode: str


class Version(Out):
    id: str
    number: int
    sha256: str
    created_at: str
    change_summary: str
    author: str | None = None
    content: str | None = None


class Paged(Out):
    total: int
    limit: int
    offset: int
    hasMore: bool  # noqa: N815
    nextOffset: int | None = Field(description="Pass as offset for the next page; null on the last page.")  # noqa: N815


class NamespaceList(Paged):
    data: list[Namespace]


class NamespacePutResult(Out):
    namespace: Namespace
    created: bool


class Tree(Out):
    namespace: str
    total: int
    tree: list[dict[str, Any]] = Field(description="Folders (with children) and documents (path, title, uri).")
    hasMore: bool  # noqa: N815
    nextOffset: int | None = None  # noqa: N815


class SearchResults(Paged):
    data: list[SearchHit]
    relaxed: bool = Field(description="True when no document matched every word and partial matches are shown.")
    effective_mode: str = Field(description="The mode that answered (hybrid falls back to text).")
    fallback_reason: str | None = None


class DocumentResult(Out):
    document: Document


class OutlineHeading(Out):
    level: int
    title: str
    heading_path: str
    section_ref: str = Field(description="Pass as sectionRef to agor_kb_get_range.")
    occurrence: int
    start_line: int
    end_line: int


class Outline(Out):
    document: Document
    version: VersionToken
    line_count: int
    headings: list[OutlineHeading]


class LineRange(Out):
    start_line: int
    end_line: int
    content: str
    numbered_content: str | None = None
    content_md5: str = Field(description="Pass as expectedMd5 to agor_kb_edit to guard a replacement.")


class Range(Out):
    document: Document
    version: VersionToken
    line_count: int
    range: LineRange


class History(Paged):
    documentId: str  # noqa: N815
    data: list[Version]


class WriteResult(Out):
    document: Document
    created: bool
    changed: bool = Field(description="False when the content was identical and no version was added.")


class ChangedRange(Out):
    start_line: int
    end_line: int


class EditResult(Out):
    dry_run: bool
    changed: bool
    document: Document
    base_version: VersionToken
    new_version: VersionToken | None = None
    diff: str
    changed_ranges: list[ChangedRange]


class Materialized(Out):
    document: Document
    subpath: str
    sidecarSubpath: str  # noqa: N815
    bytesWritten: int  # noqa: N815
    instructions: str


class Published(Out):
    dryRun: bool  # noqa: N815
    changed: bool
    diff: str | None = None
    documentId: str | None = None  # noqa: N815
    document: Document | None = None
    created: bool | None = None


class GraphDocument(Out):
    document_id: str
    reference_uri: str
    namespace: str
    path: str
    title: str


class GraphEdgeDetail(Out):
    id: str
    source: GraphDocument
    target: GraphDocument
    edge_type: str
    confidence: float
    properties: dict[str, Any]
    archived: bool


class LinkResult(Out):
    edge: GraphEdgeDetail
    created: bool
    changed: bool


class GraphNeighbor(GraphDocument):
    depth: int


class GraphEdge(Out):
    id: str
    source: str
    target: str
    edge_type: str
    confidence: float


class Neighbors(Out):
    center: GraphDocument
    nodes: list[GraphNeighbor]
    edges: list[GraphEdge]
    truncated: bool


class ArchiveResult(WriteResult):
    pass


class BulkItem(Out):
    index: int
    document_id: str
    ok: bool
    status: str = Field(description="archived, restored, unchanged or error; errors never describe the document.")
    code: str | None = None
    detail: str | None = None


class BulkArchiveResult(Out):
    archived: bool
    results: list[BulkItem]


class TeammateConfig(Out):
    user: str
    home_namespace: str | None = None


class MemoryDocument(Out):
    id: str
    reference_uri: str
    path: str
    updated_at: str
    content: str
    truncated: bool


class TeammateContext(Out):
    user: str
    workspace: str
    namespace: str
    config: TeammateConfig
    memory: list[MemoryDocument]


class MemorySearchResults(Paged):
    namespace: str
    data: list[SearchHit]


class Appended(Out):
    text: str
    hash: str
    deduped: bool = Field(description="True when this bullet was already stored; nothing was written for it.")


class MemoryAppendResult(Out):
    namespace: str
    path: str
    document_id: str | None = None
    appended: list[Appended]
