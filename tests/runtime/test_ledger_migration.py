"""Story: a run checkpointed before the receipts ledger existed restores and continues.

DESIGN.md sections 3 and 3.1: a schema-v2 checkpoint keeps its executed writes, consumed nonces
and quarantined keys in the payload. Restoring it migrates it to v3 with an empty ledger and
stages those lists; the next commit writes them as ledger entries in its own transaction, and
from then on they are indexed ledger reads.
"""

from __future__ import annotations

import json

import pytest

import runtime.checkpoints.ledger
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_restore, checkpoint_verify
from runtime.core.envelope import envelope_digest
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.keys import keyring_for
from runtime.models import Checkpoint, HighWaterMark, LedgerEntry
from tests.core import builders as b
from tests.core.v1_checkpoints import sign_body
from tests.factories import scenario_fingerprint

pytestmark = pytest.mark.django_db(transaction=True)


def _store_v2_checkpoint(run_id: str, raw_v3: bytes, generation: int) -> None:
    """Rewrite a committed v3 envelope as the v2 one the old code would have written."""
    body = json.loads(raw_v3)
    body.pop("mac")
    payload = body["payload"]
    payload.pop("ledger")
    payload["executed"] = [b.executed_for("ik-old-0").model_dump(mode="json"),
                           b.executed_for("ik-old-1", cursor=1).model_dump(mode="json")]
    payload["consumed_nonces"] = ["nonce-old"]
    payload["quarantined_keys"] = ["ik-retired"]
    body["schema_version"] = 2
    body["generation"] = generation
    raw = sign_body(body, keyring_for(TrustRoot.CHECKPOINT))
    Checkpoint.objects.create(run_id=run_id, generation=generation, envelope=raw,
                              digest=envelope_digest(raw), key_id=body["key_id"], schema_version=2,
                              lease_version=1)
    HighWaterMark.objects.filter(run_id=run_id).update(generation=generation,
                                                       checkpoint_digest=envelope_digest(raw))


def test_a_v2_checkpoint_restores_and_its_lists_become_ledger_entries_at_the_next_commit(start_run):
    state, first = start_run()
    run_id = state.identity.run_id
    committed = Checkpoint.objects.get(run_id=run_id, generation=1)
    _store_v2_checkpoint(run_id, bytes(committed.envelope), generation=2)
    runtime.checkpoints.ledger._VERIFIED.clear()

    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    assert restored.envelope.schema_version == 3 and restored.state.ledger.length == 0
    ledger = state_ledger(restored.state)
    assert ledger.executed("ik-old-1") is not None and ledger.nonce_consumed("nonce-old")
    assert ledger.key_quarantined("ik-retired")
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()

    done = checkpoint_commit(lease=first.lease, state=restored.state, expected_generation=2)

    assert done.generation == 3
    assert list(LedgerEntry.objects.filter(run_id=run_id).order_by("seq").values_list("kind", "key")) == [
        ("executed_write", "ik-old-0"), ("executed_write", "ik-old-1"),
        ("consumed_nonce", "nonce-old"), ("quarantined_key", "ik-retired")]
    runtime.checkpoints.ledger._VERIFIED.clear()
    again = checkpoint_verify(run_id=run_id)
    assert again.state.ledger.length == 4 and again.envelope.carried_ledger == []
    assert state_ledger(again.state).executed("ik-old-0").receipt.idempotency_key == "ik-old-0"
