"""The arguments of a waiting write as an approver edits them, and the action they make (DESIGN.md section 6.13).

An action stores file content by digest; an approver edits text. So the editable *arguments* of
an action are those a model or an agent would send for it: ``{"path", "content", "executable"}``
for ``write_file`` (content read from its blob), ``{"path"}`` for ``delete_file``, and
``{"target", "params"}`` for every other kind (an HTTP request, a SQL template, a plug-in's
action). :func:`arguments_to_action` turns edited arguments back into an action of the same kind
and risk, validated with the same argument models the chat-tools planner uses for a model's call
(path rule, content size); the run's policy and the adapter's own checks come after, in the
service. :func:`arguments_assign` applies ``--set key=value`` pairs from the command line, and
:func:`arguments_parse` reads arguments given as JSON text (the dashboard's form, the CLI's ``--json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from runtime.core.checkpoint import Action
from runtime.core.nesting import json_loads_bounded
from runtime.errors import AmendmentPolicyError, AmendmentRefusedError
from runtime.planners.chat_tools.tools import DeleteFileArgs, WriteFileArgs

FILE_KINDS = ("write_file", "delete_file")


def action_arguments(action: Action, *, blob: Callable[[str], bytes]) -> dict[str, Any]:
    """The editable arguments of ``action`` (see the module docstring).

    Args:
        blob: reads an attachment by digest (a ``write_file``'s content).

    Raises:
        AmendmentRefusedError: a ``write_file`` whose content is not UTF-8 text (it cannot be
            edited as text; approve or deny it as proposed).
    """
    if action.kind == "write_file":
        digest = action.params.get("content")
        try:
            text = blob(str(digest)).decode("utf-8")
        except UnicodeDecodeError:
            raise AmendmentRefusedError("the file content is not UTF-8 text, so it cannot be amended as text",
                                        action_kind=action.kind) from None
        return {"path": action.target, "content": text, "executable": bool(action.params.get("executable", False))}
    if action.kind == "delete_file":
        return {"path": action.target}
    return {"target": action.target, "params": dict(action.params)}


def arguments_to_action(original: Action, arguments: Mapping[str, Any], *,
                        put_blob: Callable[[bytes], str]) -> Action:
    """The action of ``original``'s kind and risk that ``arguments`` describe.

    Args:
        original: the waiting action; its kind and risk are kept (an amendment changes what the
            action does, never which kind of action it is or how risky the policy rates it).
        arguments: the edited arguments, shaped as :func:`action_arguments` returns them.
        put_blob: stores new file content and returns its digest.

    Raises:
        AmendmentPolicyError: the arguments fail the kind's argument model (unknown field, a path
            the path rule refuses, content over the size limit) or make no valid action.
    """
    if not isinstance(arguments, Mapping):
        raise AmendmentPolicyError("the amended arguments must be a JSON object", action_kind=original.kind)
    try:
        if original.kind == "write_file":
            args = WriteFileArgs.model_validate(dict(arguments))
            params: dict[str, Any] = {"content": put_blob(args.content.encode("utf-8")),
                                      "executable": args.executable}
            return Action(kind=original.kind, target=args.path, params=params, risk=original.risk)
        if original.kind == "delete_file":
            deleted = DeleteFileArgs.model_validate(dict(arguments))
            return Action(kind=original.kind, target=deleted.path, params={}, risk=original.risk)
        unknown = sorted(set(arguments) - {"target", "params"})
        if unknown:
            raise AmendmentPolicyError(f"unknown argument(s) {', '.join(unknown)[:200]}: only target and params "
                                       "can be amended", action_kind=original.kind)
        params = arguments.get("params", original.params)
        if not isinstance(params, Mapping):
            raise AmendmentPolicyError("params must be a JSON object", action_kind=original.kind)
        return Action(kind=original.kind, target=str(arguments.get("target", original.target)),
                      params=dict(params), risk=original.risk)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise AmendmentPolicyError(f"the amended arguments are not a valid {original.kind}: {fields[:400]}",
                                   action_kind=original.kind) from None


def arguments_parse(text: str) -> dict[str, Any]:
    """The arguments an approver wrote as JSON text, read the same way wherever they come from:
    the dashboard's amend form and ``manage.py approvals amend --json`` (DESIGN.md section 6.13).

    Args:
        text: JSON text; nesting deeper than ``runtime.core.nesting.MAX_NESTING_DEPTH`` is refused
            before parsing.

    Returns:
        The JSON object as a dict (not yet checked against the action's argument model).

    Raises:
        AmendmentPolicyError: the text is not valid JSON (or nests too deep), or is not an object.
    """
    try:
        value = json_loads_bounded(text)
    except ValueError:  # NestingTooDeepError is a ValueError too
        raise AmendmentPolicyError("the arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise AmendmentPolicyError("the arguments must be a JSON object")
    return value


def arguments_assign(arguments: Mapping[str, Any], pairs: list[str]) -> dict[str, Any]:
    """``arguments`` with each ``key=value`` of ``pairs`` applied (the CLI's ``--set``).

    A dotted key reaches into objects (``params.quantity=5``). Where the current value is a
    string the value is taken as written; elsewhere it is read as JSON when it parses (``5``,
    ``true``, ``{"a": 1}``) and taken as a string otherwise.

    Raises:
        AmendmentPolicyError: a pair without ``=``, an empty key, or a dotted key through a
            value that is not an object.
    """
    out: dict[str, Any] = json.loads(json.dumps(dict(arguments)))
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise AmendmentPolicyError(f"--set needs key=value, got {pair[:80]!r}")
        *parents, leaf = key.strip().split(".")
        node = out
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise AmendmentPolicyError(f"--set {key[:80]}: {part!r} is not an object")
            node = child
        node[leaf] = raw if isinstance(node.get(leaf), str) else _json_or_text(raw)
    return out


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw
