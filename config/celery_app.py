"""Celery application. Tasks run eagerly in the embedded default and in tests."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("knowledge")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
