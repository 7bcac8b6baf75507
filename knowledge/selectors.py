"""Reads. Every queryset is already restricted to what the actor may see, inside the SQL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, TypeVar
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr
from django.db.models.query import RelatedPopulator, get_related_populators

from config.db_prepared import prepared_cursor
from config.exceptions import Invalid, NotFound
from knowledge import structure, version_cache
from knowledge.models import Document, DocumentOutline, DocumentStatus, DocumentVersion, document_reference_uri
from knowledge.paths import normalise_folder, normalise_path
from workspaces import access
from workspaces.access import Actor
from workspaces.models import Namespace, Permission

M = TypeVar("M", bound=Model)

ARCHIVE_FILTERS = ("active", "archived", "all")
DOCUMENT_ORDERINGS = {
    "updated_at": ("updated_at", "id"),
    "-updated_at": ("-updated_at", "id"),
    "created_at": ("created_at", "id"),
    "-created_at": ("-created_at", "id"),
    "path": ("path", "id"),
    "-path": ("-path", "id"),
    "title": ("title", "id"),
    "-title": ("-title", "id"),
}


@dataclass(frozen=True)
class DocumentFilters:
    namespace: str | None = None
    path: str | None = None
    path_prefix: str | None = None
    kind: str | None = None
    visibility: str | None = None
    status: str | None = None
    include_my_drafts: bool = True
    include_other_user_drafts: bool = False
    archive_filter: str = "active"
    order: str = "-updated_at"


# --- namespaces ----------------------------------------------------------------------------


def namespace_list(
    *, actor: Actor, archive_filter: str = "active", kind: str | None = None
) -> list[tuple[Namespace, str]]:
    """Namespaces the actor can access, each with the actor's effective permission."""
    permissions = access.namespace_permissions(actor)
    result: list[tuple[Namespace, str]] = []
    queryset = Namespace.objects.filter(workspace=actor.workspace).select_related("owner").order_by("slug")
    if kind:
        queryset = queryset.filter(kind=kind)
    if archive_filter == "active":
        queryset = queryset.filter(archived=False, id__in=[k for k, v in permissions.items() if v != Permission.NONE])
    elif archive_filter == "archived":
        queryset = queryset.filter(archived=True)
    for namespace in queryset:
        if namespace.archived:
            # Archived namespaces are listed only for those who could restore them.
            permission = access.permission_on(actor, namespace, ignore_archive=True)
            if permission != Permission.OWN:
                continue
        else:
            permission = permissions.get(namespace.pk, Permission.NONE.value)
            if permission == Permission.NONE:
                continue
        result.append((namespace, permission))
    return result


def _one(queryset: QuerySet[M]) -> M | None:
    """The row of a query on a unique key, or None. `first()` would order by the primary key,
    and compiling that ORDER BY against a wide select cost more CPU than the read itself."""
    return next(iter(queryset.order_by()[:1]), None)


def namespace_get(
    *, actor: Actor, slug: str, minimum: str = Permission.READ, allow_archived: bool = False
) -> tuple[Namespace, str]:
    """One namespace by slug; invisible ones answer NotFound, like missing ones."""
    namespace = _one(Namespace.objects.filter(workspace=actor.workspace, slug=slug).select_related("owner"))
    if namespace is not None and namespace.archived and not allow_archived:
        namespace = None
    ignore_archive = allow_archived and namespace is not None and namespace.archived
    if ignore_archive and access.permission_on(actor, namespace, ignore_archive=True) != Permission.OWN:
        raise NotFound("Namespace not found.")
    permission = access.require_namespace(actor, namespace, minimum, ignore_archive=ignore_archive)
    return namespace, permission


# --- documents -----------------------------------------------------------------------------


_DOCUMENT_RELATIONS = ("namespace", "current_version", "created_by", "updated_by")


def _workspace_documents(actor: Actor) -> QuerySet[Document]:
    return Document.objects.filter(namespace__workspace=actor.workspace).select_related(*_DOCUMENT_RELATIONS)


