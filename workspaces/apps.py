from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workspaces"

    def ready(self) -> None:
        from config import db_loaders
        from workspaces.api import schema  # noqa: F401 - registers the OpenAPI auth extension

        db_loaders.connect()
