"""Test settings with a private SQLite test database file.

Several engineers run tests on this machine at once; `config.settings.test` puts every SQLite test
database at var/test.sqlite3, so concurrent runs would flush each other's data. Use with
`pytest --ds=tests.transfer.isolated_settings` when sharing a machine; CI uses the normal settings.
"""

import os

from config.settings.test import *  # noqa: F403

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("KB_TEST_SQLITE", "/tmp/kb-transfer-test.sqlite3")}  # noqa: F405
