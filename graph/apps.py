from django.apps import AppConfig


class GraphConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "graph"

    def ready(self) -> None:
        # Hook into knowledge's after-commit callbacks here, not in knowledge: the dependency
        # runs graph -> knowledge, never the other way round.
        from graph import hooks

        hooks.connect()
