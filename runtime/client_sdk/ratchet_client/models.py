"""The answers of the gateway's JSON API as typed, frozen values.

Each has ``from_json`` for the API's body; unknown fields are ignored (a newer server may add
some), missing optional ones are None. ``raw`` keeps the body as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CallStatus = Literal["executed", "waiting_for_approval", "finished", "denied"]


@dataclass(frozen=True)
class Tool:
    """One tool a run offers: ``name``, plain-text ``description``, JSON schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class RunStatus:
    """A run as the agent endpoints show it (``GET /api/v1/runs/<id>``)."""

    run_id: str
    tenant_id: str
    phase: str
    stop_reason: str | None
    generation: int
    dashboard_url: str
    tools: list[Tool]
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> RunStatus:
        return cls(run_id=str(body["run_id"]), tenant_id=str(body.get("tenant_id", "")), phase=str(body["phase"]),
                   stop_reason=body.get("stop_reason"), generation=int(body.get("generation", 0)),
                   dashboard_url=str(body.get("dashboard_url", "")),
                   tools=[Tool(name=t["name"], description=t.get("description", ""),
                               input_schema=t.get("input_schema", {})) for t in body.get("tools") or []],
                   raw=body)


@dataclass(frozen=True)
class CallResult:
    """What one call did (the server's ``CallResult``): executed with its ``receipt``,
    ``waiting_for_approval`` with the absolute ``approval_url``, ``finished``, or ``denied``: a
    person refused the write and let the run go on (``detail`` is their reason, ``denial`` the
    signed denial); try something else."""

    status: CallStatus
    run_id: str
    call_id: str
    phase: str
    idempotency_key: str | None = None
    intent_digest: str | None = None
    receipt: dict[str, Any] | None = None
    repeated: bool = False
    approval_url: str | None = None
    stop_reason: str | None = None
    detail: str | None = None
    waiting_for: str | None = None
    """While ``waiting_for_approval`` because *another* call waits: that call's idempotency key."""
    amended: dict[str, Any] | None = None
    """When an approver amended the call before approving: ``proposed`` and ``executed`` actions,
    ``amended_by``, ``note`` (the write ran with ``executed``, not with the arguments sent)."""
    denial: dict[str, Any] | None = None
    """When ``denied``: the signed denial (approver, reason, binding)."""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CallResult:
        return cls(status=body["status"], run_id=str(body["run_id"]), call_id=str(body["call_id"]),
                   phase=str(body.get("phase", "")), idempotency_key=body.get("idempotency_key"),
                   intent_digest=body.get("intent_digest"), receipt=body.get("receipt"),
                   repeated=bool(body.get("repeated", False)), approval_url=body.get("approval_url"),
                   stop_reason=body.get("stop_reason"), detail=body.get("detail"), amended=body.get("amended"),
                   denial=body.get("denial"))


@dataclass(frozen=True)
class ReceiptEntry:
    """One executed write of a run, with the call id that caused it (None: not a gateway call)."""

    call_id: str | None
    idempotency_key: str
    intent_digest: str
    receipt: dict[str, Any]
    receipt_fingerprint: str | None = None
    reconciled: bool = False

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ReceiptEntry:
        return cls(call_id=body.get("call_id"), idempotency_key=str(body["idempotency_key"]),
                   intent_digest=str(body.get("intent_digest", "")), receipt=dict(body.get("receipt") or {}),
                   receipt_fingerprint=body.get("receipt_fingerprint"), reconciled=bool(body.get("reconciled")))


@dataclass(frozen=True)
class CallRecord:
    """One call id as the committed checkpoint records it: ``unknown``, ``pending``, ``executed``
    or ``denied``."""

    call_id: str
    status: Literal["unknown", "pending", "executed", "denied"]
    idempotency_key: str | None = None
    receipt: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CallRecord:
        return cls(call_id=str(body["call_id"]), status=body["status"], idempotency_key=body.get("idempotency_key"),
                   receipt=body.get("receipt"))


@dataclass(frozen=True)
class PendingApproval:
    """The approval a run waits for; ``waiting`` False when there is none."""

    run_id: str
    waiting: bool
    phase: str
    call_id: str | None = None
    idempotency_key: str | None = None
    kind: str | None = None
    target: str | None = None
    risk: str | None = None
    approval_url: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> PendingApproval:
        return cls(run_id=str(body["run_id"]), waiting=bool(body["waiting"]), phase=str(body.get("phase", "")),
                   call_id=body.get("call_id"), idempotency_key=body.get("idempotency_key"), kind=body.get("kind"),
                   target=body.get("target"), risk=body.get("risk"), approval_url=body.get("approval_url"))


@dataclass(frozen=True)
class FileContent:
    """One file of the run's directory; ``exists`` False for a file not there (yet)."""

    path: str
    exists: bool
    content: str | None
    size_bytes: int
    truncated: bool

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> FileContent:
        return cls(path=str(body["path"]), exists=bool(body["exists"]), content=body.get("content"),
                   size_bytes=int(body.get("size_bytes", 0)), truncated=bool(body.get("truncated")))


@dataclass(frozen=True)
class DirectoryEntry:
    name: str
    path: str
    kind: Literal["file", "directory"]
    size_bytes: int | None = None


@dataclass(frozen=True)
class DirectoryListing:
    """One folder of the run's directory: only what the run's policy covers."""

    path: str
    entries: list[DirectoryEntry]
    truncated: bool

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> DirectoryListing:
        return cls(path=str(body.get("path", "")), truncated=bool(body.get("truncated")),
                   entries=[DirectoryEntry(name=e["name"], path=e["path"], kind=e["kind"],
                                           size_bytes=e.get("size_bytes")) for e in body.get("entries") or []])


@dataclass(frozen=True)
class RunInfo:
    """A run as the operator endpoints show it."""

    run_id: str
    tenant_id: str
    phase: str
    dashboard_url: str
    stop_reason: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> RunInfo:
        return cls(run_id=str(body["run_id"]), tenant_id=str(body["tenant_id"]), phase=str(body["phase"]),
                   dashboard_url=str(body.get("dashboard_url", "")), stop_reason=body.get("stop_reason"))


@dataclass(frozen=True)
class IssuedToken:
    """A gateway token just issued: ``token`` is shown this once; store it now."""

    token_id: str
    token: str = field(repr=False)
    run_id: str | None = None
