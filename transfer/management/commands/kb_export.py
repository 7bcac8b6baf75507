"""manage.py kb_export: `agor kb export` against this deployment (or --url)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from transfer.exporter import ExportOptions, run_export
from transfer.management.base import add_deployment_arguments, deployment_client, streams
from transfer.runner import run_engine


class Command(BaseCommand):
    help = "Export a namespace into a git-friendly folder (repository format v2); needs a workspace admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--namespace", required=True, help="Source namespace slug.")
        parser.add_argument("--output", required=True, help="Export directory (created 0700).")
        parser.add_argument("--dry-run", action="store_true", help="Plan only; write nothing.")
        parser.add_argument("--resume", action="store_true", help="Continue an interrupted export or publication.")
        add_deployment_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        out, err = streams(self)
        export = ExportOptions(
            slug=options["namespace"],
            output=Path(options["output"]),
            dry_run=options["dry_run"],
            resume=options["resume"],
        )
        with deployment_client(options, purpose="kb_export") as client:
            code = run_engine(run_export, client, export, out=out, err=err)
        if code:
            sys.exit(code)
