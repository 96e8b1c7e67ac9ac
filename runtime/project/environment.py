"""Every environment variable Ratchet reads, in one table: name, kind, default and what it does.

``runtime.project.settings`` reads its variables through this table (``_read(NAME)`` takes the
kind and the default from here), so the settings reference the documentation site generates from
:data:`VARIABLES` cannot drift from what the code does. A variable whose default is computed from
another setting (a path under ``RATCHET_VAR_DIR``, a value that follows ``RATCHET_TLS``) has
``default=None`` and says in ``default_text`` what it is; settings passes the computed value.

The second part, :data:`READ_ELSEWHERE`, names the variables one component reads itself (keys,
crash points, the gateway's stdio token, the chat-tools model), with the module that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Variable:
    """One environment variable.

    Args:
        name: the variable's name, also the name of the Django setting unless ``setting`` says.
        kind: how the value is parsed: ``seconds`` (a positive finite float, strict), ``positive_int``
            (an integer >= 1), ``int``, ``float``, ``bool``, ``list`` (comma-separated), ``str``,
            ``path``, ``url`` (a database or broker URL).
        default: the value when unset (``None`` when computed from another setting, see
            ``default_text``).
        section: the heading it is listed under in the reference.
        help: what it does, for an operator.
        default_text: how the default reads in the reference when it is computed or long.
        setting: the Django setting it fills, when its name differs.
        read_in: the module that reads it, for variables not read by the settings module.
    """

    name: str
    kind: str
    default: Any
    section: str
    help: str
    default_text: str = ""
    setting: str = ""
    read_in: str = ""

    def shown_default(self) -> str:
        """The default as the reference shows it."""
        if self.default_text:
            return self.default_text
        if self.default is None or self.default == "":
            return "(unset)"
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        if isinstance(self.default, list):
            return ",".join(self.default)
        if isinstance(self.default, float) and self.default.is_integer():
            return str(int(self.default))
        return str(self.default)


DATABASES = "Databases and files"
WEB = "Web, cookies and sign-in"
RUNTIME = "Runtime: keys, leases, approvals, passkeys"
GATEWAY = "Agent gateway"
OBSERVE = "Metrics and admission"
CELERY = "Celery workers and broker"
KEYS = "Keys and credentials (read by their component)"
TESTING = "Testing and models (read by their component)"

_V = Variable

VARIABLES: tuple[Variable, ...] = (
    # --- databases and files
    _V("RATCHET_VAR_DIR", "path", None, DATABASES,
       "Directory for the embedded default's files: the SQLite databases, the key file, the broker, "
       "media and static files. Created if missing.", default_text="var/ in the checkout", setting="VAR_DIR"),
    _V("DATABASE_URL", "url", None, DATABASES,
       "The main database: `sqlite:///PATH` or `postgres://USER:PASS@HOST:PORT/NAME`. Anything else "
       "is refused.", default_text="sqlite:///$RATCHET_VAR_DIR/ratchet.sqlite3", setting="DATABASES"),
    _V("RATCHET_HWM_DATABASE_URL", "url", None, DATABASES,
       "The high-water mark store, always a database of its own (DESIGN.md section 4.2). Refused when "
       "it names the main database.",
       default_text="`<stem>-hwm.sqlite3` beside a SQLite main database; `<name>_hwm` on the same "
       "PostgreSQL server", setting="DATABASES"),
    _V("RATCHET_SQLITE_BUSY_TIMEOUT", "seconds", 30.0, DATABASES,
       "How long a SQLite connection waits for a lock before it gives up."),
    _V("RATCHET_MEDIA_ROOT", "path", None, DATABASES, "Where attachments are stored (file system storage).",
       default_text="$RATCHET_VAR_DIR/media", setting="MEDIA_ROOT"),
    _V("RATCHET_KEY_FILE", "path", None, DATABASES,
       "The key file the keyrings come from when no `RATCHET_<ROOT>_KEYS` variable is set.",
       default_text="$RATCHET_VAR_DIR/keys.json"),
    _V("RATCHET_CREATE_KEY_FILE", "bool", True, DATABASES,
       "Create the key file (mode 0600) on first use. Set 0 in production, where keys are provisioned."),
    _V("RATCHET_LOG_LEVEL", "str", "INFO", DATABASES, "Log level of the `runtime` logger.",
       setting="LOGGING"),
    # --- web
    _V("RATCHET_DEBUG", "bool", False, WEB, "Django's DEBUG. Never on in production.", setting="DEBUG"),
    _V("DJANGO_SECRET_KEY", "str", None, WEB,
       "Django's secret key (sessions, CSRF). Set a long random value in production.",
       default_text="a per-install secret generated into $RATCHET_VAR_DIR/django-secret-key",
       setting="SECRET_KEY"),
    _V("ALLOWED_HOSTS", "list", ["localhost", "127.0.0.1", "[::1]", "testserver"], WEB,
       "Host names the dashboard answers to."),
    _V("CSRF_TRUSTED_ORIGINS", "list", [], WEB, "Origins trusted for POSTs, e.g. `https://ratchet.example`."),
    _V("RATCHET_TLS", "bool", False, WEB,
       "Behind TLS: Secure cookies, HTTPS redirect and one year of HSTS (each overridable below)."),
    _V("RATCHET_SSL_REDIRECT", "bool", None, WEB, "Redirect plain HTTP to HTTPS.",
       default_text="RATCHET_TLS", setting="SECURE_SSL_REDIRECT"),
    _V("RATCHET_HSTS_SECONDS", "int", None, WEB, "HSTS max-age in seconds.",
       default_text="31536000 with RATCHET_TLS, else 0", setting="SECURE_HSTS_SECONDS"),
    _V("RATCHET_HSTS_INCLUDE_SUBDOMAINS", "bool", None, WEB, "HSTS for subdomains too.",
       default_text="RATCHET_TLS", setting="SECURE_HSTS_INCLUDE_SUBDOMAINS"),
    _V("RATCHET_HSTS_PRELOAD", "bool", False, WEB,
       "Ask browsers to preload HSTS (hard to undo, so an explicit opt-in).", setting="SECURE_HSTS_PRELOAD"),
    _V("RATCHET_SECURE_COOKIES", "bool", None, WEB, "Secure session and CSRF cookies.",
       default_text="RATCHET_TLS", setting="SESSION_COOKIE_SECURE"),
    _V("RATCHET_PROXY_SSL_HEADER", "str", "", WEB,
       "Behind a TLS-terminating proxy: the header it sets, e.g. `X-Forwarded-Proto: https`.",
       setting="SECURE_PROXY_SSL_HEADER"),
    _V("RATCHET_SESSION_SECONDS", "positive_int", 8 * 3600, WEB, "Dashboard session lifetime in seconds.",
       setting="SESSION_COOKIE_AGE"),
    _V("RATCHET_CSP", "str",
       "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'", WEB,
       "The dashboard's Content-Security-Policy header.", default_text="same-origin only (see the code)"),
    _V("RATCHET_LOGIN_MAX_FAILURES", "positive_int", 5, WEB,
       "Failed sign-ins per username within the window before it is locked."),
    _V("RATCHET_LOGIN_MAX_FAILURES_PER_IP", "positive_int", 50, WEB,
       "Failed sign-ins per client address within the window before it is locked."),
    _V("RATCHET_LOGIN_DEVICE_SECONDS", "positive_int", 15552000, WEB,
       "How long a browser that signed in stays a known device whose own sign-ins a locked username "
       "does not block (seconds; 180 days; DESIGN.md section 2.5)."),
    _V("RATCHET_LOGIN_WINDOW_SECONDS", "positive_int", 900, WEB, "The sign-in throttle's window, seconds."),
    _V("RATCHET_LOGIN_LOCKOUT_SECONDS", "positive_int", 900, WEB, "How long a lockout lasts, seconds."),
    # --- runtime
    _V("RATCHET_LEASE_SECONDS", "seconds", 30.0, RUNTIME,
       "Lease lifetime, judged by the database clock (DESIGN.md section 4.5)."),
    _V("RATCHET_MAX_CALL_SECONDS", "seconds", 900.0, RUNTIME,
       "Longest single adapter or model call the lease heartbeat keeps the lease for (DESIGN.md section 4.9)."),
    _V("RATCHET_APPROVAL_SECONDS", "seconds", 3600.0, RUNTIME, "Default validity of an approval."),
    _V("RATCHET_APPROVAL_MAX_SECONDS", "seconds", 86400.0, RUNTIME,
       "Longest approval validity anyone may ask for (DESIGN.md section 6.2)."),
    _V("RATCHET_DECISION_SECONDS", "seconds", 3600.0, RUNTIME,
       "How long a signed reviewer decision stays usable after it was signed (DESIGN.md section 6.3)."),
    _V("RATCHET_PASSKEY_ORIGIN", "str", "", RUNTIME,
       "WebAuthn origin, e.g. `https://ratchet.example` (empty: the origin the browser reached). "
       "WebAuthn refuses IP addresses: use a host name such as `localhost` (DESIGN.md section 6.9)."),
    _V("RATCHET_PASSKEY_RP_ID", "str", "", RUNTIME,
       "WebAuthn relying-party id, a host name (empty: the dashboard's host)."),
    _V("RATCHET_REVIEW_PASSWORD_FALLBACK", "bool", True, RUNTIME,
       "Keep password re-entry as a way to sign reviewer decisions besides passkeys."),
    _V("RATCHET_WORKER_ID", "str", "", RUNTIME,
       "This process's lease owner name (empty: `host:pid`)."),
    # --- gateway
    _V("RATCHET_GATEWAY_RATE_LIMIT", "positive_int", 120, GATEWAY, "Calls per token per window."),
    _V("RATCHET_GATEWAY_RATE_WINDOW_SECONDS", "seconds", 60.0, GATEWAY, "The rate limit's window."),
    _V("RATCHET_GATEWAY_MAX_BYTES", "positive_int", 1_048_576, GATEWAY, "The largest call, in bytes."),
    _V("RATCHET_GATEWAY_WAIT_SECONDS", "seconds", 10.0, GATEWAY, "How long a call waits for the run's lease."),
    _V("RATCHET_GATEWAY_ALLOWED_HOSTS", "list", [], GATEWAY,
       "Host names clients reach a gateway bound off loopback by (`manage.py gateway --host`)."),
    _V("RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS", "seconds", 120.0, GATEWAY,
       "How long an MCP call whose client accepted the approval elicitation waits (bounded to 600 s)."),
    _V("RATCHET_GATEWAY_APPROVAL_POLL_SECONDS", "seconds", 0.5, GATEWAY,
       "How often a waiting call reads the run row."),
    _V("RATCHET_GATEWAY_REUSE_SESSIONS", "bool", True, GATEWAY, "Keep restored run sessions between calls."),
    _V("RATCHET_GATEWAY_IDLE_SECONDS", "float", 1.0, GATEWAY,
       "How long a run's lease stays with the gateway process after its last call (0: given back at once)."),
    _V("RATCHET_GATEWAY_HOLD_SECONDS", "seconds", 15.0, GATEWAY,
       "The longest the gateway keeps one lease between calls before giving it back."),
    _V("RATCHET_DASHBOARD_URL", "str", "", GATEWAY, "The dashboard's address, for links in gateway answers."),
    # --- metrics and admission
    _V("RATCHET_METRICS_TOKEN", "str", "", OBSERVE,
       "Bearer token for `GET /metrics`; unset, only loopback requests are served (DESIGN.md section 8.1)."),
    _V("RATCHET_METRICS_BUCKET_SECONDS", "positive_int", 60, OBSERVE, "Time bucket of the counters, seconds."),
    _V("RATCHET_ADMISSION_WINDOW_SECONDS", "seconds", 3600.0, OBSERVE,
       "The admission gate's sliding window (DESIGN.md section 8.3)."),
    _V("RATCHET_ADMISSION_MIN_SUCCESS_RATE", "float", 0.9, OBSERVE, "Lowest recovery success rate admitted."),
    _V("RATCHET_ADMISSION_MIN_RECOVERIES", "positive_int", 10, OBSERVE,
       "Recoveries in the window before the success rate is judged."),
    _V("RATCHET_ADMISSION_MAX_P95_SECONDS", "seconds", 60.0, OBSERVE, "Highest p95 recovery duration admitted."),
    _V("RATCHET_ADMISSION_MAX_DUPLICATES", "int", 0, OBSERVE, "Most duplicate submissions admitted."),
    _V("RATCHET_ADMISSION_THRESHOLDS", "str", "", OBSERVE,
       'JSON `{"tenant/task" or "tenant/*": {name: value}}` overriding the thresholds above.'),
    _V("RATCHET_CANARY_MIN_RUNS", "positive_int", 5, OBSERVE,
       "Completed canary runs a promotion needs (DESIGN.md section 8.4)."),
    # --- celery
    _V("CELERY_BROKER_URL", "url", None, CELERY,
       "The broker: `redis://...` or `amqp://...` in production.",
       default_text="sqla+sqlite:///$RATCHET_VAR_DIR/broker.sqlite3 (no server)"),
    _V("CELERY_RESULT_BACKEND", "str", None, CELERY, "Unused by Ratchet (outcomes live in the trace)."),
    _V("CELERY_TASK_DEFAULT_QUEUE", "str", "ratchet", CELERY, "The queue runs are sent to."),
    _V("RATCHET_SWEEP_SECONDS", "seconds", 10.0, CELERY,
       "Seconds between sweeps for runs whose worker died or that nobody drives."),
    _V("RATCHET_BLOCKED_RETRY_SECONDS", "seconds", 300.0, CELERY,
       "How long a blocked run (a worker lacked its plug-in, DESIGN.md section 5.14) waits before a "
       "periodic sweep tries it again; a starting worker's sweep tries every blocked run at once."),
    _V("RATCHET_WORKER_PRESENCE_SECONDS", "seconds", 15.0, CELERY,
       "How often every worker renews its presence row (DESIGN.md section 5.15); the Workers page "
       "counts a row not renewed for three periods as gone."),
    _V("RATCHET_PROCESS_ROLE", "str", "all", WEB,
       "`all`: dashboard, admin, `/metrics` and the JSON API. `agent`: only the JSON API and `/metrics`, "
       "and the process refuses to start with a private approval, reviewer or export key or without "
       "the checkpoint and public keys in the environment (DESIGN.md section 2.4)."),
    _V("RATCHET_FOLD_INTENTS", "bool", True, RUNTIME,
       "One commit per write (DESIGN.md section 4.13): a planner that proposes at once has the intent "
       "of its next write committed with the receipt of the last one. Writes that wait for an approval "
       "or a gateway caller keep two commits either way."),
    _V("RATCHET_TASK_SLICE_SECONDS", "seconds", 2.0, CELERY,
       "How long one task drives its run before it looks whether other runs wait (DESIGN.md section 5.7)."),
    _V("RATCHET_TASK_MAX_SECONDS", "seconds", 60.0, CELERY,
       "The longest one task drives its run in any case; at least RATCHET_TASK_SLICE_SECONDS."),
    _V("RATCHET_STEPS_PER_TASK", "positive_int", None, CELERY,
       "An optional cap on the committed steps one task drives.", default_text="(unset: the time slice decides)"),
    _V("RATCHET_WORKER_CONN_MAX_AGE", "seconds", 300.0, CELERY,
       "Seconds a worker process keeps a database connection across tasks."),
    _V("RATCHET_BROKER_VISIBILITY_SECONDS", "seconds", 3600.0, CELERY,
       "Redis visibility timeout; must be longer than the lease and RATCHET_TASK_MAX_SECONDS."),
    _V("RATCHET_BROKER_POLL_SECONDS", "seconds", 0.1, CELERY,
       "How long a worker on the embedded broker sleeps when it cannot take a message."),
    # --- OpenTelemetry traces and JSON logs (DESIGN.md section 8.6)
    _V("RATCHET_OTEL_DB_SPANS", "bool", False, OBSERVE,
       "One span per SQL statement (psycopg instrumentation) while tracing is on; many spans, off by default."),
    _V("RATCHET_LOG_FORMAT", "str", "text", OBSERVE,
       "`text` or `json`: one JSON object per line with `run_id` (and `trace_id`/`span_id` while a "
       "span is current) on every line logged in a run's context."),
    # --- notifications (DESIGN.md section 6.10)
    _V("RATCHET_PUBLIC_BASE_URL", "str", None, WEB,
       "The absolute http(s) base URL people and agents open the dashboard at: notification links and "
       "the gateway's `approval_url` are built on it. A host name, not an IP address, if passkeys are used.",
       default_text="RATCHET_DASHBOARD_URL if set, else http://localhost:8000"),
    _V("RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS", "seconds", 900.0, OBSERVE,
       "An approval whose signed evidence expires within this many seconds is announced as expiring."),
    _V("RATCHET_NOTIFY_MAX_ATTEMPTS", "positive_int", 8, OBSERVE, "Delivery attempts per notification."),
    _V("RATCHET_NOTIFY_BACKOFF_SECONDS", "seconds", 10.0, OBSERVE,
       "The first retry's delay; it doubles with each attempt up to RATCHET_NOTIFY_BACKOFF_MAX_SECONDS."),
    _V("RATCHET_NOTIFY_BACKOFF_MAX_SECONDS", "seconds", 3600.0, OBSERVE, "The longest delay between two attempts."),
    _V("RATCHET_NOTIFY_TIMEOUT_SECONDS", "seconds", 10.0, OBSERVE,
       "The timeout of one webhook, apprise or SMTP attempt (also Django's EMAIL_TIMEOUT)."),
    _V("RATCHET_NOTIFY_SWEEP_SECONDS", "seconds", 60.0, OBSERVE,
       "Period of the notification sweep: unrecorded events, expiring approvals, due retries."),
    # --- the client SDK, operator API and MCP reads (DESIGN.md section 5.13)
    _V("RATCHET_API_TASK_SPECS_DIR", "path", "", GATEWAY,
       "Where `POST /api/v1/operator/runs` finds the task specs an operator credential may start runs "
       "from (`<name>.toml`); empty: runs are not started through the API."),
    _V("RATCHET_GATEWAY_READ_MAX_BYTES", "positive_int", 262144, GATEWAY,
       "Largest file the gateway's `read_file` answers with, in bytes."),
    # --- the production process layout (runtime/docs/guides/deploy.md)
    _V("RATCHET_STATIC_ROOT", "path", None, WEB, "Where `manage.py collectstatic` puts the static files.",
       default_text="$RATCHET_VAR_DIR/staticfiles", setting="STATIC_ROOT"),
    _V("RATCHET_STATIC_MANIFEST", "bool", False, WEB,
       "Serve the content-hashed files `collectstatic` wrote (WhiteNoise, far-future cache headers); "
       "production sets 1 after `collectstatic`."),
    # --- retention and archive (DESIGN.md section 4.11)
    _V("RATCHET_ARCHIVE_AFTER_SECONDS", "seconds", None, OBSERVE,
       "Finished runs not updated for this long are archived by the beat task; unset: no scheduled "
       "archiving (`manage.py archive` still works).", default_text="(unset)"),
    _V("RATCHET_ARCHIVE_PHASES", "list", ["completed", "failed", "cancelled"], OBSERVE,
       "The phases the scheduled archive takes."),
    _V("RATCHET_ARCHIVE_STORAGE", "str", "default", OBSERVE,
       "The `STORAGES` entry archived bundles are written to (the media file system by default; "
       "django-storages for object storage)."),
    _V("RATCHET_ARCHIVE_PREFIX", "str", "archive", OBSERVE, "The folder (key prefix) bundles are written under."),
    _V("RATCHET_ARCHIVE_EVERY_SECONDS", "seconds", 3600.0, OBSERVE, "Period of the scheduled archive."),
    _V("RATCHET_ARCHIVE_BATCH", "positive_int", 500, OBSERVE, "Runs one scheduled archive pass takes at most."),
    _V("RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS", "seconds", 86400.0, OBSERVE,
       "Attachments younger than this are never swept (a live step may not have committed the "
       "checkpoint naming them yet)."),
)

READ_ELSEWHERE: tuple[Variable, ...] = (
    _V("RATCHET_CHECKPOINT_KEYS", "str", "", KEYS,
       "`kid:BASE64[,...]` HMAC keys of the checkpoint root; the first signs, all verify "
       "(DESIGN.md section 4.1). The same form for `RATCHET_APPROVAL_KEYS`, `RATCHET_REVIEWER_KEYS`, "
       "`RATCHET_EXPORT_KEYS`.",
       read_in="runtime.keys"),
    _V("RATCHET_APPROVAL_PUBLIC_KEYS", "str", "", KEYS,
       "`kid:BASE64[,...]` Ed25519 public keys; when set, verification uses exactly these. The same "
       "form for `RATCHET_REVIEWER_PUBLIC_KEYS` and `RATCHET_EXPORT_PUBLIC_KEYS`.", read_in="runtime.keys"),
    _V("RATCHET_REVIEWER_KEY_NAMES", "str", "", KEYS,
       "`kid:name[,...]`: binds reviewer keys from the environment to reviewer names.", read_in="runtime.keys"),
    _V("RATCHET_REDACTION_KEY_FILE", "path", "", KEYS, "The key redacted evidence is keyed with.",
       read_in="runtime.adapters.redaction"),
    _V("RATCHET_GATEWAY_TOKEN", "str", "", KEYS, "The token `manage.py gateway --stdio` serves.",
       read_in="runtime.management.commands.gateway"),
    _V("RATCHET_GATEWAY_RUN", "str", "", KEYS,
       "With a per-agent token over stdio: the run the calls go to.", read_in="runtime.management.commands.gateway"),
    _V("RATCHET_CRASH_AT", "str", "", TESTING,
       "`<point>[:<nth>]`: the process SIGKILLs itself at that crash point (`manage.py crash_points`).",
       read_in="runtime.core.crashpoints"),
    _V("RATCHET_MODEL", "str", "", TESTING, "The chat-tools planner's default model name.",
       read_in="runtime.planners.chat_tools.options"),
    _V("RATCHET_MODEL_BASE_URL", "str", "", TESTING, "The chat-tools planner's default endpoint.",
       read_in="runtime.planners.chat_tools.options"),
    _V("RATCHET_MODEL_API_KEY", "str", "", KEYS,
       "The chat-tools planner's API key (another variable with `api_key_env`); local servers need none.",
       read_in="runtime.planners.chat_tools.options"),
    _V("RATCHET_DEMO_PASSWORD", "str", "", TESTING,
       "`manage.py demo`: one password for every demo login instead of random ones printed once.",
       read_in="review.management.commands.demo"),
    _V("OTEL_EXPORTER_OTLP_ENDPOINT", "url", "", OBSERVE,
       "Tracing is on only when this (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) names an OTLP receiver; "
       "the other standard `OTEL_*` variables (headers, certificates, `OTEL_BSP_*`, "
       "`OTEL_RESOURCE_ATTRIBUTES`) are read by the OpenTelemetry SDK itself.",
       read_in="runtime.project.settings (RATCHET_TRACING, RATCHET_OTEL_ENDPOINT)"),
    _V("OTEL_EXPORTER_OTLP_PROTOCOL", "str", "http/protobuf", OBSERVE,
       "`grpc` or `http/protobuf` (also `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`); anything else stops start-up.",
       read_in="runtime.project.settings (RATCHET_OTEL_PROTOCOL)"),
    _V("OTEL_SERVICE_NAME", "str", "ratchet", OBSERVE, "The service name spans are exported under.",
       read_in="runtime.project.settings (RATCHET_OTEL_SERVICE_NAME)"),
    _V("OTEL_SDK_DISABLED", "bool", False, OBSERVE,
       "True turns tracing off whatever the endpoint (as does `OTEL_TRACES_EXPORTER=none`).",
       read_in="runtime.project.settings (RATCHET_TRACING)"),
    _V("EMAIL_HOST", "str", "localhost", OBSERVE, "SMTP server for e-mail notifications (Django's mail).",
       read_in="runtime.project.settings (EMAIL_HOST)"),
    _V("EMAIL_PORT", "int", 25, OBSERVE, "Its port.", read_in="runtime.project.settings (EMAIL_PORT)"),
    _V("EMAIL_HOST_USER", "str", "", OBSERVE, "SMTP user.", read_in="runtime.project.settings (EMAIL_HOST_USER)"),
    _V("EMAIL_HOST_PASSWORD", "str", "", KEYS, "SMTP password (only ever from the environment).",
       read_in="runtime.project.settings (EMAIL_HOST_PASSWORD)"),
    _V("EMAIL_USE_TLS", "bool", False, OBSERVE, "STARTTLS to the SMTP server.",
       read_in="runtime.project.settings (EMAIL_USE_TLS)"),
    _V("DEFAULT_FROM_EMAIL", "str", "ratchet@localhost", OBSERVE, "The sender of notification e-mail.",
       read_in="runtime.project.settings (DEFAULT_FROM_EMAIL)"),
)

VARIABLES_BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}
