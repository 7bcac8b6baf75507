"""Cheaper large writes on PostgreSQL.

- Version bodies are stored out of line without compression (STORAGE EXTERNAL). Compressing a
  10 MiB body costs about 240 ms of every save, while the body is a small share of the
  database (search and embedding chunks dwarf it), and uncompressed bodies read back faster.
  Rows written before keep their compressed form.
- The search chunks' index on document alone goes: the (document, ordinal) index serves the
  same lookups, and every chunk row written paid for both. SQLite keeps it: changing a foreign
  key there rebuilds the table, which would drop the FTS5 triggers on it.
"""

from django.db import migrations, models

CHUNK_DOCUMENT_INDEX = "knowledge_searchchunk_document_id_575885a2"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE knowledge_documentversion ALTER COLUMN content SET STORAGE EXTERNAL")
    schema_editor.execute(f"DROP INDEX IF EXISTS {CHUNK_DOCUMENT_INDEX}")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE knowledge_documentversion ALTER COLUMN content SET STORAGE EXTENDED")
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {CHUNK_DOCUMENT_INDEX} ON knowledge_searchchunk (document_id)")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0011_vector_owner")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="searchchunk",
                    name="document",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="search_chunks",
                        to="knowledge.document",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
