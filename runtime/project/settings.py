"""Ratchet settings: one module, every knob from an environment variable with a safe default.

Embedded default: a SQLite file under ``var/`` (WAL, IMMEDIATE transactions, busy timeout) and a
Celery broker that needs no server (SQLAlchemy transport on another SQLite file). Production:
``DATABASE_URL=postgres://...`` and ``CELERY_BROKER_URL=redis://...`` or ``amqp://...``.

A malformed value raises ``ImproperlyConfigured`` naming the variable (STYLE.md rule 9).

Over 400 lines: every environment variable the project reads is read here and nowhere else, so an
operator has one file to look up what a variable does and what its default is.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from runtime.project.environment import VARIABLES_BY_NAME
from runtime.project.process_role import AGENT, process_role_refusal

BASE_DIR = Path(__file__).resolve().parents[2]

env = environ.Env()


def _var_dir() -> Path:
    path = Path(env.str("RATCHET_VAR_DIR", default=str(BASE_DIR / "var")))
    path.mkdir(parents=True, exist_ok=True)
    return path


VAR_DIR = _var_dir()


def _typed(name: str, cast: Any, default: Any) -> Any:
    """Read ``name`` with ``cast``; a malformed value is a loud ImproperlyConfigured."""
    try:
        return cast(name, default=default)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"environment variable {name} is malformed: {exc}") from None


def _seconds(name: str, default: float) -> float:
    """A positive, finite number of seconds from ``name``; anything else is ImproperlyConfigured.

    Parsed strictly with ``float()``: django-environ's float cast drops characters it does not
    understand (``1h`` would become 1.0 s), which is unsafe for lease and approval lifetimes.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"environment variable {name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ImproperlyConfigured(f"environment variable {name}={raw!r} must be a positive number of seconds")
    return value


def _read(name: str, default: Any = None) -> Any:
    """Read ``name`` as its row of ``runtime.project.environment`` says (kind and default), so the
    settings reference generated from that table is what this module does. ``default`` is given
    only for a row whose default is computed here (its ``default`` is ``None``)."""
    row = VARIABLES_BY_NAME[name]
    value = row.default if row.default is not None else default
    if isinstance(value, list):
        value = list(value)  # settings may be changed at run time (tests); the table must not be
    if row.kind == "seconds":
        return _seconds(name, value)
    if row.kind == "positive_int":
        return _positive_int(name, value)
    if row.kind in ("bool", "int", "float", "list"):
        return _typed(name, getattr(env, row.kind), value)
    return env.str(name, default=value)


def _private_file(name: Any) -> None:
    """Create a SQLite database file owner-only (0600) before SQLite does: it holds password
    hashes, sessions and approval evidence, and SQLite gives its WAL files the same mode."""
    if not name or name == ":memory:" or str(name).startswith("file:"):
        return
    path = Path(name)
    if path.parent.is_dir() and not path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass


def _database(name: str, default: str | None) -> dict[str, Any] | None:
    url = env.str(name, default=default)
    if url is None:
        return None
    try:
        config = environ.Env.db_url_config(url)
    except (ValueError, KeyError, ImproperlyConfigured) as exc:
        raise ImproperlyConfigured(f"environment variable {name} is not a database URL: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine.endswith("sqlite3"):
        _private_file(config.get("NAME"))
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": _read("RATCHET_SQLITE_BUSY_TIMEOUT"),
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
        }
    elif engine.endswith("postgresql"):
        config.setdefault("CONN_MAX_AGE", 0)
        config["CONN_HEALTH_CHECKS"] = True
    else:
        raise ImproperlyConfigured(f"{name} must point at SQLite or PostgreSQL, not {engine!r}")
    config.setdefault("TEST", {})
    if engine.endswith("sqlite3") and config.get("NAME") not in (None, "", ":memory:"):
        # A real file, so child processes in crash and concurrency tests can open the test database.
        config["TEST"].setdefault("NAME", str(VAR_DIR / f"test_{Path(str(config['NAME'])).name}"))
    return config


