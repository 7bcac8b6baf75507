"""Shared plumbing for kb_export / kb_import: the same engines as `agor`, against any deployment.

By default they talk to this deployment in-process: a short-lived token is issued for
--workspace/--user, requests go through the WSGI application (every permission and limit
applies exactly as over HTTP), and the token is revoked afterwards. --url with --token (or the
stored `agor login` credentials) targets a remote deployment instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.wsgi import get_wsgi_application

from mcp_bridge.config import load_config
from transfer import faults
from transfer.client import KnowledgeClient
from workspaces.models import Membership, Workspace
from workspaces.services import token_issue, token_revoke

LOCAL_URL = "http://localhost"


def streams(command: BaseCommand) -> tuple[Any, Any]:
    """The raw streams behind Django's OutputWrapper (progress redraws need exact writes)."""
    return getattr(command.stdout, "_out", sys.stdout), getattr(command.stderr, "_out", sys.stderr)


def add_deployment_arguments(parser: CommandParser) -> None:
    parser.add_argument("--workspace", help="Local deployment: the workspace slug to act in.")
    parser.add_argument("--user", help="Local deployment: the username to act as.")
    parser.add_argument("--url", help="A remote deployment instead of this one.")
    parser.add_argument("--token", help="API token for --url (default: AGOR_TOKEN or the agor login file).")


@contextmanager
def deployment_client(options: dict[str, Any], *, purpose: str) -> Iterator[KnowledgeClient]:
    if options.get("url"):
        token = options.get("token") or load_config().token
        if not token:
            raise CommandError("--url needs --token (or AGOR_TOKEN, or `agor login`).")
        with KnowledgeClient(options["url"], token, after_response=faults.after_response) as client:
            yield client
        return
    if not options.get("workspace") or not options.get("user"):
        raise CommandError("Give --workspace and --user to act on this deployment (or --url for another one).")
    workspace = Workspace.objects.filter(slug=options["workspace"]).first()
    user = get_user_model().objects.filter(username=options["user"]).first()
    if workspace is None or user is None or not Membership.objects.filter(workspace=workspace, user=user).exists():
        raise CommandError("No such member: check --workspace and --user.")
    token, raw = token_issue(user=user, workspace=workspace, name=f"{purpose} (management command)")
    transport = httpx2.WSGITransport(app=get_wsgi_application())
    try:
        with KnowledgeClient(LOCAL_URL, raw, transport=transport, after_response=faults.after_response) as client:
            yield client
    finally:
        token_revoke(token=token)
