"""The demo's replay scenarios: one run per state the dashboard shows, and the replay task of each.

===================  =========================================================================
scenario             how it is reached
===================  =========================================================================
completed            a two-commit replay driven to the end (verifier passed)
awaiting_approval    ``approval_risks = ["low"]``: the first commit waits for an operator
approval_expired     approved with a one-second approval, which expired before the write ran
receipt_conflict     the pending key was used by another caller for a different commit (another
                     message and one file's content changed): frozen in needs_review with a
                     review case whose page shows the content diff
receipt_conflict_2   a second conflict on other commits (same files, another message), so a
                     reviewer can try both decisions, abort on one and replan on the other
recovered            a two-commit replay whose process was SIGKILLed after its second write and
                     recovered by another worker (Health's recovery figures)
failed               the policy allows only ``write_file``, so the first ``commit`` is refused
===================  =========================================================================

The running run and the model-driven runs are in :mod:`runtime.demo.agents`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.taskspec.writing import replay_task_write

MAX_TEXT_BYTES = 64 * 1024
"""The largest file the content conflict edits (the case page diffs text files this small)."""


@dataclass(frozen=True)
class Scenario:
    """One demo run: replay the source's first-parent commits after ``HEAD~base`` up to
    ``HEAD~tip``; ``approval_risks`` and ``allowed_actions`` go into the task's policy;
    ``conflict_content``: a receipt conflict whose other caller also changed a file's content."""

    name: str
    base: int
    tip: int
    approval_risks: tuple[str, ...] = ()
    allowed_actions: tuple[str, ...] = ("commit",)
    description: str = ""
    conflict_content: bool = False


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
        description="another caller used the pending key for a commit with other file content",
        conflict_content=True,
    ),
    Scenario(
        "receipt_conflict_2",
        6,
        4,
        description="a second conflict (same files, other message): replan it, abort the first",
    ),
    Scenario(
        "recovered",
        3,
        1,
        description="its process was SIGKILLed mid-run; another worker recovered and finished it",
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


OTHER_CALLER_LINE = "Written by another caller that reused this idempotency key.\n"
"""The line the content conflict puts in place of the planned file's first non-blank line."""


def conflicting_commit(action_params: dict[str, Any], *, content: bool = False) -> dict[str, Any]:
    """Parameters of a *different* commit: another caller's message and, with ``content``, one
    file's content changed too.

    Used to stage a receipt conflict (DESIGN.md section 6): same idempotency key, different
    intent digest. Without ``content`` the files are the same, so a reviewer's replan can still
    finish with the replayed tree equal to the source's. With it, the first written text file
    (UTF-8, up to ``MAX_TEXT_BYTES``) has its first non-blank line replaced by
    :data:`OTHER_CALLER_LINE`, stored as a new attachment, so the case page shows a content diff;
    a commit without such a file keeps its files.
    """
    other = {**action_params}
    if content and action_params.get("changes"):
        other["changes"] = _one_file_changed(list(action_params["changes"]))
    return {
        **other,
        "message": "Not what the plan said: another caller reused this key\n",
        "author_name": "Another Caller",
        "author_email": "other@example.invalid",
    }


def _one_file_changed(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for n, change in enumerate(changes):
        if change.get("op") != "write" or not change.get("content"):
            continue
        data = attachment_get(digest=change["content"])
        if len(data) > MAX_TEXT_BYTES:
            continue
        try:
            lines = data.decode("utf-8").splitlines(keepends=True)
        except UnicodeDecodeError:
            continue
        first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
        edited = [*lines[:first], OTHER_CALLER_LINE, *lines[first + 1:]]
        other = {**change, "content": attachment_put(data="".join(edited).encode("utf-8"))}
        return [*changes[:n], other, *changes[n + 1:]]
    return changes
