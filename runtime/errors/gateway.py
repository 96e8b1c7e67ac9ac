"""The agent gateway's refusals (DESIGN.md section 5.12).

Each sits under :class:`~runtime.errors.base.RefusedError` through :class:`GatewayError`: it has a
stable ``code`` and an HTTP ``status`` that the JSON API and the MCP server report as they are,
and none changes anything. The context carries run and call ids, never a token.
"""

from __future__ import annotations

from typing import ClassVar

from runtime.errors.base import RefusedError


class GatewayError(RefusedError):
    """Base of the gateway's refusals: each has a stable ``code`` and an HTTP ``status`` that the
    JSON API and the MCP server report as they are, and none changes anything (DESIGN.md
    section 5.12). The context carries run and call ids, never a token."""

    code: ClassVar[str] = "gateway_error"
    status: ClassVar[int] = 400
    default_message = "the gateway refused the call"
    hint = "the code and message say which rule refused the call; nothing was recorded"


class GatewayTokenError(GatewayError):
    code, status = "token_invalid", 401
    default_message = "the token is unknown, revoked or expired"
    hint = "ask an operator for a new token (`manage.py gateway_tokens issue`); retrying will not help"


class GatewayTokenMissingError(GatewayTokenError):
    code = "token_missing"
    default_message = "no token: send Authorization: Bearer <gateway token>"
    hint = ("send the token the operator issued (`manage.py gateway_tokens issue`) in the Authorization "
            "header, or set RATCHET_GATEWAY_TOKEN for --stdio; nothing was recorded")


class GatewayScopeError(GatewayError):
    code, status = "token_scope", 403
    default_message = "the token does not cover this run or action"
    hint = "use the token issued for this run; an operator can issue one with the action allowed"


class GatewayTokenScopeInvalidError(GatewayError):
    code, status = "token_scope_invalid", 400
    default_message = "a per-agent token needs either a list of runs or a task, not both or neither"
    hint = "issue it with --run RUN_ID (repeatable) or with --task TASK_ID; nothing was issued"


class GatewayRateLimitedError(GatewayError):
    code, status = "rate_limited", 429
    retryable = True
    default_message = "too many calls with this token"
    hint = "wait for the window (RATCHET_GATEWAY_RATE_WINDOW_SECONDS) to pass, then repeat the same call id"


class GatewayInputError(GatewayError):
    code, status = "invalid_input", 422
    default_message = "the call is malformed or its arguments fail the action's schema"
    hint = "fix the arguments; nothing was recorded"


class GatewayUnknownActionError(GatewayInputError):
    code = "unknown_action"
    default_message = "the run has no such action"
    hint = "list the run's actions (tools/list or GET /api/v1/runs/<id>) and use one of them"


class GatewayMalformedRequestError(GatewayInputError):
    code, status = "malformed_request", 400
    default_message = "the request is malformed (a header or the path cannot be read)"
    hint = ("send a well-formed request (Content-Length a number, the path as the API documents it); "
            "nothing was recorded")


class GatewayNotFoundError(GatewayError):
    code, status = "not_found", 404
    default_message = "the gateway API has no such endpoint"
    hint = ("see /api/v1/openapi.json for the endpoints; a call id holds only letters, digits and . _ : - "
            "(no '/' or '%2F'); nothing was recorded")


class GatewayPayloadTooLargeError(GatewayInputError):
    code, status = "payload_too_large", 413
    default_message = "the call is larger than the gateway accepts"
    hint = "send less than RATCHET_GATEWAY_MAX_BYTES bytes; nothing was recorded"


class GatewayPolicyRefusedError(GatewayError):
    code, status = "policy_refused", 403
    default_message = "the run's policy does not allow this action"
    hint = "an operator can start a run whose policy allows it; nothing was recorded or executed"


class GatewayCallConflictError(GatewayError):
    code, status = "call_conflict", 409
    default_message = "this call id was already used with other arguments"
    hint = ("use a new call id (or leave call_id out and the gateway derives one) for a new action; the first "
            "call's receipt stands and the run goes on")


class GatewayWaitingForApprovalError(GatewayError):
    """A call that arrives while another call of the run waits for a human's approval: the run
    is neither frozen nor ended, and the call goes through once the approval is settled
    (DESIGN.md section 5.12)."""

    code, status = "waiting_for_approval", 409
    retryable = True
    default_message = "the run is waiting for a human to approve another call"
    hint = ("a human approves or denies the waiting call at approval_url; repeat this call (same call id) "
            "afterwards; nothing was recorded for it")


class GatewayRunsNotEnabledError(GatewayError):
    """``POST /api/v1/operator/runs`` on a deployment that names no folder of task specs."""

    code, status = "runs_not_enabled", 404
    default_message = "runs are not started through the API here"
    hint = "an operator sets RATCHET_API_TASK_SPECS_DIR to a folder of task specs; nothing was started"


class GatewayRunStoppedError(GatewayError):
    code, status = "run_stopped", 409
    default_message = "the run is frozen for review or has ended"
    hint = "a reviewer decides frozen runs in the dashboard (cases); an ended run takes no calls"


class GatewayRunBusyError(GatewayError):
    code, status = "run_busy", 503
    retryable = True
    default_message = "another process holds the run's lease"
    hint = "repeat the same call id after the lease expires (RATCHET_LEASE_SECONDS); it runs once"


class GatewayCallLimitError(GatewayError):
    code, status = "call_limit", 409
    default_message = "the run has recorded as many calls as its planner state holds"
    hint = "finish this run and start another one for further calls"