def _document_base(actor: Actor) -> QuerySet[Document]:
    # The read filter names only namespaces of the actor's workspace, so it bounds the workspace
    # as well: counts and search scopes need no join to the namespace table for it.
    return Document.objects.filter(access.document_read_filter(actor)).select_related(*_DOCUMENT_RELATIONS)


def _as_listed(queryset: QuerySet[Document], include_content: bool) -> QuerySet[Document]:
    queryset = queryset.defer(*LIST_DEFERRED)
    return queryset if include_content else queryset.defer("current_version__content")


Scope = tuple[str, list[Any]]  # SQL selecting (id, current_version_id) of documents, and its parameters


def search_scope(documents: QuerySet[Document]) -> Scope:
    """`documents` as SQL for ranking queries to filter on inside, before ranking and limit.

    It selects each document's current version too, so the exact vector path joins the vectors
    straight to it instead of scanning the documents a second time. Compiled once per request:
    hybrid's two legs share it.
    """
    sql, params = documents.order_by().values("id", "current_version_id").query.sql_with_params()
    return sql, list(params)


def readable_share(*, actor: Actor, filters: DocumentFilters) -> float:
    """About what fraction of the workspace's documents `document_list` can return: readable
    namespaces over all (one, when the filters name a namespace). Only an estimate, from the
    permissions the actor has already loaded; semantic search sizes its candidate list with it."""
    permissions = access.namespace_permissions(actor)
    if not permissions:
        return 1.0
    readable = len(access.namespace_ids_with(actor, Permission.READ))
    if filters.namespace:
        readable = min(readable, 1)
    return readable / len(permissions)


# Columns of the joined rows that no list or search page shows: leaving them out halves the width of
# a page of 50 rows (2.5 ms to fetch instead of 4.8 on the 10,000-document bench). Reading one of
# them from a listed document still works, with one query per row.
_USER_DETAIL = ("password", "last_login", "is_superuser", "first_name", "last_name", "email", "is_staff", "date_joined")
LIST_DEFERRED = (
    *(f"{user}__{column}" for user in ("created_by", "updated_by") for column in _USER_DETAIL),
    *(f"current_version__{column}" for column in ("md5", "frontmatter", "metadata", "change_summary", "author")),
    *(f"namespace__{column}" for column in ("description", "metadata", "created_by", "created_at", "updated_at")),
)


@dataclass(slots=True)
class ListedNamespace:
    slug: str
    display_name: str


@dataclass(slots=True)
class ListedUser:
    username: str


@dataclass(slots=True)
class ListedVersion:
    id: UUID
    number: int
    sha256: str
    byte_length: int
    char_length: int
    created_at: datetime
    content: str | None = None  # read only when a page shows content


@dataclass(slots=True)
class ListedDocument:
    """A document as list and search pages show it: what `DocumentSerializer` reads, nothing else."""

    id: UUID
    namespace_id: int
    namespace: ListedNamespace
    path: str
    title: str
    icon: str
    kind: str
    visibility: str
    status: str
    edit_policy: str
    metadata: dict[str, Any]
    archived: bool
    archived_at: datetime | None
    created_by_id: int | None
    created_by: ListedUser | None
    updated_by_id: int | None
    updated_by: ListedUser | None
    created_at: datetime
    updated_at: datetime
    current_version: ListedVersion | None

    @property
    def pk(self) -> UUID:
        return self.id

    @property
    def reference_uri(self) -> str:
        return document_reference_uri(self.id)


_LISTED_COLUMNS = (
    *("id", "namespace_id", "namespace__slug", "namespace__display_name", "path", "title", "icon", "kind"),
    *("visibility", "status", "edit_policy", "metadata", "archived", "archived_at"),
    *("created_by_id", "created_by__username", "updated_by_id", "updated_by__username", "created_at", "updated_at"),
    *("current_version_id", "current_version__number", "current_version__sha256", "current_version__byte_length"),
    *("current_version__char_length", "current_version__created_at"),
)


