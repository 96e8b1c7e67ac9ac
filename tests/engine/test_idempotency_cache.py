"""Story: the idempotency cache answers by (key, intent) and never rebinds a key (DESIGN.md section 5.2).

``runtime.checkpoints.receipts`` is the runtime's rebuildable copy of adapter receipts. The same key with
the same intent and receipt returns the original receipt (one row, nothing new); the same key
with another intent -- or the same intent with another receipt -- is a conflict and leaves the
original untouched; a quarantined key can neither be read nor written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.checkpoints.receipts import key_quarantine, receipt_cache_get, receipt_cache_put
from runtime.engine import run_start
from runtime.errors import KeyQuarantinedError, ReceiptConflictError
from runtime.models import IdempotencyRecord
from tests.core.builders import action, receipt_for

pytestmark = pytest.mark.django_db(transaction=True)

INTENT = action(content="sha256:" + "1" * 64).intent_digest()
OTHER_INTENT = action(content="sha256:" + "2" * 64).intent_digest()


@pytest.fixture
def run_id(workspace_task: Path) -> str:
    return run_start(spec_path=workspace_task)


def test_it_returns_the_original_receipt_for_the_same_key_and_intent(run_id: str) -> None:
    original = receipt_for("key-1", INTENT)
    assert receipt_cache_put(run_id=run_id, receipt=original) == original

    again = receipt_cache_put(run_id=run_id, receipt=receipt_for("key-1", INTENT))

    assert again == original and receipt_cache_get(idempotency_key="key-1") == original
    assert IdempotencyRecord.objects.filter(idempotency_key="key-1").count() == 1


@pytest.mark.parametrize("changed", [{"intent_digest": OTHER_INTENT}, {"receipt_id": "rcpt-x"},
                                     {"result": {"ok": False}}],
                         ids=["other-intent", "other-receipt-id", "other-result"])
def test_it_refuses_to_rebind_a_cached_key(run_id: str, changed: dict) -> None:
    original = receipt_for("key-1", INTENT)
    receipt_cache_put(run_id=run_id, receipt=original)

    with pytest.raises(ReceiptConflictError) as caught:
        receipt_cache_put(run_id=run_id, receipt=original.model_copy(update=changed))

    assert caught.value.context["idempotency_key"] == "key-1"
    assert receipt_cache_get(idempotency_key="key-1") == original


def test_it_never_uses_a_quarantined_key_again(run_id: str) -> None:
    receipt_cache_put(run_id=run_id, receipt=receipt_for("key-1", INTENT))
    key_quarantine(run_id=run_id, idempotency_key="key-1", intent_digest=INTENT, reason="replan")
    key_quarantine(run_id=run_id, idempotency_key="never-cached", intent_digest=INTENT,
                   reason="replan")

    for key in ("key-1", "never-cached"):
        with pytest.raises(KeyQuarantinedError):
            receipt_cache_get(idempotency_key=key)
        with pytest.raises(KeyQuarantinedError):
            receipt_cache_put(run_id=run_id, receipt=receipt_for(key, INTENT))
    assert receipt_cache_get(idempotency_key="unknown") is None
