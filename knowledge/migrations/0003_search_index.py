"""The full-text index beside SearchChunk: FTS5 on SQLite, tsvector + GIN on PostgreSQL."""

from django.db import migrations

SQLITE_FORWARD = [
    """CREATE VIRTUAL TABLE knowledge_search_fts USING fts5(
        title, path_text, text,
        content='knowledge_searchchunk', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )""",
    # Title matches weigh 8x and path matches 4x a body match; `rank` then means this bm25.
    "INSERT INTO knowledge_search_fts(knowledge_search_fts, rank) VALUES ('rank', 'bm25(8.0, 4.0, 1.0)')",
    """CREATE TRIGGER knowledge_searchchunk_ai AFTER INSERT ON knowledge_searchchunk BEGIN
        INSERT INTO knowledge_search_fts(rowid, title, path_text, text)
        VALUES (new.id, new.title, new.path_text, new.text);
    END""",
    """CREATE TRIGGER knowledge_searchchunk_ad AFTER DELETE ON knowledge_searchchunk BEGIN
        INSERT INTO knowledge_search_fts(knowledge_search_fts, rowid, title, path_text, text)
        VALUES ('delete', old.id, old.title, old.path_text, old.text);
    END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS knowledge_searchchunk_ad",
    "DROP TRIGGER IF EXISTS knowledge_searchchunk_ai",
    "DROP TABLE IF EXISTS knowledge_search_fts",
]
POSTGRES_FORWARD = [
    """ALTER TABLE knowledge_searchchunk ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title), 'A')
        || setweight(to_tsvector('english', path_text), 'B')
        || setweight(to_tsvector('english', text), 'D')
    ) STORED""",
    "CREATE INDEX knowledge_searchchunk_vector ON knowledge_searchchunk USING gin (search_vector)",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS knowledge_searchchunk_vector",
    "ALTER TABLE knowledge_searchchunk DROP COLUMN IF EXISTS search_vector",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_search_chunks")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
