"""`agor kb export`: a verified source snapshot, then a staged, journaled publication.

1. Local checks before any request: a private directory we own, no local edits to tracked files,
   no interrupted publication (unless --resume completes it), the same deployment and user.
2. Plan from the inventory's stored sha256 (no bodies): cached, verified snapshot bodies are
   unchanged; everything else is fetched, verified and cached under `.agor/snapshot/`.
3. Re-read the inventory: if the source changed meanwhile, nothing new is published.
4. Render the repository, stage changed files, write the journal, apply (manifest last), verify,
   then record the new baseline. An interruption after step 4 begins is finished by --resume.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transfer import faults
from transfer import format as fmt
from transfer.client import ApiError, KnowledgeClient
from transfer.errors import Failures, TransferError, document_failure, from_api, item_failure, unreliable
from transfer.importer import batch_size, cancelled_error
from transfer.localfs import ExportLock, Repo, UnsafeLocalFile, lock_is_held, refuse_windows, sha256_bytes
from transfer.progress import Progress

STATE_FILE = f"{fmt.STATE_DIR}/state.json"
BASELINE_FILE = f"{fmt.STATE_DIR}/baseline.json"
PENDING_FILE = f"{fmt.STATE_DIR}/pending.json"
SNAPSHOT_DIR = f"{fmt.STATE_DIR}/snapshot"
STAGE_DIR = f"{fmt.STATE_DIR}/stage"
STATE_MAX_BYTES = 64 * fmt.MIB
INVENTORY_PAGE = 500
BODY_BATCH = 100
MAX_KEY = 999_999
FRESH_DIR_ENTRIES = {".git", fmt.GITIGNORE, fmt.GITATTRIBUTES, fmt.STATE_DIR, fmt.LOCK_DIR}


@dataclass
class ExportOptions:
    slug: str
    output: Path
    dry_run: bool = False
    resume: bool = False


# --- local state ---------------------------------------------------------------------------


def _dumps(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode("utf-8")


def _load(repo: Repo, rel: str) -> Any:
    if not repo.exists(rel):
        return None
    try:
        return json.loads(repo.read_text(rel, max_bytes=STATE_MAX_BYTES))
    except ValueError:
        raise UnsafeLocalFile("Export state is corrupt; use a new output directory.", file=rel) from None


def _save(repo: Repo, rel: str, data: Any) -> None:
    with repo.dir_fd(fmt.STATE_DIR, create=True, private=True):
        pass
    repo.write_atomic(rel, _dumps(data))


def _snapshot_name(key: str, sha: str) -> str:
    return f"{SNAPSHOT_DIR}/{key}-{sha}.md"


# --- inventory -----------------------------------------------------------------------------


def read_inventory(
    client: KnowledgeClient, slug: str, progress: Progress, phase: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every page of the source inventory; a shifting or inconsistent listing stops the run."""
    progress.start(phase)
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    cursor: str | None = None
    total: int | None = None
    namespace: dict[str, Any] = {}
    while True:
        try:
            page = client.get(
                "/kb/transfers/inventory",
                route="/kb/transfers/inventory",
                namespace=slug,
                cursor=cursor,
                limit=INVENTORY_PAGE,
            )
        except ApiError as exc:
            raise from_api(exc, stage="planning") from None
        namespace = page.get("namespace") or {}
        rows = page.get("entries") or []
        if total is None:
            total = page.get("total")
        if page.get("total") != total or (cursor is not None and not rows):
            raise unreliable("source", "it changed while paging")
        for row in rows:
            doc_id = str(row.get("document_id") or "")
            if doc_id in seen or (cursor is not None and doc_id <= cursor) or fmt.path_problem(row.get("path")):
                raise unreliable("source", "order or entries")
            seen.add(doc_id)
            entries.append(row)
        progress.discovered(len(entries))
        next_cursor = page.get("next_cursor")
        if not next_cursor:
            break
        cursor = str(next_cursor)
    progress.finish()
    if len(entries) != total:
        raise unreliable("source", "count mismatch")
    return namespace, entries


