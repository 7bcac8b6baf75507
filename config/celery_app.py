"""Celery application. Tasks run eagerly in the embedded default and in tests."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("knowledge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    """Treat a worker's task like a request: keep the connection (see CELERY_DB_REUSE_MAX) unless it
    is past CONN_MAX_AGE, has failed or was left outside autocommit; with CONN_HEALTH_CHECKS a kept
    one is pinged before its next use, so a session the server dropped is replaced, not used.

    An eager task runs inside its caller (a request, a test), whose connection is not ours to close.
    """
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
