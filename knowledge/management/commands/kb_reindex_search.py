"""Rebuild the full-text index from each document's current version."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from knowledge.models import Document
from knowledge.search import index_document


class Command(BaseCommand):
    help = "Rebuild the text-search index (all documents, or one namespace's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--namespace", help="Only this namespace slug.")

    def handle(self, *args: Any, **options: Any) -> None:
        documents = Document.objects.select_related("current_version").order_by("pk")
        if options.get("namespace"):
            documents = documents.filter(namespace__slug=options["namespace"])
        count = 0
        for document in documents.iterator(chunk_size=200):
            with transaction.atomic():
                index_document(document, document.current_version.content, from_scratch=True)
            count += 1
            if count % 500 == 0:
                self.stderr.write(f"indexed {count} documents")
        self.stdout.write(f"Indexed {count} documents.")