def _listed_columns(include_content: bool) -> tuple[str, ...]:
    return _LISTED_COLUMNS + (("current_version__content",) if include_content else ())


def listed(queryset: QuerySet[Document], *, include_content: bool = False) -> list[ListedDocument]:
    """A document query's rows as page entries, read as plain values.

    Built as models, each row of a page is five instances (the document, its namespace, version
    and two users): about 3 ms of CPU more for a page of 50 than reading the same columns.
    """
    return [_listed(row) for row in queryset.values_list(*_listed_columns(include_content))]


def _listed(row: tuple[Any, ...]) -> ListedDocument:
    (document_id, namespace_id, slug, display_name, path, title, icon, kind, visibility, status, edit_policy) = row[:11]
    (metadata, archived, archived_at, created_by_id, created_by, updated_by_id, updated_by) = row[11:18]
    (created_at, updated_at, version_id, number, sha256, byte_length, char_length, version_created_at) = row[18:26]
    version = None
    if version_id is not None:
        content = row[26] if len(row) > 26 else None
        version = ListedVersion(version_id, number, sha256, byte_length, char_length, version_created_at, content)
    return ListedDocument(
        id=document_id,
        namespace_id=namespace_id,
        namespace=ListedNamespace(slug, display_name),
        path=path,
        title=title,
        icon=icon,
        kind=kind,
        visibility=visibility,
        status=status,
        edit_policy=edit_policy,
        metadata=metadata,
        archived=archived,
        archived_at=archived_at,
        created_by_id=created_by_id,
        created_by=ListedUser(created_by) if created_by_id is not None else None,
        updated_by_id=updated_by_id,
        updated_by=ListedUser(updated_by) if updated_by_id is not None else None,
        created_at=created_at,
        updated_at=updated_at,
        current_version=version,
    )


def document_list(*, actor: Actor, filters: DocumentFilters, include_content: bool = False) -> QuerySet[Document]:
    """Readable documents matching the filters, ordered; drafts of others hidden unless asked."""
    if filters.archive_filter not in ARCHIVE_FILTERS:
        raise Invalid("archive_filter must be active, archived or all.", code="invalid", field="archive_filter")
    queryset = _as_listed(_document_base(actor), include_content)
    if filters.namespace:
        namespace, _ = namespace_get(actor=actor, slug=filters.namespace)
        queryset = queryset.filter(namespace=namespace)
    if filters.path:
        queryset = queryset.filter(path=normalise_path(filters.path))
    if filters.path_prefix:
        queryset = under_folder(queryset, normalise_folder(filters.path_prefix))
    for field in ("kind", "visibility", "status"):
        value = getattr(filters, field)
        if value:
            queryset = queryset.filter(**{field: value})
    if filters.archive_filter == "active":
        queryset = queryset.filter(archived=False)
    elif filters.archive_filter == "archived":
        queryset = queryset.filter(archived=True)
    if not filters.include_other_user_drafts:
        queryset = queryset.exclude(Q(status=DocumentStatus.DRAFT) & ~Q(created_by_id=actor.user_id))
    if not filters.include_my_drafts:
        queryset = queryset.exclude(status=DocumentStatus.DRAFT, created_by_id=actor.user_id)
    ordering = DOCUMENT_ORDERINGS.get(filters.order)
    if ordering is None:
        raise Invalid(f"order must be one of {', '.join(DOCUMENT_ORDERINGS)}.", code="invalid", field="order")
    return queryset.order_by(*ordering)


