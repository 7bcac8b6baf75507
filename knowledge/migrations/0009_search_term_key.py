"""A document's term rows are keyed by (document, lexeme): a revision finds the rows it changes
through this index instead of scanning all of the document's terms."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0008_term_length_steps"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="searchterm",
            constraint=models.UniqueConstraint(fields=("document", "lexeme"), name="searchterm_document_lexeme"),
        ),
        migrations.RemoveIndex(
            model_name="searchterm",
            name="searchterm_document",
        ),
    ]
