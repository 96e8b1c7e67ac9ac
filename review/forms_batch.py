"""The approvals queue's batch form: several waiting approvals decided in one action (DESIGN.md section 6.15)."""

from __future__ import annotations

import re

from django import forms

from review.forms import DENY_MODES
from runtime.decisions.batch import MAX_BATCH_ITEMS, BatchItem

ITEM = re.compile(r"^(?P<run>[A-Za-z0-9_.:-]{1,64})\|(?P<intent>sha256:[0-9a-f]{64})\|(?P<fp>sha256:[0-9a-f]{64})$")
"""One checked card: ``run_id|intent_digest|environment_fingerprint`` as the page showed them."""


class BatchForm(forms.Form):
    """``item`` (repeated, one per checked card), ``decision`` (approve or deny), the denial's
    ``reason`` and ``mode``, the approval's optional ``comment``."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny")])
    reason = forms.CharField(max_length=500, strip=True, required=False)
    mode = forms.ChoiceField(choices=DENY_MODES, required=False)
    comment = forms.CharField(max_length=2000, strip=True, required=False)

    def __init__(self, data: object = None) -> None:
        super().__init__(data)
        self.raw_items = data.getlist("item") if data is not None and hasattr(data, "getlist") else []

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        if not self.raw_items:
            raise forms.ValidationError("Select at least one waiting approval. Nothing was changed.")
        if len(self.raw_items) > MAX_BATCH_ITEMS:
            raise forms.ValidationError(f"Select at most {MAX_BATCH_ITEMS} approvals. Nothing was changed.")
        if any(ITEM.match(raw) is None for raw in self.raw_items):
            raise forms.ValidationError("The page's selection is malformed; reload it. Nothing was changed.")
        if cleaned.get("decision") == "deny" and not cleaned.get("reason"):
            raise forms.ValidationError("A denial needs a reason (at most 500 characters). Nothing was changed.")
        return cleaned

    def items(self) -> list[BatchItem]:
        """The checked cards, in page order (call after ``is_valid``)."""
        found = [ITEM.match(raw) for raw in self.raw_items]
        return [BatchItem(run_id=m["run"], intent_digest=m["intent"], environment_fingerprint=m["fp"])
                for m in found if m is not None]
