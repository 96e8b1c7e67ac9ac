"""What the browser stories share: a small real git history, replay tasks, signing in, polling a
run page, and a screenshot of every page visited."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from runtime.demo.scenarios import Scenario, task_write
from tests.helpers.procs import ROOT
from tests.planners.gitrepo import git

ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
"""Screenshots of every page the stories visit (gitignored)."""
PASSWORD = "a long browser-test password"


def linear_history(repo: Path, commits: int = 4) -> dict[int, str]:
    """A repository of ``commits`` commits (adds and edits); returns ``{k: sha of HEAD~k}``."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for day in range(1, commits + 1):
        (repo / "notes").mkdir(exist_ok=True)
        (repo / "notes" / f"day-{day}.md").write_text(f"Notes of day {day}\n")
        (repo / "README.md").write_text(f"# Browser story source\n\nDay {day}.\n")
        git(repo, "add", "-A")
        git(
            repo,
            "commit",
            "-q",
            "-m",
            f"Day {day}",
            GIT_AUTHOR_NAME="Ada Lovelace",
            GIT_AUTHOR_EMAIL="ada@example.org",
            GIT_AUTHOR_DATE=f"2024-03-{day:02d}T09:00:00+00:00",
        )
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return {k: sha for k, sha in enumerate(reversed(shas))}


def replay_task(
    directory: Path,
    source: Path,
    revs: dict[int, str],
    *,
    base: int,
    tip: int,
    approval_risks: tuple[str, ...] = (),
) -> Path:
    """A git-history replay task of ``HEAD~base..HEAD~tip`` (the demo's task template)."""
    scenario = Scenario(
        directory.name.replace("-", "_"),
        base,
        tip,
        approval_risks=approval_risks,
        description="browser story",
    )
    return task_write(scenario=scenario, source=source, workdir=directory, revs=revs)


class Story:
    """One browser story: a signed-in page and numbered screenshots of each page it visits."""

    def __init__(self, browser: Any, base_url: str, name: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.base_url = base_url
        self.name = name
        self.shots: list[Path] = []
        # Cancel, deny and abort ask for confirmation (static/review/live.js): a story accepts,
        # and keeps what it was asked.
        self.dialogs: list[str] = []
        self.page.on("dialog", self._accept)

    def _accept(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    def shot(self, label: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{len(self.shots) + 1:02d}-{label}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.shots.append(path)
        return path

    def sign_in(self, username: str) -> None:
        self.page.goto(f"{self.base_url}/accounts/login/")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", PASSWORD)
        self.shot("sign-in")
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{self.base_url}/")

    def open(self, path: str, label: str) -> None:
        self.page.goto(f"{self.base_url}{path}")
        self.shot(label)

    def wait_for_phase(self, run_id: str, phases: set[str], *, timeout: float = 90) -> str:
        """Reload the run page until its status badge shows one of ``phases``; return it."""
        deadline = time.monotonic() + timeout
        while True:
            self.page.goto(f"{self.base_url}/runs/{run_id}/")
            badge = self.page.inner_text("#run-status .badge[class*=phase-]")
            if badge.replace(" ", "_") in phases:
                return badge.replace(" ", "_")
            if time.monotonic() > deadline:
                self.shot("timed-out")
                raise AssertionError(f"run {run_id} stayed {badge!r}, expected one of {phases}")
            time.sleep(0.5)

    def messages(self) -> list[str]:
        return [m.strip() for m in self.page.locator(".messages .alert").all_inner_texts()]

    def close(self) -> None:
        self.context.close()


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def receipt_conflict_run(directory: Path, source: Path, revs: dict[int, str]) -> tuple[str, str]:
    """A two-commit replay frozen in needs_review: before its first commit ran, another caller
    used the pending key for a different commit (same files, another message -- the demo's
    conflict). Returns ``(run_id, the conflicted key)``."""
    from runtime.adapters.factory import open_adapter
    from runtime.checkpoints.protocol import checkpoint_verify
    from runtime.core.checkpoint import Action
    from runtime.demo.scenarios import conflicting_commit
    from runtime.engine import run_advance, run_start
    from runtime.evidence.attachments import attachment_get
    from runtime.models import Run

    run_id = run_start(spec_path=replay_task(directory, source, revs, base=2, tip=0))
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    pending = checkpoint_verify(run_id=run_id).state.pending
    other = Action(
        kind=pending.action.kind,
        target=pending.action.target,
        params=conflicting_commit(dict(pending.action.params)),
    )
    run = Run.objects.get(run_id=run_id)
    open_adapter("git", Path(run.spec["target"])).execute(
        other,
        idempotency_key=pending.idempotency_key,
        intent_digest=other.intent_digest(),
        fencing_token=run.lease_version,
        blobs=lambda digest: attachment_get(digest=digest),
    )
    # The stack's worker may get there first through its sweeper; either way the run freezes.
    report = run_advance(run_id=run_id, wait_seconds=15)
    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict"), report
    return run_id, pending.idempotency_key
