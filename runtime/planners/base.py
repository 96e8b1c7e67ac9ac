"""The planner protocol: deterministic proposals, plug-ins and moving state (DESIGN.md sections 5.1, 5.10).

A planner decides the next write: given the plan cursor, the small JSON state it keeps in the
checkpoint and the latest observation, it returns one :class:`~runtime.core.checkpoint.Action`
or :class:`Done`, and -- wrapped in a :class:`PlannerStep` -- its new state. The engine commits
that state in the same checkpoint as the intent, so a resume hands the planner exactly the state
committed with the last checkpoint (DESIGN.md section 5.10).

**Deterministic** means: the same committed state (cursor and planner state) and the same
observation give the same proposal -- the same intent digest -- and the same new state, in any
process. The engine derives the idempotency key before the write and compares intents after a
crash (DESIGN.md section 5.1); a planner that varied would turn every recovery into a conflict.
A planner whose decisions come from outside (a model) must record what it was told in its state
or in attachments before the engine commits, never ask again for a committed step.

The state is bounded: its canonical JSON may be at most :data:`MAX_PLANNER_STATE_BYTES`; larger
context goes to content-addressed attachments through ``put_blob`` and only the digest stays in
the state. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from pydantic import JsonValue

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Action
from runtime.errors import CanonicalizationError, PlannerError, PlannerStateError, PlannerStateTooLargeError

if TYPE_CHECKING:  # the adapter contract lives with the adapters; planners only read from it
    from runtime.adapters.base import Observation


@dataclass(frozen=True)
class Done:
    """The plan is finished; ``reason`` is shown to operators and written to the trace."""

    reason: str


Proposal: TypeAlias = Action | Done
"""What :meth:`Planner.propose` returns."""

PutBlob: TypeAlias = Callable[[bytes], str]
"""Stores bytes content-addressed and returns their ``"sha256:<hex>"`` digest."""

PlannerState: TypeAlias = dict[str, JsonValue]

MAX_PLANNER_STATE_BYTES = 64 * 1024
"""Upper bound of a planner state's canonical JSON, in bytes (it is in every checkpoint)."""


@dataclass(frozen=True)
class PlannerStep:
    """What :meth:`Planner.propose` returns: the proposal and the planner's state after it.

    A planner that keeps no moving state may return the bare proposal instead; the engine then
    keeps the committed state unchanged.

    Attributes:
        proposal: the next :class:`Action`, or :class:`Done`.
        state: the new planner state (a JSON object, at most :data:`MAX_PLANNER_STATE_BYTES`
            canonical bytes); committed with the intent, or with the run's end on ``Done``.
    """

    proposal: Action | Done
    state: PlannerState


@dataclass(frozen=True)
class ActionDenied:
    """The outcome of the planner's previous write when a person denied it and let the run go on
    (DESIGN.md section 6.14): it never ran, and the cursor moved past it.

    Attributes:
        cursor: the denied write's cursor (the one before the cursor now asked for).
        idempotency_key, intent_digest: the denied write's.
        action_kind, action_target: what it would have done.
        reason: the approver's words, at most 2,000 characters (feedback for the planner).
        approver: who denied it.
        denial_id: the signed denial's id (in the receipts ledger and the trace).
    """

    cursor: int
    idempotency_key: str
    intent_digest: str
    action_kind: str
    action_target: str
    reason: str
    approver: str
    denial_id: str


@dataclass(frozen=True)
class PlannerContext:
    """What a planner plug-in is constructed with, beside its options.

    Attributes:
        base_dir: the directory the task spec's relative paths resolve against (None for a
            hand-built spec).
        target: the environment's target path (where the adapter acts).
        setup: the spec's ``environment.setup`` (``"none"`` or ``"clone-at-base"``).
        adapter: the spec's adapter name (``"workspace"``, ``"git"``, a plug-in's name).
        adapter_entry: the adapter's ``entry`` when ``adapter = "python"``.
        adapter_options: the spec's ``[environment.options]`` (a planner that offers the
            adapter's declared actions, such as chat-tools, reads their schemas through them).
        allowed_actions: the policy's ``allowed_actions`` (empty: not given).
    """

    base_dir: Path | None
    target: Path
    setup: str = "none"
    adapter: str = ""
    adapter_entry: str | None = None
    adapter_options: Mapping[str, Any] | None = None
    allowed_actions: tuple[str, ...] = ()


