"""Reading a repository for validate and import: the whole folder is checked before any write.

Malformed headers, a missing listed file, an unsafe file anywhere under docs/ or a breached
limit reject the repository as a whole: nothing implicit, no partial subset. The import plan is
canonical (sorted by document id, keyed d000001...), hashed after link rewriting for the chosen
destination, and measured in the exact JSON the import requests will carry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from transfer import format as fmt
from transfer.client import encode_json
from transfer.localfs import Repo, lock_is_held, sha256_bytes
from transfer.progress import Progress

PENDING_FILE = f"{fmt.STATE_DIR}/pending.json"
# Bytes around the documents list in one import request ({"bundle":..,"documents":[..],"namespace":..}).
REQUEST_ENVELOPE_BYTES = 256


@dataclass
class RepoDocument:
    file: str
    header: fmt.Header
    raw_sha256: str
    body_bytes: int
    header_bytes: int


@dataclass
class RepoSnapshot:
    manifest: fmt.Manifest
    documents: list[RepoDocument]
    unlisted: list[str]

    @property
    def body_bytes(self) -> int:
        return sum(doc.body_bytes for doc in self.documents)

    @cached_property
    def file_index(self) -> dict[str, str]:
        return {doc.file: doc.header.path for doc in self.documents}

    @cached_property
    def id_index(self) -> dict[str, str]:
        return {doc.header.id: doc.header.path for doc in self.documents}


@dataclass
class PlanItem:
    key: str
    file: str
    header: fmt.Header
    raw_sha256: str
    sha256: str
    bytes: int
    request_bytes: int
    unresolved: int

    def entry(self) -> dict[str, Any]:
        """The item's place in the canonical plan (everything but the body)."""
        return {"key": self.key, **fmt.header_digest_fields(self.header), "sha256": self.sha256, "bytes": self.bytes}


@dataclass
class ImportPlan:
    bundle: str
    target_slug: str
    namespace: fmt.NamespaceInfo
    items: list[PlanItem] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(item.bytes for item in self.items)

    @property
    def request_bytes(self) -> int:
        return sum(item.request_bytes for item in self.items)

    @property
    def unresolved(self) -> int:
        return sum(item.unresolved for item in self.items)


def check_not_busy(repo: Repo) -> None:
    """Import and validate refuse a directory an export is writing or has not finished publishing."""
    if lock_is_held(repo):
        raise fmt.FormatError("An export is running in this directory; wait for it to finish.", code="locked")
    if repo.exists(PENDING_FILE):
        pending = repo.read_text(PENDING_FILE, max_bytes=fmt.MAX_MANIFEST_BYTES)
        if pending.strip() != "null":
            raise fmt.FormatError(
                "An export publication was interrupted here; complete it with `agor kb export ... --resume`.",
                code="publication_pending",
            )


def read_repository(repo: Repo, progress: Progress | None = None) -> RepoSnapshot:
    """Validate the manifest, every listed file and every entry under docs/ (no network, no writes)."""
    check_not_busy(repo)
    if repo.exists(fmt.LEGACY_MANIFEST_FILE):
        raise fmt.FormatError(
            "Unsupported Knowledge export version 1 (manifest.json); make a fresh version 2 export.",
            code="unsupported_version",
        )
    if not repo.exists(fmt.MANIFEST_FILE):
        raise fmt.FormatError("manifest.yaml is missing.", code="missing_manifest")
    manifest = fmt.parse_manifest(repo.read_text(fmt.MANIFEST_FILE, max_bytes=fmt.MAX_MANIFEST_BYTES))
    listing = repo.walk_docs()
    listed = set(manifest.documents)
    missing = sorted(listed - set(listing.files))
    if missing:
        raise fmt.FormatError("A file listed in manifest.yaml is missing.", code="missing_file", file=missing[0])
    unlisted = sorted(set(listing.files) - listed)
    if progress:
        progress.start("Planning: local files", total=len(manifest.documents))
    documents: list[RepoDocument] = []
    total_body = total_header = 0
    for file in manifest.documents:
        data = repo.read_bytes(file, max_bytes=fmt.MAX_FILE_BYTES)
        header_text, body = _split(data, file)
        header = fmt.parse_header(header_text, file=file)
        body_bytes = len(body.encode("utf-8"))
        header_bytes = len(header_text.encode("utf-8"))
        if body_bytes > fmt.MAX_DOCUMENT_BYTES:
            raise fmt.FormatError("A document body exceeds 10 MiB.", code="limit_exceeded", file=file)
        if "\x00" in body:
            raise fmt.FormatError("The body contains NUL characters, which Knowledge cannot store.", file=file)
        total_body += body_bytes
        total_header += header_bytes
        documents.append(RepoDocument(file, header, sha256_bytes(data), body_bytes, header_bytes))
        if progress:
            progress.advance(1, body_bytes)
    if progress:
        progress.finish()
    if total_body > fmt.MAX_TOTAL_BYTES:
        raise fmt.FormatError("Document bodies exceed 100 MiB in total.", code="limit_exceeded")
    if total_header > fmt.MAX_HEADER_BYTES:
        raise fmt.FormatError("Document headers exceed 10 MiB in total.", code="limit_exceeded")
    ids: set[str] = set()
    paths: set[str] = set()
    for doc in documents:
        if doc.header.id in ids:
            raise fmt.FormatError("Two documents share one agor.id.", code="duplicate_id", file=doc.file)
        if doc.header.path in paths:
            raise fmt.FormatError("Two documents share one agor.path.", code="duplicate_path", file=doc.file)
        ids.add(doc.header.id)
        paths.add(doc.header.path)
    return RepoSnapshot(manifest, documents, unlisted)


