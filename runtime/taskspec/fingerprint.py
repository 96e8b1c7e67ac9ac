"""The scenario fingerprint: one digest of everything a resume must find unchanged (DESIGN.md section 3).

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from typing import Protocol

from runtime.core.canonical import DigestKind, digest
from runtime.taskspec.models import TaskSpec

SCENARIO_FINGERPRINT_VERSION = 1
"""Version of the scenario fingerprint layout; bump it when :func:`scenario_fingerprint` changes."""


class ObservedInitialState(Protocol):
    """What :func:`scenario_fingerprint` needs of the first observation (an ``EnvironmentRef`` or
    an adapter ``Observation``)."""

    instance_id: str
    version: str
    state_fingerprint: str


def scenario_fingerprint(spec: TaskSpec, initial: ObservedInitialState) -> str:
    """Typed digest (``DigestKind.SCENARIO``) of the fixed scenario (DESIGN.md section 3).

    Covers the schema versions, task id/version/tenant, the whole policy (id, version,
    permissions, allowlists, approval risks, budgets), the environment (adapter, target, setup),
    the planner, the verifier expectation, and the observed initial state (instance id, version,
    state fingerprint). Any change gives another fingerprint, so a resume under a changed scenario
    is refused with ``ScenarioMismatchError``.

    ``[versions]`` is deliberately left out: the version combination is checked on its own
    (``VersionSet``) so that a versioned migrator can allow a resume under a new combination,
    which a scenario mismatch would make impossible.

    Args:
        spec: the validated task spec.
        initial: the observation taken before the first proposal.

    Returns:
        ``"sha256:" + 64 hex``.
    """
    body = spec.model_dump(mode="json", exclude={"versions"})
    return digest(
        DigestKind.SCENARIO,
        {
            "fingerprint_version": SCENARIO_FINGERPRINT_VERSION,
            "spec": body,
            "initial": {
                "instance_id": initial.instance_id,
                "version": initial.version,
                "state_fingerprint": initial.state_fingerprint,
            },
        },
    )
