"""Settings shared by every environment; the others only override."""

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from django.core.exceptions import ImproperlyConfigured

from config import __version__
from config.env import BASE_DIR, VAR_DIR, env
from config.yaml_config import load_yaml_config

KNOWLEDGE_VERSION = __version__

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default="insecure-local-development-key-change-me")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "workspaces",
    "knowledge",
    "graph",
    "transfer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.ReaderContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.middleware.RequestSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The planner's cost of a random page read. PostgreSQL's default of 4 models spinning disks; on
# an SSD or a cached database 1.1 is the usual setting. At 4, a rare word's ranking hashes every
# readable document (3.3 ms at 10,000) instead of probing the 30 that hold the word. Empty sends
# nothing (for poolers that refuse startup options, such as PgBouncer by default).
PG_RANDOM_PAGE_COST = env.str("PG_RANDOM_PAGE_COST", default="1.1")
# Keep the lookups every request runs (token, permissions, a document by id, a search's page) prepared on each
# connection (config/db_prepared.py). Off for poolers that cannot hold prepared statements.
PG_PREPARED_LOOKUPS = env.bool("PG_PREPARED_LOOKUPS", default=True)


def tune_postgres(database: dict[str, Any]) -> None:
    """Connection reuse, health checks and planner costs for a PostgreSQL database."""
    database.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    database["CONN_HEALTH_CHECKS"] = True
    if PG_PREPARED_LOOKUPS:
        database.setdefault("OPTIONS", {})["prepare_threshold"] = 0
    if PG_RANDOM_PAGE_COST:
        options = database.setdefault("OPTIONS", {})
        options["options"] = f"-c random_page_cost={float(PG_RANDOM_PAGE_COST)} {options.get('options', '')}".strip()


SQLITE_PATH = VAR_DIR / "knowledge.sqlite3"
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}")}
# A percent-encoded host is a Unix socket directory (postgres://user@%2Fpath%2Fto%2Fsocket/db).
DATABASES["default"]["HOST"] = unquote(DATABASES["default"].get("HOST") or "")
DATABASES["default"]["ATOMIC_REQUESTS"] = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run during a write; IMMEDIATE takes the write lock up front so
    # concurrent writers queue instead of failing on a lock upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    tune_postgres(DATABASES["default"])

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Admin messages may carry a freshly issued token: keep them server-side, not in a cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Mermaid and KaTeX for the reader pages, installed by `npm ci` (package.json); never a CDN.
STATICFILES_DIRS = [
    (prefix, folder)
    for prefix, folder in (
        ("mermaid", BASE_DIR / "node_modules" / "mermaid" / "dist"),
        ("katex", BASE_DIR / "node_modules" / "katex" / "dist"),
    )
    if folder.is_dir()
]

# Reader pages (/ui/) run no inline script; mermaid and KaTeX need inline styles.
KNOWLEDGE_READER_CSP_PATHS = ("/ui/",)
KNOWLEDGE_READER_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)

