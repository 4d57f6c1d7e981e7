"""Settings for deepwork-server, driven by environment variables.

The embedded default is one SQLite file in the data folder (``VAR_DIR``) shared by every
``mcpserve`` process and the web process; ``DATABASE_URL`` points at PostgreSQL for scale and
``REDIS_URL`` turns on the channels-redis layer.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url

from deepwork_site import process
from deepwork_site.sqlite_files import private_file, private_folder

BASE_DIR = process.BASE_DIR
SITE_DIR = Path(__file__).resolve().parent


def _var_dir() -> Path:
    """The data folder (database, secret key, caches): ``DEEPWORK_VAR_DIR`` if set; a clone's
    ``var/``; else the user's data folder (``~/.local/share/deepwork-server`` on Linux), never
    site-packages, which may be read-only, shared or replaced by the next upgrade."""
    if named := os.environ.get("DEEPWORK_VAR_DIR"):
        return Path(named).expanduser().absolute()
    if process.running_from_clone():
        return BASE_DIR / "var"
    import platformdirs  # only installed copies need it

    return Path(platformdirs.user_data_dir("deepwork-server", appauthor=False))


VAR_DIR = _var_dir()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.strip().lower() == "none":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number or None, got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _secret_key() -> str:
    """Read SECRET_KEY from the environment, else from a per-install file made on first use.

    No secret is ever committed: a fresh install generates its own key in its data folder.
    """
    if key := os.environ.get("SECRET_KEY"):
        return key
    key_file = VAR_DIR / "secret_key"
    try:
        key = key_file.read_text().strip()
    except FileNotFoundError:
        key = ""
    if key:
        private_file(key_file)  # an older install may have left it readable by others
        return key
    private_folder(VAR_DIR)
    return _secret_key_write(key_file)


def _secret_key_write(key_file: Path) -> str:
    """Make the key file whole or not at all: the key is written to a private temporary file
    first, which then takes the file's name, so no process ever reads a half-written or empty
    key. Linking fails if another process starting at the same moment got there first, and
    then its key is the one everyone uses (renaming would replace it)."""
    key = secrets.token_urlsafe(50)
    fd, temporary = tempfile.mkstemp(dir=VAR_DIR, prefix=".secret_key.")  # 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, key_file)
        except FileExistsError:
            if existing := key_file.read_text().strip():
                return existing
            # Empty: an older version crashed between creating the file and writing it.
            os.replace(temporary, key_file)
        return key
    finally:
        Path(temporary).unlink(missing_ok=True)


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

ALL_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Serves /api/docs from its bundled Swagger UI files instead of a CDN (works offline).
    "ninja",
    "workflows",
    "tracker",
    "dag",
    "workflow_tools",
    "reviews",
    "insights",
    "mcp_bridge",
    "dashboard",
    "accounts",
    "api",
]
# What `deepwork-server mcp` (`manage.py mcpserve`) loads: the models its tools use and nothing
# of the web stack (admin, ninja, the dashboard, the API), whose imports an agent would wait for
# at every start.
# Its first-run migration still migrates ALL_APPS, in a child process (mcp_bridge/migrate.py).
MCP_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "workflows",
    "tracker",
    "dag",
    "workflow_tools",
    "reviews",
    # The event writer counts the insight tallies with every event it writes.
    "insights",
    "mcp_bridge",
]
# Set by the entry point (deepwork_site.cli) before these settings are read.
SERVING_MCP = process.serving_mcp()
INSTALLED_APPS = MCP_APPS if SERVING_MCP else ALL_APPS

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "deepwork_site.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "deepwork_site.urls"
ASGI_APPLICATION = "deepwork_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # A checkout's top-level templates/; installed, the same files inside the package.
        "DIRS": [
            BASE_DIR / "templates" if process.running_from_clone() else SITE_DIR / "templates"
        ],
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

# SQLite settings that let several processes share one file: WAL so readers never block the
# writer, IMMEDIATE so a write transaction takes the lock up front instead of failing on upgrade,
# and a generous busy timeout so a second writer waits instead of erroring.
# DEEPWORK_SQLITE_BUSY_TIMEOUT (seconds) shortens that wait, e.g. for tests of a busy database.
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": float(os.environ.get("DEEPWORK_SQLITE_BUSY_TIMEOUT") or 30),
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


# Django's SQLite backend, keeping each statement's rewritten placeholders (see its module).
SQLITE_ENGINE = "deepwork_site.sqlite_backend"


def _database() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    config: dict[str, Any]
    if not url:
        private_folder(VAR_DIR)
        config = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "deepwork.sqlite3"),
        }
    else:
        config = dict(dj_database_url.parse(url, conn_max_age=0))
    # Reopening a connection costs more than most of our queries (and, for SQLite, rereads the
    # WAL settings and checkpoints on close): keep connections open, checked before reuse.
    config["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", None)
    config["CONN_HEALTH_CHECKS"] = True
    if config["ENGINE"] in ("django.db.backends.sqlite3", SQLITE_ENGINE):
        config["ENGINE"] = SQLITE_ENGINE
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
        # A file, not ":memory:", so that an mcpserve subprocess started by a test sees the
        # same test database as the test itself; one per test run, so two runs never collide.
        config["TEST"] = {"NAME": str(VAR_DIR / f"test_deepwork_{os.getpid()}.sqlite3")}
    elif config["ENGINE"] == "django.db.backends.postgresql":
        options = config.setdefault("OPTIONS", {})
        if env_bool("DEEPWORK_PG_PREPARED", True):
            # A transition sends a dozen small statements, the same ones every time, and
            # PostgreSQL plans each anew unless it is prepared: planning was most of the
            # database's time per call. Parameters bound on the server let psycopg prepare a
            # statement on a connection once it has run five times. Off for a pooler that
            # cannot keep prepared statements (PgBouncer before 1.21 in transaction mode).
            options.setdefault("server_side_binding", True)
            options.setdefault("prepare_threshold", 5)
        if lock_timeout := os.environ.get("DEEPWORK_PG_LOCK_TIMEOUT"):
            # PostgreSQL waits for a lock forever unless told otherwise, e.g. "5s" or "200ms".
            current = options.get("options", "")
            options["options"] = f"{current} -c lock_timeout={lock_timeout}".strip()
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ATOMIC_REQUESTS = False

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

NINJA_PAGINATION_PER_PAGE = 50
NINJA_PAGINATION_MAX_LIMIT = 500

# How often each web process reads the Event outbox for live updates when no announcement
# arrives (seconds). With REDIS_URL, announcements make most reads immediate.
DEEPWORK_OUTBOX_POLL_SECONDS = float(os.environ.get("DEEPWORK_OUTBOX_POLL_SECONDS", "0.25"))

# Multi-agent DAG workflows: an agent gets steps while its lease runs. An agent renewed only by
# its own calls (hosted /mcp) holds a lease of RESPONSIVE seconds; one a running mcpserve holds
# (renewed by its heartbeat thread every third of it) a lease of LEASE seconds, at most
# RESPONSIVE. A waiting agent (await_assignment) looks for work every POLL seconds.
DEEPWORK_AGENT_RESPONSIVE_SECONDS = float(
    os.environ.get("DEEPWORK_AGENT_RESPONSIVE_SECONDS") or 300
)
DEEPWORK_AGENT_LEASE_SECONDS = float(os.environ.get("DEEPWORK_AGENT_LEASE_SECONDS") or 30)
DEEPWORK_AGENT_POLL_SECONDS = float(os.environ.get("DEEPWORK_AGENT_POLL_SECONDS") or 0.02)

# Messages live in the session, not in a readable cookie: the admin's "new API token" message
# carries the token's secret once.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# Behind HTTPS (a proxy terminating TLS), set DEEPWORK_HTTPS=true: cookies become Secure, the
# proxy's X-Forwarded-Proto is trusted, and browsers are told to stay on HTTPS.
HTTPS = env_bool("DEEPWORK_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
# Origins allowed to post forms and open the live socket besides the server's own address,
# e.g. "https://deepwork.example.com" behind a proxy that rewrites Host.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        # stderr, always: stdout of mcpserve carries the MCP protocol.
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
        },
    },
    "root": {"handlers": ["stderr"], "level": os.environ.get("DEEPWORK_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
    },
}
