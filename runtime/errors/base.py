"""The root of the exception tree, :class:`RatchetError`, and its category bases.

A category base says what kind of failure an error is, and so what an operator does about it;
the modules beside this one hold the concrete errors of each category. Every submodule imports
from here (or from a sibling), never from the package ``runtime.errors`` itself, so the package
can re-export them all without an import circle. Nothing here imports Django: the framework-free
core raises these errors (DESIGN.md section 2).
"""

from __future__ import annotations

from typing import Any, ClassVar

#: Context names whose values are secrets by their name. A value passed under one of them is
#: replaced by ``REDACTED`` before it reaches ``context``, ``str()``, a log line or a pickle:
#: errors name the key id or the variable, never the key or the token (DESIGN.md section 4.1).
SECRET_CONTEXT_NAMES = frozenset({
    "api_key", "authorization", "key_material", "password", "secret", "secret_key", "token",
})
REDACTED = "<redacted>"


class RatchetError(Exception):
    """Root of every error the runtime raises on purpose; raise a concrete subclass, never this.

    Args:
        message: what failed, in one sentence; ``default_message`` of the class when omitted.
        **context: keyword-only identifiers of what failed (``run_id``, ``generation``,
            ``key_id``, ``idempotency_key``, ``case_id``, ``path``, ...); ``None`` values are
            dropped, values under a name in :data:`SECRET_CONTEXT_NAMES` are redacted. Shown in
            ``str()`` sorted by name.

    Attributes (every error has all of them):
        message: what failed, in words.
        context: which thing failed -- the identifiers above, never a key or token value.
        hint: what the operator can do about it (a class attribute; never empty).
        retryable: True when the same call may succeed later without operator action (a
            class attribute).
        category: the name of the category base the error sits under (``"configuration"``,
            ``"ownership"``, ...), so a log line or an API answer can be grouped without
            importing the class.

    An error pickles as its class, message and context (``__reduce__``), so it survives crossing
    a process boundary such as a Celery task; subclasses keep their constructor signature
    ``(message=None, **context)`` for that reason.
    """

    message: str
    context: dict[str, Any]
    retryable: ClassVar[bool] = False
    hint: ClassVar[str] = "read the message and the identifiers it names"
    default_message: ClassVar[str] = "runtime error"
    category: ClassVar[str] = ""

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message
        self.context = {k: REDACTED if k in SECRET_CONTEXT_NAMES else v
                        for k, v in context.items() if v is not None}
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.context:
            parts.append(" (" + ", ".join(f"{k}={v}" for k, v in sorted(self.context.items())) + ")")
        if self.hint:
            parts.append(f". Hint: {self.hint}")
        return "".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.context))


def _rebuild(cls: type[RatchetError], message: str, context: dict[str, Any]) -> RatchetError:
    """Unpickle an error: its class called with the message and context it was raised with."""
    return cls(message, **context)


# --- the category bases: what kind of failure, and so what the operator does ------------------
# A new error goes under the category that says what an operator does about it, in the module of
# that category (see the tree in ``runtime/errors/__init__.py``). A new category is the exception:
# the tree's test keeps the root's direct children to this list.


class ConfigurationError(RatchetError):
    """The deployment is misconfigured: an environment variable, a key file, a keyring, the
    dashboard's roles or a crash point spec. Nothing ran; fix the named setting and restart."""

    category = "configuration"
    default_message = "runtime configuration is invalid"
    hint = "fix the named environment variable or file and restart"


class InvalidInputError(RatchetError):
    """What the caller handed in is malformed or names nothing: a task spec, JSON that is not
    canonical or nests too deep, a digest, a run or case id that does not exist. Nothing was
    changed; the same input fails the same way, so only a corrected input helps."""

    category = "input"
    default_message = "the input is invalid"
    hint = "correct the named input and try again; the same input fails the same way"


class EvidenceError(RatchetError):
    """What the runtime recorded is refused: a checkpoint that does not verify, is not the latest
    or does not fit the run; a signature, the trace's hash chain, the receipts ledger, an
    attachment or an evidence bundle that does not check out (DESIGN.md sections 3 and 4). These
    fail closed: the records are kept as found and the run does not move until a human looks."""

    category = "evidence"
    default_message = "recorded evidence does not verify"
    hint = "the records are kept as found; inspect them (`manage.py checkpoint verify RUN_ID`) before anything resumes"


class LeaseError(RatchetError):
    """Ownership: another worker holds the run's lease, this worker lost it, or its fencing token
    is older than one the environment has seen (DESIGN.md sections 4.5 and 4.6)."""

    category = "ownership"
    default_message = "lease check failed"
    hint = "another worker owns the run; this worker stops and recovery resumes the run from its owner"


class AdapterError(RatchetError):
    """An environment adapter refused or failed a call (DESIGN.md section 5.5).

    Context names the adapter ``instance_id`` and, where relevant, the ``idempotency_key``,
    ``path`` or ``fencing_token``. Unless a subclass says otherwise nothing was written; a
    ``retryable`` one is retried by the engine, any other freezes the run for review.
    """

    category = "adapter"
    default_message = "adapter call failed"
    hint = "nothing was written; the run is frozen for review unless the error is retryable"


class ComponentError(RatchetError):
    """A pluggable component of the run -- its planner (a script, a git replay, a model), its
    verifier, or any plug-in named in a task spec -- failed, cannot be loaded or does not match
    the one pinned with the run (DESIGN.md sections 5.10 and 6.7). Nothing was executed for the
    failed call."""

    category = "component"
    default_message = "a planner, verifier or plug-in failed"
    hint = "read the component's error in the run's review case; fix it, then replan or abort the run"


class RefusedError(RatchetError):
    """A rule of the runtime refuses the request: the policy, an approval or reviewer decision,
    the admission gate, a version combination's state, the run state machine, the exactly-once
    rules, or the agent gateway. Nothing was changed; ``retryable`` says whether the same
    request can succeed later."""

    category = "refused"
    default_message = "the request is refused"
    hint = "the message names the rule; nothing was changed"


class OperatorCommandError(RatchetError):
    """An operator tool (``manage.py bench``, ``chaos``, ``demo``) could not set up or measure
    what it set out to. No run's evidence is affected; the cause is in the output above."""

    category = "command"
    default_message = "the command could not do its work"
    hint = "the output above says what failed; fix that and run the command again"


class EngineError(RatchetError):
    """An internal error: the step engine met a state it cannot handle (a bug, or rows changed
    behind its back). The run is left at its last committed checkpoint."""

    category = "internal"
    default_message = "the step engine met a state it cannot handle"
    hint = "the run is left at its last committed checkpoint; report this with the run id"


#: The root's direct children, in the order the package docstring draws them.
CATEGORIES: tuple[type[RatchetError], ...] = (
    ConfigurationError, InvalidInputError, EvidenceError, LeaseError, AdapterError,
    ComponentError, RefusedError, OperatorCommandError, EngineError,
)
