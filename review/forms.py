"""Forms that parse the dashboard's query strings into typed filters."""

from __future__ import annotations

from django import forms

from review.queries import RunFilters, TraceFilters
from runtime.models import Phase


class RunFilterForm(forms.Form):
    """Runs list filters (GET). An invalid field is ignored, never an error page."""

    phase = forms.ChoiceField(choices=[("", "any phase"), *Phase.choices], required=False)
    tenant = forms.CharField(max_length=200, required=False)
    task = forms.CharField(max_length=200, required=False)
    q = forms.CharField(max_length=64, required=False, label="Run id")

    def filters(self) -> RunFilters:
        """The valid fields as :class:`RunFilters` (empty ones mean "any")."""
        self.is_valid()  # invalid fields drop out of cleaned_data; the valid ones still filter
        data = getattr(self, "cleaned_data", {})
        return RunFilters(
            phase=data.get("phase", ""),
            tenant=data.get("tenant", "").strip(),
            task=data.get("task", "").strip(),
            q=data.get("q", "").strip(),
        )


class TraceFilterForm(forms.Form):
    """Trace evidence browser filters (GET)."""

    run = forms.CharField(max_length=64, required=False, label="Run id")
    event_type = forms.CharField(max_length=64, required=False, label="Event type")
    environment_version = forms.CharField(
        max_length=200, required=False, label="Environment version"
    )

    def filters(self) -> TraceFilters:
        """The valid fields as :class:`TraceFilters`."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return TraceFilters(
            run=data.get("run", "").strip(),
            event_type=data.get("event_type", "").strip(),
            environment_version=data.get("environment_version", "").strip(),
        )