@runtime_checkable
class Planner(Protocol):
    """What the step engine needs of a planner.

    Optional: a class attribute ``proposes_at_once = True`` says the planner proposes from its
    state and the observation alone, without waiting on anyone and without side effects (no
    model call, no trace of its own); the engine then asks it for the next write while it
    settles the last one, and commits the receipt and the next intent in one checkpoint
    (DESIGN.md section 4.13). Without it, every proposal gets a checkpoint of its own.

    Optional: a method ``bind_amendment(*, amendment)`` is called before every proposal with a
    :class:`~runtime.core.amendment.WriteAmendment` when the write this planner proposed at the
    previous cursor executed with arguments an approver amended (what was proposed, what ran,
    who amended it and why), and with None otherwise (DESIGN.md section 6.13). The amendment is
    read from the committed trace, so a proposal asked again after a crash is told the same; a
    planner that keeps a conversation (chat-tools) puts it in the result of that step.

    Optional: a class attribute ``takes_denials = True`` says :meth:`propose` accepts a keyword
    ``denied``: an :class:`ActionDenied` when the write proposed at ``cursor - 1`` was denied by a
    person who let the run continue, else None (DESIGN.md section 6.14). The engine reads it from
    the signed denial in the receipts ledger, so every call for that cursor gets the same value.
    A planner without the attribute is asked for ``cursor`` as after any write and is not told why
    the previous one did not run.
    """

    def init_state(self) -> PlannerState:
        """Called once when the run is created; the result is kept in every checkpoint.

        Anything the plan depends on that could move later (a branch HEAD, a file list) is
        resolved here and pinned, so a resume does not depend on it. Keep it small (kilobytes).
        """
        ...

    def prepare_environment(self, target: Path) -> None:
        """Called once at run creation, before the first observation: create what the spec's
        ``environment.setup`` asks for (a clone at the replay base), or do nothing."""
        ...

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> PlannerStep | Proposal:
        """Propose the write at ``cursor`` (0-based index of the next write), or :class:`Done`.

        Args:
            cursor: index of the next write; the engine advances it after each committed write.
            planner_state: the state committed with the last checkpoint (at first, what
                :meth:`init_state` returned); read-only, return a new one.
            observation: the adapter's latest observation of the environment.
            put_blob: stores bytes content-addressed; the returned digest goes into the action's
                params or the state.

        Returns:
            A :class:`PlannerStep` (proposal and new state), or a bare proposal (state unchanged).

        Raises:
            PlannerStateError: ``planner_state`` was not made by this planner.
            PlannerError: the next action cannot be computed. Any exception freezes the run for
                review with the exception named; nothing is executed (DESIGN.md section 5.10).
        """
        ...


def check_cursor(cursor: int) -> int:
    """Return ``cursor`` if it is a non-negative int.

    Raises:
        PlannerError: otherwise (a bool or negative value means a corrupted engine state).
    """
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise PlannerError(f"plan cursor must be a non-negative integer, got {cursor!r:.40}")
    return cursor



def planner_state_check(state: object) -> PlannerState:
    """Return ``state`` if it is a JSON object within :data:`MAX_PLANNER_STATE_BYTES`.

    Raises:
        PlannerStateError: not a JSON object with string keys and JSON values.
        PlannerStateTooLargeError: its canonical JSON is larger than the bound.
    """
    if not isinstance(state, dict):
        raise PlannerStateError(f"planner state must be a JSON object, got {type(state).__name__}")
    try:
        size = len(canonical_json(state))
    except (CanonicalizationError, TypeError, ValueError) as exc:
        raise PlannerStateError(f"planner state is not canonical JSON: {str(exc)[:200]}") from None
    if size > MAX_PLANNER_STATE_BYTES:
        raise PlannerStateTooLargeError(
            f"planner state is {size} bytes of canonical JSON, more than {MAX_PLANNER_STATE_BYTES}",
            size=size, limit=MAX_PLANNER_STATE_BYTES,
        )
    return state