DEBUG = _read("RATCHET_DEBUG")
SECRET_KEY = _read("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    # Embedded default: a per-install secret kept beside the database, never in the repo.
    _secret_file = VAR_DIR / "django-secret-key"
    if not _secret_file.exists():
        import secrets as _secrets

        _secret_file.touch(mode=0o600)
        _secret_file.write_text(_secrets.token_urlsafe(50))
    SECRET_KEY = _secret_file.read_text().strip()

ALLOWED_HOSTS = _read("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "runtime.apps.RuntimeConfig",
    "review.apps.ReviewConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "review.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "runtime.project.urls"
WSGI_APPLICATION = "runtime.project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "review.admission_banner.admission_banner",
            ],
        },
    }
]

DATABASES: dict[str, Any] = {
    "default": _database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'ratchet.sqlite3'}"),
}


def _hwm_database(main: dict[str, Any]) -> dict[str, Any]:
    """The high-water mark store, always a database of its own (DESIGN.md section 4.2), so a main
    database restored from a backup fails closed: ``RATCHET_HWM_DATABASE_URL`` if set; else one
    named after the main database: ``<stem>-hwm.sqlite3`` beside an SQLite file (in the var dir by
    default), ``<name>_hwm`` on the same server beside a PostgreSQL database (created by the
    operator). Being a function of the main database, a child process given only a
    ``DATABASE_URL`` (tests: the test database) finds the same store as its parent.

    Raises:
        ImproperlyConfigured: the URL is malformed or names the main database itself.
    """
    if env.str("RATCHET_HWM_DATABASE_URL", default=""):
        config: dict[str, Any] = _database("RATCHET_HWM_DATABASE_URL", None) or {}
    elif main["ENGINE"].endswith("sqlite3"):
        path = Path(str(main["NAME"]))
        config = _database("RATCHET_HWM_DATABASE_URL",
                           f"sqlite:///{path.with_name(f'{path.stem}-hwm{path.suffix}')}") or {}
    else:
        # 63 bytes is PostgreSQL's identifier limit; the suffix must survive the cut.
        config = {**main, "NAME": f"{str(main['NAME'])[:59]}_hwm", "TEST": {},
                  "OPTIONS": dict(main.get("OPTIONS") or {})}

    def where(db: dict[str, Any]) -> tuple[str, ...]:
        name = str(db.get("NAME") or "")
        if db["ENGINE"].endswith("sqlite3"):
            name = str(Path(name).resolve())
        return db["ENGINE"], str(db.get("HOST") or ""), str(db.get("PORT") or ""), name

    if where(config) == where(main):
        raise ImproperlyConfigured(
            "RATCHET_HWM_DATABASE_URL names the main database: the high-water marks must live in "
            "another database, or a restored backup of the main one is taken as the newest state "
            "(unset it for the default, or name a second database)"
        )
    return config


