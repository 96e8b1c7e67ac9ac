"""Both sides of what a review case is about, readable, for every kind of case (DESIGN.md section 6.11).

A case row keeps the pending intent, the receipt and the environments; the ``review.opened``
event of the freeze keeps the rest (the planner's error, the adapter's refusal, the cached
receipt); the trace of the run keeps the arguments of every intent it proposed. This module
reads those -- and nothing else: no plug-in is imported, so a case stays readable in a process
that cannot load the run's planner or adapter -- and answers, per case kind, a left and a right
side with plain facts, the arguments as text, and a unified diff (``difflib``) where the two
sides say the same kind of thing.

Kinds (``StopReason`` values a freeze or the ledger check opens a case with): receipt_conflict,
untrusted_receipt, receipt_drift, receipt_missing, outcome_unknown, environment_drift,
adapter_refused, planner_failed, verifier_error, ledger_corrupt, restore_refused, code_changed.
Any other reason still gets the planned side and the detail text.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.core.amendment import AMENDED_EVENT
from runtime.errors import RatchetError
from runtime.evidence.attachments import attachment_get
from runtime.models import Attachment, Checkpoint, LedgerEntry, ReviewCase, TraceEvent

MAX_INLINE_BYTES = 64 * 1024
"""A content attachment up to this size (bytes) that is UTF-8 text is shown inline, line by line."""

MAX_DIFF_LINES = 400
"""Lines of one diff kept; the rest are counted in ``CaseSides.diff_omitted``."""

REASON_HEADLINES = {
    "receipt_conflict": "Another write already used this write's idempotency key with other arguments.",
    "untrusted_receipt": "The adapter's receipt for this key does not carry the approval the write needed.",
    "receipt_drift": "The runtime's cached receipt and the adapter's receipt for this key differ.",
    "receipt_missing": "The write's effect (or a cached receipt) is there but the adapter holds no receipt.",
    "outcome_unknown": "The write may or may not have happened: the adapter gave no answer in time.",
    "environment_drift": "The environment is not the one the run checkpointed.",
    "adapter_refused": "The adapter refused the write.",
    "planner_failed": "The planner failed; nothing was executed.",
    "verifier_error": "The verifier gave no verdict; nothing was executed.",
    "ledger_corrupt": "The receipts ledger does not chain to the signed checkpoint.",
    "restore_refused": "The run's stored evidence did not verify, so it could not be restored.",
    "code_changed": "A worker tried to resume the run under other code than the run is pinned to.",
}
"""What a reader is told first, per case kind."""


@dataclass(frozen=True)
class Side:
    """One side of a case: ``title``, readable ``facts`` (label, value) and ``text``, the
    arguments or record as pretty JSON or plain text (what the diff compares)."""

    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class CaseSides:
    """What a case is about (see the module docstring).

    Attributes:
        reason: the case kind; ``headline``: one plain sentence about it; ``detail``: the
            runtime's own words when it froze the run.
        left / right: the two sides (:class:`Side`).
        diff: unified diff lines, right -> left (empty when the sides are not comparable or equal);
            ``diff_omitted``: lines beyond ``MAX_DIFF_LINES``; ``comparable``: whether a diff applies.
        notes: where something could not be found, said plainly.
    """

    reason: str
    headline: str
    detail: str
    left: Side
    right: Side
    diff: list[str] = field(default_factory=list)
    diff_omitted: int = 0
    comparable: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def both(self) -> list[Side]:
        """``[left, right]``, for pages that lay the sides out in a loop."""
        return [self.left, self.right]

    @property
    def diff_rows(self) -> list[tuple[str, str]]:
        """The diff lines with their kind (``meta``, ``hunk``, ``add``, ``del``, ``ctx``) for display."""
        def kind(line: str) -> str:
            if line.startswith(("+++", "---")):
                return "meta"
            if line.startswith("@@"):
                return "hunk"
            return {"+": "add", "-": "del"}.get(line[:1], "ctx")
        return [(kind(line), line) for line in self.diff]

    @property
    def diff_text(self) -> str:
        """The diff as one string (for the command line and JSON)."""
        return "\n".join(self.diff)

    def as_dict(self) -> dict[str, Any]:
        """The sides as JSON-ready data (``manage.py cases show --json``)."""
        out = asdict(self)
        out["diff_text"] = self.diff_text
        return out


def pretty(value: Any) -> str:
    """``value`` as sorted, indented JSON (non-JSON values as strings)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def unified(old: str, new: str, *, old_name: str, new_name: str) -> tuple[list[str], int]:
    """The unified diff ``old`` -> ``new`` as lines (at most ``MAX_DIFF_LINES``) and how many more."""
    lines = [line.rstrip("\n") for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=old_name, tofile=new_name)]
    return lines[:MAX_DIFF_LINES], max(0, len(lines) - MAX_DIFF_LINES)


