"""Helpers for the step-engine stories: small real histories, task files, and the evidence checks.

The stories drive real runs (``run_start`` / ``run_advance`` in-process, or ``manage.py run`` /
``resume`` in child processes) against real environments: a git clone the git adapter commits to,
or a directory the workspace adapter journals. Everything they assert comes from the
environment's own records (git history trailers, the workspace journal), the committed checkpoint
and the trace -- never from what the engine says about itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from runtime.adapters.base import Adapter
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.checks import Restored
from runtime.checkpoints.protocol import checkpoint_restore
from runtime.checkpoints.scenario import InitialObservation
from runtime.core.checkpoint import Action, Receipt, VersionSet
from runtime.evidence.attachments import attachment_get
from runtime.models import Run, TraceEvent
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.regression.sources import SMALL_HISTORY_COMMITS, hanging_git_install
from runtime.taskspec import TaskSpec, scenario_fingerprint
from runtime.taskspec.writing import replay_task, toml_dumps
from tests.planners.gitrepo import BlobStore, git, observation

# --- the small source history and its replay task -----------------------------------------------------------------

SOURCE_COMMITS = SMALL_HISTORY_COMMITS
"""Commits after the root in the small history the stories replay
(``runtime.regression.sources.small_history_build``); the replay range is ``last:5``."""


def replay_task_text(source: Path | str, *, count: int = SOURCE_COMMITS, risk: str = "low",
                     approval_risks: tuple[str, ...] = (), budget: int = 40,
                     task_id: str = "engine-replay") -> str:
    """TOML text of a git-history replay of ``source``'s last ``count`` commits into ``target``
    next to the file: the product's replay task (``runtime.taskspec.writing``) with no
    ``[versions]`` and no permissions."""
    return toml_dumps(replay_task(task_id=task_id, policy_id="replay", source=source, range_=f"last:{count}",
                                  target="target", risk=risk, approval_risks=approval_risks, budget=budget,
                                  versions=None, permissions=()))


def write_replay_task(directory: Path, source: Path, **options: Any) -> Path:
    """Write :func:`replay_task_text` (``options`` are its keyword arguments) to
    ``directory/task.toml``; return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "task.toml"
    path.write_text(replay_task_text(source, **options), encoding="utf-8")
    return path


def planned_intents(source: Path, count: int = SOURCE_COMMITS) -> list[str]:
    """The intent digests an uninterrupted replay of ``last:count`` proposes, cursor by cursor.

    Computed from the planner alone (no database, no adapter): the plan is deterministic, so
    every run of the task -- crashed and resumed or not -- must propose exactly these.
    """
    planner = GitHistoryPlanner(source=source, range=f"last:{count}")
    state = planner.init_state()
    blobs = BlobStore()
    out = []
    for cursor in range(count):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        assert isinstance(action, Action)
        out.append(action.intent_digest())
    return out


# --- scripted workspace tasks ---------------------------------------------------------------

WORKSPACE_STEPS: list[dict[str, Any]] = [
    {"target": "README.md", "content": "# Workspace\n"},
    {"target": "notes.txt", "content": "temporary notes\n"},
    {"target": "scripts/run.sh", "content": "#!/bin/sh\necho run\n", "executable": True},
    {"target": "README.md", "content": "# Workspace\n\nEdited by step four.\n"},
    {"target": "notes.txt", "delete": True},
]
"""Five writes: add, add, add executable, edit, delete."""

WORKSPACE_FINAL = {
    "README.md": "# Workspace\n\nEdited by step four.\n",
    "scripts/run.sh": "#!/bin/sh\necho run\n",
}


def scripted_task_text(steps: list[dict[str, Any]], *, files: dict[str, str] | None = None,
                       absent: list[str] | None = None, approval_risks: tuple[str, ...] = (),
                       allowed_paths: tuple[str, ...] = ("**",), budget: int = 40,
                       task_id: str = "engine-scripted") -> str:
    """TOML text of a scripted workspace task writing into ``workspace`` next to the file.

    ``files`` / ``absent`` set a ``files-equal`` verifier; without them the verifier is
    ``always``.
    """
    verifier: dict[str, Any] = {"kind": "always"}
    if files is not None or absent is not None:
        verifier = {"kind": "files-equal", "absent": list(absent or []), "files": dict(sorted((files or {}).items()))}
    return toml_dumps({
        "task": {"id": task_id, "version": "1"},
        "policy": {"id": "scripted", "version": "1", "allowed_actions": ["write_file", "delete_file"],
                   "allowed_paths": list(allowed_paths), "approval_risks": list(approval_risks),
                   "budgets": {"proposals": budget, "steps": budget, "wall_seconds": 600}},
        "environment": {"adapter": "workspace", "target": "workspace"},
        "planner": {"kind": "scripted", **({"steps": steps} if steps else {})},
        "verifier": verifier,
    })


def write_scripted_task(directory: Path, steps: list[dict[str, Any]] | None = None,
                        **kwargs: Any) -> Path:
    """Write :func:`scripted_task_text` to ``directory/task.toml`` and create the workspace."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workspace").mkdir(exist_ok=True)
    path = directory / "task.toml"
    if steps is None:
        steps = WORKSPACE_STEPS
        kwargs.setdefault("files", WORKSPACE_FINAL)
        kwargs.setdefault("absent", ["notes.txt"])
    path.write_text(scripted_task_text(steps, **kwargs), encoding="utf-8")
    return path


# --- reading a run back ---------------------------------------------------------------------


def run_target(run_id: str) -> Path:
    """The environment directory the run acts on (a per-run clone for clone-at-base tasks)."""
    return Path(Run.objects.get(run_id=run_id).spec["target"])


def execute_outside(run_id: str, action: Action | None = None) -> Receipt:
    """Execute the run's pending write -- or ``action`` under the pending write's key -- straight
    at a fresh adapter, with the run's current fencing token: what another caller, or a write
    that landed before the engine heard of it, does. Returns the adapter's receipt."""
    pending = restore(run_id).state.pending
    assert pending is not None, f"run {run_id} has no pending write"
    intent = pending.intent_digest if action is None else action.intent_digest()
    return run_adapter(run_id).execute(
        action or pending.action, idempotency_key=pending.idempotency_key, intent_digest=intent,
        fencing_token=Run.objects.get(run_id=run_id).lease_version, blobs=lambda d: attachment_get(digest=d))