DATABASES["hwm"] = _hwm_database(DATABASES["default"])
DATABASE_ROUTERS = ["runtime.database.routers.HighWaterMarkRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
USE_I18N = False

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
MEDIA_ROOT = Path(_read("RATCHET_MEDIA_ROOT", str(VAR_DIR / "media")))
STORAGES = {
    # Attachments go through the storage API so a multi-machine deployment can use object storage.
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

LOGIN_URL = "/accounts/login/"

# --- Security headers, cookies and sign-in throttling (dashboard) ----------------------------


def _positive_int(name: str, default: int) -> int:
    value = _typed(name, env.int, default)
    if value < 1:
        raise ImproperlyConfigured(f"environment variable {name} must be >= 1")
    return int(value)


# Embedded default: plain HTTP on localhost, so cookies cannot be Secure. Behind TLS set
# RATCHET_TLS=1: Secure cookies, HTTPS redirect and one year of HSTS (each overridable below);
# behind a TLS-terminating proxy also set RATCHET_PROXY_SSL_HEADER, or the redirect loops.
# `manage.py check --deploy` is clean with RATCHET_TLS=1, RATCHET_HSTS_PRELOAD=1, RATCHET_DEBUG=0,
# RATCHET_METRICS_TOKEN, a long random DJANGO_SECRET_KEY and ALLOWED_HOSTS set.
RATCHET_TLS = _read("RATCHET_TLS")
SECURE_SSL_REDIRECT = _read("RATCHET_SSL_REDIRECT", RATCHET_TLS)
SECURE_HSTS_SECONDS = _read("RATCHET_HSTS_SECONDS", 31_536_000 if RATCHET_TLS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _read("RATCHET_HSTS_INCLUDE_SUBDOMAINS", RATCHET_TLS)
# Preloading is hard to undo (browsers ship the list), so it is an explicit opt-in.
SECURE_HSTS_PRELOAD = _read("RATCHET_HSTS_PRELOAD")
SESSION_COOKIE_SECURE = _read("RATCHET_SECURE_COOKIES", RATCHET_TLS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
_proxy_ssl_header = _read("RATCHET_PROXY_SSL_HEADER")
if _proxy_ssl_header:
    # "X-Forwarded-Proto: https": trust this header from the TLS-terminating proxy (and only then).
    _name, _sep, _value = _proxy_ssl_header.partition(":")
    if not _sep or not _name.strip() or not _value.strip():
        raise ImproperlyConfigured(
            "environment variable RATCHET_PROXY_SSL_HEADER must look like 'X-Forwarded-Proto: https'"
        )
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip())
CSRF_TRUSTED_ORIGINS = _read("CSRF_TRUSTED_ORIGINS")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = _read("RATCHET_SESSION_SECONDS")
# htmx sends the CSRF token from the page (hx-headers), so no script needs to read the cookie.
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
RATCHET_CSP = _read("RATCHET_CSP")
# Sign-in throttling (review.throttle): failures per username / per client address within the
# window lock that username / address for the lockout. Seconds.
RATCHET_LOGIN_MAX_FAILURES = _read("RATCHET_LOGIN_MAX_FAILURES")
RATCHET_LOGIN_MAX_FAILURES_PER_IP = _read("RATCHET_LOGIN_MAX_FAILURES_PER_IP")
RATCHET_LOGIN_WINDOW_SECONDS = _read("RATCHET_LOGIN_WINDOW_SECONDS")
RATCHET_LOGIN_LOCKOUT_SECONDS = _read("RATCHET_LOGIN_LOCKOUT_SECONDS")
RATCHET_LOGIN_DEVICE_SECONDS = _read("RATCHET_LOGIN_DEVICE_SECONDS")

# --- Ratchet runtime -------------------------------------------------------------------------
RATCHET_KEY_FILE = Path(_read("RATCHET_KEY_FILE", str(VAR_DIR / "keys.json")))
RATCHET_CREATE_KEY_FILE = _read("RATCHET_CREATE_KEY_FILE")
RATCHET_LEASE_SECONDS = _read("RATCHET_LEASE_SECONDS")
# Longest single adapter or model call the lease heartbeat keeps the lease for (DESIGN.md section 4.9).
RATCHET_MAX_CALL_SECONDS = _read("RATCHET_MAX_CALL_SECONDS")
RATCHET_APPROVAL_SECONDS = _read("RATCHET_APPROVAL_SECONDS")
# Longest approval validity anyone may ask for, and how long a signed reviewer decision stays
# usable after it was signed; both judged by the database clock (DESIGN.md sections 4.7, 6.2, 6.3).
RATCHET_APPROVAL_MAX_SECONDS = _read("RATCHET_APPROVAL_MAX_SECONDS")
RATCHET_DECISION_SECONDS = _read("RATCHET_DECISION_SECONDS")
# Reviewers' passkeys (DESIGN.md section 6.9): the WebAuthn origin and relying-party id (empty:
# the dashboard's own origin and host as the browser reaches it), and whether the password
# re-entry stays available as a fallback for signing decisions.
RATCHET_PASSKEY_ORIGIN = _read("RATCHET_PASSKEY_ORIGIN")
RATCHET_PASSKEY_RP_ID = _read("RATCHET_PASSKEY_RP_ID")
RATCHET_REVIEW_PASSWORD_FALLBACK = _read("RATCHET_REVIEW_PASSWORD_FALLBACK")
RATCHET_WORKER_ID = _read("RATCHET_WORKER_ID")
# The agent gateway (DESIGN.md section 5.12): calls per token per window, the largest call in
# bytes, how long a call waits for the run's lease, and the dashboard's address for its links.
RATCHET_GATEWAY_RATE_LIMIT = _read("RATCHET_GATEWAY_RATE_LIMIT")
RATCHET_GATEWAY_RATE_WINDOW_SECONDS = _read("RATCHET_GATEWAY_RATE_WINDOW_SECONDS")
RATCHET_GATEWAY_MAX_BYTES = _read("RATCHET_GATEWAY_MAX_BYTES")
RATCHET_GATEWAY_WAIT_SECONDS = _read("RATCHET_GATEWAY_WAIT_SECONDS")
# The host names clients reach a gateway bound off loopback by (`manage.py gateway --host`): its
# Host header must be one of them, so DNS-rebinding protection stays on (runtime/gateway/binding.py).
RATCHET_GATEWAY_ALLOWED_HOSTS = _read("RATCHET_GATEWAY_ALLOWED_HOSTS")
# How long an MCP call whose client accepted the approval elicitation waits (bounded to 600 s),
# how often it reads the run row meanwhile, and whether the gateway keeps restored sessions.
RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS = _read("RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS")
RATCHET_GATEWAY_APPROVAL_POLL_SECONDS = _read("RATCHET_GATEWAY_APPROVAL_POLL_SECONDS")
RATCHET_GATEWAY_REUSE_SESSIONS = _read("RATCHET_GATEWAY_REUSE_SESSIONS")
# A run's lease stays with the gateway between calls (warm) for this idle time, at most this long
# in all (runtime/gateway/sessions.py).
RATCHET_GATEWAY_IDLE_SECONDS = _read("RATCHET_GATEWAY_IDLE_SECONDS")
RATCHET_GATEWAY_HOLD_SECONDS = _read("RATCHET_GATEWAY_HOLD_SECONDS")
RATCHET_DASHBOARD_URL = _read("RATCHET_DASHBOARD_URL")
# /metrics (DESIGN.md section 8.1): bearer token; unset, only loopback requests are served.
RATCHET_METRICS_TOKEN = _read("RATCHET_METRICS_TOKEN")
RATCHET_METRICS_BUCKET_SECONDS = _read("RATCHET_METRICS_BUCKET_SECONDS")
# Admission gate (DESIGN.md section 8.3): defaults per tenant and task over a sliding window;
# RATCHET_ADMISSION_THRESHOLDS is JSON {"tenant/task" or "tenant/*": {name: value}} overriding them.
RATCHET_ADMISSION_WINDOW_SECONDS = _read("RATCHET_ADMISSION_WINDOW_SECONDS")
RATCHET_ADMISSION_MIN_SUCCESS_RATE = _read("RATCHET_ADMISSION_MIN_SUCCESS_RATE")
RATCHET_ADMISSION_MIN_RECOVERIES = _read("RATCHET_ADMISSION_MIN_RECOVERIES")
RATCHET_ADMISSION_MAX_P95_SECONDS = _read("RATCHET_ADMISSION_MAX_P95_SECONDS")
RATCHET_ADMISSION_MAX_DUPLICATES = _read("RATCHET_ADMISSION_MAX_DUPLICATES")
RATCHET_ADMISSION_THRESHOLDS = _read("RATCHET_ADMISSION_THRESHOLDS")
# Version combinations (DESIGN.md section 8.4): completed canary runs a promotion needs.
RATCHET_CANARY_MIN_RUNS = _read("RATCHET_CANARY_MIN_RUNS")

# --- Celery ----------------------------------------------------------------------------------
# Embedded default: `manage.py worker` runs one worker with the sweeper (beat) inside it, on a
# broker that needs no server (kombu's SQLAlchemy transport on var/broker.sqlite3). Production:
# CELERY_BROKER_URL=redis://... or amqp://..., `celery -A runtime worker` on every machine and
# exactly ONE `celery -A runtime beat` (a second beat only sends duplicate sweeps, which are safe
# but wasteful). Tasks carry only ids and are safe to deliver twice (runtime/workers/tasks.py).
CELERY_BROKER_URL = _read("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'broker.sqlite3'}")


def _broker_scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def _is_sqlalchemy_broker(url: str) -> bool:
    return _broker_scheme(url).startswith(("sqla+", "sqlalchemy+"))


def _reject_on_worker_lost(url: str) -> bool:
    """Give a dead pool process's message back to the queue, except on the SQLAlchemy broker.

    That transport shares one SQLAlchemy session between the consumer and the pool's result
    thread, which is where a worker-lost reject republishes: the two collide and the whole worker
    dies ("session is in 'prepared' state"). There the message is acknowledged instead and the
    sweeper re-queues the run once its lease expires (it would only find the lease held before).
    """
    return not _is_sqlalchemy_broker(url)


CELERY_RESULT_BACKEND = _read("CELERY_RESULT_BACKEND")
# Outcomes live in the trace and the checkpoints; a result store would be a second, weaker copy.
CELERY_TASK_IGNORE_RESULT = True
# Acknowledge after the task ran, so a SIGKILL mid-step leaves the message unacknowledged (to be
# delivered again or, at worst, replaced by the sweeper); the lease makes a second delivery a
# no-op or a recovery, never a second effect.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = _reject_on_worker_lost(CELERY_BROKER_URL)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Seconds a worker waits for a dead pool process's result before declaring its job lost. Until
# then the job holds a prefetch slot and the worker takes no new message (default 10 s); our
# tasks keep no results, and a job declared lost too early is at worst delivered twice.
CELERY_WORKER_LOST_WAIT = 2.0
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = _read("CELERY_TASK_DEFAULT_QUEUE")
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Seconds between sweeps for runs whose worker died (lease expired by the database clock) or that
# nobody is driving (lease free, untouched for this long).
RATCHET_SWEEP_SECONDS = _read("RATCHET_SWEEP_SECONDS")
# Seconds a blocked run (a worker lacked its plug-in, DESIGN.md section 5.14) waits before a
# periodic sweep tries it again; a starting worker's sweep tries every blocked run at once.
RATCHET_BLOCKED_RETRY_SECONDS = _read("RATCHET_BLOCKED_RETRY_SECONDS")
# How long one advance_run task keeps driving its run (seconds) before it looks whether other
# runs wait for a worker: it keeps the lease, the restored session and the warm adapter while it
# works, and hands the run back to the queue only when others wait (a time slice, so no run
# starves) or after RATCHET_TASK_MAX_SECONDS in any case (so a worker can shut down warm and the
# broker never redelivers a message that is still being worked on). DESIGN.md section 5.7.
RATCHET_TASK_SLICE_SECONDS = _read("RATCHET_TASK_SLICE_SECONDS")
RATCHET_TASK_MAX_SECONDS = _read("RATCHET_TASK_MAX_SECONDS")
if RATCHET_TASK_MAX_SECONDS < RATCHET_TASK_SLICE_SECONDS:
    raise ImproperlyConfigured(
        "environment variable RATCHET_TASK_MAX_SECONDS must be at least RATCHET_TASK_SLICE_SECONDS")
# An optional cap on the committed steps one task drives (unset: the time slice alone decides);
# tests and operators who want many short hops between workers set it.
RATCHET_STEPS_PER_TASK = (_read("RATCHET_STEPS_PER_TASK")
                          if os.environ.get("RATCHET_STEPS_PER_TASK") is not None else None)
# Seconds a Celery worker process keeps a database connection open across tasks (its CONN_MAX_AGE;
# web and CLI processes keep the one DATABASE_URL gives). Broken connections are closed sooner.
RATCHET_WORKER_CONN_MAX_AGE = _read("RATCHET_WORKER_CONN_MAX_AGE")
CELERY_BEAT_SCHEDULE = {
    # Sweeps sent while no worker was up expire instead of piling up (a minute, or three
    # periods: generous, since the worker judges expiry by its own clock).
    "ratchet.sweep": {"task": "ratchet.sweep", "schedule": RATCHET_SWEEP_SECONDS,
                      "options": {"expires": max(60.0, 3 * RATCHET_SWEEP_SECONDS)}},
}

# Redis redelivers an unacknowledged message after the visibility timeout (seconds). It must
# outlast the longest task, or a running task's message is handed to a second worker (harmless:
# the lease turns it into a no-op, but wasteful), so it is refused if not longer than the lease.
RATCHET_BROKER_VISIBILITY_SECONDS = _read("RATCHET_BROKER_VISIBILITY_SECONDS")
if RATCHET_BROKER_VISIBILITY_SECONDS <= max(RATCHET_LEASE_SECONDS, RATCHET_TASK_MAX_SECONDS):
    raise ImproperlyConfigured(
        "environment variable RATCHET_BROKER_VISIBILITY_SECONDS must be longer than "
        "RATCHET_LEASE_SECONDS and RATCHET_TASK_MAX_SECONDS"
    )


def _broker_transport_options(url: str) -> dict[str, Any]:
    scheme = _broker_scheme(url)
    if scheme in ("redis", "rediss", "sentinel", "redis+socket"):
        return {"visibility_timeout": RATCHET_BROKER_VISIBILITY_SECONDS}
    if _is_sqlalchemy_broker(url):
        # Every option of this transport goes to sqlalchemy.create_engine(), so only engine
        # arguments belong here (not even `polling_interval`, which it refuses: the worker sets
        # it from RATCHET_BROKER_POLL_SECONDS in runtime.project.celery.BrokerPolling instead). The
        # SQLite busy timeout (seconds) rides out processes publishing at once.
        return {"connect_args": {"timeout": 30}} if "+sqlite" in scheme else {}
    return {}


CELERY_BROKER_TRANSPORT_OPTIONS = _broker_transport_options(CELERY_BROKER_URL)
# Seconds a worker on a polling broker (the embedded SQLAlchemy transport) sleeps when it cannot
# take a message (queue empty or prefetch slots full): kombu's default of 1 s made every task
# wait up to a second for the next (runtime.project.celery.BrokerPolling, DESIGN.md section 5.7).
RATCHET_BROKER_POLL_SECONDS = _read("RATCHET_BROKER_POLL_SECONDS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"runtime": {"handlers": ["console"], "level": _read("RATCHET_LOG_LEVEL")}},
}

# --- OpenTelemetry traces and JSON logs (runtime/telemetry/, DESIGN.md section 8.6) -------------
# Tracing is on only when an OTLP endpoint is configured, with the standard OpenTelemetry
# variables; the exporter, the batch processor and the resource read the other OTEL_* variables
# (headers, certificates, timeout, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES) themselves.
RATCHET_OTEL_ENDPOINT = env.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", default="") or env.str(
    "OTEL_EXPORTER_OTLP_ENDPOINT", default="")
RATCHET_TRACING = bool(RATCHET_OTEL_ENDPOINT.strip()) and not _typed("OTEL_SDK_DISABLED", env.bool, False) and (
    env.str("OTEL_TRACES_EXPORTER", default="otlp").strip().lower() != "none")
# grpc or http/protobuf (the Python exporters speak no http/json); anything else fails at start-up.
RATCHET_OTEL_PROTOCOL = (env.str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", default="")
                         or env.str("OTEL_EXPORTER_OTLP_PROTOCOL", default="http/protobuf")).strip()
RATCHET_OTEL_SERVICE_NAME = env.str("OTEL_SERVICE_NAME", default="ratchet")
# One span per SQL statement (psycopg instrumentation): many spans; off unless asked for.
RATCHET_OTEL_DB_SPANS = _read("RATCHET_OTEL_DB_SPANS")
# text (the default) or json: one JSON object per line, with run_id (and trace_id / span_id
# while a span is current) on every line logged in a run's context (runtime/telemetry/logs.py).
RATCHET_LOG_FORMAT = _read("RATCHET_LOG_FORMAT").strip().lower()
if RATCHET_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"RATCHET_LOG_FORMAT must be text or json, not {RATCHET_LOG_FORMAT!r}")
if RATCHET_LOG_FORMAT == "json":
    LOGGING["filters"] = {"run_context": {"()": "runtime.telemetry.logs.RunContextFilter"}}
    LOGGING["formatters"]["json"] = {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(run_id)s",
        "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
    }
    LOGGING["handlers"]["console"].update(formatter="json", filters=["run_context"])
# Notifications (DESIGN.md section 6.10): links in messages are absolute, built on this public
# base URL (scheme and host the people who receive them can open; no trailing slash needed).
# The agent gateway's approval_url uses the same setting.
RATCHET_PUBLIC_BASE_URL = _read("RATCHET_PUBLIC_BASE_URL", RATCHET_DASHBOARD_URL or "http://localhost:8000").strip().rstrip("/")
if not RATCHET_PUBLIC_BASE_URL.startswith(("http://", "https://")) or "://" == RATCHET_PUBLIC_BASE_URL[-3:]:
    raise ImproperlyConfigured(
        "environment variable RATCHET_PUBLIC_BASE_URL must be an absolute http(s) URL, e.g. https://ratchet.example.com")
# An approval whose signed evidence expires within this many seconds is announced as expiring.
RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS = _read("RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS")
# Delivery: attempts per message, the first retry's delay (doubling each time, capped), and the
# timeout of one HTTP or SMTP attempt, all in seconds.
RATCHET_NOTIFY_MAX_ATTEMPTS = _read("RATCHET_NOTIFY_MAX_ATTEMPTS")
RATCHET_NOTIFY_BACKOFF_SECONDS = _read("RATCHET_NOTIFY_BACKOFF_SECONDS")
RATCHET_NOTIFY_BACKOFF_MAX_SECONDS = _read("RATCHET_NOTIFY_BACKOFF_MAX_SECONDS")
RATCHET_NOTIFY_TIMEOUT_SECONDS = _read("RATCHET_NOTIFY_TIMEOUT_SECONDS")
# The periodic sweep: events a lost message left unrecorded, expiring approvals, due retries.
RATCHET_NOTIFY_SWEEP_SECONDS = _read("RATCHET_NOTIFY_SWEEP_SECONDS")
CELERY_BEAT_SCHEDULE["ratchet.notify_sweep"] = {
    "task": "ratchet.notify_sweep", "schedule": RATCHET_NOTIFY_SWEEP_SECONDS,
    "options": {"expires": max(60.0, 3 * RATCHET_NOTIFY_SWEEP_SECONDS)}}
# E-mail goes through Django's mail (SMTP); the password only ever comes from the environment.
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = _typed("EMAIL_PORT", env.int, 25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = _typed("EMAIL_USE_TLS", env.bool, False)
EMAIL_TIMEOUT = RATCHET_NOTIFY_TIMEOUT_SECONDS
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="ratchet@localhost")
# Client SDK, operator API and MCP reads (DESIGN.md section 5.13): every link the gateway hands
# out (approval_url) is absolute, built on RATCHET_PUBLIC_BASE_URL (set above, with notifications).
# Where `POST /api/v1/runs` finds the task specs an operator credential may start runs from
# (`<name>.toml` in this folder); empty: runs are not started through the API.
RATCHET_API_TASK_SPECS_DIR = _read("RATCHET_API_TASK_SPECS_DIR")
# Largest file the gateway's read_file answers with, in bytes.
RATCHET_GATEWAY_READ_MAX_BYTES = _read("RATCHET_GATEWAY_READ_MAX_BYTES")
# django-ninja's own app: the API docs page (/api/v1/docs) loads Swagger UI from this process's
# static files, never from a CDN.
INSTALLED_APPS += ["ninja"]
# --- Production process layout: static files served by the web process ------------------------
# WhiteNoise serves /static/ from the web process itself (no separate file server), with
# far-future cache headers on content-hashed names once `manage.py collectstatic` has filled
# RATCHET_STATIC_ROOT and RATCHET_STATIC_MANIFEST=1 is set (production, runtime/docs/guides/deploy.md).
# Without the manifest it serves the source folders directly, so the embedded default needs no
# collectstatic step.
STATIC_ROOT = Path(_read("RATCHET_STATIC_ROOT", str(VAR_DIR / "staticfiles")))
RATCHET_STATIC_MANIFEST = _read("RATCHET_STATIC_MANIFEST")
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                  "whitenoise.middleware.WhiteNoiseMiddleware")
if RATCHET_STATIC_MANIFEST:
    STORAGES["staticfiles"] = {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}
