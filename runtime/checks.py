"""System checks for the runtime's safety rules (STYLE.md rule 9)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Warning, register


@register()
def keyrings_configured(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """runtime.E001: every trust root must have a usable keyring that verifies: the checkpoint
    HMAC key and the *public* keys of the approval, reviewer and export roots. Private keys of
    those roots are not required (a worker holds none; DESIGN.md section 4.1)."""
    from runtime.core.signing import TrustRoot
    from runtime.errors import KeyringError
    from runtime.keys import keyring_for

    errors = []
    for root in TrustRoot:
        try:
            keyring_for(root)
        except KeyringError as exc:
            errors.append(
                Error(
                    f"no usable {root} keyring: {exc.message}",
                    hint=(f"set RATCHET_{root.upper()}_PUBLIC_KEYS=KEY_ID:BASE64 (the public key) "
                          if root.asymmetric else f"set RATCHET_{root.upper()}_KEYS=KEY_ID:BASE64 ")
                    + "or run any command once to create the embedded key file",
                    id="runtime.E001",
                )
            )
    return errors


@register()
def hwm_store_shared(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """runtime.W001: the main database is PostgreSQL (many workers, many hosts) but the
    high-water marks are in an SQLite file, which each host would hold on its own: a run a
    worker on another host commits has no mark there and fails closed (DESIGN.md section 4.2).
    Fine only when every worker runs on this one host."""
    from django.conf import settings

    databases = settings.DATABASES
    if "hwm" not in databases or not databases["default"]["ENGINE"].endswith("postgresql"):
        return []
    if not databases["hwm"]["ENGINE"].endswith("sqlite3"):
        return []
    return [Warning(
        "the main database is PostgreSQL but the high-water marks are in an SQLite file on this host",
        hint="unless every worker runs on this host, set RATCHET_HWM_DATABASE_URL to a PostgreSQL "
             "database that every worker reaches (unset, it is <name>_hwm beside the main one)",
        id="runtime.W001",
    )]


@register(deploy=True)
def metrics_token_set(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """runtime.W002 (``check --deploy``): ``/metrics`` has no bearer token, so it answers every
    request from a loopback address, which behind a reverse proxy on the same host is every
    request (DESIGN.md section 8.1)."""
    from django.conf import settings

    if getattr(settings, "RATCHET_METRICS_TOKEN", ""):
        return []
    return [Warning(
        "RATCHET_METRICS_TOKEN is not set: /metrics answers any client whose request reaches the "
        "web process from a loopback address, including everyone behind a reverse proxy on this host",
        hint="set RATCHET_METRICS_TOKEN to a long random value and give it to Prometheus as its "
             "bearer token (authorization.credentials in the scrape config)",
        id="runtime.W002",
    )]
