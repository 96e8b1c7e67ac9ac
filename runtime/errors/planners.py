"""Planner errors: planner state, git-history replay and the chat-tools planner's model.

Each sits under :class:`~runtime.errors.base.ComponentError` through :class:`PlannerError`: the
planner cannot propose a deterministic next action, so nothing is proposed or executed for the
failed call and the engine freezes the run for review.
"""

from __future__ import annotations

from runtime.errors.base import ComponentError


class PlannerError(ComponentError):
    """Base for planner failures: the planner cannot propose a deterministic next action."""

    default_message = "planner cannot propose an action"
    hint = "nothing was proposed or executed; read the planner's error in the review case, then replan or abort"


class PlannerStateError(PlannerError):
    default_message = "planner state in the checkpoint does not match this planner"
    hint = "the checkpoint was made by another planner or edited; the run needs manual handling"


class PlannerStateTooLargeError(PlannerError):
    """The planner returned a state whose canonical JSON exceeds the bound kept in every
    checkpoint (``MAX_PLANNER_STATE_BYTES``); nothing was proposed or executed."""

    default_message = "planner state is too large for a checkpoint"
    hint = ("keep large context out of the state: store it with put_blob and keep only its "
            "sha256 digest in the state")


# --- the git-history planner -----------------------------------------------------------------


class GitReplayError(PlannerError):
    """The git-history planner could not read its source repository or range."""

    default_message = "git history replay failed"
    hint = "check that the source repository and the commit range exist and are readable"


class GitReplayUnsupportedError(GitReplayError):
    default_message = "the commit range holds an entry the replay cannot express as file writes"
    hint = ("the error names the commit and why an action cannot carry it (a path that is not "
            "UTF-8, a message git could not show past its trailers); choose another range")


class ReplayTargetNotEmptyError(PlannerError):
    default_message = "replay target already exists and is not empty: refusing to touch it"
    hint = "choose a fresh target path or remove the old one by hand"


# --- the chat-tools planner (DESIGN.md section 6.7) -----------------------------------------


class ModelReplyError(PlannerError):
    """Base for a model reply the chat-tools planner cannot turn into a proposal. Nothing is
    executed for it; the planner retries a bounded number of times, tracing each attempt."""

    default_message = "the model's reply cannot be used as a proposal"
    hint = "read the trace's planner.model_error events; fix the model, its prompt or its server"


class MalformedModelReplyError(ModelReplyError):
    default_message = "the model's reply is malformed (not a chat completion, or no single tool call)"
    hint = "the model must answer with exactly one tool call; check the server speaks chat-completions"


class UnknownToolError(ModelReplyError):
    default_message = "the model called a tool that was not offered"
    hint = "only the adapter's actions and finish are offered; check the prompt and the model"


class ToolArgumentsError(ModelReplyError):
    default_message = "the model's tool arguments are not JSON or fail the tool's schema"
    hint = "the error names the failing fields; check the tool schema digest pinned with the run"


class ModelRefusalError(ModelReplyError):
    default_message = "the model refused to answer"
    hint = "read the refusal in the recorded reply; change the task or the prompt in a new run"


_MODEL_GAVE_UP = ("the planner gave up after its bounded retries, so the run is frozen for review and nothing was "
                  "executed: once the model answers, a reviewer replans the case (the model is asked again) or "
                  "aborts it")
"""What follows a model error the chat-tools planner gave up on: the engine freezes the run (DESIGN.md section 6.7)."""


class ModelTimeoutError(ModelReplyError):
    retryable = True
    default_message = "the model server did not answer in time"
    hint = f"check the model server at base_url; {_MODEL_GAVE_UP}"


class ModelRateLimitedError(ModelReplyError):
    retryable = True
    default_message = "the model server refused with 429 (rate limited)"
    hint = f"wait, or raise the limit of the model server at base_url; {_MODEL_GAVE_UP}"


class ModelUnavailableError(ModelReplyError):
    retryable = True
    default_message = "the model server could not be reached or answered with a server error"
    hint = f"the model is unreachable or failing at base_url: start it; {_MODEL_GAVE_UP}"


class ModelAuthError(ModelReplyError):
    default_message = "the model server refused the API key (401/403) or the request (4xx)"
    hint = f"set the API key variable the spec names (never in the task file) for the worker; {_MODEL_GAVE_UP}"


class ModelPinMismatchError(PlannerStateError):
    """The model, prompt digest or tool-schema digest differs from what was pinned with the run."""

    default_message = "model, prompt or tool schema differs from the versions pinned with the run"
    hint = ("a resume must use the pinned model, prompt and tool schema; restore them, or start a "
            "new run under the new versions")


class ModelBudgetExhaustedError(PlannerError):
    """A chat-tools budget (model calls, tokens, model seconds) is used up; the model was not asked."""

    default_message = "the chat-tools planner's budget is used up"
    hint = "raise the budget in a new task version, or accept the run as stopped"


class ModelReplyMissingError(PlannerStateError):
    """A reply digest committed in the planner state names no stored attachment."""

    default_message = "a recorded model reply committed with the run is missing or corrupt"
    hint = "the reply cannot be replayed and the model is never asked twice for a committed step; review the run"