WHITENOISE_USE_FINDERS = not RATCHET_STATIC_MANIFEST
if not RATCHET_STATIC_MANIFEST:
    # WhiteNoise also serves STATIC_ROOT and warns on every start while it does not exist.
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_AUTOREFRESH = DEBUG
# Worker presence (runtime.workers.presence, DESIGN.md section 5.15): every worker renews its row
# this often (seconds); the Workers page counts a row not renewed for three periods as gone.
RATCHET_WORKER_PRESENCE_SECONDS = _read("RATCHET_WORKER_PRESENCE_SECONDS")
# --- Retention and archive of finished runs (runtime.archive, DESIGN.md section 4.11) ------------
# Finished runs not updated for RATCHET_ARCHIVE_AFTER_SECONDS are archived by the beat task every
# RATCHET_ARCHIVE_EVERY_SECONDS: their signed bundle goes to STORAGES[RATCHET_ARCHIVE_STORAGE]
# (the media filesystem by default; point it at django-storages for object storage) and their
# bulky rows are removed. Unset (the default): no scheduled archiving; `manage.py archive` still works.
RATCHET_ARCHIVE_AFTER_SECONDS = _read("RATCHET_ARCHIVE_AFTER_SECONDS")
RATCHET_ARCHIVE_PHASES = _read("RATCHET_ARCHIVE_PHASES")
RATCHET_ARCHIVE_STORAGE = _read("RATCHET_ARCHIVE_STORAGE")
RATCHET_ARCHIVE_PREFIX = _read("RATCHET_ARCHIVE_PREFIX")
RATCHET_ARCHIVE_EVERY_SECONDS = _read("RATCHET_ARCHIVE_EVERY_SECONDS")
RATCHET_ARCHIVE_BATCH = _read("RATCHET_ARCHIVE_BATCH")
# Attachments younger than this are never swept: a live step may not have committed the
# checkpoint that names them yet.
RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS = _read("RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS")
if RATCHET_ARCHIVE_STORAGE not in STORAGES:
    raise ImproperlyConfigured(f"RATCHET_ARCHIVE_STORAGE={RATCHET_ARCHIVE_STORAGE!r} names no entry of STORAGES")
