"""The amend form: the waiting write's arguments as JSON, and what the approver saw (DESIGN.md section 6.13)."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from runtime.decisions.amend_arguments import arguments_parse
from runtime.errors import AmendmentPolicyError

MAX_ARGUMENTS_CHARS = 1_100_000
"""Enough for the largest file content an action may carry (1,000,000 characters) and its JSON escaping."""


class AmendForm(forms.Form):
    """Preview or confirm an amendment.

    ``arguments`` is the JSON object the approver edited; ``proposed_intent_digest`` and
    ``environment_fingerprint`` are the intent and environment the page showed (the service
    refuses if either moved); ``step`` is ``preview`` (compute the diff, change nothing) or
    ``confirm`` (amend and approve).
    """

    arguments = forms.CharField(max_length=MAX_ARGUMENTS_CHARS, strip=False, widget=forms.Textarea)
    proposed_intent_digest = forms.RegexField(regex=r"^sha256:[0-9a-f]{64}$", widget=forms.HiddenInput)
    environment_fingerprint = forms.RegexField(regex=r"^sha256:[0-9a-f]{64}$", widget=forms.HiddenInput, required=False)
    note = forms.CharField(max_length=500, required=False, strip=True)
    step = forms.ChoiceField(choices=[("preview", "preview"), ("confirm", "confirm")])

    def clean_arguments(self) -> dict[str, Any]:
        try:
            return arguments_parse(self.cleaned_data["arguments"])
        except AmendmentPolicyError as exc:
            raise forms.ValidationError(exc.message) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("step") == "confirm" and not data.get("environment_fingerprint"):
            raise forms.ValidationError("preview the amendment before confirming it")
        return data


def arguments_text(arguments: dict[str, Any]) -> str:
    """The arguments as the form's textarea shows them (indented JSON, keys sorted)."""
    return json.dumps(arguments, indent=2, sort_keys=True, ensure_ascii=False)
