"""Settings, all read from the environment through config/env.py (see docs/operations.md, "Settings").

With nothing set, the project runs embedded: SQLite and a filesystem Celery broker under var/,
DEBUG on and a secret key generated into var/. Production sets DEBUG=false, SECRET_KEY,
ALLOWED_HOSTS, DATABASE_URL and REDIS_URL.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext
from csp.constants import NONE, SELF
from kombu import Queue

from config.env import (
    ImproperlyConfiguredEnv,
    db_config,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    persistent_secret_key,
)
from mcptax.outbound import parse_networks

# django-stubs types admin classes and forms as generic over their model (ModelAdmin[Team]);
# this makes Django's classes subscriptable at run time too, so the typed code runs as written.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfiguredEnv("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = persistent_secret_key(VAR_DIR)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Empty: notification links use the address of the request that opened the alert, else
# dashboard.origin.DEFAULT_SITE_URL (the embedded run sets it to the address it serves on).
SITE_URL = env_str("SITE_URL", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",
    "csp",
    "axes",
    "dashboard",
    "ingest",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Pages (and their chart figures, which travel in the page) gzip-compressed for a client that
    # accepts it; static files arrive already compressed from WhiteNoise and pass through. Django
    # pads each compressed response with random bytes against BREACH-style length guessing.
    "django.middleware.gzip.GZipMiddleware",
    "csp.middleware.CSPMiddleware",
    "config.middleware.RejectNulMiddleware",
    # Before the session: a database or broker outage anywhere further in answers 503.
    "dashboard.system.middleware.OutageMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "dashboard.origin.RequestOriginMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "builtins": ["template_partials.templatetags.partials"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.teams.context_processors.navigation",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
DATABASES = {"default": db_config(DATABASE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded run has a web server and a worker writing at once: WAL plus IMMEDIATE
    # transactions turn "database is locked" errors into short waits.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one username from
# one address, that pair is refused, even with the right password, until LOGIN_COOLOFF_MINUTES
# have passed since the last failure. A success resets the count. Records are rows in the
# database, so every web process sees the same count. API tokens do not pass through here.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("LOGIN_THROTTLE", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
# No "AXES: BEGIN version ..." INFO line at every start of every command (lockouts still log).
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names, gzip, cached for good (dashboard.staticstorage): strict in production; in
    # development once collectstatic has run, plain names for anything not collected or edited since.
    "staticfiles": {"BACKEND": "dashboard.staticstorage.StaticStorage", "OPTIONS": {"development": DEBUG}},
}
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
UPLOAD_DIR = MEDIA_ROOT / "uploads"
# The files ingest jobs read (uploads, queued API bodies, whole over-long lines): one storage every
# host shares. Unset INGEST_S3_BUCKET keeps them under MEDIA_ROOT (one host: the embedded run);
# set, they go to that S3-compatible bucket (MinIO in docker-compose.yml). Keys unset: boto3's own
# chain (AWS_ACCESS_KEY_ID, an instance role). See ingest/capture/storage.py.
INGEST_S3_BUCKET = env_str("INGEST_S3_BUCKET")
if INGEST_S3_BUCKET:
    INGEST_S3_ENDPOINT_URL = env_str("INGEST_S3_ENDPOINT_URL")
    STORAGES["ingest"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": INGEST_S3_BUCKET,
            "endpoint_url": INGEST_S3_ENDPOINT_URL or None,
            "access_key": env_str("INGEST_S3_ACCESS_KEY_ID") or None,
            "secret_key": env_str("INGEST_S3_SECRET_ACCESS_KEY") or None,
            "region_name": env_str("INGEST_S3_REGION", "us-east-1"),
            "location": env_str("INGEST_S3_PREFIX", "").strip("/"),
            # MinIO and most self-hosted stores want bucket names in the path, not the host name.
            "addressing_style": "path" if INGEST_S3_ENDPOINT_URL else None,
            # Anything django-storages buffers itself rolls over to disk past 2 MiB.
            "max_memory_size": 2 * 1024 * 1024,
        },
    }
else:
    # No location: it follows MEDIA_ROOT (also when a test changes it).
    STORAGES["ingest"] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 32 * 1024 * 1024)

# Security: strict by default once DEBUG is off; each can be relaxed for a TLS-terminating proxy.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp) on every response: scripts, styles and everything else only
# from our own origin, no inline script or style, no eval. Pages keep their JavaScript in static/js
# (chart data travels as json_script JSON), htmx's own indicator <style> is switched off in
# base.html, and plotly.js (its basic-shape bundle needs no eval) draws through the CSSOM, which
# the policy allows.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Email: console in the embedded run, SMTP when EMAIL_HOST is set.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "mcp-tax@localhost")
# Where the file backend (django.core.mail.backends.filebased.EmailBackend, which the embedded run
# `make run` / `make serve` uses when neither EMAIL_HOST nor EMAIL_BACKEND is set) writes messages.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))

# Celery. Unset REDIS_URL means the embedded filesystem broker, so a laptop needs no services.
REDIS_URL = env_str("REDIS_URL")
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND: str | None = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)
    }
else:
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    # The filesystem transport ignores the host; naming one keeps kombu from warning "No hostname
    # was supplied" on every command that sends a task.
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_RESULT_BACKEND = None
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # One folder for both directions: the producer's "out" is the consumer's "in".
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # Broadcast (worker control) messages; the default would be ./control in the project root.
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Beat's dispatcher tick (seconds): each tick sends the polls falling due before the next one,
# each with its exact ETA, so a poll starts on time, not up to a tick late.
POLL_DISPATCH_EVERY = 15.0
# Watched folders are read on the disk of the worker that scans them: INGEST_WATCH_QUEUE names the
# queue the scan goes to, so only the worker of the host holding the logs consumes it (for
# example `-Q ingest,watch-logs1`).
INGEST_WATCH_QUEUE = env_str("INGEST_WATCH_QUEUE").strip() or "ingest"
# Three work queues that scale independently, and the default one. Each queue needs its own routing
# key: left out, Celery binds every queue with the default key "celery" on the same direct exchange,
# and one message would land in all of them.
CELERY_TASK_QUEUES = [
    Queue(name, routing_key=name)
    for name in ["poll", "ingest", "notify", "celery"]
    + ([INGEST_WATCH_QUEUE] if INGEST_WATCH_QUEUE != "ingest" else [])
]
# Task names are import paths (dashboard/tasks.py, ingest/tasks.py); a test checks each resolves.
CELERY_TASK_ROUTES = {
    "dashboard.tasks.poll_server": {"queue": "poll"},
    "dashboard.tasks.dispatch_due_polls": {"queue": "poll"},
    # An exact name wins over the pattern below.
    "ingest.tasks.scan_watched_folders": {"queue": INGEST_WATCH_QUEUE},
    "ingest.tasks.*": {"queue": "ingest"},
    "dashboard.tasks.deliver_notification": {"queue": "notify"},
    "dashboard.tasks.sweep_notifications": {"queue": "notify"},
}
# Periodic work lives here, in code, so every deployment runs the same schedule.
CELERY_BEAT_SCHEDULE = {
    "dispatch-due-polls": {"task": "dashboard.tasks.dispatch_due_polls", "schedule": POLL_DISPATCH_EVERY},
    "sweep-notifications": {"task": "dashboard.tasks.sweep_notifications", "schedule": 60.0},
    "scan-watched-folders": {"task": "ingest.tasks.scan_watched_folders", "schedule": 10.0},
    "resume-stalled-ingest-jobs": {"task": "ingest.tasks.resume_stalled_jobs", "schedule": 60.0},
    "purge-expired-content": {"task": "ingest.tasks.purge_expired_content", "schedule": 3600.0},
}

# Domain settings.
TOKEN_ENCODINGS = env_list("TOKEN_ENCODINGS", ["cl100k_base"])
# Provider-exact counts: the Anthropic API base (its POST /v1/messages/count_tokens), the API
# version header it is called with, and the request's timeout.
ANTHROPIC_API_BASE_URL = env_str("ANTHROPIC_API_BASE_URL", "https://api.anthropic.com")
ANTHROPIC_API_VERSION = env_str("ANTHROPIC_API_VERSION", "2023-06-01")
PROVIDER_COUNT_TIMEOUT = env_float("PROVIDER_COUNT_TIMEOUT", 20.0)
DEFAULT_CONTEXT_WINDOW = env_int("DEFAULT_CONTEXT_WINDOW", 200_000)
# Days an invite link (e-mailed or copied) stays valid; each link works once.
INVITE_LINK_DAYS = env_int("INVITE_LINK_DAYS", 7)
POLL_DEFAULT_INTERVAL_SECONDS = env_int("POLL_DEFAULT_INTERVAL_SECONDS", 900)
POLL_CONNECT_TIMEOUT = env_float("POLL_CONNECT_TIMEOUT", 10.0)
POLL_TOTAL_TIMEOUT = env_float("POLL_TOTAL_TIMEOUT", 60.0)
POLL_MAX_BYTES = env_int("POLL_MAX_BYTES", 5 * 1024 * 1024)
POLL_CONCURRENCY = env_int("POLL_CONCURRENCY", 16)
# The CI gate (POST /api/v1/check): refused over these sizes (413), findings given up past the time
# budget (the answer then says status "error" and why), and a per-token rate limit (429).
# The same size as POLL_MAX_BYTES: a list the poller would refuse never becomes a snapshot anyway.
GATE_MAX_BYTES = env_int("GATE_MAX_BYTES", 5 * 1024 * 1024)
GATE_MAX_TOOLS = env_int("GATE_MAX_TOOLS", 2000)
GATE_TIME_BUDGET_SECONDS = env_float("GATE_TIME_BUDGET_SECONDS", 10.0)
GATE_RATE_PER_MINUTE = env_int("GATE_RATE_PER_MINUTE", 30)
# Seconds of checking (reading, parsing, tokenizing, findings) one token may use per minute: a
# 2,000-tool, 5 MB check costs seconds of a web worker, so many in-limit requests must not add up.
GATE_WORK_SECONDS_PER_MINUTE = env_float("GATE_WORK_SECONDS_PER_MINUTE", 10.0)
INGEST_MAX_UPLOAD_BYTES = env_int("INGEST_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)
# The one limit on decompressed bytes: a gzip input (web upload, manage.py ingest, any file the
# pipeline opens) that unpacks past it is refused before anything is stored. INGEST_API_MAX_BYTES,
# the push API's body limit (as sent and after gunzip), follows it unless set on its own.
INGEST_MAX_BYTES = env_int("INGEST_MAX_BYTES", env_int("INGEST_API_MAX_BYTES", 32 * 1024 * 1024))
INGEST_API_MAX_BYTES = env_int("INGEST_API_MAX_BYTES", INGEST_MAX_BYTES)
# A line longer than this is not parsed (quarantined as oversize_line, its bytes kept as a file).
INGEST_MAX_LINE_BYTES = env_int("INGEST_MAX_LINE_BYTES", 16 * 1024 * 1024)
# Raw text of a quarantined line kept in its database row; a longer line keeps this much as its
# head there and the whole line as a file (default_storage, named by its sha256).
INGEST_MAX_RAW_BYTES = env_int("INGEST_MAX_RAW_BYTES", 1024 * 1024)
INGEST_API_RATE_PER_MINUTE = env_int("INGEST_API_RATE_PER_MINUTE", 120)
# The OpenTelemetry logs receiver (POST /api/v1/otel/v1/logs): the largest body (as sent and after
# gunzip; 413 past it) and the requests per minute per token (429 with Retry-After). Every agent of
# a team exports with the team's token, by default every 5 s: 600 a minute is 50 agents.
OTEL_MAX_BYTES = env_int("OTEL_MAX_BYTES", 8 * 1024 * 1024)
OTEL_RATE_PER_MINUTE = env_int("OTEL_RATE_PER_MINUTE", 600)
# `POST /api/v1/ingest?wait=true` waits at most this long for a worker to finish the batch (then 202).
INGEST_API_WAIT_SECONDS = min(env_float("INGEST_API_WAIT_SECONDS", 5.0), 30.0)
INGEST_WATCH_DIRS = env_list("INGEST_WATCH_DIRS", [])
# A batch of an ingest is committed after this many calls, lines or argument bytes, whichever first.
INGEST_BATCH_CALLS = env_int("INGEST_BATCH_CALLS", 250)
INGEST_BATCH_LINES = env_int("INGEST_BATCH_LINES", 5000)
INGEST_BATCH_BYTES = env_int("INGEST_BATCH_BYTES", 16 * 1024 * 1024)
# On PostgreSQL a batch's calls, bulk arguments and contents are streamed with COPY; false: INSERTs.
INGEST_USE_COPY = env_bool("INGEST_USE_COPY", True)
# Read and parse the next batch in a thread while the current one is written (pipeline.readahead).
INGEST_READ_AHEAD = env_bool("INGEST_READ_AHEAD", True)
# COPY in binary format (no escaping of the texts); false: the text format.
INGEST_COPY_BINARY = env_bool("INGEST_COPY_BINARY", True)
# A running job whose heartbeat is older than this is taken to be dead and resumed by another worker.
INGEST_JOB_LEASE_SECONDS = env_int("INGEST_JOB_LEASE_SECONDS", 120)
# A job still queued this long after it was accepted is sent again by the stalled-job sweep (its
# message may have died with Redis, or been spent while the database was down). A second message
# for a job that is already running or done is refused by the job's lease, so it never runs twice.
INGEST_QUEUED_RESEND_SECONDS = env_int("INGEST_QUEUED_RESEND_SECONDS", 60)
# An envelope log larger than this is read in ranges of about this size, by as many workers as are free.
INGEST_RANGE_BYTES = env_int("INGEST_RANGE_BYTES", 64 * 1024 * 1024)
# A job that fails for a transient reason (the storage, the database, I/O) is tried again up to this
# many times, after INGEST_RETRY_BASE_SECONDS, doubling each time; refused input is never retried.
INGEST_RETRY_MAX = env_int("INGEST_RETRY_MAX", 3)
INGEST_RETRY_BASE_SECONDS = env_int("INGEST_RETRY_BASE_SECONDS", 30)
# Tool discovery (docs/methodology.md, "Discovery"): advice from the team's sessions, and the alert
# on a release after which a tool's load-to-call rate falls.
# "Keep eager": a tool called in more than this share (%) of the deferring sessions touching its server.
DISCOVERY_KEEP_EAGER_PERCENT = env_int("DISCOVERY_KEEP_EAGER_PERCENT", 50)
# "Remove or merge": a tool never loaded nor called in the last N deferring sessions touching its server.
DISCOVERY_UNUSED_SESSIONS = env_int("DISCOVERY_UNUSED_SESSIONS", 20)
# Advice needs at least this many deferring sessions touching the server.
DISCOVERY_MIN_SESSIONS = env_int("DISCOVERY_MIN_SESSIONS", 3)
# Alert when a tool's load-to-call rate after a release is this many points below the rate before,
# each side over at least DISCOVERY_RATE_MIN_LOADS loads (within DISCOVERY_RATE_WINDOW_DAYS of it).
DISCOVERY_RATE_DROP_POINTS = env_int("DISCOVERY_RATE_DROP_POINTS", 20)
DISCOVERY_RATE_MIN_LOADS = env_int("DISCOVERY_RATE_MIN_LOADS", 5)
DISCOVERY_RATE_WINDOW_DAYS = env_int("DISCOVERY_RATE_WINDOW_DAYS", 30)
# Quarantined lines (and the long lines kept as files) are deleted this many days after their job
# finished, by the hourly purge; 0 keeps them until someone deletes them on the quarantine page.
QUARANTINE_RETENTION_DAYS = env_int("QUARANTINE_RETENTION_DAYS", 30)
# Requests made on a user's behalf (HTTP MCP servers, channels, reference documents) never reach
# loopback, private, link-local, CGNAT, multicast or reserved addresses, except inside these
# networks (comma-separated CIDR, e.g. "10.20.0.0/16" for an internal MCP gateway).
OUTBOUND_ALLOW_NETWORKS = env_list("OUTBOUND_ALLOW_NETWORKS", [])
try:
    parse_networks(OUTBOUND_ALLOW_NETWORKS)
except ValueError as exc:
    raise ImproperlyConfiguredEnv(str(exc)) from None
# Reference documents registered by URL: allow-listed hosts only ("*.example.com" for subdomains),
# refused over the size limit (never cut), under the outbound policy above.
REFERENCE_ALLOWED_HOSTS = env_list(
    "REFERENCE_ALLOWED_HOSTS", ["github.com", "raw.githubusercontent.com", "gist.githubusercontent.com"]
)
REFERENCE_MAX_BYTES = env_int("REFERENCE_MAX_BYTES", 10 * 1024 * 1024)
if env_bool("REFERENCE_ALLOW_PRIVATE", False):
    # Removed: it allowed every inward address at once. Saying so beats a silent change of rules.
    raise ImproperlyConfiguredEnv(
        "REFERENCE_ALLOW_PRIVATE was removed; list the networks reference documents may come from "
        "in OUTBOUND_ALLOW_NETWORKS (e.g. 10.0.0.0/8) instead"
    )
FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY")
NOTIFY_HTTP_TIMEOUT = env_float("NOTIFY_HTTP_TIMEOUT", 10.0)
# SMTP gets the same bound as the HTTP channels (Django's default is to wait forever).
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", NOTIFY_HTTP_TIMEOUT)
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 6)
NOTIFY_RETRY_BASE_SECONDS = env_int("NOTIFY_RETRY_BASE_SECONDS", 30)
# A lease (a poll's or a delivery's lock) left by a worker that died is taken over once it is older
# than the longest a live holder can keep it (twice its timeout) plus this grace; a queued message
# that has not run this long after it was due counts as lost and is sent again by the sweep.
LEASE_GRACE_SECONDS = env_int("LEASE_GRACE_SECONDS", 60)

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # httpx logs every request at INFO; a poll cycle would drown the worker's log.
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}