def crash_point_hits(monkeypatch: Any, modules: Iterable[ModuleType]) -> Counter[str]:
    """Count, per crash point name, how often the code in ``modules`` reaches it from now on
    (each module's ``crash_point`` wrapped; a module without one is skipped)."""
    hits: Counter[str] = Counter()
    for module in modules:
        original = getattr(module, "crash_point", None)
        if original is None:
            continue

        def counted(name: str, original: Any = original) -> None:
            hits[name] += 1
            original(name)

        monkeypatch.setattr(module, "crash_point", counted)
    return hits


def run_adapter(run_id: str) -> Adapter:
    """A fresh adapter on the run's environment, as another caller would open it."""
    run = Run.objects.get(run_id=run_id)
    return open_adapter(run.spec["task"]["environment"]["adapter"], run.spec["target"])


def restore(run_id: str) -> Restored:
    """The run's committed checkpoint, restored exactly as the engine restores it."""
    run = Run.objects.get(run_id=run_id)
    spec = TaskSpec.from_json(run.spec["task"])
    scenario = scenario_fingerprint(spec, InitialObservation(**run.spec["initial"]))
    return checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario,
                              versions=VersionSet(**spec.versions.model_dump()))


def trace_types(run_id: str) -> list[str]:
    """Event types of the run's trace, in order."""
    return list(TraceEvent.objects.filter(run_id=run_id).order_by("seq")
                .values_list("event_type", flat=True))


def trace_events(run_id: str, event_type: str) -> list[dict[str, Any]]:
    """Payloads of the run's events of ``event_type``, in order."""
    return list(TraceEvent.objects.filter(run_id=run_id, event_type=event_type).order_by("seq")
                .values_list("payload", flat=True))


def keyed_commits(repo: Path) -> list[str]:
    """``Idempotency-Key`` trailer values on HEAD's history, oldest first, one per keyed commit.

    Read with plain ``git log``, not through the adapter: this is the repository's own record.
    """
    out = git(repo, "log", "--reverse", "--format=%x1e%(trailers:key=Idempotency-Key,valueonly)",
              "HEAD")
    keys = []
    for record in out.split("\x1e")[1:]:
        values = [line.strip() for line in record.splitlines() if line.strip()]
        keys.extend(values)
    return keys


def commit_trailer(repo: Path, trailer: str) -> list[str]:
    """Values of ``trailer`` on HEAD's history, oldest first (commits without it are skipped)."""
    out = git(repo, "log", "--reverse", f"--format=%x1e%(trailers:key={trailer},valueonly)", "HEAD")
    return [line.strip() for record in out.split("\x1e")[1:] for line in record.splitlines()
            if line.strip()]


def key_effects(repo: Path) -> Counter[str]:
    """How many commits carry each idempotency key (exactly-once means every count is 1)."""
    return Counter(keyed_commits(repo))


def head_tree(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD^{tree}").strip()


def workspace_journal(workspace: Path) -> list[dict[str, Any]]:
    """The workspace adapter's journal records, read straight from ``.ratchet/journal.jsonl``."""
    text = (workspace / ".ratchet" / "journal.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def journal_effects(workspace: Path) -> Counter[str]:
    """How many ``committed`` journal records each idempotency key has."""
    return Counter(r["key"] for r in workspace_journal(workspace) if r["type"] == "committed")


def workspace_files(workspace: Path) -> dict[str, tuple[str, bool]]:
    """``relative path -> (text, executable)`` of every file outside ``.ratchet``."""
    out = {}
    for path in sorted(workspace.rglob("*")):
        rel = path.relative_to(workspace).as_posix()
        if rel.split("/")[0] == ".ratchet" or not path.is_file():
            continue
        out[rel] = (path.read_text(encoding="utf-8"), bool(path.stat().st_mode & 0o100))
    return out


def outside_commit(repo: Path, message: str, *, all_tracked: bool = False) -> str:
    """Commit whatever is in ``repo``'s work tree as an outsider would (not through the adapter)."""
    git(repo, "add", "-u" if all_tracked else "-A")
    git(repo, "commit", "-q", "-m", message, GIT_AUTHOR_NAME="Outsider",
        GIT_AUTHOR_EMAIL="outsider@example.org", GIT_AUTHOR_DATE="2024-06-01T00:00:00+00:00")
    return git(repo, "rev-parse", "HEAD").strip()


# --- a git that hangs -----------------------------------------------------------------------

def install_hanging_git(directory: Path, *, limit: int, after_update: bool) -> Path:
    """The git wrapper of ``runtime.regression.sources.hanging_git_install`` in ``directory``
    (prepend the returned directory to PATH)."""
    return hanging_git_install(directory, limit=limit, after_update=after_update)


def hangs(directory: Path) -> int:
    """How many times the wrapper in ``directory`` hung so far."""
    path = directory / "hangs"
    return len(path.read_text().splitlines()) if path.exists() else 0
