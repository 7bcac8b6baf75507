"""Reader pages: thin views over the knowledge selectors and services, rendered by templates.

A browser session acts in the user's first workspace (as the API does for sessions). Missing and
invisible objects both answer the same 404 page; visible but forbidden actions answer 403.
Sanitized document HTML is the only markup marked safe, and it comes from `knowledge.rendering`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import quote
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from config.exceptions import Conflict, DomainError, Invalid, NotFound, PermissionDenied
from knowledge import selectors, services
from knowledge.models import Document
from knowledge.paths import normalise_path
from knowledge.rendering import document_link, reader_path, render_for_reader
from knowledge.ui.structure import build_tree, unified_diff_rows
from workspaces import access
from workspaces.access import Actor, actor_for
from workspaces.models import Membership

TREE_LIMIT = 2000
RECENT_LIMIT = 50
ARCHIVED_LIMIT = 500
SEARCH_LIMIT = 20

View = Callable[..., HttpResponse]


def _actor(request: HttpRequest) -> Actor | None:
    """The session's actor: the user's first membership, as for session calls to the API."""
    membership = Membership.objects.filter(user=request.user).select_related("workspace").order_by("id").first()
    if membership is None:
        return None
    return actor_for(request.user, membership.workspace)


def _error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    titles = {400: "Invalid request", 403: "Not allowed", 404: "Not found", 409: "Conflict"}
    context = {"status": status, "title": titles.get(status, "Error"), "message": message}
    return render(request, "knowledge/ui/error.html", context, status=status)


def reader_view(view: View) -> View:
    """Session login (else redirect to the login page), the actor, domain errors as pages."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("ui:login"))
        actor = _actor(request)
        if actor is None:
            return _error(request, 403, "Your account is not a member of any workspace.")
        try:
            return view(request, actor, *args, **kwargs)
        except NotFound:
            return _error(request, 404, "There is nothing here, or you cannot see it.")
        except PermissionDenied as exc:
            return _error(request, 403, exc.message)
        except DomainError as exc:
            return _error(request, exc.http_status, exc.message)

    return wrapper


# --- helpers ---------------------------------------------------------------------------------


def _tree(actor: Actor, namespace: str, current_path: str | None = None) -> tuple[Any, bool]:
    filters = selectors.DocumentFilters(namespace=namespace, order="path")
    rows = list(
        selectors.document_list(actor=actor, filters=filters).values_list("path", "title", "icon")[: TREE_LIMIT + 1]
    )
    return build_tree(namespace, rows[:TREE_LIMIT], current_path), len(rows) > TREE_LIMIT


def _document_url(document: Document) -> str:
    """Archived documents are addressed by id: another document may hold their path now."""
    if document.archived:
        return document_link(document.pk)
    return reader_path(document.namespace.slug, document.path)


def _reader_page(request: HttpRequest, actor: Actor, document: Document) -> HttpResponse:
    version, rendered = render_for_reader(actor=actor, document=document, version=request.GET.get("version"))
    html = rendered.html
    tree, tree_truncated = _tree(actor, document.namespace.slug, None if document.archived else document.path)
    context = {
        "document": document,
        "namespace": document.namespace,
        "version": version,
        "is_current_version": version.pk == document.current_version_id,
        # Sanitized by knowledge.sanitize (the nh3 allowlist) inside render_for_reader.
        "body": mark_safe(html),
        "headings": rendered.headings,
        # The body usually starts with the title as its own H1: then the header shows only meta.
        "title_in_body": bool(
            rendered.headings
            and rendered.headings[0].level == 1
            and rendered.headings[0].text == document.title
            and html.lstrip().startswith("<h1")
        ),
        "needs_mermaid": rendered.has_mermaid,
        "needs_math": rendered.has_math,
        "needs_code": rendered.has_code,
        "degraded": rendered.degraded,
        "tree": tree,
        "tree_truncated": tree_truncated,
        "can_restore": document.archived and access.can_archive_document(actor, document),
        "links_endpoint": f"/kb/documents/{document.pk}/links",
        "history_url": reverse("ui:history", args=[document.pk]),
        "document_url": _document_url(document),
    }
    return render(request, "knowledge/ui/document.html", context)


# --- pages -----------------------------------------------------------------------------------


@require_GET
@reader_view
def home(request: HttpRequest, actor: Actor) -> HttpResponse:
    """The namespaces this user can read."""
    rows = selectors.namespace_list(actor=actor)
    return render(request, "knowledge/ui/home.html", {"namespaces": rows, "workspace": actor.workspace})


@require_GET
@reader_view
def namespace_index(request: HttpRequest, actor: Actor, namespace: str) -> HttpResponse:
    """A namespace: its tree and its recently updated documents."""
    ns, permission = selectors.namespace_get(actor=actor, slug=namespace)
    filters = selectors.DocumentFilters(namespace=namespace)
    recent = list(selectors.document_list(actor=actor, filters=filters)[:RECENT_LIMIT])
    tree, tree_truncated = _tree(actor, namespace)
    context = {
        "namespace": ns,
        "permission": permission,
        "recent": [(doc, reader_path(namespace, doc.path)) for doc in recent],
        "tree": tree,
        "tree_truncated": tree_truncated,
    }
    return render(request, "knowledge/ui/namespace.html", context)


