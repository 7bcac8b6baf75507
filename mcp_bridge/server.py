"""The MCP server: every Knowledge tool, each one typed, bounded and calling the REST API once or twice."""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import httpx2
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from mcp_bridge import schemas as out
from mcp_bridge.bounds import bound_result, truncate_content
from mcp_bridge.client import ApiError, KnowledgeApi
from mcp_bridge.config import AgorConfig

log = logging.getLogger("mcp_bridge")

DOCUMENT_URI = re.compile(r"^agor://kb/document/([0-9a-fA-F-]{32,36})$")
PATH_URI = re.compile(r"^agor://kb/([^/]+)/(.+)$")
CONTENT_BUDGET = 90_000
REF_HELP = "Provide documentId, a valid agor://kb/<namespace>/<path> uri, or namespace + path."
SIDECAR_SCHEMA = "knowledge/materialization/v1"

DocumentId = Annotated[str | None, Field(description="Document id (UUID).")]
Uri = Annotated[str | None, Field(description="agor://kb/document/<id> or agor://kb/<namespace>/<path>.")]
NamespaceSlug = Annotated[str | None, Field(description="Namespace slug (with path).", max_length=100)]
DocPath = Annotated[str | None, Field(description="Document path inside the namespace.", max_length=1024)]
Limit100 = Annotated[int, Field(ge=1, le=100)]
Offset = Annotated[int, Field(ge=0, le=1_000_000)]
ArchiveFilter = Literal["active", "archived", "all"]
Version = Annotated[int | str | None, Field(description="Version number or version id.")]
ToolBody = Callable[..., Awaitable[dict[str, Any]]]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_snake(k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def explain(error: ApiError) -> str:
    """An actionable message for the model."""
    body = error.body
    if error.status == 0:
        return f"{error.detail}. Check AGOR_URL and that the Knowledge server is running."
    if error.status == 401:
        return "The Knowledge API rejected the token (401). Set AGOR_TOKEN or run `agor login --url URL`."
    if error.code == "version_conflict":
        current = body.get("current_version") or {}
        number = current.get("number")
        if number is None:
            return f"Version conflict: {error.detail}"
        return (
            f"Version conflict: the document is now at version {number}. Read it again "
            f"(agor_kb_get or agor_kb_outline) and retry with expectedVersion={number}."
        )
    if error.status == 404:
        return f"Not found: {error.detail} (it does not exist or you cannot access it)."
    if error.status == 403:
        return f"Permission denied: {error.detail}"
    if error.status == 413:
        return f"Too large: {error.detail}"
    extra = ""
    if body.get("errors"):
        extra = " " + json.dumps(body["errors"], ensure_ascii=False)[:1000]
    return f"{error.detail} (code {error.code}){extra}"


def unexpected_shape(tool_name: str, error: ValidationError) -> str:
    """A server answer the output schema rejects: name the fields, point at a version mismatch."""
    fields = ", ".join(".".join(str(p) for p in e["loc"]) + f" ({e['msg'].lower()})" for e in error.errors()[:5])
    return (
        f"{tool_name}: the Knowledge server answered in an unexpected shape: {fields}. The server and this "
        "bridge may be different versions; compare `agor --version` with the server's /health."
    )


class Bridge:
    """Holds the API client and the start-up problem (if any) shared by every tool."""

    def __init__(self, config: AgorConfig, api: KnowledgeApi | None = None) -> None:
        self.config = config
        self.api = api or KnowledgeApi(config)
        self.problem: str | None = None
        if not config.is_complete:
            self.problem = (
                "Knowledge is not configured: set AGOR_URL and AGOR_TOKEN, or run `agor login --url URL` "
                "to write the credentials file."
            )

    def check(self) -> str | None:
        """Validate the token once at start-up (blocking, short timeout); remember any problem."""
        if self.problem:
            return self.problem
        try:
            response = httpx2.get(
                self.config.url + "/kb/me", headers={"Authorization": f"Bearer {self.config.token}"}, timeout=10
            )
        except httpx2.HTTPError as exc:
            # The server may come up later; tools report reachability errors themselves.
            log.warning("Cannot reach %s yet (%s).", self.config.url, exc.__class__.__name__)
            return None
        if response.status_code == 401:
            self.problem = explain(ApiError(401, "authentication_failed", "rejected"))
        elif response.status_code >= 400:
            log.warning("%s/kb/me answered %s.", self.config.url, response.status_code)
        return self.problem

    async def document_id(
        self, document_id: str | None, uri: str | None, namespace: str | None, path: str | None
    ) -> str:
        ref = parse_ref(document_id, uri, namespace, path)
        if ref[0] == "id":
            return ref[1]
        doc = await self.api.get(
            "/kb/documents/by-path", namespace=ref[1], path=ref[2], include_content=False, archive_filter="all"
        )
        return str(doc["id"])


def parse_ref(document_id: str | None, uri: str | None, namespace: str | None, path: str | None) -> tuple[str, ...]:
    if document_id:
        return ("id", document_id.strip())
    if uri:
        match = DOCUMENT_URI.match(uri.strip())
        if match:
            return ("id", match.group(1).lower())
        match = PATH_URI.match(uri.strip())
        if match and match.group(1) != "document":
            return ("path", match.group(1), match.group(2))
    if namespace and path:
        return ("path", namespace, path)
    raise ToolError(REF_HELP)


def page(data: list[Any], total: int, limit: int, offset: int, **extra: Any) -> dict[str, Any]:
    has_more = offset + len(data) < total
    return {
        **extra,
        "data": data,
        "total": total,
        "limit": limit,
        "offset": offset,
        "hasMore": has_more,
        "nextOffset": offset + len(data) if has_more else None,
    }


def bound_document(doc: dict[str, Any]) -> dict[str, Any]:
    if isinstance(doc.get("content"), str):
        doc["content"], info = truncate_content(doc["content"], CONTENT_BUDGET)
        if info:
            doc["contentTruncation"] = info
    return doc


def build_server(config: AgorConfig, api: KnowledgeApi | None = None) -> MCPServer:
    bridge = Bridge(config, api)
    server = MCPServer(
        "knowledge",
        instructions=(
            "Team knowledge: markdown documents in namespaces with immutable versions. Search first "
            "(agor_kb_search), read large documents by outline and range, write with expectedVersion."
        ),
    )
    server.bridge = bridge  # type: ignore[attr-defined]

    def tool(
        *, output: type[out.Out], read_only: bool = False, idempotent: bool = False, destructive: bool = False
    ) -> Callable[[ToolBody], ToolBody]:
        """Register a tool whose dict result is bounded, then validated against and published as `output`."""

        def decorate(func: ToolBody) -> ToolBody:
            @functools.wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
                if bridge.problem:
                    raise ToolError(bridge.problem)
                try:
                    result = await func(*args, **kwargs)
                except ApiError as exc:
                    raise ToolError(explain(exc)) from None
                result = bound_result(result)
                try:
                    output.model_validate(result)
                except ValidationError as exc:
                    raise ToolError(unexpected_shape(func.__name__, exc)) from None
                return result

            wrapper.__signature__ = inspect.signature(func, eval_str=True).replace(return_annotation=output)  # type: ignore[attr-defined]

            annotations = ToolAnnotations(
                read_only_hint=read_only, idempotent_hint=idempotent or read_only, destructive_hint=destructive
            )
            return server.tool(annotations=annotations, structured_output=True)(wrapper)

        return decorate

    api = bridge.api

    # --- namespaces ------------------------------------------------------------------------

    @tool(read_only=True, output=out.NamespaceList)
    async def agor_kb_namespaces_list(
        slug: Annotated[str | None, Field(description="Only this namespace.")] = None,
        kind: Annotated[str | None, Field(description="global, system, user, repo, branch or team.")] = None,
        archiveFilter: ArchiveFilter = "active",  # noqa: N803 - MCP parameters are camelCase
        includeArchived: bool = False,  # noqa: N803
        limit: Limit100 = 10,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """List the namespaces you can access, each with your effective permission (read/write/own)."""
        archive = "all" if includeArchived and archiveFilter == "active" else archiveFilter
        if slug:
            try:
                one = await api.get(f"/kb/namespaces/{quote(slug, safe='')}")
                rows = [one] if archive == "all" or one["archived"] == (archive == "archived") else []
            except ApiError as exc:
                if exc.status != 404:
                    raise
                rows = []
            return page(rows[offset : offset + limit], len(rows), limit, offset)
        body = await api.get("/kb/namespaces", archive_filter=archive, kind=kind, limit=limit, offset=offset)
        return page(body["data"], body["total"], limit, offset)

    @tool(idempotent=True, output=out.NamespacePutResult)
    async def agor_kb_namespace_put(
        slug: Annotated[str, Field(min_length=1, max_length=100, description="Namespace slug (immutable).")],
        displayName: str | None = None,  # noqa: N803
        description: str | None = None,
        kind: str | None = None,
        visibilityDefault: Literal["public", "private"] | None = None,  # noqa: N803
        othersCan: Literal["none", "read", "write"] | None = None,  # noqa: N803
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create a namespace (you become its owner) or update the one with this slug (needs own)."""
        fields = {
            "display_name": displayName,
            "description": description,
            "kind": kind,
            "visibility_default": visibilityDefault,
            "others_can": othersCan,
            "metadata": metadata,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        try:
            await api.get(f"/kb/namespaces/{quote(slug, safe='')}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            created = await api.request("POST", "/kb/namespaces", json={"slug": slug, **fields})
            return {"namespace": created, "created": True}
        updated = await api.request("PATCH", f"/kb/namespaces/{quote(slug, safe='')}", json=fields)
        return {"namespace": updated, "created": False}

    @tool(read_only=True, output=out.Tree)
    async def agor_kb_tree(
        namespace: Annotated[str, Field(min_length=1, max_length=100)],
        pathPrefix: str | None = None,  # noqa: N803
        depth: Annotated[int, Field(ge=1, le=10)] = 3,
        kind: str | None = None,
        status: Literal["draft", "published"] | None = None,
        includeMyDrafts: bool = True,  # noqa: N803
        includeOtherUserDrafts: bool = False,  # noqa: N803
        archiveFilter: ArchiveFilter = "active",  # noqa: N803
        limit: Annotated[int, Field(ge=1, le=100)] = 25,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """The folder/document tree of a namespace (no content). Use it to see what exists before reading."""
        body = await api.get(
            f"/kb/namespaces/{quote(namespace, safe='')}/tree",
            path_prefix=pathPrefix,
            depth=depth,
            kind=kind,
            status=status,
            include_my_drafts=includeMyDrafts,
            include_other_user_drafts=includeOtherUserDrafts,
            archive_filter=archiveFilter,
            limit=limit,
            offset=offset,
        )
        paging = body.get("pagination") or {}
        return {**body, "hasMore": bool(paging.get("has_more")), "nextOffset": paging.get("next_offset")}

    # --- reading ---------------------------------------------------------------------------

    @tool(read_only=True, output=out.SearchResults)
    async def agor_kb_search(
        query: Annotated[
            str, Field(max_length=1000, description='Words, "phrases", OR, -exclude, prefix*. "" browses.')
        ],
        namespace: str | None = None,
        pathPrefix: str | None = None,  # noqa: N803
        kind: str | None = None,
        visibility: Literal["public", "private"] | None = None,
        status: Literal["draft", "published"] | None = None,
        includeMyDrafts: bool = True,  # noqa: N803
        includeOtherUserDrafts: bool = False,  # noqa: N803
        archiveFilter: ArchiveFilter | None = None,  # noqa: N803
        includeArchived: bool = False,  # noqa: N803
        mode: Literal["text", "semantic", "hybrid"] = "text",
        contentMode: Literal["none", "snippet", "full"] | None = None,  # noqa: N803
        snippetLines: Annotated[int, Field(ge=1, le=20)] = 3,  # noqa: N803
        limit: Limit100 = 20,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Ranked search over every document you may read. Natural-language questions work."""
        archive = archiveFilter or ("all" if includeArchived else "active")
        content = contentMode or ("snippet" if query.strip() else "none")
        body = await api.get(
            "/kb/search",
            q=query,
            namespace=namespace,
            path_prefix=pathPrefix,
            kind=kind,
            visibility=visibility,
            status=status,
            include_my_drafts=includeMyDrafts,
            include_other_user_drafts=includeOtherUserDrafts,
            archive_filter=archive,
            mode=mode,
            content_mode=content,
            snippet_lines=snippetLines,
            limit=limit,
            offset=offset,
        )
        return page(
            body["data"],
            body["total"],
            limit,
            offset,
            relaxed=body.get("relaxed", False),
            effective_mode=body.get("effective_mode", mode),
            fallback_reason=body.get("fallback_reason"),
        )

    @tool(read_only=True, output=out.DocumentResult)
    async def agor_kb_get(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        version: Version = None,
        includeContent: bool = True,  # noqa: N803
    ) -> dict[str, Any]:
        """Read a document (metadata, current version, content). Long content is cut with a hint to read on."""
        ref = parse_ref(documentId, uri, namespace, path)
        if ref[0] == "id":
            doc = await api.get(f"/kb/documents/{quote(ref[1], safe='')}", include_content=includeContent)
        else:
            doc = await api.get("/kb/documents/by-path", namespace=ref[1], path=ref[2], include_content=includeContent)
        if version is not None:
            found = await api.get(f"/kb/documents/{doc['id']}/versions/{quote(str(version), safe='')}")
            doc["version"] = {k: v for k, v in found.items() if k != "content"}
            if includeContent:
                doc["content"] = found.get("content", "")
        return {"document": bound_document(doc)}

    @tool(read_only=True, output=out.Outline)
    async def agor_kb_outline(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        version: Version = None,
        maxDepth: Annotated[int, Field(ge=1, le=6)] = 6,  # noqa: N803
    ) -> dict[str, Any]:
        """Headings with line ranges and section refs: read big documents section by section."""
        doc_id = await bridge.document_id(documentId, uri, namespace, path)
        return await api.get(f"/kb/documents/{doc_id}/outline", version=version, max_depth=maxDepth)

    @tool(read_only=True, output=out.Range)
    async def agor_kb_get_range(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        version: Version = None,
        startLine: Annotated[int | None, Field(ge=1)] = None,  # noqa: N803
        endLine: Annotated[int | None, Field(ge=1)] = None,  # noqa: N803
        headingPath: str | None = None,  # noqa: N803
        occurrence: Annotated[int, Field(ge=1)] = 1,
        sectionRef: str | None = None,  # noqa: N803
        contextLines: Annotated[int, Field(ge=0, le=20)] = 2,  # noqa: N803
        offsetLines: Annotated[int | None, Field(ge=0)] = None,  # noqa: N803
        maxLines: Annotated[int | None, Field(ge=1, le=1000)] = None,  # noqa: N803
        includeLineNumbers: bool = True,  # noqa: N803
    ) -> dict[str, Any]:
        """Read lines of a document by sectionRef, headingPath or startLine/endLine; contentMd5 feeds edits."""
        doc_id = await bridge.document_id(documentId, uri, namespace, path)
        return await api.get(
            f"/kb/documents/{doc_id}/range",
            version=version,
            start_line=startLine,
            end_line=endLine,
            heading_path=headingPath,
            occurrence=occurrence,
            section_ref=sectionRef,
            context_lines=contextLines,
            offset_lines=offsetLines,
            max_lines=maxLines,
            include_line_numbers=includeLineNumbers,
        )

    @tool(read_only=True, output=out.History)
    async def agor_kb_history(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        includeContent: bool = False,  # noqa: N803
        limit: Limit100 = 20,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Versions newest first (works for archived documents too)."""
        doc_id = await bridge.document_id(documentId, uri, namespace, path)
        body = await api.get(
            f"/kb/documents/{doc_id}/versions", include_content=includeContent, limit=limit, offset=offset
        )
        return page(body["data"], body["total"], limit, offset, documentId=doc_id)

    # --- writing ---------------------------------------------------------------------------

    @tool(idempotent=True, output=out.WriteResult)
    async def agor_kb_put(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        content: Annotated[str | None, Field(description="Markdown; required for new documents.")] = None,
        title: str | None = None,
        firstLineIsTitle: bool | None = None,  # noqa: N803
        kind: str | None = None,
        iconEmoji: str | None = None,  # noqa: N803
        visibility: Literal["public", "private"] | None = None,
        status: Literal["draft", "published"] | None = None,
        editPolicy: Literal["owner", "public", "admins"] | None = None,  # noqa: N803
        createNamespace: bool = False,  # noqa: N803
        namespaceDisplayName: str | None = None,  # noqa: N803
        metadata: dict[str, Any] | None = None,
        changeSummary: str | None = None,  # noqa: N803
        expectedVersion: int | str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        """Create or update a document by path (idempotent: identical content adds no version)."""
        fields = {
            "content": content,
            "title": title,
            "first_line_is_title": firstLineIsTitle,
            "kind": kind,
            "icon": iconEmoji,
            "visibility": visibility,
            "status": status,
            "edit_policy": editPolicy,
            "metadata": metadata,
            "change_summary": changeSummary,
            "expected_version": expectedVersion,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        ref = parse_ref(documentId, uri, namespace, path)
        if ref[0] == "id":
            doc = await api.get(f"/kb/documents/{quote(ref[1], safe='')}", include_content=False)
            ref = ("path", doc["namespace"], doc["path"])
            if path and namespace and path != doc["path"]:
                fields["path"] = path
        body = {**fields, "create_namespace": createNamespace}
        if namespaceDisplayName:
            body["namespace_display_name"] = namespaceDisplayName
        result = await api.request(
            "PUT", f"/kb/namespaces/{quote(ref[1], safe='')}/documents/{quote(ref[2])}", json=body
        )
        return result

    @tool(output=out.EditResult)
    async def agor_kb_edit(
        ops: Annotated[
            list[dict[str, Any]],
            Field(
                min_length=1,
                max_length=100,
                description=(
                    "In order, on LF lines (1-based): {type: replace_line_range, startLine, endLine, replacement, "
                    "expectedText?|expectedMd5?}, {type: insert_at_line, line, position: before|after, content, "
                    "expectedNeighborText?}, {type: delete_line_range, startLine, endLine, "
                    "expectedText?|expectedMd5?}, {type: replace_literal, find, replace, expectedCount}."
                ),
            ),
        ],
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        expectedVersion: int | str | None = None,  # noqa: N803
        dryRun: bool = False,  # noqa: N803
        changeSummary: str | None = None,  # noqa: N803
        returnContent: Literal["none", "full"] = "none",  # noqa: N803
    ) -> dict[str, Any]:
        """Line-precise edits; one successful call creates exactly one version. dryRun shows the diff only."""
        doc_id = await bridge.document_id(documentId, uri, namespace, path)
        body = {
            "ops": snake_keys(ops),
            "expected_version": expectedVersion,
            "dry_run": dryRun,
            "change_summary": changeSummary or "",
            "include_content": returnContent == "full" or dryRun,
        }
        return await api.request("POST", f"/kb/documents/{doc_id}/edits", json=body)

    # --- worktree --------------------------------------------------------------------------

    def worktree_file(worktree: str | None, subpath: str) -> Path:
        root = Path(worktree or os.environ.get("AGOR_WORKTREE") or os.getcwd()).resolve()
        candidate = Path(subpath)
        if candidate.is_absolute() or ".." in candidate.parts:
            raise ToolError(f"subpath must be relative and stay inside the worktree ({root}).")
        target = (root / candidate).resolve()
        if root != target and root not in target.parents:
            raise ToolError(f"subpath escapes the worktree ({root}).")
        return target

    @tool(output=out.Materialized)
    async def agor_kb_materialize(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        version: Version = None,
        subpath: str | None = None,
        worktree: Annotated[str | None, Field(description="Worktree root (default AGOR_WORKTREE or cwd).")] = None,
        overwrite: bool = False,
    ) -> dict[str, Any]:
        """Write a document into the local worktree (plus a sidecar recording its version) to edit as a file."""
        ref = parse_ref(documentId, uri, namespace, path)
        if ref[0] == "id":
            doc = await api.get(f"/kb/documents/{quote(ref[1], safe='')}")
        else:
            doc = await api.get("/kb/documents/by-path", namespace=ref[1], path=ref[2])
        current = doc["current_version"]
        content = doc["content"]
        if version is not None:
            found = await api.get(f"/kb/documents/{doc['id']}/versions/{quote(str(version), safe='')}")
            current, content = found, found["content"]
        rel = subpath or f".agor/kb/{doc['namespace']}/{doc['path']}"
        target = worktree_file(worktree, rel)
        sidecar = target.with_name(target.name + ".agor-kb.json")
        if not overwrite and (target.exists() or sidecar.exists()):
            raise ToolError(f"Destination already exists: {rel} (pass overwrite=true to replace it).")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8", newline="")
        record = {
            "$schema": SIDECAR_SCHEMA,
            "document_id": doc["id"],
            "uri": doc["uri"],
            "reference_uri": doc["reference_uri"],
            "namespace": doc["namespace"],
            "path": doc["path"],
            "version_id": str(current["id"]),
            "version_number": current["number"],
            "content_sha256": current["sha256"],
            "materialized_at": datetime.now(UTC).isoformat(),
        }
        sidecar.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        doc.pop("content", None)
        return {
            "document": doc,
            "subpath": rel,
            "sidecarSubpath": rel + ".agor-kb.json",
            "bytesWritten": len(content.encode("utf-8")),
            "instructions": "Edit the file, then call agor_kb_publish_from_worktree with the same subpath.",
        }

    @tool(output=out.Published)
    async def agor_kb_publish_from_worktree(
        subpath: Annotated[str, Field(min_length=1, max_length=1024)],
        worktree: str | None = None,
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        expectedVersion: int | str | None = None,  # noqa: N803
        dryRun: bool = False,  # noqa: N803
        createNamespace: bool = False,  # noqa: N803
        title: str | None = None,
        kind: str | None = None,
        visibility: Literal["public", "private"] | None = None,
        changeSummary: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        """Publish a worktree file as a new version (the sidecar supplies the document and expected version)."""
        target = worktree_file(worktree, subpath)
        if not target.is_file():
            raise ToolError(f"No file at {subpath}.")
        content = target.read_text(encoding="utf-8")
        sidecar_path = target.with_name(target.name + ".agor-kb.json")
        sidecar: dict[str, Any] = {}
        if sidecar_path.is_file():
            try:
                sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
            except ValueError:
                raise ToolError(f"The sidecar {subpath}.agor-kb.json is not valid JSON.") from None
        summary = changeSummary or f"Publish from {subpath}"
        existing_id = documentId or sidecar.get("document_id")
        if existing_id or uri:
            doc_id = await bridge.document_id(existing_id, uri, None, None)
            expected = expectedVersion if expectedVersion is not None else sidecar.get("version_number")
            if expected is None and not dryRun:
                raise ToolError("expectedVersion is required to publish over an existing document.")
            current = await api.get(f"/kb/documents/{doc_id}")
            diff = "".join(
                difflib.unified_diff(
                    current["content"].splitlines(keepends=True), content.splitlines(keepends=True), "current", subpath
                )
            )
            if dryRun:
                return {"dryRun": True, "documentId": doc_id, "diff": diff, "changed": bool(diff)}
            if str(expected) != str(current["current_version"]["number"]):
                raise ToolError(
                    f"Version conflict: the document is now at version {current['current_version']['number']}, "
                    f"the worktree copy was made from version {expected}. Materialize again (overwrite=true) "
                    "and reapply your changes, or pass expectedVersion explicitly."
                )
            if not diff:
                return {"dryRun": False, "documentId": doc_id, "diff": "", "changed": False}
            revised = await api.request(
                "POST",
                f"/kb/documents/{doc_id}/revise",
                json={"content": content, "expected_version": expected, "change_summary": summary},
            )
            version = revised["current_version"]
            sidecar.update(
                document_id=doc_id,
                version_id=str(version["id"]),
                version_number=version["number"],
                content_sha256=version["sha256"],
                published_at=datetime.now(UTC).isoformat(),
            )
            sidecar_path.write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
            return {"dryRun": False, "documentId": doc_id, "diff": diff, "changed": True, "document": revised}
        if not (namespace and path):
            raise ToolError("No existing document or sidecar found. Provide namespace + path to create a new document.")
        if dryRun:
            diff = "".join(difflib.unified_diff([], content.splitlines(keepends=True), "/dev/null", subpath))
            return {"dryRun": True, "diff": diff, "changed": True}
        body = {"content": content, "change_summary": summary, "create_namespace": createNamespace}
        body.update({k: v for k, v in {"title": title, "kind": kind, "visibility": visibility}.items() if v})
        result = await api.request(
            "PUT", f"/kb/namespaces/{quote(namespace, safe='')}/documents/{quote(path)}", json=body
        )
        created = result["document"]
        version = created["current_version"]
        sidecar_path.write_text(
            json.dumps(
                {
                    "$schema": SIDECAR_SCHEMA,
                    "document_id": created["id"],
                    "uri": created["uri"],
                    "reference_uri": created["reference_uri"],
                    "namespace": created["namespace"],
                    "path": created["path"],
                    "version_id": str(version["id"]),
                    "version_number": version["number"],
                    "content_sha256": version["sha256"],
                    "published_at": datetime.now(UTC).isoformat(),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return {"dryRun": False, "changed": True, "document": created, "created": result.get("created", True)}

    # --- graph -----------------------------------------------------------------------------

    def node(document_id: str | None, uri: str | None, namespace: str | None, path: str | None) -> dict[str, Any]:
        ref = parse_ref(document_id, uri, namespace, path)
        return {"document_id": ref[1]} if ref[0] == "id" else {"namespace": ref[1], "path": ref[2]}

    @tool(idempotent=True, output=out.LinkResult)
    async def agor_kb_link(
        edgeType: Literal[  # noqa: N803
            "references",
            "mentions",
            "implements",
            "depends_on",
            "supersedes",
            "derived_from",
            "tagged_with",
            "about",
            "parent_of",
            "related_to",
        ],
        sourceDocumentId: str | None = None,  # noqa: N803
        sourceUri: str | None = None,  # noqa: N803
        sourceNamespace: str | None = None,  # noqa: N803
        sourcePath: str | None = None,  # noqa: N803
        targetDocumentId: str | None = None,  # noqa: N803
        targetUri: str | None = None,  # noqa: N803
        targetNamespace: str | None = None,  # noqa: N803
        targetPath: str | None = None,  # noqa: N803
        confidence: Annotated[float, Field(ge=0, le=1)] = 1.0,
        properties: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create or restore a typed link between two documents (needs write on the source)."""
        body = {
            "source": node(sourceDocumentId, sourceUri, sourceNamespace, sourcePath),
            "target": node(targetDocumentId, targetUri, targetNamespace, targetPath),
            "edge_type": edgeType,
            "confidence": confidence,
            "properties": properties or {},
        }
        return await api.request("POST", "/kb/graph/links", json=body)

    @tool(read_only=True, output=out.Neighbors)
    async def agor_kb_graph_neighbors(
        documentId: DocumentId = None,  # noqa: N803
        uri: Uri = None,
        namespace: NamespaceSlug = None,
        path: DocPath = None,
        direction: Literal["in", "out", "both"] = "both",
        edgeTypes: list[str] | None = None,  # noqa: N803
        depth: Annotated[int, Field(ge=1, le=3)] = 1,
        limit: Annotated[int, Field(ge=1, le=100)] = 50,
    ) -> dict[str, Any]:
        """Documents linked to a document, walked up to 3 hops, only those you can read."""
        ref = parse_ref(documentId, uri, namespace, path)
        params: dict[str, Any] = {"direction": direction, "edge_types": edgeTypes, "depth": depth, "limit": limit}
        if ref[0] == "id":
            params["document_id"] = ref[1]
        else:
            params.update(namespace=ref[1], path=ref[2])
        return await api.get("/kb/graph/neighbors", **params)

    # --- archive ---------------------------------------------------------------------------

    @tool(idempotent=True, destructive=True, output=out.ArchiveResult)
    async def agor_kb_archive(
        documentId: Annotated[str, Field(min_length=1)],  # noqa: N803
        archived: bool,
        expectedVersion: int | str | None = None,  # noqa: N803
        expectedArchived: bool | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        """Archive (archived=true) or restore (false) a document; retries are safe no-ops."""
        body: dict[str, Any] = {"archived": archived}
        if expectedVersion is not None:
            body["expected_version"] = expectedVersion
        if expectedArchived is not None:
            body["expected_archived"] = expectedArchived
        return await api.request("PATCH", f"/kb/documents/{quote(documentId, safe='')}", json=body)

    @tool(idempotent=True, destructive=True, output=out.BulkArchiveResult)
    async def agor_kb_archive_bulk(
        archived: bool,
        targets: Annotated[
            list[dict[str, Any]],
            Field(
                min_length=1,
                max_length=50,
                description=("[{documentId, expectedVersion?, expectedArchived?}], 1 to 50."),
            ),
        ],
    ) -> dict[str, Any]:
        """Archive or restore up to 50 documents; each target is reported on its own."""
        items = []
        for target in targets:
            item = {"document_id": str(target.get("documentId") or target.get("document_id") or "")}
            if target.get("expectedVersion") is not None:
                item["expected_version"] = target["expectedVersion"]
            if target.get("expectedArchived") is not None:
                item["expected_archived"] = target["expectedArchived"]
            items.append(item)
        return await api.request("POST", "/kb/documents/archive", json={"archived": archived, "targets": items})

    # --- teammate --------------------------------------------------------------------------

    @tool(read_only=True, output=out.TeammateContext)
    async def agor_teammate_context(
        includeMemory: bool = True,  # noqa: N803
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> dict[str, Any]:
        """Your teammate config, home namespace and recent memory (the home is created on first use)."""
        return await api.get("/kb/teammate", include_memory=includeMemory, limit=limit)

    @tool(read_only=True, output=out.MemorySearchResults)
    async def agor_teammate_memory_search(
        query: Annotated[str, Field(max_length=1000)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        contentMode: Literal["none", "snippet", "full"] | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        """Search your own memory (the home namespace's memory/ folder)."""
        context = await api.get("/kb/teammate", include_memory=False)
        body = await api.get(
            "/kb/search",
            q=query,
            namespace=context["namespace"],
            path_prefix="memory/",
            include_my_drafts=True,
            content_mode=contentMode or ("snippet" if query.strip() else "none"),
            limit=limit,
        )
        return page(body["data"], body["total"], limit, 0, namespace=context["namespace"])

    @tool(idempotent=True, output=out.MemoryAppendResult)
    async def agor_teammate_memory_append(
        bullets: Annotated[str | list[str], Field(description="One bullet per line, or a list.")],
        date: Annotated[str | None, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")] = None,
        category: Literal["note", "decision", "preference", "project", "learning", "task", "other"] = "note",
        tags: list[str] | None = None,
        importance: Literal["low", "normal", "high"] | None = None,
        idempotencyKey: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        """Remember things across sessions; the same idempotencyKey never writes twice."""
        body: dict[str, Any] = {"bullets": bullets, "category": category, "tags": tags or []}
        if date:
            body["date"] = date
        if importance:
            body["importance"] = importance
        if idempotencyKey:
            body["idempotency_key"] = idempotencyKey
        return await api.request("POST", "/kb/teammate/memory", json=body)

    return server
