"""Forms of the dashboard: the small GET filters of the approvals queue and the case list, and
the action forms (POST). The runs list's and the trace browser's filters are ``review.filters``.

Action forms carry only what the operator or reviewer decides or saw (an environment fingerprint,
a reason, a decision, the binding the page showed and a re-entered password); everything else a
service needs comes from the server side (the signed-in user, the run and case ids in the URL).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core import signing

from runtime.core.checkpoint import DecisionKind
from runtime.core.denial_evidence import DenyMode
from runtime.core.evidence import DECISION_BOUND_FIELDS
from runtime.models import CaseStatus


class ApprovalsFilterForm(forms.Form):
    """Approvals queue filter (GET): one run id, or all."""

    run = forms.CharField(max_length=64, required=False, label="Run id")

    def run_id(self) -> str:
        """The run id to show, or ``""`` for every waiting run."""
        self.is_valid()
        return getattr(self, "cleaned_data", {}).get("run", "").strip()


class ApprovalForm(forms.Form):
    """Approve or refresh: the environment fingerprint (and, to approve, the intent digest) the
    operator saw on the page.

    The runtime refuses when the environment has changed since (DESIGN.md section 6: approval is
    bound to the state the approver looked at), so the page carries it back as a hidden field.
    """

    environment_fingerprint = forms.RegexField(
        regex=r"^sha256:[0-9a-f]{64}$", widget=forms.HiddenInput,
        error_messages={"invalid": "the page's environment fingerprint is malformed; reload it"},
    )
    comment = forms.CharField(max_length=2000, strip=True, required=False)
    """Approve only: an optional comment, signed into the approval (DESIGN.md section 6.15)."""
    intent_digest = forms.RegexField(
        regex=r"^sha256:[0-9a-f]{64}$", widget=forms.HiddenInput, required=False,
        error_messages={"invalid": "the page's intent digest is malformed; reload it"},
    )
    """Approve only: the intent digest the card showed; the runtime refuses an approval when the
    waiting write's digest differs (DESIGN.md section 6.15), so what is signed is what was seen."""


DENY_MODE_LABELS = {
    DenyMode.STOP: "stop the run",
    DenyMode.CONTINUE: "let the agent try something else (it is told your reason)",
}
"""What each way to deny does, as the deny forms offer it (one label per :class:`DenyMode`)."""

DENY_MODES = [(mode.value, DENY_MODE_LABELS[mode]) for mode in DenyMode]
"""The ways to deny (DESIGN.md section 6.14), from :class:`DenyMode` alone: the forms' choices and
the radio buttons the templates show. ``stop`` is what a form without a choice does."""


class DenyForm(forms.Form):
    """Deny a pending action: a reason is required (it lands in the trace and the stop detail, or
    reaches the planner as the write's outcome); ``mode`` is one of :data:`DENY_MODES`; the
    fingerprint and intent digest the page showed bind the denial when present."""

    reason = forms.CharField(max_length=500, strip=True)
    mode = forms.ChoiceField(choices=DENY_MODES, required=False)
    environment_fingerprint = forms.RegexField(regex=r"^sha256:[0-9a-f]{64}$", required=False)
    intent_digest = forms.RegexField(regex=r"^sha256:[0-9a-f]{64}$", required=False)

    def deny_mode(self) -> str:
        """The chosen mode (``stop`` when none was chosen)."""
        return self.cleaned_data.get("mode") or DenyMode.STOP.value


class CaseFilterForm(forms.Form):
    """Review cases list filter (GET): status, or any."""

    status = forms.ChoiceField(choices=[("", "any status"), *CaseStatus.choices], required=False)

    def status_value(self) -> str:
        """The chosen status, or ``""`` for any."""
        self.is_valid()
        return getattr(self, "cleaned_data", {}).get("status", "")


BINDING_SALT = "review.decision-binding"
"""``django.core.signing`` salt of the binding a case page shows (per case id, see below)."""


def binding_token(*, case_id: str, binding: dict[str, Any]) -> str:
    """The hidden-field form of the binding the page showed: Django-signed so an edited field is
    caught here with a clear message (the runtime would refuse it as a wrong binding anyway)."""
    return signing.dumps(binding, salt=f"{BINDING_SALT}:{case_id}", compress=True)


class DecisionForm(forms.Form):
    """A reviewer's decision: replan or abort, the binding the page showed, and the reviewer's
    password re-entered (the signer is the signed-in user; DESIGN.md section 6)."""

    decision = forms.ChoiceField(
        choices=[(d.value, d.value) for d in DecisionKind], widget=forms.RadioSelect
    )
    password = forms.CharField(strip=False, widget=forms.PasswordInput, max_length=4096)
    binding = forms.CharField(widget=forms.HiddenInput, max_length=20_000)

    def __init__(self, *args: Any, case_id: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.case_id = case_id

    def clean_binding(self) -> dict[str, Any]:
        """The binding as the page showed it: exactly the bound fields of a decision.

        Only those fields may come from the page: ``nonce``, ``issued_at``, ``reviewer`` and
        ``decision`` are the server's to set, never the form's.
        """
        try:
            value = signing.loads(
                self.cleaned_data["binding"], salt=f"{BINDING_SALT}:{self.case_id}"
            )
        except signing.BadSignature:
            raise forms.ValidationError(
                "the decision binding on the page was altered or belongs to another case; "
                "reload the case and review it again"
            ) from None
        if not isinstance(value, dict) or set(value) != set(DECISION_BOUND_FIELDS):
            raise forms.ValidationError("the decision binding is incomplete; reload the case")
        return value


class TokenIssueForm(forms.Form):
    """Issue a gateway token for the run (DESIGN.md section 5.13): the agent's name and, optionally,
    the action kinds it may call (none ticked: every action the run's policy allows)."""

    agent = forms.CharField(max_length=200, required=False, strip=True, label="Agent name")
    actions = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                        label="Limit to these actions")

    def __init__(self, *args: Any, allowed_actions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["actions"].choices = [(kind, kind) for kind in allowed_actions]
