"""The policy part of a task spec, enforced on every proposed action (DESIGN.md sections 3 and 6).

:func:`policy_check` rejects an action whose kind is not allowlisted or which touches a path
outside ``allowed_paths``; :func:`needs_approval` says whether an action's risk needs a human
approval. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from runtime.core.checkpoint import Action, Scope
from runtime.errors import PolicyViolationError
from runtime.taskspec.models import PolicySection, TaskSpec
from runtime.taskspec.paths import glob_match, relative_path_problem

FILE_ACTION_KINDS = frozenset({"write_file", "delete_file", "commit"})
"""Action kinds whose paths :func:`policy_check` checks against ``allowed_paths``."""

PolicyScope = TaskSpec | PolicySection | Scope


def _allowlists(scope: PolicyScope) -> tuple[list[str], list[str]]:
    policy = scope.policy if isinstance(scope, TaskSpec) else scope
    return list(policy.allowed_actions), list(policy.allowed_paths)


def action_paths(action: Action) -> list[str]:
    """The workspace paths a file action touches: the target, or every change of a commit.

    Raises:
        PolicyViolationError: a commit's ``changes`` is not a list of ``{"op", "path"}`` objects.
    """
    if action.kind in ("write_file", "delete_file"):
        return [action.target]
    if action.kind != "commit":
        return []
    changes = action.params.get("changes")
    if not isinstance(changes, list):
        raise PolicyViolationError("commit action has no list of changes", action_kind="commit")
    paths: list[str] = []
    for index, change in enumerate(changes):
        path = change.get("path") if isinstance(change, dict) else None
        if not isinstance(path, str):
            raise PolicyViolationError(
                f"commit change {index} has no path", action_kind="commit"
            )
        paths.append(path)
    if action.target:
        paths.append(action.target)
    return paths


def policy_check(scope: PolicyScope, action: Action, *, run_id: str | None = None) -> None:
    """Reject an action outside the allowed scope (DESIGN.md section 3, allowed scope).

    The kind must be in ``allowed_actions``. For file actions (``write_file``, ``delete_file``,
    ``commit``) every path touched -- each change of a commit -- must be a safe relative path
    (no ``..``, not absolute, not inside ``.git``) matching one of ``allowed_paths``. Other
    kinds (a future browser or API adapter) are checked by kind only.

    Args:
        scope: a :class:`TaskSpec`, its ``policy`` section, or the checkpoint's ``Scope``.
        action: the proposed action.
        run_id: named in the error, when known.

    Raises:
        PolicyViolationError: naming the action kind and the first offending path.
    """
    allowed_actions, allowed_paths = _allowlists(scope)
    if action.kind not in allowed_actions:
        raise PolicyViolationError(
            f"action kind {action.kind!r} is not in the policy's allowed_actions",
            action_kind=action.kind, run_id=run_id,
        )
    if action.kind not in FILE_ACTION_KINDS:
        return
    for path in action_paths(action):
        problem = relative_path_problem(path)
        if problem:
            raise PolicyViolationError(
                f"{action.kind} touches an unsafe path: {problem}",
                action_kind=action.kind, path=repr(path[:200]), run_id=run_id,
            )
        if not any(glob_match(p, path) for p in allowed_paths):
            raise PolicyViolationError(
                f"{action.kind} touches a path outside the policy's allowed_paths",
                action_kind=action.kind, path=repr(path[:200]), run_id=run_id,
            )


def needs_approval(scope: PolicyScope, action: Action) -> bool:
    """Whether ``action`` needs a human approval: its risk is in ``approval_risks`` (section 6)."""
    policy = scope.policy if isinstance(scope, TaskSpec) else scope
    return str(action.risk) in {str(r) for r in policy.approval_risks}
