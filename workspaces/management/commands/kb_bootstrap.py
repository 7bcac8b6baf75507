"""Create a workspace, user and membership if missing, then print a fresh API token as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.exceptions import DomainError
from workspaces.models import Role, slug_validator
from workspaces.services import membership_set, token_issue, user_ensure, workspace_ensure


class Command(BaseCommand):
    help = (
        "Idempotently ensure a workspace, a user and the user's role, then print "
        '{"workspace", "user", "role", "token"} with a new API token.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace slug.")
        parser.add_argument("--user", required=True, help="Username.")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--password", help="Set this password (for the admin and the browser).")
        parser.add_argument("--staff", action="store_true", help="Let the user sign in to the admin.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            slug_validator(options["workspace"])
        except Exception as exc:
            raise CommandError(f"Invalid workspace slug: {options['workspace']!r}") from exc
        workspace = workspace_ensure(slug=options["workspace"])
        user = user_ensure(username=options["user"], password=options.get("password"), is_staff=options["staff"])
        try:
            membership_set(workspace=workspace, user=user, role=options["role"])
            _, raw = token_issue(user=user, workspace=workspace, name="kb_bootstrap")
        except DomainError as exc:
            raise CommandError(f"{exc.message} ({exc.code})") from exc
        payload = {"workspace": workspace.slug, "user": user.username, "role": options["role"], "token": raw}
        self.stdout.write(json.dumps(payload))
