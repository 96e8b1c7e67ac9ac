"""What the conflicting write did, beside what the pending intent would do (DESIGN.md section 6.6).

A review case holds the pending intent and the receipt that shares its key. This module reads the
content behind both so a reviewer can judge without opening git by hand:

* git: the planned commit (message, files from the action's attachments) against the landed
  commit (its message without the Ratchet trailers, its files as they are in its tree), with a
  unified diff per file (landed -> planned) and of the message;
* workspace: the planned content against the file on disk now, plus whether the disk still
  holds what the conflicting receipt says it wrote;
* any other adapter (HTTP, SQL): the planned action's parameters against the receipt's result
  (the request and response, or the row), as JSON side by side with a diff.

Everything read is capped (``MAX_CONTENT_BYTES`` per file, ``MAX_FILES`` files,
``MAX_DIFF_LINES`` lines per diff), binary content is marked instead of shown, and workspace
paths are checked and confined to the environment's directory (no symlink is followed). The
texts returned are plain strings; the template escapes them. Reading never changes anything.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from review.queries.approvals import DiffLine, diff_lines
from runtime.adapters.landed import FileRead, LandedEffect
from runtime.adapters.readback import landed_effect
from runtime.errors import RatchetError
from runtime.evidence.attachments import attachment_get
from runtime.models import Attachment, ReviewCase

MAX_CONTENT_BYTES = 256 * 1024
"""Bytes read per file side; a larger file is named, sized and not diffed."""

MAX_FILES = 50
"""Files compared per case; the rest are counted as left out."""

MAX_DIFF_LINES = 400
"""Lines of one diff shown; the rest are counted."""

@dataclass(frozen=True)
class Content:
    """One side of a file: ``state`` is ``text``, ``binary``, ``absent``, ``too_large`` or
    ``unreadable`` (``note`` says why); ``text`` only for ``text``; ``size`` in bytes."""

    state: str
    text: str = ""
    size: int = 0
    digest: str = ""
    note: str = ""

    @property
    def label(self) -> str:
        """A short human description of this side."""
        if self.state == "text":
            return f"{self.size} bytes"
        if self.state == "absent":
            return "absent"
        if self.state == "binary":
            return f"binary, {self.size} bytes (not shown)"
        if self.state == "too_large":
            return f"{self.size} bytes, over the {MAX_CONTENT_BYTES // 1024} KiB display limit"
        return f"not readable: {self.note}"


@dataclass(frozen=True)
class FileComparison:
    """One path: what the intent plans (``planned``) and what landed (``landed``), and the
    unified diff landed -> planned (``diff``; empty when identical or not comparable)."""

    path: str
    planned_op: str
    landed_op: str
    planned: Content
    landed: Content
    diff: list[DiffLine]
    omitted_lines: int = 0

    @property
    def same(self) -> bool:
        return self.planned.state == self.landed.state and (
            self.planned.digest == self.landed.digest if self.planned.digest else
            self.planned.state == "absent")


@dataclass
class ConflictEvidence:
    """The content-level evidence for one case (see the module docstring).

    Attributes:
        kind: ``git``, ``workspace`` or ``other`` (how the evidence was read).
        summary: plain-language sentences about the binding (run, action, environment versions).
        planned_message / landed_message: commit messages (git only) and their diff.
        files: per-file comparisons (git, workspace); ``files_left_out`` beyond ``MAX_FILES``.
        planned_json / landed_json: the action parameters and the receipt result (other
            adapters, and always available as raw fields), pretty JSON, with ``json_diff``.
        error: why content could not be read (the rest of the page still stands), or ``""``.
    """

    kind: str
    summary: list[str]
    planned_message: str = ""
    landed_message: str = ""
    message_diff: list[DiffLine] = field(default_factory=list)
    files: list[FileComparison] = field(default_factory=list)
    files_left_out: int = 0
    planned_json: str = ""
    landed_json: str = ""
    json_diff: list[DiffLine] = field(default_factory=list)
    error: str = ""


def _content(data: bytes | None, *, size: int | None = None) -> Content:
    if data is None:
        return Content("absent")
    size = len(data) if size is None else size
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if size > MAX_CONTENT_BYTES:
        return Content("too_large", size=size, digest=digest)
    if b"\0" in data:
        return Content("binary", size=size, digest=digest)
    try:
        return Content("text", text=data.decode("utf-8"), size=size, digest=digest)
    except UnicodeDecodeError:
        return Content("binary", size=size, digest=digest)


def _attachment_content(digest: Any) -> Content:
    """The planned bytes named by an action's ``content`` digest, size-checked before reading."""
    if not isinstance(digest, str):
        return Content("unreadable", note="the action names no content digest")
    size = Attachment.objects.filter(digest=digest).values_list("size", flat=True).first()
    if size is not None and size > MAX_CONTENT_BYTES:
        return Content("too_large", size=size, digest=digest)
    try:
        return _content(attachment_get(digest=digest))
    except RatchetError as exc:
        return Content("unreadable", note=exc.message, digest=digest)


