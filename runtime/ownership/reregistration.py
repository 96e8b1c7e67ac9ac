"""A person re-registers an environment whose fence was moved outside the control plane
(DESIGN.md section 4.16).

Fencing tokens come from the control plane's one counter per environment (``runtime.ownership.
environments``). When something the control plane never issued a token to raises an
environment's fence far ahead (a restored control-plane database, another installation, a hand
edit), every lease the control plane hands out is older than the fence: a run there freezes, a
replan freezes again and new runs are refused, for good. Only a person can say that the
environment is sound and the foreign fence is to be honoured; this module is how they say it:

1. :func:`reregistration_sign` -- the person signs a statement with their reviewer key: which
   environment, the fence they observed on it, why, who, when (database clock);
2. :func:`environment_reregister` -- the control plane checks the signature under the reviewer
   trust root and that the key is bound to the person named (DESIGN.md section 6.3), refuses a
   statement older than ``RATCHET_DECISION_SECONDS``, moves the environment's counter up to the
   observed fence (never down), and traces the signed statement on every run of the
   environment as ``environment.reregistered``. The next lease holds a token past the fence.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import TERMINAL_PHASES
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.database.clock import db_now
from runtime.errors import DecisionRefusedError, RatchetError
from runtime.evidence.trace import trace_append
from runtime.keys import keyring_for, reviewer_names, signer_for
from runtime.models import EnvironmentRegistration, Run

_FUTURE_STAMP_SECONDS = 300.0
"""How far ``issued_at`` may lie ahead of the database clock: the skew reviewer decisions allow
(``runtime.decisions.reviews.FUTURE_STAMP_SECONDS``), so a statement cannot be pre-dated to
outlive ``RATCHET_DECISION_SECONDS``."""

logger = logging.getLogger(__name__)

REREGISTERED = "environment.reregistered"
"""The trace event every run of a re-registered environment receives."""

STATEMENT_KIND = "environment.reregister"
MAX_FENCE = 2**62


@dataclass(frozen=True)
class Reregistration:
    """What :func:`environment_reregister` did: the counter before and after, the runs traced."""

    instance_id: str
    reviewer: str
    token_before: int
    token_after: int
    runs_traced: tuple[str, ...]


def reregistration_sign(*, instance_id: str, observed_fence: int, reviewer: str, reason: str,
                        keyring: Keyring | None = None) -> dict[str, Any]:
    """A signed re-registration statement for ``instance_id``, as ``reviewer``.

    Args:
        instance_id: the registered environment instance.
        observed_fence: the fence (a non-negative integer) the person read on the environment.
        reviewer: the person's reviewer name (bound to ``keyring``'s key when keys are bound).
        reason: why the environment is sound (1-500 characters, kept in every run's trace).
        keyring: the person's own reviewer key; None: the reviewer role key this process holds.

    Returns:
        ``{"statement": {...}, "signature": {"key_id", "mac"}}``.

    Raises:
        DecisionRefusedError: an argument is out of range.
        KeyringError: this process holds no private reviewer key.
    """
    if not isinstance(observed_fence, int) or not 0 <= observed_fence <= MAX_FENCE:
        raise DecisionRefusedError("the observed fence must be an integer from 0 to 2**62", instance_id=instance_id)
    if not reason or len(reason) > 500:
        raise DecisionRefusedError("a re-registration needs a reason of 1-500 characters", instance_id=instance_id)
    statement = {"kind": STATEMENT_KIND, "instance_id": instance_id, "observed_fence": observed_fence,
                 "reviewer": reviewer, "reason": reason, "issued_at": db_now().isoformat()}
    signature = (keyring or signer_for(TrustRoot.REVIEWER)).sign(canonical_json(statement))
    return {"statement": statement, "signature": {"key_id": signature.key_id, "mac": signature.mac}}


def environment_reregister(*, signed: dict[str, Any]) -> Reregistration:
    """Apply a signed re-registration statement (see :func:`reregistration_sign`).

    Raises:
        DecisionRefusedError: the statement is malformed, names an unknown environment, is
            older than ``RATCHET_DECISION_SECONDS`` (database clock), or is signed with a key
            bound to another reviewer; nothing is changed.
        UnknownKeyError / BadSignatureError: the signature does not verify under the reviewer
            trust root; nothing is changed.
    """
    statement, signature = _parts(signed)
    instance_id = statement["instance_id"]
    keyring_for(TrustRoot.REVIEWER).verify(canonical_json(statement), signature)
    bound = reviewer_names().get(signature.key_id)
    if bound is not None and bound != statement["reviewer"]:
        raise DecisionRefusedError(f"the key {signature.key_id} is bound to {bound}, not {statement['reviewer']}",
                                   instance_id=instance_id)
    issued, now = datetime.fromisoformat(statement["issued_at"]), db_now()
    if now - issued > timedelta(seconds=settings.RATCHET_DECISION_SECONDS):
        raise DecisionRefusedError("the re-registration statement has expired; sign a new one",
                                   instance_id=instance_id)
    if issued > now + timedelta(seconds=_FUTURE_STAMP_SECONDS):
        raise DecisionRefusedError("the re-registration statement is stamped in the future by the database "
                                   "clock; sign a new one", instance_id=instance_id)
    with transaction.atomic():
        row = EnvironmentRegistration.objects.select_for_update().filter(instance_id=instance_id).first()
        if row is None:
            raise DecisionRefusedError("no such registered environment", instance_id=instance_id)
        before = int(row.fencing_token)
        after = max(before, int(statement["observed_fence"]))
        EnvironmentRegistration.objects.filter(instance_id=instance_id).update(fencing_token=after)
    # Traced on the runs it can still change; a finished run's evidence stays as it ended.
    runs = tuple(Run.objects.filter(environment_instance_id=instance_id)
                 .exclude(phase__in=[p.value for p in TERMINAL_PHASES]).order_by("run_id")
                 .values_list("run_id", flat=True))
    payload = {"statement": statement, "signature": signed["signature"], "token_before": before,
               "token_after": after}
    for run_id in runs:
        try:
            trace_append(run_id=run_id, event_type=REREGISTERED, payload=payload)
        except RatchetError as exc:  # a run whose trace cannot take it is logged, the rest go on
            logger.warning("run %s: environment.reregistered not traced: %s", run_id, type(exc).__name__)
    logger.warning("environment %s re-registered by %s: fencing token %d -> %d", instance_id,
                   statement["reviewer"], before, after)
    return Reregistration(instance_id=instance_id, reviewer=statement["reviewer"], token_before=before,
                          token_after=after, runs_traced=runs)


def _parts(signed: Any) -> tuple[dict[str, Any], Signature]:
    try:
        statement = dict(signed["statement"])
        raw = dict(signed["signature"])
        if statement.get("kind") != STATEMENT_KIND or set(statement) != {
                "kind", "instance_id", "observed_fence", "reviewer", "reason", "issued_at"}:
            raise ValueError("not a re-registration statement")
        if not isinstance(statement["observed_fence"], int) or not 0 <= statement["observed_fence"] <= MAX_FENCE:
            raise ValueError("observed_fence out of range")
        if not all(isinstance(statement[k], str) for k in ("instance_id", "reviewer", "reason", "issued_at")):
            raise ValueError("a field is not text")
        datetime.fromisoformat(statement["issued_at"])
        return statement, Signature(key_id=str(raw["key_id"]), mac=str(raw["mac"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise DecisionRefusedError(f"malformed re-registration statement: {exc}") from None
