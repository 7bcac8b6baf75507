"""Search term rows measure document length in `knowledge.search.term_length` units.

Earlier rows held the exact count of indexed words, which changed on nearly every edit and
forced a rewrite of every term row of the document. The function is copied here so that this
migration keeps meaning what it meant when it was written.
"""

import math

from django.db import migrations

LENGTH_STEP = 1.1


def term_length(char_length: int) -> int:
    words = max(char_length / 8, 1.0)
    return round(LENGTH_STEP ** round(math.log(words, LENGTH_STEP)))


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return  # SQLite ranks with FTS5 and has no term rows
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.id, v.char_length FROM knowledge_document d "
            "JOIN knowledge_documentversion v ON v.id = d.current_version_id"
        )
        rows = cursor.fetchall()
        for start in range(0, len(rows), 1000):
            batch = rows[start : start + 1000]
            cursor.execute(
                "UPDATE knowledge_searchterm t SET doc_length = m.length "
                "FROM unnest(%s::uuid[], %s::int[]) AS m(id, length) WHERE t.document_id = m.id",
                [[row[0] for row in batch], [term_length(row[1]) for row in batch]],
            )


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0007_chunk_sync_failure")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
