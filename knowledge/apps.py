from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "knowledge"

    def ready(self) -> None:
        from knowledge import hooks
        from knowledge.embeddings import hooks as embedding_hooks

        hooks.connect()
        embedding_hooks.connect()
