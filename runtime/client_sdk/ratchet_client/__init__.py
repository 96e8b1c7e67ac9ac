"""``ratchet_client``: a typed Python client for Ratchet's agent gateway JSON API (sync and async).

Installable on its own (``pip install runtime/client_sdk``): it needs httpx and nothing of Django
or Celery. Owns the requests and answers of ``/api/v1/`` (Ratchet's DESIGN.md sections 5.12 and
5.13), the typed errors of its codes, and waiting for an approval as a value::

    from ratchet_client import Client

    with Client("http://127.0.0.1:8000", token=TOKEN) as ratchet:
        call = ratchet.call(RUN_ID, "write_file", {"path": "notes/a.txt", "content": "hi"})
        if call.waiting_for_approval:
            call = call.wait_for_approval(timeout=600)
        print(call.receipt)

LangGraph tools (call ids from LangGraph's checkpoint, approvals as ``interrupt()``) are in
:mod:`ratchet_client.langgraph`, with the ``langgraph`` extra (``ratchet-client[langgraph]``).
"""

from ratchet_client.async_client import AsyncCall, AsyncClient
from ratchet_client.client import Call, Client
from ratchet_client.errors import (
    ERRORS,
    ApprovalWaitTimeout,
    CallConflict,
    CallLimit,
    InvalidInput,
    MalformedJson,
    MalformedRequest,
    NotFound,
    PayloadTooLarge,
    PolicyRefused,
    RatchetError,
    RateLimited,
    RunBusy,
    RunsNotEnabled,
    RunStopped,
    RuntimeFailure,
    TokenInvalid,
    TokenMissing,
    TokenScope,
    TokenScopeInvalid,
    TransportError,
    UnknownAction,
    WaitingForApproval,
)
from ratchet_client.models import (
    CallRecord,
    CallResult,
    DirectoryEntry,
    DirectoryListing,
    FileContent,
    IssuedToken,
    PendingApproval,
    ReceiptEntry,
    RunInfo,
    RunStatus,
    Tool,
)

__version__ = "0.1.0"

__all__ = [
    "ERRORS", "ApprovalWaitTimeout", "AsyncCall", "AsyncClient", "Call", "CallConflict", "CallLimit", "CallRecord",
    "CallResult", "Client", "DirectoryEntry", "DirectoryListing", "FileContent", "InvalidInput", "IssuedToken",
    "MalformedJson", "MalformedRequest", "NotFound", "PayloadTooLarge", "PendingApproval", "PolicyRefused",
    "RateLimited", "RatchetError", "ReceiptEntry", "RunBusy", "RunInfo", "RunStatus", "RunStopped",
    "RunsNotEnabled", "RuntimeFailure", "TokenInvalid", "TokenMissing", "TokenScope", "TokenScopeInvalid", "Tool",
    "TransportError", "UnknownAction", "WaitingForApproval", "__version__",
]