def ranked_page(*, actor: Actor, document_ids: list[Any], include_content: bool = False) -> dict[Any, ListedDocument]:
    """The documents of one page of ranked ids, by id, as `listed` rows.

    Only for ids that a query over `search_scope(document_list(...))` returned in this request:
    the access filter already ran inside that query, so it is not compiled and run a second time
    here (that cost a search as much CPU as loading the rows). The workspace still bounds it.
    """
    if not document_ids:
        return {}
    if connection.vendor == "postgresql":
        rows = _ranked_rows(actor.workspace.pk, document_ids, include_content)
    else:
        rows = listed(_workspace_documents(actor).filter(pk__in=document_ids), include_content=include_content)
    return {row.id: row for row in rows}


_WORKSPACE_SLOT = -1  # stand-ins that mark where `_ranked_statement`'s two parameters go


@cache
def _ranked_statement(include_content: bool) -> tuple[str, int]:
    """`listed`'s SELECT of one workspace's documents among an array of ids (PostgreSQL), compiled once.

    Only the parameters change from one search to the next, and compiling the five-table select
    cost a search more CPU (about 1 ms) than PostgreSQL spends running it. Returns the SQL and
    the position of the workspace among its two parameters (the other is the id array).
    """
    ids = RawSQL("SELECT unnest(%s::uuid[])", ([],))
    queryset = Document.objects.filter(namespace__workspace_id=_WORKSPACE_SLOT, pk__in=ids)
    sql, params = queryset.values_list(*_listed_columns(include_content)).query.sql_with_params()
    if sorted(params, key=lambda param: isinstance(param, list)) != [_WORKSPACE_SLOT, []]:
        raise AssertionError(f"unexpected parameters for the ranked page: {params!r}")
    return sql, list(params).index(_WORKSPACE_SLOT)


def _ranked_rows(workspace_id: int, document_ids: list[Any], include_content: bool) -> list[ListedDocument]:
    sql, workspace_at = _ranked_statement(include_content)
    params: list[Any] = [[UUID(str(pk)) for pk in document_ids]]
    params.insert(workspace_at, workspace_id)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # Django has psycopg hand jsonb over as text, for JSONField to decode.
    at = _LISTED_COLUMNS.index("metadata")
    return [_listed((*row[:at], _json(row[at]), *row[at + 1 :])) for row in rows]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def under_folder(queryset: QuerySet[Document], folder: str, *, include_self: bool = False) -> QuerySet[Document]:
    """Documents below a folder, compared case-sensitively on both databases.

    `path__startswith` alone is a LIKE, which SQLite evaluates case-insensitively; the Substr
    equality keeps `Guides/...` out of `guides`, and the LIKE keeps the query selective.
    """
    if not folder:
        return queryset
    head = folder + "/"
    below = Q(path__startswith=head, _folder_head=head)
    return queryset.alias(_folder_head=Substr("path", 1, len(head))).filter(
        below | Q(path=folder) if include_self else below
    )


def _parse_uuid(value: UUID | str) -> UUID:
    try:
        return value if isinstance(value, UUID) else UUID(str(value))
    except ValueError as exc:
        raise NotFound("Document not found.") from exc


def document_get(*, actor: Actor, document_id: UUID | str, include_content: bool = True) -> Document:
    """A document by id, archived or not (authorized direct links keep working).

    Read by key through one statement compiled once per process, then checked with the access
    rule's per-document form: every document read starts here, and building the five-table
    query with the read filter cost more CPU than running it.
    """
    document = _document_by_id(_parse_uuid(document_id), include_content=include_content)
    access.require_document_read(actor, document)
    return document


@dataclass(frozen=True)
class _CompiledGet:
    sql: str
    init_list: list[str]  # the document's loaded columns, first in each row
    populators: list[RelatedPopulator]  # select_related's namespace, version and users
    converters: list[tuple[int, tuple[list[Any], Any]]]


_KEY_SLOT = UUID(int=0)


