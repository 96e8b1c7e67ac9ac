"""The demo's replay scenarios: one run per state the dashboard shows, and the replay task of each.

===================  =========================================================================
scenario             how it is reached
===================  =========================================================================
completed            a two-commit replay driven to the end (verifier passed)
awaiting_approval    ``approval_risks = ["low"]``: the first commit waits for an operator
approval_expired     approved with a one-second approval, which expired before the write ran
receipt_conflict     the pending key was used by another caller for a different commit (same
                     files, another message): frozen in needs_review with a review case
receipt_conflict_2   a second such conflict on other commits, so a reviewer can try both
                     decisions, replan on one and abort on the other
failed               the policy allows only ``write_file``, so the first ``commit`` is refused
===================  =========================================================================

The running run and the model-driven runs are in :mod:`runtime.demo.agents`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.taskspec.writing import replay_task_write


@dataclass(frozen=True)
class Scenario:
    """One demo run: replay the source's first-parent commits after ``HEAD~base`` up to
    ``HEAD~tip``; ``approval_risks`` and ``allowed_actions`` go into the task's policy."""

    name: str
    base: int
    tip: int
    approval_risks: tuple[str, ...] = ()
    allowed_actions: tuple[str, ...] = ("commit",)
    description: str = ""


SCENARIOS = (
    Scenario("completed", 4, 2, description="replayed to the end; the verifier passed"),
    Scenario(
        "awaiting_approval",
        1,
        0,
        approval_risks=("low",),
        description="its first commit waits for an operator's approval",
    ),
    Scenario(
        "approval_expired",
        2,
        1,
        approval_risks=("low",),
        description="approved for one second; the approval expired before the write",
    ),
    Scenario(
        "receipt_conflict",
        3,
        1,
        description="another caller used the pending key for a different commit",
    ),
    Scenario(
        "receipt_conflict_2",
        6,
        4,
        description="a second conflict: try replan on one and abort on the other",
    ),
    Scenario(
        "failed",
        1,
        0,
        allowed_actions=("write_file",),
        description="the policy does not allow commits, so the first one is refused",
    ),
)
"""Every scenario, in the order they are seeded."""

MIN_COMMITS = max(s.base for s in SCENARIOS) + 1
"""First-parent commits the source needs (``HEAD~6`` must exist)."""

def task_write(*, scenario: Scenario, source: Path, workdir: Path, revs: dict[int, str]) -> Path:
    """Write the scenario's task spec to ``<workdir>/tasks/<name>.toml`` and return its path.

    Args:
        scenario: the scenario; its ``base`` and ``tip`` are keys of ``revs``.
        source: the repository replayed.
        workdir: the demo's work directory; the run's clone goes to ``<workdir>/targets/<name>``.
        revs: ``k -> commit id of HEAD~k`` of ``source``.
    """
    base, tip = revs[scenario.base], revs[scenario.tip]
    dashed = f"demo-{scenario.name.replace('_', '-')}"
    return replay_task_write(
        path=workdir / "tasks" / f"{scenario.name}.toml",
        comment=(f'Demo scenario "{scenario.name}": {scenario.description}.\n'
                 f"Written by `manage.py demo`; replays {base}..{tip} of {source.name}."),
        task_id=dashed, source=source, range_=f"{base}..{tip}", target=f"../targets/{scenario.name}",
        allowed_actions=scenario.allowed_actions, approval_risks=scenario.approval_risks,
        wall_seconds=900, risk="low")


def conflicting_commit(action_params: dict[str, Any]) -> dict[str, Any]:
    """Parameters of a *different* commit with the same file changes: another caller's message.

    Used to stage a receipt conflict (DESIGN.md section 6): same idempotency key, different
    intent digest. Because the files are the same, a reviewer's replan can still finish with
    the replayed tree equal to the source's.
    """
    return {
        **action_params,
        "message": "Not what the plan said: another caller reused this key\n",
        "author_name": "Another Caller",
        "author_email": "other@example.invalid",
    }
