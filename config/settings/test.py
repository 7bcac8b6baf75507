"""Test settings: fast hashing, eager Celery, database from DATABASE_URL (SQLite by default)."""

import os
import tempfile
from pathlib import Path

from config.settings.base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file (not :memory:) so live-server threads get their own connections, as in production;
    # one per test run, so concurrent runs never share it.
    _run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"kb-test-{_run}.sqlite3")}  # noqa: F405
