"""Forms of the dashboard: typed filters from query strings (GET) and the action forms (POST).

Action forms carry only what the operator or reviewer decides or saw (an environment fingerprint,
a reason, a decision, the binding the page showed and a re-entered password); everything else a
service needs comes from the server side (the signed-in user, the run and case ids in the URL).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core import signing

from review.queries.runs_list import DEFAULT_SORT, SORTS, RunFilters
from review.queries.trace import TraceFilters
from runtime.core.checkpoint import DecisionKind
from runtime.core.evidence import DECISION_BOUND_FIELDS
from runtime.models import CaseStatus, Phase

_DAY_ERRORS = {"invalid": "enter a day as YYYY-MM-DD (UTC)"}


class _StrictQueryForm(forms.Form):
    """A GET filter form that names a query parameter it does not know as an error, instead of
    silently showing everything (a misspelt ``created_from`` must not look like a working
    filter). ``EXTRA``: parameters the page reads outside the form (paging, polling)."""

    EXTRA: frozenset[str] = frozenset()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        unknown = sorted(set(self.data) - set(self.fields) - self.EXTRA)
        if unknown:
            known = ", ".join(sorted({*self.fields, *self.EXTRA} - {"since"}))
            raise forms.ValidationError(
                f"unknown filter: {', '.join(unknown)}; this page takes {known}")
        return data


class RunFilterForm(_StrictQueryForm):
    """Runs list filters and order (GET, DESIGN.md section 6.8). A bad value is a form error the
    page shows next to its field (and answers ``400``); nothing is silently dropped."""

    EXTRA = frozenset({"since"})

    q = forms.CharField(max_length=200, required=False, label="Search")
    key = forms.CharField(max_length=200, required=False, label="Idempotency key")
    phase = forms.ChoiceField(choices=[("", "any phase"), *Phase.choices], required=False)
    tenant = forms.CharField(max_length=200, required=False)
    task = forms.CharField(max_length=200, required=False)
    date_field = forms.ChoiceField(choices=[("created", "created"), ("updated", "updated")],
                                   required=False, label="Date")
    sort = forms.ChoiceField(choices=[(s, s) for key in SORTS for s in (key, f"-{key}")], required=False)
    after = forms.CharField(max_length=64, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # ``from`` is a Python keyword: these two are added by name.
        self.fields["from"] = forms.DateField(required=False, label="From (UTC)", error_messages=_DAY_ERRORS,
                                              input_formats=["%Y-%m-%d"])
        self.fields["to"] = forms.DateField(required=False, label="To (UTC, inclusive)",
                                            error_messages=_DAY_ERRORS, input_formats=["%Y-%m-%d"])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("from"), data.get("to")
        if start and end and end < start:
            self.add_error("to", "the range ends before it starts; swap the two days")
        return data

    def filters(self) -> RunFilters:
        """The valid fields as :class:`RunFilters` (empty ones mean "any"); call after
        ``is_valid()`` to know whether a field was dropped."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        start, end = data.get("from"), data.get("to")
        return RunFilters(
            phase=data.get("phase", ""),
            tenant=data.get("tenant", "").strip(),
            task=data.get("task", "").strip(),
            q=data.get("q", "").strip(),
            key=data.get("key", "").strip(),
            date_field=data.get("date_field") or "created",
            date_from=start.isoformat() if start else "",
            date_to=end.isoformat() if end else "",
        )

    def sort_value(self) -> str:
        """The order asked for (``key`` or ``-key``), ``DEFAULT_SORT`` when none."""
        return getattr(self, "cleaned_data", {}).get("sort") or DEFAULT_SORT


class TraceFilterForm(_StrictQueryForm):
    """Trace evidence browser filters (GET): a partial run id, content search, event type,
    environment version; a bad value is a form error, as on the runs list."""

    EXTRA = frozenset({"verify"})

    run = forms.CharField(max_length=64, required=False, label="Run id")
    q = forms.CharField(max_length=200, required=False, label="Search")
    event_type = forms.CharField(max_length=64, required=False, label="Event type")
    environment_version = forms.CharField(
        max_length=200, required=False, label="Environment version"
    )
    before = forms.RegexField(regex=r"^[0-9]{1,19}$", required=False,
                              error_messages={"invalid": "a page cursor is an event id (digits); "
                                                         "go back to the first page"})

    def filters(self) -> TraceFilters:
        """The valid fields as :class:`TraceFilters`."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return TraceFilters(
            run=data.get("run", "").strip(),
            q=data.get("q", "").strip(),
            event_type=data.get("event_type", "").strip(),
            environment_version=data.get("environment_version", "").strip(),
        )


# --- approvals, cancel and review decisions (POST forms) ---------------------------------------


class ApprovalsFilterForm(forms.Form):
    """Approvals queue filter (GET): one run id, or all."""

    run = forms.CharField(max_length=64, required=False, label="Run id")

    def run_id(self) -> str:
        """The run id to show, or ``""`` for every waiting run."""
        self.is_valid()
        return getattr(self, "cleaned_data", {}).get("run", "").strip()


class ApprovalForm(forms.Form):
    """Approve or refresh: the environment fingerprint the operator saw on the page.

    The runtime refuses when the environment has changed since (DESIGN.md section 6: approval is
    bound to the state the approver looked at), so the page carries it back as a hidden field.
    """

    environment_fingerprint = forms.RegexField(
        regex=r"^sha256:[0-9a-f]{64}$", widget=forms.HiddenInput,
        error_messages={"invalid": "the page's environment fingerprint is malformed; reload it"},
    )


class DenyForm(forms.Form):
    """Deny a pending action: a reason is required (it lands in the trace and the stop detail)."""

    reason = forms.CharField(max_length=500, strip=True)


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
