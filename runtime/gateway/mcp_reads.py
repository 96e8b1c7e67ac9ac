"""What the MCP server offers to read: tools, resources and a prompt (DESIGN.md section 5.13).

Read tools (``read_file``, ``list_directory``, ``run_status``, ``list_receipts``,
``pending_approval``) sit beside the run's write tools and take no ``call_id``: a read changes
nothing, so it is never recorded. The same reads are resources (``ratchet://runs/<run>/status``,
``.../receipts``, ``.../approval`` and the template ``ratchet://runs/<run>/files/{path}``) for
hosts that show resources rather than call tools, and one prompt (``work-in-run``) says how to
use the run. Each read is one of the services of :mod:`runtime.gateway.reads` and
:mod:`runtime.gateway.workspace_reads`, with the request's admitted token row: a read needs a
token for the run and counts against its rate limit like a call.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from runtime.errors import GatewayInputError, GatewayUnknownActionError
from runtime.gateway.reads import approval_pending, receipts_list, run_status
from runtime.gateway.workspace_reads import workspace_list, workspace_read
from runtime.models import GatewayToken

_PATH = {"type": "string", "minLength": 1, "maxLength": 4096,
         "description": "a path relative to the run's directory, with / between folders"}

READ_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": ("Read one file of the run's directory (only paths the run's policy covers). Reading "
                  "changes nothing.", {"type": "object", "properties": {"path": _PATH}, "required": ["path"],
                                       "additionalProperties": False}),
    "list_directory": ("List one folder of the run's directory (empty path: the top), showing only what the "
                       "run's policy covers. Reading changes nothing.",
                       {"type": "object", "properties": {"path": {**_PATH, "minLength": 0, "default": ""}},
                        "additionalProperties": False}),
    "run_status": ("The run's phase, stop reason, generation and dashboard address. Reading changes nothing.",
                   {"type": "object", "properties": {}, "additionalProperties": False}),
    "list_receipts": ("Every write the run executed, oldest first, with its receipt and the call id that "
                      "caused it. Reading changes nothing.",
                      {"type": "object", "properties": {}, "additionalProperties": False}),
    "pending_approval": ("The write the run waits for a human to approve, if any, with the address where "
                         "the human approves it. Reading changes nothing and approves nothing.",
                         {"type": "object", "properties": {}, "additionalProperties": False}),
}
"""Read tool name -> (plain-text description, JSON schema of its arguments)."""

PROMPT_NAME = "work-in-run"

PROMPT_TEXT = (
    "You work in a Ratchet run. Read before you write: list_directory and read_file show the run's files "
    "(only what its policy covers). Each write tool executes exactly once; call_id is optional (leave it out "
    "and the gateway derives one from the call, so an identical repeated call returns the first receipt). "
    "A result with status waiting_for_approval means a human must approve the write at approval_url: tell "
    "the user, wait, then repeat the same call. An error with retryable true may be repeated later. "
    "list_receipts shows what was executed; call finish when the task is done."
)


def read_tool_names(*, offered: set[str]) -> list[str]:
    """The read tools to list beside the run's tools ``offered`` (a write tool's name wins)."""
    return [name for name in READ_TOOLS if name not in offered]


def read_tool_call(*, name: str, arguments: dict[str, Any], run_id: str, row: GatewayToken) -> Any:
    """The answer of read tool ``name`` for ``run_id`` (JSON-ready).

    Raises:
        GatewayUnknownActionError: not a read tool.
        GatewayInputError: arguments that are not the tool's.
        the refusals of the read services (scope, policy, path).
    """
    if name not in READ_TOOLS:
        raise GatewayUnknownActionError(tool=name[:80])
    allowed = set(READ_TOOLS[name][1]["properties"])
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise GatewayInputError(f"{name} takes no argument {extra[0][:40]!r}", tool=name)
    path = arguments.get("path", "")
    if not isinstance(path, str):
        raise GatewayInputError("path must be a string", tool=name)
    if name == "read_file":
        return workspace_read(run_id=run_id, path=path, admitted=row)
    if name == "list_directory":
        return workspace_list(run_id=run_id, path=path, admitted=row)
    if name == "run_status":
        found = run_status(run_id=run_id, admitted=row)
        return {k: v for k, v in found.items() if k != "tools"}
    if name == "list_receipts":
        return {"receipts": receipts_list(run_id=run_id, admitted=row)}
    return approval_pending(run_id=run_id, admitted=row)


def run_resources(*, run_id: str) -> list[dict[str, str]]:
    """``{"uri", "name", "description"}`` of the run's fixed resources."""
    base = f"ratchet://runs/{run_id}"
    return [
        {"uri": f"{base}/status", "name": "run status", "description": READ_TOOLS["run_status"][0]},
        {"uri": f"{base}/receipts", "name": "receipts", "description": READ_TOOLS["list_receipts"][0]},
        {"uri": f"{base}/approval", "name": "pending approval", "description": READ_TOOLS["pending_approval"][0]},
    ]


def files_template(*, run_id: str) -> str:
    """The URI template of one file of the run (RFC 6570 level 2: ``{+path}`` keeps the slashes)."""
    return f"ratchet://runs/{run_id}/files/{{+path}}"


def resource_read(*, uri: str, run_id: str, row: GatewayToken) -> tuple[str, str]:
    """``(mime type, text)`` of the resource ``uri`` of ``run_id``.

    Raises:
        GatewayInputError: a URI that names no resource of this run.
        the refusals of the read services.
    """
    base = f"ratchet://runs/{run_id}/"
    if not uri.startswith(base):
        raise GatewayInputError("the resource is not one of this run's", uri=uri[:200])
    rest = uri[len(base):]
    if rest.startswith("files/"):
        found = workspace_read(run_id=run_id, path=unquote(rest[len("files/"):]), admitted=row)
        if not found["exists"]:
            raise GatewayInputError("no such file in the run's directory", uri=uri[:200])
        return "text/plain", str(found["content"])
    tool = {"status": "run_status", "receipts": "list_receipts", "approval": "pending_approval"}.get(rest)
    if tool is None:
        raise GatewayInputError("the run has no such resource", uri=uri[:200])
    answer = read_tool_call(name=tool, arguments={}, run_id=run_id, row=row)
    return "application/json", json.dumps(answer, sort_keys=True, default=str)
