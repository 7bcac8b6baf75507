"""Rebuild the `references` graph from every document's current version."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graph import services
from workspaces.models import Namespace, Workspace


class Command(BaseCommand):
    help = (
        "Re-sync every document's outgoing `references` edges and pending links (all documents, or one "
        "namespace's). Explicit edges of other types are kept. Prints a JSON summary."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--namespace", help="Only documents of this namespace slug.")
        parser.add_argument("--workspace", help="Only this workspace slug (needed when slugs repeat).")

    def handle(self, *args: Any, **options: Any) -> None:
        namespace, workspace = options.get("namespace"), options.get("workspace")
        if workspace and not Workspace.objects.filter(slug=workspace).exists():
            raise CommandError(f"No workspace '{workspace}'.")
        if namespace:
            namespaces = Namespace.objects.filter(slug=namespace)
            if workspace:
                namespaces = namespaces.filter(workspace__slug=workspace)
            if not namespaces.exists():
                raise CommandError(f"No namespace '{namespace}'.")

        def progress(done: int) -> None:
            if done % 500 == 0:
                self.stderr.write(f"reconciled {done} documents")

        summary = services.links_reconcile(namespace=namespace, workspace=workspace, progress=progress)
        self.stdout.write(json.dumps(summary, sort_keys=True))
        if summary["failed"]:
            self.stderr.write(f"{summary['failed']} documents failed; see the log. Run the command again to retry.")