def _split(data: bytes, file: str) -> tuple[str, str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fmt.FormatError("The file is not valid UTF-8.", code="unsafe_local_file", file=file) from None
    return fmt.split_document(text, file=file)


def request_item(item: PlanItem, content: str) -> dict[str, Any]:
    """The JSON object one document travels as in an import request."""
    header = item.header
    return {
        "key": item.key,
        "source_id": header.id,
        "path": header.path,
        "title": header.title,
        "icon": header.icon,
        "kind": header.kind,
        "status": header.status,
        "frontmatter": header.frontmatter,
        "provenance": header.provenance,
        "sha256": item.sha256,
        "bytes": item.bytes,
        "content": content,
    }


def rewritten_body(repo: Repo, snapshot: RepoSnapshot, doc: RepoDocument, target_slug: str) -> tuple[str, int]:
    """Re-read a planned file, refuse it if it changed since planning, and rewrite its links."""
    data = repo.read_bytes(doc.file, max_bytes=fmt.MAX_FILE_BYTES)
    if sha256_bytes(data) != doc.raw_sha256:
        raise fmt.FormatError("Local file changed after planning.", code="changed_after_planning", file=doc.file)
    _, body = _split(data, doc.file)
    result = fmt.import_links(
        body,
        source_slug=snapshot.manifest.namespace.slug,
        target_slug=target_slug,
        file=doc.file,
        file_to_path=snapshot.file_index,
        id_to_path=snapshot.id_index,
    )
    return result.body, result.unresolved


def build_plan(repo: Repo, snapshot: RepoSnapshot, target_slug: str, progress: Progress | None = None) -> ImportPlan:
    """The canonical plan for one destination, with every request limit checked before any write."""
    ordered = sorted(snapshot.documents, key=lambda doc: doc.header.id)
    if progress:
        progress.start("Planning: local checksums", total=len(ordered), total_bytes=snapshot.body_bytes)
    items: list[PlanItem] = []
    for index, doc in enumerate(ordered):
        body, unresolved = rewritten_body(repo, snapshot, doc, target_slug)
        encoded = body.encode("utf-8")
        item = PlanItem(
            key=fmt.plan_key(index),
            file=doc.file,
            header=doc.header,
            raw_sha256=doc.raw_sha256,
            sha256=sha256_bytes(encoded),
            bytes=len(encoded),
            request_bytes=0,
            unresolved=unresolved,
        )
        if item.bytes > fmt.MAX_DOCUMENT_BYTES:
            raise fmt.FormatError("A rewritten document body exceeds 10 MiB.", code="limit_exceeded", file=doc.file)
        item.request_bytes = len(encode_json(request_item(item, body)))
        if item.request_bytes + REQUEST_ENVELOPE_BYTES > fmt.MAX_REQUEST_BYTES:
            raise fmt.FormatError(
                "A document's encoded import request exceeds 9 MiB (JSON escaping included).",
                code="limit_exceeded",
                file=doc.file,
            )
        items.append(item)
        if progress:
            progress.advance(1, doc.body_bytes)
    if progress:
        progress.finish()
    plan = ImportPlan(
        bundle=fmt.bundle_fingerprint(snapshot.manifest.namespace, target_slug, [item.entry() for item in items]),
        target_slug=target_slug,
        namespace=snapshot.manifest.namespace,
        items=items,
    )
    if plan.request_bytes > fmt.MAX_TOTAL_REQUEST_BYTES:
        raise fmt.FormatError("The encoded import requests exceed 110 MiB in total.", code="limit_exceeded")
    return plan


def batches(plan: ImportPlan, items: list[PlanItem], *, max_items: int = 50) -> Iterator[list[PlanItem]]:
    """Group items into requests of at most `max_items` documents and 9 MiB."""
    batch: list[PlanItem] = []
    size = REQUEST_ENVELOPE_BYTES
    for item in items:
        if batch and (len(batch) >= max_items or size + item.request_bytes + 1 > fmt.MAX_REQUEST_BYTES):
            yield batch
            batch, size = [], REQUEST_ENVELOPE_BYTES
        batch.append(item)
        size += item.request_bytes + 1
    if batch:
        yield batch


def validate_summary(snapshot: RepoSnapshot, plan: ImportPlan) -> dict[str, Any]:
    return {
        "valid": True,
        "version": fmt.VERSION,
        "namespace": snapshot.manifest.namespace.slug,
        "documents": len(snapshot.documents),
        "bytes": snapshot.body_bytes,
        "bundle": plan.bundle,
        "unresolved": plan.unresolved,
        "unlisted": snapshot.unlisted,
    }


def dumps(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode("utf-8")
