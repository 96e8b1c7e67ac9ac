"""Which executed write an approver amended, read back from the trace (DESIGN.md section 6.13).

The amendment is sealed in the run's trace (``intent.amended``, committed with the checkpoint that
put the amended action in place), so it is there for every later reader: the engine, to tell the
planner at its next proposal that the write it proposed ran with other arguments, and the gateway,
to tell a waiting caller the arguments its call executed with. Reads only; one query per call.
"""

from __future__ import annotations

from runtime.core.amendment import AMENDED_EVENT, WriteAmendment
from runtime.core.checkpoint import RunState
from runtime.core.ledger import state_ledger
from runtime.models import TraceEvent


def amendment_for(*, run_id: str, idempotency_key: str | None = None,
                  cursor: int | None = None) -> WriteAmendment | None:
    """The newest amendment in ``run_id``'s trace of the write under ``idempotency_key`` (or, when
    None, of the newest write amended at ``cursor``), or None.

    The proposed action is the one the first amendment of that key superseded (what the planner
    or the caller proposed), the executed one the newest amendment's.
    """
    # JSON key lookups, so the database picks the few events of one write (this runs before every
    # proposal of a run: DESIGN.md section 6.13).
    events = TraceEvent.objects.filter(run_id=run_id, event_type=AMENDED_EVENT)
    if idempotency_key is None:
        newest = events.filter(payload__cursor=cursor).order_by("-seq").values_list("payload", flat=True).first()
        if not isinstance(newest, dict):
            return None
        idempotency_key = str(newest.get("idempotency_key", ""))
    found = [p for p in events.filter(payload__idempotency_key=idempotency_key).order_by("seq")
             .values_list("payload", flat=True) if isinstance(p, dict)]
    if not found:
        return None
    first, last = found[0], found[-1]
    superseded = first.get("superseded") or {}
    return WriteAmendment(cursor=int(last.get("cursor", 0)), idempotency_key=idempotency_key,
                          proposed=dict(superseded.get("action") or {}), executed=dict(last.get("action") or {}),
                          proposed_intent_digest=str(superseded.get("intent_digest", "")),
                          executed_intent_digest=str(last.get("intent_digest", "")),
                          amended_by=str(last.get("approver", "")), note=str(last.get("note", "")))


def previous_write_amendment(*, run_id: str, state: RunState) -> WriteAmendment | None:
    """The amendment of the write executed at the cursor before ``state.cursor``, or None.

    Only a write that executed (or was reconciled) under the amended intent counts: the ledger's
    intent digest for the key must be the amendment's. One trace query (no rows for a run nobody
    amended) and, only when an amendment is found, one ledger look-up by key.
    """
    if state.cursor == 0:
        return None
    found = amendment_for(run_id=run_id, cursor=state.cursor - 1)
    if found is None:
        return None
    write = state_ledger(state).executed(found.idempotency_key)
    if write is None or write.intent_digest != found.executed_intent_digest:
        return None
    return found