@require_GET
@reader_view
def reader(request: HttpRequest, actor: Actor, namespace: str, path: str) -> HttpResponse:
    """`/ui/kb/<namespace>/<path>`: the document at that path (a link without `.md` finds it too)."""
    try:
        document = selectors.document_get_by_path(actor=actor, namespace=namespace, path=path, archive_filter="all")
    except (NotFound, Invalid):
        if path.lower().endswith((".md", ".markdown")):
            raise NotFound() from None
        selectors.document_get_by_path(actor=actor, namespace=namespace, path=f"{path}.md", archive_filter="active")
        return HttpResponseRedirect(reader_path(namespace, normalise_path(f"{path}.md")))
    if document.archived:
        return HttpResponseRedirect(document_link(document.pk))
    return _reader_page(request, actor, document)


@require_GET
@reader_view
def document_by_id(request: HttpRequest, actor: Actor, document_id: UUID) -> HttpResponse:
    """`/ui/doc/<id>`: the rename-proof address. Active documents redirect to their current path."""
    document = selectors.document_get(actor=actor, document_id=document_id)
    if not document.archived:
        url = reader_path(document.namespace.slug, document.path)
        if request.GET.get("version"):
            url += "?version=" + quote(request.GET["version"])
        return HttpResponseRedirect(url)
    return _reader_page(request, actor, document)


def _version_number(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        raise Invalid("Version numbers are whole numbers.") from None


@require_GET
@reader_view
def history(request: HttpRequest, actor: Actor, document_id: UUID) -> HttpResponse:
    """Versions newest first, and a diff between any two (`?a=<n>&b=<n>`)."""
    document = selectors.document_get(actor=actor, document_id=document_id)
    versions = list(selectors.version_list(actor=actor, document=document))
    newest = versions[0].number if versions else 0
    b = _version_number(request.GET.get("b"), newest)
    a = _version_number(request.GET.get("a"), max(b - 1, 1))
    diff = None
    too_large = False
    if versions and a != b:
        old = selectors.version_get(actor=actor, document=document, version=a)
        new = selectors.version_get(actor=actor, document=document, version=b)
        diff = unified_diff_rows(old.content, new.content, f"v{a}", f"v{b}")
        too_large = diff is None
    context = {
        "document": document,
        "namespace": document.namespace,
        "versions": versions,
        "a": a,
        "b": b,
        "diff": diff,
        "diff_too_large": too_large,
        "document_url": _document_url(document),
    }
    return render(request, "knowledge/ui/history.html", context)


@require_POST
@reader_view
def restore(request: HttpRequest, actor: Actor, document_id: UUID) -> HttpResponse:
    """Restore an archived document (the service checks who may); back to its page."""
    document = selectors.document_get(actor=actor, document_id=document_id)
    try:
        services.document_set_archived(actor=actor, document_id=document.pk, archived=False)
    except Conflict as exc:
        messages.error(request, exc.message)
        return HttpResponseRedirect(document_link(document.pk))
    document = selectors.document_get(actor=actor, document_id=document_id)
    messages.success(request, "Restored.")
    return HttpResponseRedirect(_document_url(document))


@require_GET
@reader_view
def graph(request: HttpRequest, actor: Actor, namespace: str) -> HttpResponse:
    """The namespace's documents and links, drawn client-side from the graph API."""
    ns, _ = selectors.namespace_get(actor=actor, slug=namespace)
    context = {
        "namespace": ns,
        "graph_endpoint": f"/kb/namespaces/{quote(ns.slug)}/graph",
        "reader_base": f"/ui/kb/{quote(ns.slug)}/",
    }
    return render(request, "knowledge/ui/graph.html", context)


@require_GET
@reader_view
def archived(request: HttpRequest, actor: Actor, namespace: str) -> HttpResponse:
    """Archived documents of a namespace, each restorable by those allowed."""
    ns, _ = selectors.namespace_get(actor=actor, slug=namespace)
    filters = selectors.DocumentFilters(namespace=namespace, archive_filter="archived", order="-updated_at")
    documents = list(selectors.document_list(actor=actor, filters=filters)[: ARCHIVED_LIMIT + 1])
    rows = [(doc, document_link(doc.pk), access.can_archive_document(actor, doc)) for doc in documents[:ARCHIVED_LIMIT]]
    context = {"namespace": ns, "rows": rows, "truncated": len(documents) > ARCHIVED_LIMIT}
    return render(request, "knowledge/ui/archived.html", context)


@require_GET
@reader_view
def search(request: HttpRequest, actor: Actor) -> HttpResponse:
    """Text search through the API's own view (same ranking, filters and access rules)."""
    from knowledge.api.search_views import SearchView

    query = request.GET.get("q", "").strip()
    namespace = request.GET.get("namespace", "").strip()
    context: dict[str, Any] = {"q": query, "namespace_filter": namespace, "hits": [], "searched": False}
    if query:
        params = QueryDict(mutable=True)
        params.update({"q": query, "limit": str(SEARCH_LIMIT)})
        if namespace:
            params["namespace"] = namespace
        internal = copy.copy(request)
        internal.GET = params
        response = SearchView.as_view()(internal)
        context["searched"] = True
        if response.status_code != 200:
            context["error"] = response.data.get("detail", "Search failed.")
        else:
            context["total"] = response.data["total"]
            context["relaxed"] = response.data["relaxed"]
            context["hits"] = [
                {
                    "title": hit["document"]["title"],
                    "icon": hit["document"]["icon"],
                    "path": hit["document"]["path"],
                    "namespace": hit["namespace"]["slug"],
                    "url": reader_path(hit["namespace"]["slug"], hit["document"]["path"]),
                    "snippet": (hit.get("snippet") or {}).get("text", ""),
                }
                for hit in response.data["data"]
            ]
    return render(request, "knowledge/ui/search.html", context)
