"""What a web process serves, and which keys its role allows it to hold (DESIGN.md section 2.4).

``RATCHET_PROCESS_ROLE=all`` (the default) serves the dashboard, the Django admin, ``/metrics`` and
the agents' JSON API under ``/api/v1/``; it signs approvals, reviewer decisions and evidence
bundles for the people signed in, so it holds those private keys. ``agent`` serves only the JSON
API and ``/metrics``: agent traffic, which anyone holding a gateway token can send, then reaches a
process that holds no private key at all. An agent process is keyed like a worker: the checkpoint
key and the public keys of the three asymmetric roots, all from the environment, so it never opens
the key file (which holds private seeds). This module reads nothing from Django: the settings
module calls :func:`process_role_refusal` before anything else loads.
"""

from __future__ import annotations

from collections.abc import Mapping

ALL = "all"
AGENT = "agent"
ROLES = (ALL, AGENT)

PRIVATE_KEY_VARIABLES = ("RATCHET_APPROVAL_KEYS", "RATCHET_REVIEWER_KEYS", "RATCHET_EXPORT_KEYS")
"""The private halves of the approval, reviewer and export roots (``runtime.keys``)."""
AGENT_KEY_VARIABLES = ("RATCHET_CHECKPOINT_KEYS", "RATCHET_APPROVAL_PUBLIC_KEYS",
                       "RATCHET_REVIEWER_PUBLIC_KEYS", "RATCHET_EXPORT_PUBLIC_KEYS")
"""What an agent process is keyed with instead: the checkpoint key and the public keys."""


def process_role_refusal(*, role: str, environ: Mapping[str, str]) -> str | None:
    """Why a process with ``role`` and this environment must not start, or None if it may.

    Args:
        role: the value of ``RATCHET_PROCESS_ROLE`` (``all`` or ``agent``).
        environ: the process environment (``os.environ``); only variable *names* are reported,
            never a value.

    Returns:
        A message for ``ImproperlyConfigured`` naming the offending variables and what to do, or
        None.
    """
    if role not in ROLES:
        return f"RATCHET_PROCESS_ROLE={role!r} is not one of {', '.join(ROLES)}"
    if role != AGENT:
        return None
    held = [name for name in PRIVATE_KEY_VARIABLES if environ.get(name)]
    if held:
        return (f"RATCHET_PROCESS_ROLE=agent refuses private keys, but {', '.join(held)} "
                f"{'is' if len(held) == 1 else 'are'} set: start the agent process without "
                "them (it verifies with the *_PUBLIC_KEYS; deploy guide, 'Agent traffic')")
    missing = [name for name in AGENT_KEY_VARIABLES if not environ.get(name)]
    if missing:
        return (f"RATCHET_PROCESS_ROLE=agent takes its keys from the environment only (never the key "
                f"file, which holds private seeds), but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} unset")
    return None