def _opened_payload(case: ReviewCase) -> dict[str, Any]:
    """The ``review.opened`` payload of the freeze that opened ``case`` (its extras), or ``{}``."""
    payload = (TraceEvent.objects.filter(run_id=case.run_id, event_type="review.opened",
                                         payload__case_id=case.case_id)
               .order_by("-seq").values_list("payload", flat=True).first())
    return payload if isinstance(payload, dict) else {}


def _proposed_action(*, run_id: str, intent_digest: str | None) -> dict[str, Any] | None:
    """The action of an ``intent.proposed`` event with ``intent_digest``, or of an
    ``intent.amended`` one (an approver's amendment has its own intent digest, DESIGN.md section
    6.13): this run's first, then any run's (a key shared by another run of this control plane),
    or None."""
    if not intent_digest:
        return None
    # A JSON key lookup, so the database finds the event; this run's own first.
    events = TraceEvent.objects.filter(event_type__in=("intent.proposed", AMENDED_EVENT),
                                       payload__intent_digest=intent_digest)
    for scope in (events.filter(run_id=run_id), events.exclude(run_id=run_id)):
        found = scope.order_by("seq").values_list("run_id", "payload").first()
        if found is not None and isinstance(found[1].get("action"), dict):
            return {**found[1]["action"], "_run_id": found[0]}
    return None


def _action_facts(action: dict[str, Any], *, key: Any, digest: Any) -> list[tuple[str, str]]:
    return [("Action", str(action.get("kind") or "—")), ("Target", str(action.get("target") or "—")),
            ("Risk", str(action.get("risk") or "—")), ("Idempotency key", str(key or "—")),
            ("Intent digest", str(digest or "—"))]


def _value_lines(name: str, value: Any) -> list[str]:
    """``name: value`` lines; a content digest naming a small text attachment shows its text."""
    if isinstance(value, str) and value.startswith("sha256:"):
        text = _attachment_text(value)
        if text is not None:
            return [f"{name} ({value[:19]}…, {len(text.encode())} bytes):"] + [
                "  | " + line for line in text.splitlines()]
    if isinstance(value, dict) and value:
        return [line for key in sorted(value) for line in _value_lines(f"{name}.{key}", value[key])]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [line for i, item in enumerate(value) for line in _value_lines(f"{name}[{i}]", item)]
    return [f"{name}: {json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)}"]


def _attachment_text(digest: str) -> str | None:
    size = Attachment.objects.filter(digest=digest).values_list("size", flat=True).first()
    if size is None or size > MAX_INLINE_BYTES:
        return None
    try:
        data = attachment_get(digest=digest)
    except RatchetError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def readable(*, kind: Any, target: Any, params: Any) -> str:
    """An action as plain lines (``kind``, ``target``, one line per parameter, small text
    content inline), so a line diff of two actions shows what differs (DESIGN.md section 6.11)."""
    lines = [f"kind: {kind if kind is not None else '—'}", f"target: {target or '—'}"]
    for key in sorted(params or {}):
        lines += _value_lines(f"params.{key}", params[key])
    return "\n".join(lines)


def _arguments(action: dict[str, Any]) -> str:
    return readable(kind=action.get("kind"), target=action.get("target"), params=action.get("params") or {})


def _planned(case: ReviewCase) -> Side:
    pending = case.pending or {}
    action = pending.get("action") or {}
    if not action:
        return Side("Planned by this run", [("Pending write", "none: the run had no write in flight")], "")
    pre = pending.get("pre_state") or {}
    facts = _action_facts(action, key=pending.get("idempotency_key"), digest=pending.get("intent_digest"))
    facts.append(("Environment before the write", f"{pre.get('version') or '—'} of {pre.get('instance_id') or '—'}"))
    return Side("Planned by this run (pending intent)", facts, _arguments(action))


def _receipt_facts(receipt: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Receipt", str(receipt.get("receipt_id") or "—")),
            ("Committed at", str(receipt.get("committed_at") or "—")),
            ("Idempotency key", str(receipt.get("idempotency_key") or "—")),
            ("Intent digest", str(receipt.get("intent_digest") or "—")),
            ("Environment after the write", str(receipt.get("environment_version_after") or "—")),
            ("Fencing token", str(receipt.get("fencing_token") if receipt.get("fencing_token") is not None else "—"))]