if RATCHET_ARCHIVE_AFTER_SECONDS is not None:
    CELERY_BEAT_SCHEDULE["ratchet.archive"] = {
        "task": "ratchet.archive", "schedule": RATCHET_ARCHIVE_EVERY_SECONDS,
        "options": {"expires": RATCHET_ARCHIVE_EVERY_SECONDS}}
# --- One commit per write (DESIGN.md section 4.13) ---------------------------------------------
# On by default: a planner that proposes at once (the scripted and git-history planners) has the
# intent of its next write committed in the same checkpoint as the receipt of the last one. Off
# only to reach the settled state between two writes mid-run (no write pending).
RATCHET_FOLD_INTENTS = _read("RATCHET_FOLD_INTENTS")
# --- Process role (runtime.project.process_role, DESIGN.md section 2.4) -------------------------
# An agent process serves only the JSON API and holds no private key; checked here, before any
# request, so a mis-keyed agent process never starts.
RATCHET_PROCESS_ROLE = _read("RATCHET_PROCESS_ROLE")
_role_refusal = process_role_refusal(role=RATCHET_PROCESS_ROLE, environ=os.environ)
if _role_refusal:
    raise ImproperlyConfigured(_role_refusal)
if RATCHET_PROCESS_ROLE == AGENT:
    ROOT_URLCONF = "runtime.project.urls_agent"
