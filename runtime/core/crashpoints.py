"""Named crash points: inert in production, armed per process by tests (STYLE.md rule 8).

Production code marks each persistence step with ``crash_point("checkpoint.after_append")``.
Unless the environment variable ``RATCHET_CRASH_AT`` names that point, the call does nothing. A
test arms a point in a *child* process (``RATCHET_CRASH_AT=checkpoint.after_append`` or
``checkpoint.after_append:2`` for the second hit) and the child SIGKILLs itself there: no
``finally`` blocks, no atexit handlers, no transaction commit, exactly like a power cut or an OOM
kill. DESIGN.md section 8 asks for a SIGKILL before and after every persistence step.

Names must be registered (:func:`register`) before use, so a typo in production code raises
instead of silently never firing. The variable is read at call time, not at import, so one
process can be armed without touching any other.

This module imports nothing from Django.
"""

from __future__ import annotations

import os
import signal

from runtime.errors import CrashPointError

ENV_VAR = "RATCHET_CRASH_AT"

CRASH_POINTS: dict[str, str] = {}
"""Registered crash points: ``name -> description`` of the moment it marks."""

_hits: dict[str, int] = {}


def register(name: str, description: str) -> str:
    """Register a crash point and return its name (so callers can keep it in a constant).

    Args:
        name: dotted name, e.g. ``"checkpoint.after_append"``; must not contain ``":"``.
        description: what has and has not been persisted when the point is hit.

    Raises:
        CrashPointError: the name is empty, contains ``":"`` or is registered with another
            description (two call sites must not share a name by accident).
    """
    if not name or ":" in name:
        raise CrashPointError(
            "crash point names are non-empty and contain no ':'", crash_point=name
        )
    known = CRASH_POINTS.get(name)
    if known is not None and known != description:
        raise CrashPointError(
            "crash point registered twice with different meanings", crash_point=name
        )
    CRASH_POINTS[name] = description
    return name


def _armed() -> tuple[str, int] | None:
    spec = os.environ.get(ENV_VAR, "").strip()
    if not spec:
        return None
    name, sep, nth = spec.partition(":")
    if not sep:
        return name, 1
    try:
        count = int(nth)
    except ValueError:
        raise CrashPointError(
            f"{ENV_VAR} must be NAME or NAME:N with N >= 1", crash_point=spec
        ) from None
    if count < 1:
        raise CrashPointError(f"{ENV_VAR} must be NAME or NAME:N with N >= 1", crash_point=spec)
    return name, count


def crash_point(name: str) -> None:
    """Mark a crash point; SIGKILL this process if ``RATCHET_CRASH_AT`` arms it.

    ``RATCHET_CRASH_AT="<name>"`` fires on the first hit, ``"<name>:<n>"`` on the n-th hit
    (1-based) of that point in this process.

    Raises:
        CrashPointError: ``name`` was never registered, or the variable is malformed.
    """
    if name not in CRASH_POINTS:
        raise CrashPointError(crash_point=name)
    armed = _armed()
    if armed is None or armed[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == armed[1]:
        # SIGKILL, not sys.exit: nothing may run after this line, or the test proves nothing.
        os.kill(os.getpid(), signal.SIGKILL)
