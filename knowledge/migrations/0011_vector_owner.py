"""Vectors carry their chunk's document and version (see embeddings/store.py, DOCUMENT_INDEX).

Databases whose vector table predates the columns get them here, filled from the chunks; a
database without the table (SQLite, PostgreSQL without pgvector) has nothing to do. The update
rewrites every vector row, HNSW entries included: allow minutes per 100,000 vectors.
"""

from django.db import migrations


def add_vector_owner(apps, schema_editor):
    from knowledge.embeddings import store

    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [store.TABLE])
        if not cursor.fetchone()[0]:
            return
        cursor.execute(f"ALTER TABLE {store.TABLE} ADD COLUMN IF NOT EXISTS document_id uuid")
        cursor.execute(f"ALTER TABLE {store.TABLE} ADD COLUMN IF NOT EXISTS version_id uuid")
        cursor.execute(
            f"UPDATE {store.TABLE} v SET document_id = c.document_id, version_id = c.version_id "
            "FROM knowledge_embeddingchunk c WHERE c.id = v.chunk_id AND (v.document_id IS NULL OR v.version_id IS NULL)"
        )
        cursor.execute(store.DOCUMENT_INDEX)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0010_search_chunks_inline")]

    operations = [migrations.RunPython(add_vector_owner, migrations.RunPython.noop)]
