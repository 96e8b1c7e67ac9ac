"""System checks for the runtime's safety rules (house style 9)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register


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