def _text_diff(old: str, new: str, *, fromfile: str, tofile: str) -> tuple[list[DiffLine], int]:
    lines = [
        line if line.endswith("\n") else line + "\n"
        for line in difflib.unified_diff(old.splitlines(keepends=True),
                                         new.splitlines(keepends=True),
                                         fromfile=fromfile, tofile=tofile)
    ]
    parsed = diff_lines("".join(lines))
    return parsed[:MAX_DIFF_LINES], max(0, len(parsed) - MAX_DIFF_LINES)


def _compare(path: str, planned_op: str, planned: Content, landed_op: str,
             landed: Content) -> FileComparison:
    diff: list[DiffLine] = []
    omitted = 0
    if planned.state in ("text", "absent") and landed.state in ("text", "absent"):
        diff, omitted = _text_diff(landed.text, planned.text, fromfile=f"landed/{path}",
                                   tofile=f"planned/{path}")
    return FileComparison(path, planned_op, landed_op, planned, landed, diff, omitted)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _summary(case: ReviewCase) -> list[str]:
    pending = case.pending or {}
    receipt = case.receipt or {}
    action = pending.get("action") or {}
    pre = pending.get("pre_state") or {}
    what = action.get("kind") or "an action"
    if action.get("target"):
        what += f" on {action['target']}"
    message = (action.get("params") or {}).get("message")
    if isinstance(message, str) and message.strip():
        what += f' ("{message.strip().splitlines()[0][:120]}")'
    environment = case.environment or {}
    version = pre.get("version") or environment.get("version")
    where = pre.get("instance_id") or environment.get("instance_id") or "its environment"
    if not action:
        # No write was in flight: say what the run was on, never a placeholder for a key.
        out = [f"Run {case.run_id} had no write in flight when it froze ({case.reason})"
               + (f"; its environment was at version {version} of {where}." if version else ".")]
    else:
        out = [f"Run {case.run_id} planned {what} with key {pending.get('idempotency_key')}"
               + (f", against environment version {version} of {where}." if version else f", against {where}.")]
    if receipt:
        out.append(
            f"Another write with the same key had already landed: receipt"
            f" {receipt.get('receipt_id')} at {receipt.get('committed_at')}, leaving the"
            f" environment at version {receipt.get('environment_version_after')}"
            f" (fencing token {receipt.get('fencing_token')})."
        )
        if receipt.get("intent_digest") != pending.get("intent_digest"):
            out.append("Its intent differs from the pending one, so the runtime will not treat it "
                       "as this run's write: replan (new key, fresh observation) or abort.")
        else:
            out.append("Its intent digest matches the pending one.")
    else:
        out.append(f"No receipt is attached to this case; the run froze because of {case.reason}.")
    return out


