"""Prepare the embedded default for `make run`: demo workspace, admin user, a fresh token."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from knowledge.models import Document
from knowledge.services import document_create
from workspaces.access import actor_for
from workspaces.models import Namespace, Role
from workspaces.services import membership_set, namespace_create, token_issue, user_ensure, workspace_ensure

WELCOME = """# Welcome to Knowledge

This is the demo workspace. Documents live in namespaces, every save is an immutable
version, and agents reach everything here through the MCP bridge.

- Browse the API at `/kb/docs`.
- Manage namespaces in the admin at `/admin/`.
"""


class Command(BaseCommand):
    help = "Ensure the demo workspace and admin user exist, then print the login and a new API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", default="demo")
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        password_file = settings.VAR_DIR / "admin-password"
        if password_file.exists():
            password = password_file.read_text().strip()
        else:
            password = secrets.token_urlsafe(12)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
        workspace = workspace_ensure(slug=options["workspace"], name="Demo")
        user = user_ensure(username=options["username"], password=password, is_staff=True, is_superuser=True)
        membership_set(workspace=workspace, user=user, role=Role.OWNER)
        actor = actor_for(user, workspace)
        namespace = Namespace.objects.filter(workspace=workspace, slug="handbook").first()
        if namespace is None:
            namespace = namespace_create(actor=actor, slug="handbook", display_name="Handbook", others_can="read")
        if not Document.objects.filter(namespace=namespace).exists():
            document_create(actor=actor, namespace=namespace, path="welcome.md", content=WELCOME)
        _, token = token_issue(user=user, workspace=workspace, name="make run")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"  Admin login   {user.username} / {password}   (stored in {password_file})",
                    f"  Workspace     {workspace.slug}",
                    f"  API token     {token}",
                    f'  Try           curl -H "Authorization: Bearer {token}" http://HOST:PORT/kb/namespaces',
                    "",
                ]
            )
        )
