"""`agor`: log in to a deployment, inspect Knowledge, and move a namespace through a folder.

The CLI only speaks HTTP to the deployment's API (it never imports Django or the apps), reads
and stores credentials through `mcp_bridge.config` (shared with the MCP bridge), and keeps
stdout for results: tables, markdown, or one JSON document. Progress, warnings and errors go to
stderr, and every untrusted string is escaped before it reaches a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import click

from mcp_bridge.config import AgorConfig, forget_credentials, load_config, save_credentials
from transfer import faults
from transfer.client import ApiError, KnowledgeClient
from transfer.exporter import ExportOptions, run_export
from transfer.importer import ImportOptions, run_import
from transfer.runner import run_engine, run_validate
from transfer.terminal import escape_text, safe_json
from transfer.version import client_version

SERVER_PAGE = 200  # the list endpoints' largest page
DEFAULT_LIMIT = 50


class CliError(click.ClickException):
    """A failure the user can act on: printed (escaped) to stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"agor: error: {escape_text(self.message, multiline=True)}", err=True)


def api_failure(exc: ApiError, *, what: str = "") -> CliError:
    """A short, actionable message for a failed request; the server's detail is escaped."""
    if exc.transport:
        return CliError("Cannot reach the deployment (transport error). Check the URL and your network.")
    if exc.status == 401:
        return CliError("Not authenticated: the token was rejected. Log in again with `agor login --url URL`.")
    if exc.status == 404:
        return CliError(f"{what or 'Object'} not found (or not visible to you).")
    if exc.status == 403:
        return CliError(f"Permission denied: {exc.detail or 'you may not do this'}")
    if exc.status == 429:
        return CliError("Rate limited by the deployment; wait for the limit to reset and retry.")
    detail = f": {exc.detail}" if exc.detail else ""
    fields = f" (fields: {', '.join(exc.fields)})" if exc.fields else ""
    return CliError(f"HTTP {exc.status} {exc.code}{detail}{fields}")


def current_config() -> AgorConfig:
    config = load_config()
    if not config.is_complete:
        raise CliError("Not logged in: run `agor login --url URL`, or set AGOR_URL and AGOR_TOKEN.")
    return config


@contextmanager
def connected(config: AgorConfig | None = None) -> Iterator[KnowledgeClient]:
    config = config or current_config()
    client = KnowledgeClient(config.url, config.token)
    try:
        yield client
    finally:
        client.close()


def call(fn: Callable[[], Any], *, what: str = "") -> Any:
    try:
        return fn()
    except ApiError as exc:
        raise api_failure(exc, what=what) from None


def emit_json(data: Any) -> None:
    click.echo(safe_json(data))


