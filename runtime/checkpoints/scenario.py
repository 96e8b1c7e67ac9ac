"""The scenario a run was created for, recomputed from the spec stored with it (DESIGN.md section 4).

A checkpoint's identity names the scenario fingerprint: the task spec and the initial observation
of the environment, digested. A restore and ``checkpoint verify`` recompute it from the run's
stored copy of both, never take the run row's column for it: a stored spec edited after the run
was created then no longer matches what the checkpoints were signed for, and the run fails closed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from runtime.taskspec import TaskSpec, scenario_fingerprint


@dataclass(frozen=True)
class InitialObservation:
    """The initial observation as stored with the run, for recomputing the scenario fingerprint."""

    instance_id: str
    version: str
    state_fingerprint: str
    kind: str


def stored_scenario(*, stored: dict[str, Any]) -> tuple[TaskSpec, str]:
    """``(spec, scenario fingerprint)`` from a run's stored ``spec`` column.

    Raises:
        TaskSpecError / PluginError: the stored spec no longer validates or loads.
        KeyError / TypeError: the stored copy lacks its parts (a row edited outside Ratchet).
    """
    return _parsed(json.dumps({"task": stored["task"], "initial": stored["initial"]}, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> tuple[TaskSpec, str]:
    # A run's stored spec never changes, and every restore, `checkpoint verify` and gateway read
    # recomputes from it: parse and digest each distinct spec once per process, keyed by content.
    stored = json.loads(text)
    spec = TaskSpec.from_json(stored["task"])
    return spec, scenario_fingerprint(spec, InitialObservation(**stored["initial"]))
