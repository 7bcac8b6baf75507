"""manage.py kb_validate: `agor kb validate` (offline: no deployment, no network, no writes)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from transfer.management.base import streams
from transfer.runner import run_validate


class Command(BaseCommand):
    help = "Validate an export folder offline and print its JSON summary."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")

    def handle(self, *args: Any, **options: Any) -> None:
        out, err = streams(self)
        code = run_validate(Path(options["directory"]), out=out, err=err)
        if code:
            sys.exit(code)