@cache
def _compiled_get(include_content: bool) -> _CompiledGet:
    """`Document` by primary key with `_DOCUMENT_RELATIONS`, compiled the way QuerySet iteration does."""
    queryset = Document.objects.select_related(*_DOCUMENT_RELATIONS).filter(pk=_KEY_SLOT)
    if not include_content:
        queryset = queryset.defer("current_version__content")
    compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
    sql, params = compiler.as_sql()
    if len(params) != 1:
        raise AssertionError(f"unexpected parameters for a document by id: {params!r}")
    select, klass_info = compiler.select, compiler.klass_info
    fields = klass_info["select_fields"]
    return _CompiledGet(
        sql=sql,
        init_list=[column[0].target.attname for column in select[fields[0] : fields[-1] + 1]],
        populators=get_related_populators(klass_info, select, DEFAULT_DB_ALIAS),
        converters=list(compiler.get_converters([column[0] for column in select[: compiler.col_count]]).items()),
    )


def _document_by_id(document_id: UUID, *, include_content: bool) -> Document | None:
    compiled = _compiled_get(include_content)
    key = Document._meta.pk.get_db_prep_value(document_id, connection)
    with prepared_cursor() as cursor:
        cursor.execute(compiled.sql, [key])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for position, (converters, expression) in compiled.converters:
        for convert in converters:
            values[position] = convert(values[position], expression, connection)
    document = Document.from_db(DEFAULT_DB_ALIAS, compiled.init_list, values[: len(compiled.init_list)])
    for populator in compiled.populators:
        populator.populate(values, document)
    return document


def document_get_by_path(*, actor: Actor, namespace: str, path: str, archive_filter: str = "active") -> Document:
    """The active document at a path; with archive_filter archived/all, archived ones too."""
    ns, _ = namespace_get(actor=actor, slug=namespace)
    queryset = _document_base(actor).filter(namespace=ns, path=normalise_path(path))
    if archive_filter == "active":
        queryset = queryset.filter(archived=False)
    elif archive_filter == "archived":
        queryset = queryset.filter(archived=True)
    document = queryset.order_by("archived", "-archived_at").first()
    if document is None:
        raise NotFound("Document not found.")
    return document


def version_list(*, actor: Actor, document: Document, include_content: bool = False) -> QuerySet[DocumentVersion]:
    """Versions newest first; history stays readable for archived documents."""
    access.require_document_read(actor, document)
    queryset = DocumentVersion.objects.filter(document=document).select_related("author").order_by("-number")
    if not include_content:
        queryset = queryset.defer("content")
    return queryset


def version_get(
    *, actor: Actor, document: Document, version: int | str, include_content: bool = True
) -> DocumentVersion:
    """A version by number, or by id when the value is not a number."""
    access.require_document_read(actor, document)
    queryset = DocumentVersion.objects.filter(document=document).select_related("author")
    if not include_content:
        queryset = queryset.defer("content")
    text = str(version)
    if text.isascii() and text.isdigit():
        found = _one(queryset.filter(number=int(text))) if len(text) <= 9 else None
    else:
        try:
            found = _one(queryset.filter(pk=UUID(text)))
        except ValueError:
            found = None
    if found is None:
        raise NotFound("Version not found.")
    return found


def version_outline(*, version: DocumentVersion) -> structure.Outline:
    """A version's outline: from this process's cache, else stored, else computed and stored.

    The caller has checked read access to the version's document.
    """
    from knowledge import services

    def load() -> tuple[structure.Outline, int]:
        stored = _one(DocumentOutline.objects.filter(version_id=version.pk))
        if stored is not None:
            found = structure.outline_from_data(stored.line_count, stored.headings)
        else:
            found = services.version_outline_store(version=version)
        return found, found.approximate_size()

    return version_cache.cached(("outline", version.pk), load)


def version_lines(*, version: DocumentVersion) -> list[str]:
    """A version's content as lines (`structure.split_document`), cached like its outline.

    The content is fetched only on a cache miss, so pass versions read without it. The caller
    has checked read access to the version's document.
    """

    def load() -> tuple[list[str], int]:
        lines, _ = structure.split_document(version.content)
        return lines, structure.approximate_size(lines)

    return version_cache.cached(("lines", version.pk), load)
