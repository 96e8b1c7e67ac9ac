"""The chat-tools planner: a model proposes each write through an OpenAI-compatible tool-calling loop.

``[planner] kind = "chat-tools"`` (DESIGN.md section 6.7). At each plan cursor the planner sends
the conversation so far -- system prompt, task, and for every committed step the model's tool call
and its result -- with the adapter's actions as tools, and turns the model's one tool call into
an :class:`Action` (or :class:`Done` for ``finish``). The model only *proposes*: the engine puts
every proposal through the same policy gate, approval rules and intent digest as any other, and
risks, paths and content digests are set here by deterministic code.

Exactly-once asking: the reply's bytes are stored content-addressed and their digest, with the
transcript's, is returned in the new planner state, which the engine commits with the intent
before anything executes. A proposal asked again at a cursor whose reply is committed replays the
recorded reply and never asks the model; a crash *before* that commit loses the reply's digest,
so the model is asked again (the only window where it can be asked twice; the reply is not acted on
until committed). Pinned versions are checked on every proposal; malformed replies, unknown tools,
bad arguments, refusals, timeouts, 429s and server errors each raise a typed error, are traced
and retried up to ``max_attempts``; none of them executes anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.amendment import WriteAmendment
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Risk
from runtime.core.crashpoints import crash_point, register
from runtime.errors import ModelAuthError, ModelReplyError, PlannerError, PlannerStateError
from runtime.planners.base import ActionDenied, PlannerContext, PlannerState, PlannerStep, PutBlob, check_cursor
from runtime.planners.chat_tools.budget import budget_check, usage_read, usage_zero
from runtime.planners.chat_tools.client import ModelEndpoint, model_ask
from runtime.planners.chat_tools.options import ChatToolsOptions
from runtime.planners.chat_tools.pins import pins_check, pins_make, prompt_digest
from runtime.planners.chat_tools.replies import GetBlob, parse_reply, recorded, transcript_get, transcript_put
from runtime.planners.chat_tools.tools import call_to_proposal, toolset_for

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

CP_AFTER_REPLY = register("chat_tools.after_reply_recorded",
                          "chat-tools: reply and transcript stored, the new planner state not committed")

Trace = Callable[[str, Mapping[str, Any]], None]
Ask = Callable[..., bytes]


class ChatToolsPlanner:
    """A planner plug-in (entry point ``chat-tools`` in ``ratchet.planners``) driven by a model.

    Args:
        options: the validated ``[planner]`` table (:class:`ChatToolsOptions`).
        context: the planner context; ``context.adapter`` chooses the tools offered.
        get_blob: reads recorded replies and transcripts (default: the attachment store).
        trace: ``(event_type, payload)`` sink for attempts and replays (default: the run's trace,
            once :meth:`bind_run` named the run).
        ask: the request function (default :func:`model_ask`); tests may pass another.
        sleep: pauses between attempts (seconds).

    Raises:
        PlannerError: no model or base URL configured, or the adapter has no actions to offer
            (the tools are the adapter's actions the policy allows, DESIGN.md section 6.7).
    """

    kind = "chat-tools"
    Options = ChatToolsOptions
    offers_adapter_actions = True  # a spec whose policy allows none is refused (runtime.taskspec.offered_actions)
    takes_denials = True  # a denial with feedback is the denied tool call's result (DESIGN.md section 6.14)

    def risk_rule(self, kind: str, target: str) -> str:
        """Where an action's risk came from, in words (DESIGN.md section 6.11): the ``risks``
        option, or the rule that an action kind without a configured risk is high."""
        if kind in self._options.risks:
            return f"chat-tools risks[{kind!r}] = {Risk(self._options.risks[kind])}"
        return f"chat-tools: no risk configured for {kind!r}, so {Risk.HIGH}"

    def __init__(self, *, options: ChatToolsOptions, context: PlannerContext | None = None,
                 get_blob: GetBlob | None = None, trace: Trace | None = None, ask: Ask | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._options = options
        if context is None:
            self._toolset = toolset_for("workspace")
        else:
            self._toolset = toolset_for(context.adapter or "workspace", entry=context.adapter_entry,
                                        options=context.adapter_options, allowed=context.allowed_actions)
        self._endpoint = ModelEndpoint(base_url=options.resolved_base_url(), model=options.resolved_model(),
                                       timeout_seconds=options.timeout_seconds)
        self._pins = pins_make(model=self._endpoint.model,
                               prompt=prompt_digest(system_prompt=options.system_prompt, task=options.task),
                               tool_schema=self._toolset.digest)
        self._get_blob: GetBlob = get_blob or _unbound_blob
        self._trace = trace
        self._run_id: str | None = None
        self._ask = ask or model_ask
        self._sleep = sleep
        self._amendment: WriteAmendment | None = None

    @property
    def pins(self) -> dict[str, str]:
        """The versions this process would use: ``{"model", "prompt", "tool_schema"}``."""
        return dict(self._pins)

    def bind_run(self, *, run_id: str, trace: Trace | None = None, get_blob: GetBlob | None = None) -> None:
        """Bind the run this planner proposes for (called by the engine before each proposal).

        Args:
            run_id: the run whose trace receives this planner's events.
            trace: ``(event_type, payload)`` appender for that run's trace; the engine passes one so
                this framework-free module never imports the trace store.
            get_blob: reads a content-addressed attachment by digest (recorded replies).
        """
        self._run_id = run_id
        if trace is not None:
            self._trace = trace
        if get_blob is not None and self._get_blob is _unbound_blob:
            self._get_blob = get_blob

    def bind_amendment(self, *, amendment: WriteAmendment | None) -> None:
        """Be told, before a proposal, that the previous write ran amended (or None: as proposed).

        The model then reads, in that write's tool result, that an approver changed the arguments,
        who, why, and the arguments that executed (DESIGN.md section 6.13).
        """
        self._amendment = amendment

    def init_state(self) -> PlannerState:
        """``{"kind", "pins", "usage", "cursor": -1, "reply": None, "transcript": None}``."""
        return {"kind": self.kind, "pins": dict(self._pins), "usage": usage_zero(), "cursor": -1,
                "reply": None, "transcript": None}

    def prepare_environment(self, target: Path) -> None:
        """Nothing to prepare: the adapter owns its target."""

    def propose(self, *, cursor: int, planner_state: Mapping[str, Any], observation: Observation,
                put_blob: PutBlob, denied: ActionDenied | None = None) -> PlannerStep:
        """The model's proposal at ``cursor`` and the state recording its reply.

        ``denied`` (the engine passes it: ``takes_denials``) is the previous write's denial with
        feedback: the model gets it as that tool call's result instead of "executed".

        Returns:
            A :class:`PlannerStep`; its state names the reply and transcript digests, so the
            engine's commit of the intent also commits what the model said.

        Raises:
            ModelPinMismatchError: the pinned model, prompt or tool schema differs (fail closed).
            PlannerStateError / ModelReplyMissingError: the state or a recorded reply is unusable.
            ModelBudgetExhaustedError: a chat-tools budget is used up; the model was not asked.
            ModelReplyError subclasses: the last attempt's error after ``max_attempts``, with the
                model's ``base_url`` in its context; the engine then freezes the run for review
                (DESIGN.md section 6.7: an unreachable model is not retried without a human).
        """
        check_cursor(cursor)
        if planner_state.get("kind") != self.kind:
            raise PlannerStateError("planner state was not made by the chat-tools planner")
        pins_check(planner_state.get("pins"), self._pins)
        usage = usage_read(planner_state.get("usage"))
        last = planner_state.get("cursor")
        if not isinstance(last, int) or isinstance(last, bool) or last < -1:
            raise PlannerStateError("chat-tools planner state has no valid cursor")
        if last == cursor and isinstance(planner_state.get("reply"), str):
            return self._replay(cursor, dict(planner_state), put_blob)
        if last != cursor - 1:
            raise PlannerStateError(f"chat-tools planner state records the reply of step {last}, "
                                    f"the engine asks for step {cursor}")
        messages = self._messages(planner_state, observation, denied, cursor=cursor)
        return self._ask_model(cursor, messages, usage, dict(planner_state), put_blob)

    # -- the conversation ---------------------------------------------------------------------

    def _messages(self, state: Mapping[str, Any], observation: Observation,
                  denied: ActionDenied | None = None, *, cursor: int) -> list[dict[str, Any]]:
        if state.get("transcript") is None:
            seen = {"adapter": observation.kind, "instance": observation.instance_id, "version": observation.version}
            return [{"role": "system", "content": self._options.system_prompt},
                    {"role": "user", "content": f"{self._options.task}\n\nEnvironment: "
                                                f"{canonical_json(seen).decode()}"}]
        messages = transcript_get(self._get_blob, str(state["transcript"]))
        call_id = _last_call_id(messages)
        # The engine only asks for the next cursor after the previous write executed (or was
        # reconciled), or a person denied it and let the run go on (DESIGN.md section 6.14).
        result: dict[str, Any] = {"status": "executed", "environment_version": observation.version}
        amendment = self._amendment
        if amendment is not None and amendment.cursor == cursor - 1:
            result["amended"] = self._amended(amendment)
        if denied is not None:
            result = {"status": "denied", "denied_by": denied.approver, "reason": denied.reason,
                      "environment_version": observation.version,
                      "note": "a person denied this call; it was not executed. Propose something else or finish."}
        return [*messages, {"role": "tool", "tool_call_id": call_id, "content": canonical_json(result).decode()}]

    def _amended(self, amendment: WriteAmendment) -> dict[str, Any]:
        """The tool result's ``amended`` object: the executed action in the tool's own argument
        shape (file content as text), so the model sees what ran instead of its call."""
        executed = amendment.executed
        kind = str(executed.get("kind", ""))
        params = executed.get("params") or {}
        if kind == "write_file":
            content = recorded(self._get_blob, str(params.get("content")), what="amended content")
            arguments: dict[str, Any] = {"path": executed.get("target", ""),
                                         "content": content.decode("utf-8", errors="replace"),
                                         "executable": bool(params.get("executable", False))}
        elif kind == "delete_file":
            arguments = {"path": executed.get("target", "")}
        else:
            arguments = {"target": executed.get("target", ""), "params": params}
        return {"by": amendment.amended_by, "reason": amendment.note,
                "detail": "an approver changed the arguments of your call before approving it: the write "
                          "executed with executed_arguments, not with the arguments you proposed",
                "executed_arguments": arguments}

    def _replay(self, cursor: int, state: dict[str, Any], put_blob: PutBlob) -> PlannerStep:
        raw = recorded(self._get_blob, str(state["reply"]), what="reply")
        parsed = parse_reply(raw, self._toolset)
        proposal = call_to_proposal(parsed.name, parsed.arguments, risks=self._options.risks, put_blob=put_blob)
        self._event("planner.reply_replayed", {"cursor": cursor, "reply": state["reply"], "tool": parsed.name})
        return PlannerStep(proposal=proposal, state=state)

    def _ask_model(self, cursor: int, messages: list[dict[str, Any]], usage: dict[str, Any],
                   state: dict[str, Any], put_blob: PutBlob) -> PlannerStep:
        o = self._options
        endpoint = ModelEndpoint(base_url=self._endpoint.base_url, model=self._endpoint.model,
                                 timeout_seconds=o.timeout_seconds, api_key=o.api_key())
        error: ModelReplyError | None = None
        for attempt in range(1, o.max_attempts + 1):
            budget_check(usage, max_calls=o.max_model_calls, max_tokens=o.max_tokens,
                         max_seconds=o.max_model_seconds)
            started = time.monotonic()
            reply: str | None = None
            try:
                raw = self._ask(endpoint, messages=messages, tools=self._toolset.tools)
                usage["calls"] += 1
                usage["seconds"] += time.monotonic() - started
                reply = put_blob(raw)  # recorded before it is parsed: a bad reply is evidence too
                parsed = parse_reply(raw, self._toolset)
                usage["tokens"] += parsed.tokens
                proposal = call_to_proposal(parsed.name, parsed.arguments, risks=o.risks, put_blob=put_blob)
            except ModelReplyError as exc:
                if reply is None:
                    usage["calls"] += 1
                    usage["seconds"] += time.monotonic() - started
                error = exc
                self._event("planner.model_error", {"cursor": cursor, "attempt": attempt, "error": type(exc).__name__,
                                                    "message": exc.message[:300], "reply": reply,
                                                    "retryable": exc.retryable})
                if isinstance(exc, ModelAuthError) or attempt == o.max_attempts:
                    break
                self._sleep(self._pause(exc, attempt))
                continue
            transcript = transcript_put([*messages, parsed.assistant], put_blob)
            self._event("planner.model_replied", {"cursor": cursor, "attempt": attempt, "reply": reply,
                                                  "tool": parsed.name, "tokens": parsed.tokens})
            crash_point(CP_AFTER_REPLY)
            new_state = {**state, "usage": {**usage, "seconds": round(usage["seconds"], 6)}, "cursor": cursor,
                         "reply": reply, "transcript": transcript}
            return PlannerStep(proposal=proposal, state=new_state)
        if error is None:  # max_attempts >= 1, so the loop ran; kept so a broken option fails loudly
            raise PlannerError("the chat-tools planner made no attempt", cursor=cursor)
        # The engine freezes the run on this error; its hint says what a human does then, and the
        # model's address tells them which server to start (a transient error is not retried forever).
        raise type(error)(f"{error.message} (after {attempt} attempt(s))",
                          **{**error.context, "base_url": endpoint.base_url})

    def _pause(self, exc: ModelReplyError, attempt: int) -> float:
        o = self._options
        retry_after = exc.context.get("retry_after")
        if isinstance(retry_after, int | float):
            return min(float(retry_after), o.max_backoff_seconds)
        base = o.retry_backoff_seconds * 2 ** (attempt - 1)
        return min(base, o.max_backoff_seconds)

    def _event(self, event_type: str, payload: Mapping[str, Any]) -> None:
        if self._trace is not None:
            self._trace(event_type, payload)


def _unbound_blob(digest: str) -> bytes:
    raise PlannerError("the chat-tools planner was not bound to a run's attachment store "
                       "(the engine calls bind_run before proposing)")


def _last_call_id(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls:
            return str(calls[0]["id"])
    raise PlannerStateError("the recorded transcript holds no tool call to answer")


__all__ = ("ChatToolsPlanner",)
