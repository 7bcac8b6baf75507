"""PostgreSQL: a covering index for the access filter, so that search scopes and list counts
are read from the index alone."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0014_term_statistics"),
        ("workspaces", "0003_semantic_policy"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                fields=["namespace", "archived"],
                include=("id", "status", "visibility", "created_by", "kind", "current_version"),
                name="document_scope",
            ),
        ),
    ]
