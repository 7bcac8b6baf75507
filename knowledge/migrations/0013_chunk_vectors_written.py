"""PostgreSQL: the statement that writes a chunk row computes its tsvector (no longer generated).

Computing tsvectors is most of the cost of a large write (about a second for the ~7,000 chunks
of a 10 MiB body on one core). A generated column is computed by the inserting backend alone;
a plain one lets a second connection compute half of a large write's vectors at the same time
(`knowledge.search._insert_chunks`). Existing rows keep their vectors; NOT NULL makes a write
that forgets one fail instead of leaving an unsearchable chunk.
"""

from django.db import migrations

FORWARD = [
    "ALTER TABLE knowledge_searchchunk ALTER COLUMN search_vector DROP EXPRESSION",
    "ALTER TABLE knowledge_searchchunk ALTER COLUMN search_vector SET NOT NULL",
]
BACKWARD = [
    "DROP INDEX IF EXISTS knowledge_searchchunk_vector",
    "ALTER TABLE knowledge_searchchunk DROP COLUMN IF EXISTS search_vector",
    """ALTER TABLE knowledge_searchchunk ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title), 'A')
        || setweight(to_tsvector('english', path_text), 'B')
        || setweight(to_tsvector('english', text), 'D')
    ) STORED""",
    "CREATE INDEX knowledge_searchchunk_vector ON knowledge_searchchunk USING gin (search_vector)",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0012_large_writes")]

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD))]
