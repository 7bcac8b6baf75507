"""manage.py kb_import: `agor kb import` against this deployment (or --url)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from transfer.importer import ImportOptions, run_import
from transfer.management.base import add_deployment_arguments, deployment_client, streams
from transfer.runner import run_engine


class Command(BaseCommand):
    help = "Import an export folder into a new private namespace owned by --user; plans only unless --apply."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", help="The export folder (or a git clone of it).")
        parser.add_argument("--namespace", required=True, help="New destination namespace slug.")
        parser.add_argument("--apply", action="store_true", help="Write (the default only plans).")
        parser.add_argument("--dry-run", action="store_true", help="Plan only (the default).")
        parser.add_argument("--resume", action="store_true", help="Continue this import using destination receipts.")
        add_deployment_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["apply"] and options["dry_run"]:
            raise CommandError("--apply and --dry-run are mutually exclusive.")
        out, err = streams(self)
        plan = ImportOptions(
            directory=Path(options["directory"]),
            slug=options["namespace"],
            apply=options["apply"],
            resume=options["resume"],
        )
        with deployment_client(options, purpose="kb_import") as client:
            code = run_engine(run_import, client, plan, out=out, err=err)
        if code:
            sys.exit(code)
