"""Configuration errors: keyrings and keys, the redaction key, the dashboard's roles, crash points,
tracing.

Each sits under :class:`~runtime.errors.base.ConfigurationError`: nothing ran, the operator fixes
the named setting and restarts. Messages name the variable, file or key id, never key text.
"""

from __future__ import annotations

from runtime.errors.base import ConfigurationError


class KeyringError(ConfigurationError):
    """A keyring (checkpoint, approval, reviewer or evidence) is missing, malformed or holds a
    key that is too short (DESIGN.md section 4.1). Context: ``root``, ``key_id``, ``file``."""

    default_message = "keyring is misconfigured"
    hint = "fix the named key file (RATCHET_KEY_FILE) or key text and restart; keys are never shown in this message"


class WrongTrustRootError(KeyringError, ValueError):
    """A keyring of one trust root was used where another root is required (DESIGN.md section 4).

    Also a ``ValueError`` because ``seal`` raised that before this error existed.
    """

    default_message = "keyring belongs to another trust root"
    hint = "checkpoints, approvals and reviewer decisions each have their own keyring"


class RedactionKeyError(ConfigurationError):
    """The redaction key (``RATCHET_REDACTION_KEY`` or its key file) is missing or malformed.
    The message names the variable or file, never key text (DESIGN.md section 5.9)."""

    default_message = "the redaction key is missing or malformed"
    hint = ("set RATCHET_REDACTION_KEY=KEY_ID:BASE64 (at least 32 random bytes) or remove the broken "
            "redaction key file so a fresh one is created")


class RoleSetupError(ConfigurationError):
    """The dashboard's role permissions are missing, so the groups cannot be built."""

    default_message = "dashboard role permissions are missing from the database"
    hint = "run `manage.py migrate` first, then `manage.py ratchet_roles`"


class CrashPointError(ConfigurationError):
    """A crash point name or spec is malformed, unknown or registered twice with different
    descriptions (``runtime.core.crashpoints``). Context: ``crash_point``."""

    default_message = "unknown crash point"
    hint = ("crash point names must be registered with runtime.core.crashpoints.register first; "
            "`manage.py crash_points` lists them")


class TelemetrySetupError(ConfigurationError):
    """Tracing is configured (an OTLP endpoint is set) but cannot start: the OpenTelemetry
    packages are not installed, or the OTLP protocol is one the exporter does not speak
    (DESIGN.md section 8.6). Context: ``setting``, ``value``."""

    default_message = "OpenTelemetry tracing is configured but cannot start"
    hint = ("install the tracing extra (pip install 'ratchet[otel]'), set OTEL_EXPORTER_OTLP_PROTOCOL to grpc or "
            "http/protobuf, or unset OTEL_EXPORTER_OTLP_ENDPOINT to switch tracing off")