def source_fingerprint(source: dict[str, Any], namespace: dict[str, Any], entries: list[dict[str, Any]]) -> str:
    ordered = sorted(entries, key=lambda e: e["document_id"])
    return fmt.sha256_hex(fmt.canonical_json({"source": source, "namespace": namespace, "entries": ordered}))


def repository_identity(entries: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """(agor.id, provenance) per document id.

    A document that was itself imported keeps the repository identity and provenance it arrived
    with while its content is the imported version, so export -> import -> export reproduces the
    same tree. The inherited id must be a UUID no other document uses; otherwise its own id.
    """
    live = {e["document_id"] for e in entries}
    candidates: dict[str, int] = {}
    for entry in entries:
        inherited = (entry.get("imported") or {}).get("source_uuid") or ""
        candidates[inherited] = candidates.get(inherited, 0) + 1
    result: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry in entries:
        imported = entry.get("imported") or {}
        repo_id = entry["document_id"]
        provenance = entry.get("provenance") or {}
        inherited = str(imported.get("source_uuid") or "")
        try:
            valid = inherited and str(uuid.UUID(inherited)) == inherited
        except ValueError:
            valid = False
        if valid and candidates.get(inherited) == 1 and (inherited not in live or inherited == entry["document_id"]):
            repo_id = inherited
            if (
                isinstance(imported.get("provenance"), dict)
                and imported.get("sha256") == entry.get("sha256")
                and entry.get("version_number") == 1
            ):
                provenance = imported["provenance"]
        result[entry["document_id"]] = (repo_id, provenance)
    return result


# --- the run -------------------------------------------------------------------------------


def run_export(
    client: KnowledgeClient,
    options: ExportOptions,
    progress: Progress,
    cancel: threading.Event,
    summary: dict[str, Any],
) -> int:
    refuse_windows()
    if not fmt.SLUG.match(options.slug):
        raise TransferError("--namespace takes a source slug (a-z, 0-9, '.', '_', '-'), not an id.", stage="planning")
    output = options.output
    if options.dry_run and not output.exists():
        return _dry_run(client, options, None, progress, summary)
    with Repo(output, create=not options.dry_run, private=True) as repo:
        if options.dry_run:
            if lock_is_held(repo):
                raise TransferError("Another export is running in this directory.", stage="planning")
            return _dry_run(client, options, repo, progress, summary)
        with ExportLock(repo):
            return _export(client, options, repo, progress, cancel, summary)


def _local_checks(repo: Repo, options: ExportOptions) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """State and baseline after refusing v1 folders, foreign folders and local edits."""
    if repo.exists(fmt.LEGACY_MANIFEST_FILE):
        raise fmt.FormatError(
            "Version 1 export directory is immutable; export into a new directory.", code="unsupported_version"
        )
    state = _load(repo, STATE_FILE)
    if state is None:
        extra = set(repo.list_dir("")) - FRESH_DIR_ENTRIES
        if extra:
            raise fmt.FormatError(
                "The output directory is not empty and holds no export baseline (a clone?); "
                "use a new output directory.",
                code="not_an_export",
            )
    elif state.get("version") != fmt.VERSION or state.get("namespace") != options.slug:
        raise fmt.FormatError("This export directory belongs to another namespace or version.", code="not_an_export")
    baseline = _load(repo, BASELINE_FILE) or {"version": fmt.VERSION, "files": {}, "paths": {}, "retained": {}}
    for file, expected in sorted((baseline.get("files") or {}).items()):
        if repo.hash_file(file, max_bytes=fmt.MAX_FILE_BYTES) != expected:
            raise fmt.FormatError(
                "Local content differs from export baseline; commit or revert local edits, or use a new directory.",
                code="local_edits",
                file=file,
            )
    retained = {}
    for file, expected in (baseline.get("retained") or {}).items():
        if repo.hash_file(file, max_bytes=fmt.MAX_FILE_BYTES) == expected:
            retained[file] = expected
    baseline["retained"] = retained
    return state, baseline


def _identity(client: KnowledgeClient) -> dict[str, Any]:
    try:
        me = client.get("/kb/me", route="/kb/me")
    except ApiError as exc:
        raise from_api(exc, stage="planning") from None
    return {"url": client.url, "workspace": me.get("workspace"), "user": me.get("user")}


def _plan_cached(
    repo: Repo | None, entries: list[dict[str, Any]], keys: dict[str, str], progress: Progress
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cached, to_fetch): a cached body is a snapshot file whose bytes hash to the stored sha256."""
    cached: list[dict[str, Any]] = []
    fetch: list[dict[str, Any]] = []
    candidates = [e for e in entries if e.get("sha256") and e["document_id"] in keys]
    progress.start("Planning: local checksums", total=len(candidates))
    for entry in entries:
        key = keys.get(entry["document_id"])
        sha = entry.get("sha256")
        if repo is None or not sha or key is None:
            fetch.append(entry)
            continue
        name = _snapshot_name(key, sha)
        actual = repo.hash_file(name, max_bytes=fmt.MAX_DOCUMENT_BYTES)
        if actual is None:
            fetch.append(entry)
        elif actual != sha:
            raise UnsafeLocalFile("A snapshot cache file was altered; use a new output directory.", file=name)
        else:
            cached.append(entry)
        progress.advance(1)
    progress.finish()
    return cached, fetch


def _check_limits(entries: list[dict[str, Any]]) -> None:
    """A repository no import could accept is not written at all."""
    if len(entries) > fmt.MAX_DOCUMENTS:
        raise TransferError(f"planning: the namespace has more than {fmt.MAX_DOCUMENTS} documents.", stage="planning")
    if sum(int(e.get("bytes") or 0) for e in entries) > fmt.MAX_TOTAL_BYTES:
        raise TransferError("planning: the namespace holds more than 100 MiB of markdown.", stage="planning")


def _assign_keys(state: dict[str, Any] | None, entries: list[dict[str, Any]]) -> tuple[dict[str, str], int]:
    keys = dict((state or {}).get("keys") or {})
    next_key = int((state or {}).get("next_key") or 1)
    for entry in sorted(entries, key=lambda e: e["document_id"]):
        if entry["document_id"] not in keys:
            if next_key > MAX_KEY:
                raise TransferError("planning: too many documents for one export directory.", stage="planning")
            keys[entry["document_id"]] = fmt.plan_key(next_key - 1)
            next_key += 1
    return keys, next_key


def _plan_line(progress: Progress, entries: list[Any], cached: list[Any], fetch: list[dict[str, Any]]) -> None:
    known = sum(int(e.get("bytes") or 0) for e in fetch if e.get("sha256"))
    unknown = sum(1 for e in fetch if not e.get("sha256"))
    progress.line(
        f"Plan: {len(entries)} documents; {len(cached)} unchanged; {len(fetch)} fetch/verify; "
        f"{known} known bytes; {unknown} unknown hashes"
    )


def _dry_run(
    client: KnowledgeClient, options: ExportOptions, repo: Repo | None, progress: Progress, summary: dict[str, Any]
) -> int:
    state = None
    if repo is not None:
        state, _ = _local_checks(repo, options)
        pending = _load(repo, PENDING_FILE)
        if pending is not None:
            raise fmt.FormatError(
                "A publication was interrupted; run the export with --resume.", code="publication_pending"
            )
    source = _identity(client)
    if state is not None and state.get("source") != source:
        raise fmt.FormatError("Export directory belongs to another deployment/user.", code="foreign_directory")
    _, entries = read_inventory(client, options.slug, progress, "Planning: source inventory")
    keys, _ = _assign_keys(state, entries)
    cached, fetch = _plan_cached(repo, entries, keys, progress)
    _plan_line(progress, entries, cached, fetch)
    summary.update(
        dryRun=True,
        documents=len(entries),
        unchanged=len(cached),
        pending=len(fetch),
        bytesNeeded=sum(int(e.get("bytes") or 0) for e in fetch),
        unknown=sum(1 for e in fetch if not e.get("sha256")),
    )
    return 0


def _export(
    client: KnowledgeClient,
    options: ExportOptions,
    repo: Repo,
    progress: Progress,
    cancel: threading.Event,
    summary: dict[str, Any],
) -> int:
    pending = _load(repo, PENDING_FILE)
    if pending is not None:
        if not options.resume:
            raise fmt.FormatError(
                "A publication was interrupted; re-run the export with --resume to complete it.",
                code="publication_pending",
            )
        apply_journal(repo, pending, progress)
    for leftover in repo.list_dir(STAGE_DIR):
        repo.remove(f"{STAGE_DIR}/{leftover}")
    state, baseline = _local_checks(repo, options)
    if state is not None and not state.get("complete") and not options.resume:
        raise fmt.FormatError(
            "An earlier export into this directory did not finish; re-run with --resume.", code="incomplete_export"
        )
    source = _identity(client)
    if state is not None and state.get("source") != source:
        raise fmt.FormatError("Export directory belongs to another deployment/user.", code="foreign_directory")
    namespace, entries = read_inventory(client, options.slug, progress, "Planning: source inventory")
    fingerprint = source_fingerprint(source, namespace, entries)
    if state is not None and not state.get("complete") and state.get("fingerprint") != fingerprint:
        raise fmt.FormatError(
            "Source changed since the incomplete export plan. Use a new output directory.", code="source_changed"
        )
    _check_limits(entries)
    keys, next_key = _assign_keys(state, entries)
    cached, fetch = _plan_cached(repo, entries, keys, progress)
    _plan_line(progress, entries, cached, fetch)
    complete = bool(state and state.get("complete"))
    _save(
        repo,
        STATE_FILE,
        {
            "version": fmt.VERSION,
            "source": source,
            "namespace": options.slug,
            "fingerprint": fingerprint,
            "keys": keys,
            "next_key": next_key,
            "complete": complete,
        },
    )
    faults.point("export:planned")
    summary.update(documents=len(entries), unchanged=len(cached), copied=0, bytes=0, failed=0)
    failures = Failures()
    _fetch_bodies(client, repo, options.slug, fetch, keys, progress, cancel, failures, summary)
    if failures:
        summary["failed"] = len(failures)
        summary["errors"] = failures.details()
        progress.line(
            f"Export incomplete: {summary['copied']} copied, {len(failures)} failed; verified bodies are kept and "
            "no new repository was published. Re-run with --resume."
        )
        for line in failures.details():
            progress.line("  " + line)
        return 1
    _, again = read_inventory(client, options.slug, progress, "Verifying source inventory")
    if source_fingerprint(source, namespace, again) != fingerprint:
        raise fmt.FormatError(
            "Source changed during export; no new completed manifest was published.", code="source_changed"
        )
    written, unresolved, retained = publish(repo, options.slug, namespace, entries, keys, baseline, source, progress)
    faults.point("export:published")
    wanted = {_snapshot_name(keys[e["document_id"]], e["sha256"]).rsplit("/", 1)[1] for e in entries if e.get("sha256")}
    for name in repo.list_dir(SNAPSHOT_DIR):
        if name not in wanted:
            repo.remove(f"{SNAPSHOT_DIR}/{name}")
    _save(
        repo,
        STATE_FILE,
        {
            "version": fmt.VERSION,
            "source": source,
            "namespace": options.slug,
            "fingerprint": fingerprint,
            "keys": keys,
            "next_key": next_key,
            "complete": True,
        },
    )
    for name, text in ((fmt.GITIGNORE, fmt.GITIGNORE_TEXT), (fmt.GITATTRIBUTES, fmt.GITATTRIBUTES_TEXT)):
        if not repo.exists(name):
            repo.write_atomic(name, text.encode())
        elif repo.hash_file(name, max_bytes=fmt.MAX_MANIFEST_BYTES) != sha256_bytes(text.encode()):
            progress.line(f"Kept the existing {name}; make sure it covers .agor/, .agor-lock/ and docs/**/*.md -text.")
    summary.update(manifest=fmt.MANIFEST_FILE, unresolved=unresolved, retained=retained, written=written)
    progress.line(
        f"Repository complete: {len(entries)} documents; {written} files written; "
        f"{len(retained)} old files retained, not imported."
    )
    return 0


def _fetch_bodies(
    client: KnowledgeClient,
    repo: Repo,
    slug: str,
    fetch: list[dict[str, Any]],
    keys: dict[str, str],
    progress: Progress,
    cancel: threading.Event,
    failures: Failures,
    summary: dict[str, Any],
) -> None:
    """Fetch, verify and cache bodies in bounded batches; deferred items are asked for again."""
    total_bytes = sum(int(e.get("bytes") or 0) for e in fetch)
    progress.start("Exporting", total=len(fetch), total_bytes=total_bytes)
    queue = list(fetch)
    while queue:
        if cancel.is_set():
            progress.finish()
            raise cancelled_error("exporting")
        size = batch_size(BODY_BATCH)
        batch, queue = queue[:size], queue[size:]
        by_id = {entry["document_id"]: entry for entry in batch}
        body = {
            "namespace": slug,
            "items": [{"document_id": e["document_id"], "version_id": e["version_id"]} for e in batch],
        }
        try:
            answer = client.post("/kb/transfers/bodies", body, route="/kb/transfers/bodies")
        except ApiError as exc:
            error = from_api(exc, stage="exporting")
            if error.fatal:
                raise error from None
            for entry in batch:
                failures.add(document_failure(error, key=keys[entry["document_id"]], source_id=entry["document_id"]))
                progress.advance(1)
            continue
        deferred = []
        for item in answer.get("items") or []:
            entry = by_id.pop(str(item.get("document_id")), None)
            if entry is None:
                raise TransferError("exporting: the deployment answered for other documents.", stage="exporting")
            key = keys[entry["document_id"]]
            status = item.get("status")
            if status == "deferred":
                deferred.append(entry)
                continue
            if status != "ok":
                failures.add(item_failure(stage="exporting", key=key, source_id=entry["document_id"], code=str(status)))
                progress.advance(1)
                continue
            data = str(item.get("content") or "").encode("utf-8")
            digest = sha256_bytes(data)
            if (entry.get("sha256") and digest != entry["sha256"]) or digest != item.get("sha256"):
                failures.add(
                    item_failure(stage="exporting", key=key, source_id=entry["document_id"], code="checksum_mismatch")
                )
                progress.advance(1)
                continue
            entry["sha256"] = entry.get("sha256") or digest
            name = _snapshot_name(key, digest)
            existing = repo.hash_file(name, max_bytes=fmt.MAX_DOCUMENT_BYTES)
            if existing is None:
                with repo.dir_fd(SNAPSHOT_DIR, create=True, private=True):
                    pass
                repo.write_atomic(name, data, durable=False)
            elif existing != digest:
                raise UnsafeLocalFile("A snapshot cache file was altered; use a new output directory.", file=name)
            summary["copied"] += 1
            summary["bytes"] += len(data)
            progress.advance(1, len(data))
            faults.point("export:body")
        if by_id:
            raise TransferError("exporting: the deployment left documents unanswered.", stage="exporting")
        repo.sync()  # this batch's snapshot files are durable before the next request
        queue = deferred + queue
    progress.finish()


# --- publication ---------------------------------------------------------------------------


def publish(
    repo: Repo,
    slug: str,
    namespace: dict[str, Any],
    entries: list[dict[str, Any]],
    keys: dict[str, str],
    baseline: dict[str, Any],
    source: dict[str, Any],
    progress: Progress,
) -> tuple[int, int, list[str]]:
    """Render, stage and journal every changed file, then apply; returns (written, unresolved, retained)."""
    mapping = fmt.map_files([e["path"] for e in entries], previous=baseline.get("paths") or {})
    identities = repository_identity(entries)
    id_to_path = {e["document_id"]: e["path"] for e in entries}
    tracked = dict(baseline.get("files") or {})  # verified against the disk by _local_checks
    retained_before = dict(baseline.get("retained") or {})
    previous_render = baseline.get("render") or {}
    render: dict[str, dict[str, Any]] = {}
    new_files: dict[str, str] = {}
    writes: list[dict[str, Any]] = []
    unresolved = 0
    header_bytes = 0
    body_bytes = 0
    # Any rename, addition or removal can change relative links anywhere: then everything re-renders.
    layout = fmt.sha256_hex(fmt.canonical_json({"slug": slug, "mapping": mapping, "ids": id_to_path}))
    progress.start("Staging", total=len(entries))

    def stage(file: str, data: bytes) -> None:
        digest = sha256_bytes(data)
        new_files[file] = digest
        current = tracked[file] if file in tracked else repo.hash_file(file, max_bytes=fmt.MAX_FILE_BYTES)
        if current == digest:
            return
        if current is not None and current != tracked.get(file) and current != retained_before.get(file):
            raise fmt.FormatError(
                "Export refuses to overwrite an untracked or edited file; use a new output directory.",
                code="untracked_file",
                file=file,
            )
        staged = f"{STAGE_DIR}/{len(writes):06d}"
        repo.write_atomic(staged, data, durable=False)
        writes.append({"file": file, "stage": staged, "before": current, "after": digest})

    with repo.dir_fd(STAGE_DIR, create=True, private=True):
        pass
    for entry in sorted(entries, key=lambda e: e["path"]):
        key = keys[entry["document_id"]]
        file = mapping[entry["path"]]
        repo_id, provenance = identities[entry["document_id"]]
        header = fmt.Header(
            id=repo_id,
            path=entry["path"],
            title=entry["title"],
            icon=entry.get("icon") or None,
            kind=entry["kind"],
            status=entry["status"],
            frontmatter=entry.get("frontmatter") or None,
            provenance=provenance,
        )
        render_key = fmt.sha256_hex(fmt.canonical_json({"layout": layout, "sha": entry["sha256"], **header.as_dict()}))
        previous = previous_render.get(file)
        if previous and previous.get("key") == render_key and file in tracked:
            # Same body, same header, same layout: the published file is already right.
            new_files[file] = tracked[file]
            render[file] = previous
            header_bytes += int(previous.get("header_bytes") or 0)
            body_bytes += int(previous.get("body_bytes") or 0)
            unresolved += int(previous.get("unresolved") or 0)
            progress.advance(1)
            continue
        snapshot = _snapshot_name(key, entry["sha256"])
        raw = repo.read_bytes(snapshot, max_bytes=fmt.MAX_DOCUMENT_BYTES)
        if sha256_bytes(raw) != entry["sha256"]:
            raise UnsafeLocalFile("A snapshot cache file was altered; use a new output directory.", file=snapshot)
        rewritten = fmt.export_links(
            raw.decode("utf-8"), slug=slug, file=file, path_to_file=mapping, id_to_path=id_to_path
        )
        text = fmt.render_document(header, rewritten.body)
        header_text, _ = fmt.split_document(text, file=file)
        try:
            fmt.parse_header(header_text, file=file)
        except fmt.FormatError as exc:
            raise TransferError(
                f"exporting: the generated header cannot be re-read ({exc.code}).",
                stage="exporting",
                key=key,
                source_id=entry["document_id"],
            ) from None
        size = len(header_text.encode("utf-8"))
        body_size = len(rewritten.body.encode("utf-8"))
        header_bytes += size
        body_bytes += body_size
        unresolved += rewritten.unresolved
        render[file] = {
            "key": render_key,
            "header_bytes": size,
            "body_bytes": body_size,
            "unresolved": rewritten.unresolved,
        }
        stage(file, text.encode("utf-8"))
        progress.advance(1)
    if body_bytes > fmt.MAX_TOTAL_BYTES:
        raise TransferError("exporting: rewritten bodies would exceed 100 MiB in total.", stage="exporting")
    if header_bytes > fmt.MAX_HEADER_BYTES:
        raise TransferError("exporting: document headers would exceed 10 MiB in total.", stage="exporting")
    info = fmt.NamespaceInfo(
        slug=slug,
        display_name=namespace.get("display_name") or slug,
        description=namespace.get("description") or None,
        provenance=namespace.get("provenance") or {},
    )
    manifest = fmt.render_manifest(fmt.Manifest(info, sorted(set(mapping.values())), list(fmt.OMISSIONS)))
    if len(manifest.encode("utf-8")) > fmt.MAX_MANIFEST_BYTES:
        raise TransferError("exporting: manifest.yaml would exceed 10 MiB.", stage="exporting")
    stage(fmt.MANIFEST_FILE, manifest.encode("utf-8"))
    progress.finish()
    retained = {
        file: digest
        for file, digest in {**retained_before, **tracked}.items()
        if file not in new_files and file != fmt.MANIFEST_FILE and repo.exists(file)
    }
    next_baseline = {
        "version": fmt.VERSION,
        "files": new_files,
        "paths": mapping,
        "retained": retained,
        "render": render,
    }
    if not writes and baseline == next_baseline:
        return 0, unresolved, sorted(retained)
    repo.sync()  # every staged file is on disk before the journal names it
    faults.point("export:staged")
    journal = {"version": fmt.VERSION, "source": source, "writes": writes, "baseline": next_baseline}
    _save(repo, PENDING_FILE, journal)
    faults.point("export:journal")
    apply_journal(repo, journal, progress)
    return len(writes), unresolved, sorted(retained)


def apply_journal(repo: Repo, journal: dict[str, Any], progress: Progress) -> None:
    """Apply staged writes (manifest last), verify them, then record the baseline and clear the journal.

    Re-running it is safe: files already at their new hash are skipped; a file that matches
    neither its old nor its new hash was edited meanwhile, and publication stops.
    """
    writes = journal.get("writes") or []
    progress.start("Publishing", total=len(writes))
    for write in writes:
        file, staged, before, after = write["file"], write["stage"], write.get("before"), write["after"]
        current = repo.hash_file(file, max_bytes=fmt.MAX_FILE_BYTES)
        if current == after:
            repo.remove(staged)
            progress.advance(1)
            continue
        if current != before:
            raise fmt.FormatError(
                "A file was edited while publication was incomplete; refusing to overwrite it.",
                code="local_edits",
                file=file,
            )
        if repo.hash_file(staged, max_bytes=fmt.MAX_FILE_BYTES) != after:
            raise UnsafeLocalFile("A staged file was altered or lost; use a new output directory.", file=staged)
        repo.move(staged, file, durable=False)
        progress.advance(1)
        faults.point("export:apply")
    for directory in sorted({write["file"].rpartition("/")[0] for write in writes} | {STAGE_DIR}):
        if directory == "" or repo.exists(directory):
            repo.fsync_dir(directory)
    for write in writes:
        if repo.hash_file(write["file"], max_bytes=fmt.MAX_FILE_BYTES) != write["after"]:
            raise UnsafeLocalFile("A published file does not match what was staged.", file=write["file"])
    progress.finish()
    _save(repo, BASELINE_FILE, journal["baseline"])
    faults.point("export:baseline")
    _save(repo, PENDING_FILE, None)
