"""Every refusal of the gateway as a typed exception, chosen by its stable ``code``.

The server answers a refusal as ``{"error": {"code", "message", "hint", "retryable", "context"}}``
with an HTTP status (Ratchet's DESIGN.md sections 5.12 and 5.13); :func:`error_from` turns it into
the class of that code, so a caller catches what it can handle (``RunBusy`` and ``RateLimited``
are ``retryable``: repeat the same call id later) and lets the rest through. The context carries
run and call ids, never a token.
"""

from __future__ import annotations

from typing import Any, ClassVar


class RatchetError(Exception):
    """A refusal or failure; ``code`` is the server's stable code (``transport_error`` when no
    answer came). ``retryable``: repeating the same call later may succeed."""

    code: ClassVar[str] = "gateway_error"

    def __init__(self, message: str, *, status: int = 0, hint: str = "", retryable: bool = False,
                 context: dict[str, Any] | None = None) -> None:
        self.message, self.status, self.hint = message, status, hint
        self.retryable = retryable
        self.context: dict[str, Any] = dict(context or {})
        super().__init__(f"{self.code}: {message}" + (f" (hint: {hint})" if hint else ""))


class TransportError(RatchetError):
    """No answer from the server (connection refused, timeout): the call may or may not have been
    recorded; repeat it with the same call id, which never repeats an effect."""

    code = "transport_error"


class ApprovalWaitTimeout(RatchetError):
    """``wait_for_approval`` gave up before a human settled the approval (nothing was repeated)."""

    code = "approval_wait_timeout"


class TokenMissing(RatchetError):
    code = "token_missing"


class TokenInvalid(RatchetError):
    code = "token_invalid"


class TokenScope(RatchetError):
    code = "token_scope"


class TokenScopeInvalid(RatchetError):
    code = "token_scope_invalid"


class RateLimited(RatchetError):
    code = "rate_limited"


class InvalidInput(RatchetError):
    code = "invalid_input"


class UnknownAction(InvalidInput):
    code = "unknown_action"


class MalformedRequest(InvalidInput):
    code = "malformed_request"


class MalformedJson(InvalidInput):
    code = "malformed_json"


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"


class NotFound(RatchetError):
    code = "not_found"


class RunsNotEnabled(RatchetError):
    code = "runs_not_enabled"


class PolicyRefused(RatchetError):
    code = "policy_refused"


class CallConflict(RatchetError):
    """The call id was already used with other arguments; nothing was executed, the run goes on."""

    code = "call_conflict"


class WaitingForApproval(RatchetError):
    """Another call of the run waits for a human's approval (``approval_url`` in the context).
    :meth:`ratchet_client.Client.call` answers it as a :class:`~ratchet_client.Call` to wait on."""

    code = "waiting_for_approval"


class RunStopped(RatchetError):
    """The run is frozen for review or has ended (``phase`` and ``stop_reason`` in the context)."""

    code = "run_stopped"


class RunBusy(RatchetError):
    code = "run_busy"


class CallLimit(RatchetError):
    code = "call_limit"


class RuntimeFailure(RatchetError):
    code = "runtime_error"


ERRORS: dict[str, type[RatchetError]] = {
    cls.code: cls for cls in (
        TokenMissing, TokenInvalid, TokenScope, TokenScopeInvalid, RateLimited, InvalidInput, UnknownAction,
        MalformedRequest, MalformedJson, PayloadTooLarge, NotFound, RunsNotEnabled, PolicyRefused, CallConflict,
        WaitingForApproval, RunStopped, RunBusy, CallLimit, RuntimeFailure)
}
"""Server error code -> exception class."""


def error_from(status: int, body: Any) -> RatchetError:
    """The exception for an answer with HTTP ``status`` and JSON ``body`` (any shape)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return RatchetError(f"the server answered HTTP {status} without the gateway's error body", status=status,
                            retryable=status in (502, 503, 504))
    cls = ERRORS.get(str(error.get("code")), RatchetError)
    context = error.get("context")
    return cls(str(error.get("message", "")), status=status, hint=str(error.get("hint", "")),
               retryable=bool(error.get("retryable", False)), context=context if isinstance(context, dict) else {})