def render_table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[escape_text("" if value is None else value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines += ["  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def footer(shown: int, total: int, offset: int, label: str) -> str:
    text = f"{shown} of {total} accessible {label} entries"
    if shown:
        text += f" (rows {offset + 1}-{offset + shown})"
    return text


def fetch_page(client: KnowledgeClient, path: str, params: dict[str, Any], limit: int, offset: int) -> dict[str, Any]:
    """Rows [offset, offset+limit) from an offset-paged list, in server pages of at most 200."""
    rows: list[dict[str, Any]] = []
    total = 0
    position = offset
    while True:
        want = min(SERVER_PAGE, limit - len(rows))
        data = client.get(path, route=path, **params, limit=max(want, 1), offset=position)
        total = int(data.get("total", 0))
        batch = data.get("data") or []
        rows.extend(batch[:want])
        position += len(batch)
        if len(rows) >= limit or not batch or position >= total:
            break
    return {"total": total, "limit": limit, "offset": offset, "data": rows}


# --- the application -----------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(client_version(), "--version", prog_name="agor", message="%(prog)s %(version)s")
def main() -> None:
    """Agor Knowledge from the command line."""


@main.command()
@click.option("--url", required=True, help="The deployment, e.g. https://kb.example.com")
@click.option("--token", default=None, help="API token (prompted for when omitted, so it stays out of history).")
def login(url: str, token: str | None) -> None:
    """Check a token against the deployment and store URL + token (file mode 0600)."""
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError("--url must be an http:// or https:// address.")
    if token is None:
        # A person types it without echo; a script pipes it on stdin.
        interactive = sys.stdin.isatty()
        token = click.prompt("API token", hide_input=True, err=True) if interactive else sys.stdin.readline()
    token = (token or "").strip()
    if not token:
        raise CliError("An API token is required.")
    config = AgorConfig(url=url, token=token, source="login")
    with connected(config) as client:
        me = call(lambda: client.get("/kb/me"))
    path = save_credentials(url, token)
    click.echo(
        f"Logged in to {escape_text(url)} as {escape_text(me.get('user'))} ({escape_text(me.get('role'))}) "
        f"in workspace {escape_text(me.get('workspace'))}; server version {escape_text(me.get('version'))}."
    )
    click.echo(f"Credentials saved to {escape_text(path)} (mode 0600).", err=True)


@main.command()
def logout() -> None:
    """Forget the stored credentials."""
    removed = forget_credentials()
    click.echo("Logged out." if removed else "No stored credentials.")
    if os.environ.get("AGOR_URL") or os.environ.get("AGOR_TOKEN"):
        click.echo("AGOR_URL / AGOR_TOKEN are still set in the environment.", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def whoami(as_json: bool) -> None:
    """Who the current token acts as, and the server's version."""
    config = current_config()
    with connected(config) as client:
        me = call(lambda: client.get("/kb/me"))
    data = {
        "url": config.url,
        "user": me.get("user"),
        "workspace": me.get("workspace"),
        "role": me.get("role"),
        "server_version": me.get("version"),
        "client_version": client_version(),
        "credentials": config.source,
    }
    if as_json:
        emit_json(data)
        return
    click.echo(
        f"{escape_text(data['user'])} ({escape_text(data['role'])}) in workspace {escape_text(data['workspace'])} "
        f"at {escape_text(config.url)}; server {escape_text(data['server_version'])}, client {data['client_version']}"
    )


@main.group()
def kb() -> None:
    """Knowledge: namespaces, documents, export, import and validate."""


@kb.group()
def namespace() -> None:
    """Read namespaces (read-only)."""


@namespace.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=DEFAULT_LIMIT, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print {total, limit, offset, data}.")
def namespace_list(limit: int, offset: int, as_json: bool) -> None:
    """Namespaces you can access, sorted by slug."""
    with connected() as client:
        page = call(lambda: fetch_page(client, "/kb/namespaces", {}, limit, offset))
    if as_json:
        emit_json(page)
        return
    rows = [[ns.get(k) for k in ("slug", "effective_permission", "kind", "display_name")] for ns in page["data"]]
    if rows:
        click.echo(render_table(["SLUG", "PERMISSION", "KIND", "DISPLAY NAME"], rows))
    click.echo(footer(len(rows), page["total"], offset, "active"))


@namespace.command("show")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the namespace as JSON.")
def namespace_show(slug: str, as_json: bool) -> None:
    """One namespace's details."""
    with connected() as client:
        url = f"/kb/namespaces/{quote(slug, safe='')}"
        data = call(lambda: client.get(url, route="/kb/namespaces/{slug}"), what="Namespace")
    if as_json:
        emit_json(data)
        return
    for key in ("slug", "display_name", "description", "kind", "owner", "effective_permission", "others_can",
                "visibility_default", "archived", "created_at", "updated_at"):  # fmt: skip
        click.echo(f"{key}: {escape_text(data.get(key, ''))}")


@kb.group()
def document() -> None:
    """Read documents (read-only)."""


@document.command("list")
@click.option("--namespace", "namespace_slug", required=True, help="Namespace slug.")
@click.option("--status", type=click.Choice(["draft", "published"]), default=None)
@click.option("--archive", type=click.Choice(["active", "archived", "all"]), default="active", show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=DEFAULT_LIMIT, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print {total, limit, offset, data}.")
def document_list(
    namespace_slug: str, status: str | None, archive: str, limit: int, offset: int, as_json: bool
) -> None:
    """Documents in a namespace sorted by path, drafts you may read included; no bodies."""
    params = {
        "namespace": namespace_slug,
        "status": status,
        "archive_filter": archive,
        "order": "path",
        "include_other_user_drafts": True,
    }
    with connected() as client:
        page = call(lambda: fetch_page(client, "/kb/documents", params, limit, offset), what="Namespace")
    if as_json:
        emit_json(page)
        return
    fields = ("path", "status", "kind", "visibility")
    rows = [[*(d.get(k) for k in fields), (d.get("updated_at") or "")[:10], d.get("title")] for d in page["data"]]
    if rows:
        click.echo(render_table(["PATH", "STATUS", "KIND", "VISIBILITY", "UPDATED", "TITLE"], rows))
    label = {"active": "active", "archived": "archived", "all": "active and archived"}[archive]
    click.echo(footer(len(rows), page["total"], offset, label))


@document.command("get")
@click.argument("path")
@click.option("--namespace", "namespace_slug", required=True, help="Namespace slug.")
@click.option("--json", "as_json", is_flag=True, help="Print metadata, current version and content as JSON.")
def document_get(path: str, namespace_slug: str, as_json: bool) -> None:
    """The current markdown of one document (authorized archives included)."""
    params = {"namespace": namespace_slug, "path": path, "include_content": True, "archive_filter": "all"}
    with connected() as client:
        route = "/kb/documents/by-path"
        data = call(lambda: client.get(route, route=route, **params), what="Document")
    if as_json:
        emit_json(data)
        return
    content = data.get("content") or ""
    if sys.stdout.isatty():
        click.echo(escape_text(content, multiline=True), nl=False)
    else:
        # Byte for byte when piped or redirected.
        sys.stdout.flush()
        sys.stdout.buffer.write(content.encode("utf-8", "surrogatepass"))
        sys.stdout.buffer.flush()


# --- export, import, validate --------------------------------------------------------------


def _transfer_client(config: AgorConfig) -> KnowledgeClient:
    return KnowledgeClient(config.url, config.token, after_response=faults.after_response)


@kb.command("validate")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
def validate(directory: Path) -> None:
    """Check an export folder offline: no login, no network, no writes; prints a JSON result."""
    sys.exit(run_validate(directory))


@kb.command("export")
@click.option("--namespace", "slug", required=True, help="Source namespace slug (not an id).")
@click.option("--output", required=True, type=click.Path(path_type=Path, file_okay=False), help="Export directory.")
@click.option("--dry-run", is_flag=True, help="Plan only: no directory, no files, no bodies.")
@click.option("--resume", is_flag=True, help="Continue an interrupted export or publication.")
def export(slug: str, output: Path, dry_run: bool, resume: bool) -> None:
    """Export a namespace into a git-friendly folder (workspace admin)."""
    config = current_config()
    with _transfer_client(config) as client:
        code = run_engine(run_export, client, ExportOptions(slug=slug, output=output, dry_run=dry_run, resume=resume))
    sys.exit(code)


@kb.command("import")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--namespace", "slug", required=True, help="New destination namespace slug.")
@click.option("--apply", is_flag=True, help="Write to the deployment (the default only plans).")
@click.option("--dry-run", is_flag=True, help="Plan only (the default).")
@click.option("--resume", is_flag=True, help="Continue this import, consulting the destination's receipts.")
def import_(directory: Path, slug: str, apply: bool, dry_run: bool, resume: bool) -> None:
    """Import an export folder into a new private namespace you own (member)."""
    if apply and dry_run:
        raise click.UsageError("--apply and --dry-run are mutually exclusive.")
    config = current_config()
    with _transfer_client(config) as client:
        code = run_engine(run_import, client, ImportOptions(directory=directory, slug=slug, apply=apply, resume=resume))
    sys.exit(code)


if __name__ == "__main__":
    main(prog_name="agor")