def _landed(case: ReviewCase, notes: list[str]) -> Side:
    """The write the receipt records: its arguments when this control plane proposed it."""
    receipt = case.receipt or {}
    if not receipt:
        return Side("What the adapter holds", [("Receipt", "none for this key")], "")
    facts = _receipt_facts(receipt)
    action = _proposed_action(run_id=case.run_id, intent_digest=receipt.get("intent_digest"))
    if action is not None:
        origin = action.pop("_run_id", None)
        facts.append(("Proposed by", f"run {origin}" if origin else "a run of this control plane"))
        facts[:0] = [(label, value) for label, value in _action_facts(action, key=None, digest=None)[:3]]
        return Side("Landed under the same key (receipt)", facts, _arguments(action))
    notes.append("The landed write was not proposed by a run of this control plane, so its action is known only "
                 "through its intent digest; its side shows what the receipt records it wrote.")
    result = receipt.get("result")
    params = {k: v for k, v in result.items() if k not in ("op", "path")} if isinstance(result, dict) else {
        "result": result}
    kind = result.get("op") if isinstance(result, dict) else None
    facts[:0] = [("Target", str(receipt.get("business_object") or "—"))]
    return Side("Landed under the same key (receipt)", facts,
                readable(kind=f"{kind} (as the receipt records it)" if kind else None,
                         target=receipt.get("business_object"), params=params))


def _environment_side(title: str, env: dict[str, Any] | None) -> Side:
    if not env:
        return Side(title, [("Observation", "not recorded")], "")
    facts = [("Instance", str(env.get("instance_id") or "—")), ("Version", str(env.get("version") or "—")),
             ("Fingerprint", str(env.get("state_fingerprint") or "—"))]
    return Side(title, facts, pretty({k: v for k, v in env.items() if k not in ("observed_at",)}))


def _error_side(title: str, error: dict[str, Any], detail: str) -> Side:
    facts = [(label, str(error[key])) for key, label in (("what", "Plug-in"), ("type", "Error"),
                                                         ("message", "Message"), ("output_digest", "Output so far"))
             if error.get(key)]
    if not facts:
        facts = [("Error", detail or "—")]
    return Side(title, facts, str(error.get("message") or detail))


def case_sides(*, case: ReviewCase) -> CaseSides:
    """Both sides of ``case`` in readable form (DESIGN.md section 6.11).

    Args:
        case: a ``ReviewCase`` row (its ``pending``, ``receipt``, ``environment`` and ``observed``
            fields loaded).

    Returns:
        A :class:`CaseSides`. Never raises for missing data: what cannot be found is said in
        ``notes``. Reads the database only (the ``review.opened`` event, ``intent.proposed``
        events); imports no plug-in.
    """
    reason, notes = case.reason, []
    opened = _opened_payload(case)
    headline = REASON_HEADLINES.get(reason, f"The run froze for review ({reason}).")
    planned = _planned(case)
    if reason in ("receipt_conflict", "untrusted_receipt"):
        left, right = planned, _landed(case, notes)
    elif reason == "receipt_drift":
        cached = opened.get("cached_receipt") or {}
        left = Side("Cached by the runtime", _receipt_facts(cached), pretty(cached)) if cached else planned
        held = case.receipt or {}
        right = Side("Held by the adapter (authoritative)", _receipt_facts(held), pretty(held))
    elif reason == "outcome_unknown" and not case.receipt and not (case.observed or opened.get("observed")):
        left, right = planned, _unanswered(opened, case.detail)
    elif reason in ("receipt_missing", "outcome_unknown"):
        left = planned
        right = _landed(case, notes) if case.receipt else _environment_side(
            "Observed when the run froze (no receipt)", case.observed or opened.get("observed"))
    elif reason == "environment_drift":
        left = _environment_side("Checkpointed environment", case.environment)
        right = _environment_side("Observed when the run froze", case.observed or opened.get("observed"))
    elif reason == "adapter_refused":
        fencing, error = opened.get("fencing") or {}, opened.get("adapter_error") or {}
        if not case.pending and isinstance(error.get("action"), dict):
            action = error["action"]
            planned = Side("Proposed by this run (refused before it became the pending write)",
                           _action_facts(action, key=None, digest=None)[:3], _arguments(action))
        named = (("fencing_token", "Fencing token sent"), ("newest_seen", "Newest token the adapter saw"),
                 ("refusals", "Refusals so far"))
        facts = [("Refusal", case.detail or "—")] + [(label, str(error[key])) for key, label in (
            ("type", "Error"), ("message", "Reason")) if error.get(key)] + [
            (label, str(fencing[key])) for key, label in named if fencing.get(key) is not None]
        left, right = planned, Side("The adapter's refusal", facts, case.detail)
    elif reason in ("planner_failed", "verifier_error"):
        left = planned if case.pending else _last_write(case)
        what = "verifier" if reason == "verifier_error" else "planner"
        right = _error_side(f"The {what}'s error", opened.get("plugin_error") or {}, case.detail)
    elif reason == "ledger_corrupt":
        left, right = _ledger_sides(case)
    elif reason in ("restore_refused", "code_changed"):
        left, right = _refusal_sides(case)
    else:
        left, right = planned, Side("What the runtime found", [("Detail", case.detail or "—")], case.detail)
    comparable = reason in ("receipt_conflict", "untrusted_receipt", "receipt_drift", "environment_drift") or (
        reason in ("receipt_missing", "outcome_unknown") and bool(case.receipt))
    diff, omitted = [], 0
    if comparable and left.text and right.text:
        diff, omitted = unified(right.text, left.text, old_name=right.title, new_name=left.title)
    return CaseSides(reason=reason, headline=headline, detail=case.detail, left=left, right=right, diff=diff,
                     diff_omitted=omitted, comparable=comparable, notes=notes)