def _environment(case: ReviewCase) -> tuple[str, Path | None]:
    spec = case.run.spec or {}
    kind = ((spec.get("task") or {}).get("environment") or {}).get("adapter") or ""
    target = spec.get("target")
    return kind, (Path(target) if isinstance(target, str) and target else None)


def _git_planned_message(action: dict[str, Any]) -> str:
    params = action.get("params") or {}
    if action.get("kind") in ("write_file", "delete_file"):
        verb = "write" if action["kind"] == "write_file" else "delete"
        return f"ratchet: {verb} {action.get('target')}"
    message = params.get("message")
    if isinstance(message, dict):
        return "(a message that is not UTF-8 text)"
    return message if isinstance(message, str) else ""


def _planned_changes(action: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """path -> (op, content digest or None) of a file action or a commit action."""
    kind = action.get("kind")
    params = action.get("params") or {}
    if kind == "write_file":
        return {str(action.get("target")): ("write", params.get("content"))}
    if kind == "delete_file":
        return {str(action.get("target")): ("delete", None)}
    out: dict[str, tuple[str, Any]] = {}
    for change in params.get("changes") or []:
        if isinstance(change, dict) and isinstance(change.get("path"), str):
            out[change["path"]] = (str(change.get("op")), change.get("content"))
    return out


def _landed_content(read: FileRead) -> Content:
    """The display side of one file an adapter read back."""
    if read.state == "bytes":
        return _content(read.data)
    if read.state == "absent":
        return Content("absent")
    if read.state == "too_large":
        return Content("too_large", size=read.size, digest=read.digest)
    return Content("unreadable", note=read.note)


def _planned_side(op: str, digest: Any, before: FileRead | None) -> Content:
    """What the intent plans for one path: the attachment it writes, nothing for a delete, and
    for a path it does not touch, the content the write started from (where known)."""
    if op == "write":
        return _attachment_content(digest)
    if op == "unchanged" and before is not None:
        return _landed_content(before)
    return Content("absent")


def _file_evidence(action: dict[str, Any], landed: LandedEffect, evidence: ConflictEvidence) -> ConflictEvidence:
    if landed.error:
        evidence.error = landed.error
        return evidence
    if landed.message is not None:
        planned_message = _git_planned_message(action)
        evidence.planned_message, evidence.landed_message = planned_message, landed.message
        evidence.message_diff, _ = _text_diff(landed.message, planned_message,
                                              fromfile="landed message", tofile="planned message")
    planned = _planned_changes(action)
    for file in landed.files:
        op, digest = planned.get(file.path, ("unchanged", None))
        evidence.files.append(_compare(file.path, op, _planned_side(op, digest, file.before), file.op,
                                       _landed_content(file.landed)))
    evidence.files_left_out = landed.files_left_out
    return evidence


def conflict_evidence(*, case: ReviewCase) -> ConflictEvidence:
    """Read the content behind ``case``'s pending intent and conflicting receipt.

    Args:
        case: a ``ReviewCase`` with its run loaded (``select_related("run")``, ``spec`` included).

    Returns:
        A :class:`ConflictEvidence`; read problems are reported in its ``error`` or per file,
        never raised (the rest of the case page must still render). DESIGN.md section 6.6.
    """
    action = (case.pending or {}).get("action") or {}
    result = (case.receipt or {}).get("result")
    kind, root = _environment(case)
    evidence = ConflictEvidence(kind="other", summary=_summary(case))
    evidence.planned_json = _pretty(action.get("params") or {})
    evidence.landed_json = _pretty(result if result is not None else {})
    evidence.json_diff, _ = _text_diff(evidence.landed_json, evidence.planned_json,
                                       fromfile="receipt result", tofile="planned parameters")
    if root is None or not case.receipt:
        return evidence
    landed = landed_effect(adapter=kind, target=root, receipt=case.receipt,
                           paths=sorted(_planned_changes(action)), max_bytes=MAX_CONTENT_BYTES,
                           max_files=MAX_FILES)
    if landed is None:
        return evidence
    evidence.kind = kind
    return _file_evidence(action, landed, evidence)
