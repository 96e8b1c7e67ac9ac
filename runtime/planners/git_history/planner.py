"""The git-history replay planner: re-create a range of commits as deterministic commit actions.

Given a source repository and a range (``"A..B"`` or ``"last:N"``), the planner lists the range's
first-parent commits oldest first (``git rev-list --first-parent``) and pins their base, tip,
count and digest in its planner state at run creation (:mod:`.git_replay_state`; the state stays
the same size whatever the range) -- a resume never depends on where the source's HEAD points
later. For commit ``i`` it computes the changes
against the previous commit of the list (its first parent; for a merge, octopus merges
included, this is the mainline, so a merge replays as one commit with the merged-in changes)
and proposes one ``"commit"`` action in the git adapter's shape
(:mod:`runtime.adapters.git.commit_params`; what is carried over and how is in
:mod:`.git_source_commits`)::

    Action(kind="commit", target="", risk=<spec risk>, params={
        "message": ..., "author_name": ..., "author_email": ..., "author_date": ...,
        "committer_name": ..., "committer_email": ..., "committer_date": ...,
        ["encoding": ...,]
        "changes": [<deletes by path>, <writes, symlinks, gitlinks by path>],
    })

or, when those fields cannot say the source's header byte for byte (an identity line git reads
ambiguously, ``mergetag``, ``gpgsig``, any other extra header), ``{"message", "header",
"changes"}`` with the raw header lines after the tree and parents.

``changes`` may be empty (an empty commit, or a merge that changed nothing on the mainline);
the adapter still makes one commit, so the commit count matches. Every commit of the range is
scanned at run creation with the adapter's own checks, so a commit that cannot be replayed
fails then with :class:`GitReplayUnsupportedError` naming the commit and why -- never halfway
through a run. :mod:`.git_replay_target` creates the replay target (``setup =
"clone-at-base"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.adapters.git.commit_params import GITLINK
from runtime.core.blob_origin import GitObjectBytes
from runtime.core.checkpoint import Action, Risk
from runtime.planners.base import Done, PlannerState, Proposal, PutBlob, check_cursor
from runtime.planners.git_history.replay_state import KIND, read_replay_state, replay_commits, replay_state
from runtime.planners.git_history.replay_target import clone_at_base
from runtime.planners.git_history.source import cat_batch, resolve_range
from runtime.planners.git_history.source_commits import (
    change_params,
    commit_params,
    diff_entries,
    parse_commit,
)

if TYPE_CHECKING:
    from runtime.adapters.base import Observation


class GitHistoryPlanner:
    """Replays a commit range of ``source`` as commit actions (see :mod:`.git_history`).

    Args:
        source: the source repository (a work tree or bare repository).
        range: ``"A..B"`` or ``"last:N"``.
        risk: ``"low"``, ``"medium"`` or ``"high"``; the risk of every commit action.
        setup: ``"clone-at-base"`` makes :meth:`prepare_environment` create the target.
    """

    kind = KIND
    proposes_at_once = True
    """Proposes from its state and the observation alone, at once and without side effects, so
    the engine asks for the next write while it settles the last one and commits both in one
    checkpoint (DESIGN.md section 4.13)."""

    def __init__(
        self, *, source: Path | str, range: str, risk: str = "low", setup: str = "none"
    ) -> None:
        self.source = Path(source)
        self.range = range
        self.risk = Risk(risk)
        self.setup = setup
        self._plan: PlannerState | None = None

    def _pinned(self) -> PlannerState:
        # Resolved once per planner object, so prepare_environment() and init_state() at run
        # creation see the same base even if the source's HEAD moves in between.
        if self._plan is None:
            base, tip, commits = resolve_range(self.source, self.range)
            raws = cat_batch(self.source, commits, kind="commit")
            for raw, commit in zip(raws, commits, strict=True):
                parse_commit(raw, commit=commit)
            parent = base
            for commit in commits:
                diff_entries(self.source, parent, commit)
                parent = commit
            self._plan = replay_state(source=self.source, range_=self.range, base=base, tip=tip,
                                      commits=commits)
        return self._plan

    def init_state(self) -> PlannerState:
        """Resolve and pin the range, scanning every commit so an unreplayable one fails now.

        Returns:
            ``{"kind", "source", "range", "base", "tip", "count", "commits_digest"}``
            (:func:`.git_replay_state.replay_state`).

        Raises:
            GitReplayError: the source or range cannot be read.
            GitReplayUnsupportedError: a commit the git adapter could not reproduce exactly.
        """
        state = self._pinned()
        return dict(state)

    def prepare_environment(self, target: Path | str) -> None:
        """With ``setup = "clone-at-base"``, create ``target`` as a clone at the pinned base.

        The range is resolved and scanned first, so a range that cannot be replayed fails
        before anything is created. With ``setup = "none"`` this does nothing.

        Raises:
            ReplayTargetNotEmptyError, GitReplayError, GitReplayUnsupportedError: see
                :func:`.git_replay_target.clone_at_base` and :meth:`init_state`.
        """
        if self.setup != "clone-at-base":
            return
        state = self._pinned()
        clone_at_base(source=self.source, base=str(state["base"]), target=Path(target))

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> Proposal:
        """The commit action re-creating commit ``cursor`` of the pinned list, or Done.

        The observation is not consulted: the plan is fixed at run creation, and whether the
        environment still matches it is the engine's check (DESIGN.md section 5).

        Raises:
            PlannerStateError: ``planner_state`` is not a git-history state, or the source's
                history is no longer the pinned one.
            GitReplayError / GitReplayUnsupportedError: the source cannot be read as planned.
        """
        check_cursor(cursor)
        plan = read_replay_state(planner_state)
        source, base, tip = plan.source, plan.base, plan.tip
        if cursor >= plan.count:
            return Done(reason=f"replayed {plan.count} commits from {base[:12]} to {tip[:12]}")
        commits = replay_commits(plan)
        commit = commits[cursor]
        parent = base if cursor == 0 else commits[cursor - 1]
        (raw,) = cat_batch(source, [commit], kind="commit")
        params = commit_params(parse_commit(raw, commit=commit))
        entries = diff_entries(source, parent, commit)
        wanted = list(dict.fromkeys(e.new_oid for e in entries
                                    if e.status != "D" and e.new_mode != GITLINK))
        # Handed over as git objects: the store records where they are instead of a copy.
        blobs = {oid: GitObjectBytes(data, repository=str(Path(source).resolve()), oid=oid)
                 for oid, data in zip(wanted, cat_batch(source, wanted, kind="blob"), strict=True)}
        params["changes"] = change_params(entries, blobs, put_blob)
        return Action(kind="commit", target="", params=params, risk=self.risk)