# Documents may hold up to 10 MiB of markdown; a JSON body escapes it, so the request
# limit leaves room for the encoding while the content limit itself is checked exactly.
KNOWLEDGE_MAX_CONTENT_BYTES = 10 * 1024 * 1024
KNOWLEDGE_MAX_REQUEST_BYTES = env.int("KNOWLEDGE_MAX_REQUEST_BYTES", default=32 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = KNOWLEDGE_MAX_REQUEST_BYTES
KNOWLEDGE_PUBLIC_URL = env("KNOWLEDGE_PUBLIC_URL", default="")
# Per process: the lines and outlines of versions already read, for outline and range reads.
KNOWLEDGE_VERSION_CACHE_BYTES = env.int("KNOWLEDGE_VERSION_CACHE_BYTES", default=64 * 1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "workspaces.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["workspaces.api.permissions.IsWorkspaceMember"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "config.schema.KnowledgeAutoSchema",
    "EXCEPTION_HANDLER": "config.exception_handler.domain_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Knowledge API",
    "DESCRIPTION": "Markdown documents in namespaces, with immutable versions, ACLs and archive/restore.",
    "VERSION": __version__,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "VisibilityEnum": ["public", "private"],
        "NamespaceKindEnum": ["global", "system", "user", "repo", "branch", "team"],
        "OthersCanEnum": ["none", "read", "write"],
        "PermissionEnum": ["none", "read", "write", "own"],
        "GrantEnum": ["read", "write", "own"],
        "DocumentKindEnum": ["doc", "memory", "skill", "prompt", "guide", "decision", "bundle", "external"],
        "DocumentStatusEnum": ["draft", "published"],
        "EditPolicyEnum": ["owner", "public", "admins"],
        "ArchiveFilterEnum": ["active", "archived", "all"],
        "BulkResultStatusEnum": ["archived", "restored", "unchanged", "error"],
    },
}

CELERY_BROKER_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ACKS_LATE = True  # embedding work is fenced by claims, so redelivery after a crash is safe
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the database connection around every task unless this is set, so a
# worker would open a PostgreSQL session (a backend fork and cold catalog caches) for each
# after-save task. It then closes only every this many tasks; config.celery_app applies Django's
# own per-request rules (CONN_MAX_AGE, errors, health checks) around each task instead.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_BEAT_SCHEDULE = {
    # Redis only wakes workers; this poll recovers expired leases and work whose wake-up was lost.
    "poll-embeddings": {
        "task": "knowledge.tasks.poll_embeddings_task",
        "schedule": env.float("KNOWLEDGE_EMBEDDING_POLL_SECONDS", default=15.0),
    },
}

# Semantic search. "single": one workspace's policy batch size (1-128) per claim;
# "required_from_auth": many workspaces share workers, each capped per batch and per scan.
KNOWLEDGE_WORKSPACE_MODE = env("KNOWLEDGE_WORKSPACE_MODE", default="single")
if KNOWLEDGE_WORKSPACE_MODE not in ("single", "required_from_auth"):
    raise ImproperlyConfigured("KNOWLEDGE_WORKSPACE_MODE must be 'single' or 'required_from_auth'.")
KNOWLEDGE_EMBEDDING_LEASE_SECONDS = env.int("KNOWLEDGE_EMBEDDING_LEASE_SECONDS", default=120)
KNOWLEDGE_EMBEDDING_TIMEOUT = env.float("KNOWLEDGE_EMBEDDING_TIMEOUT", default=30.0)
# Batches one embedding message runs before handing over (0: only its 20 s budget; shared mode: 1).
KNOWLEDGE_EMBEDDING_SLICE_BATCHES = env.int("KNOWLEDGE_EMBEDDING_SLICE_BATCHES", default=0)
# Cool-down before the poll's sweep retries a failed chunk or a failed chunk sync.
KNOWLEDGE_EMBEDDING_FAILED_RETRY_SECONDS = env.float("KNOWLEDGE_EMBEDDING_FAILED_RETRY_SECONDS", default=900.0)
KNOWLEDGE_RRF_K = env.int("KNOWLEDGE_RRF_K", default=60)

# Optional deployment file; its old `knowledge:` block is refused (settings are per workspace now).
_config_file = env("KNOWLEDGE_CONFIG_FILE", default=str(BASE_DIR / "config.yaml"))
DEPLOYMENT_CONFIG = load_yaml_config(Path(_config_file) if _config_file else None)

# AES-256-GCM keys for stored provider secrets, newest first (base64, 32 bytes each). Old keys
# keep decrypting until every ciphertext has been re-sealed with the newest one.
KNOWLEDGE_SECRET_KEYS = env.list("KNOWLEDGE_SECRET_KEYS", default=[])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

STATIC_ROOT.mkdir(parents=True, exist_ok=True)