def _ledger_sides(case: ReviewCase) -> tuple[Side, Side]:
    """The newest signed checkpoint (which names the ledger head) beside the ledger rows found."""
    signed = Checkpoint.objects.filter(run_id=case.run_id).order_by("-generation").values_list(
        "generation", "digest", "key_id").first()
    facts = [("Ledger head", "the receipts ledger head the signed checkpoint names")]
    if signed is not None:
        facts += [("Checkpoint generation", str(signed[0])), ("Checkpoint digest", signed[1]),
                  ("Signed with key", signed[2])]
    rows = LedgerEntry.objects.filter(run_id=case.run_id)
    found = [("Finding", case.detail or "—"), ("Ledger rows stored", str(rows.count()))]
    keys = "\n".join(f"{seq} {kind} {key}" for seq, kind, key in rows.order_by("seq").values_list("seq", "kind", "key"))
    return Side("Signed checkpoint", facts, ""), Side("Ledger rows found", found, keys or case.detail)


def _refusal_sides(case: ReviewCase) -> tuple[Side, Side]:
    """The run's stored record (row and newest trace events) beside the typed refusal."""
    observed = case.observed or {}
    facts = [(label, str(observed[key])) for key, label in (("row_phase", "Run row phase"),
                                                            ("row_generation", "Run row generation"))
             if observed.get(key) is not None]
    events = [f"{e.get('seq')} {e.get('type')}" for e in case.trace_excerpt or [] if isinstance(e, dict)]
    if events:
        facts.append(("Newest traced event", events[-1]))
    what = "The restore's refusal" if case.reason == "restore_refused" else "The code check's refusal"
    refusal = [("Error", str(observed.get("error") or "—")), ("Refusal", case.detail or "—")]
    return (Side("The run as stored", facts or [("Run row", "not recorded")], "\n".join(events)),
            Side(what, refusal, case.detail))


def _unanswered(opened: dict[str, Any], detail: str) -> Side:
    """What the adapter answered a write that timed out: no receipt, the attempts and the last error."""
    facts = [("Receipt", "none for this key")] + [
        (label, str(opened[key])) for key, label in (("attempts", "Attempts timed out"), ("error", "Last error"))
        if opened.get(key) is not None]
    return Side("The adapter's answer (no receipt)", facts, str(opened.get("error") or detail))


def _last_write(case: ReviewCase) -> Side:
    """The run's newest proposed write from the case's trace excerpt (the planner failed after it)."""
    for event in reversed(case.trace_excerpt or []):
        if event.get("type") == "intent.proposed" and isinstance(event.get("payload"), dict):
            payload = event["payload"]
            action = payload.get("action") or {}
            facts = _action_facts(action, key=payload.get("idempotency_key"), digest=payload.get("intent_digest"))
            return Side("The run's last proposed write (before the failure)", facts, _arguments(action))
    return Side("What the run had done", [("Writes", "none proposed before the failure")], "")
