"""Forms of the rollout pages: threshold edits, re-opening admission, promoting and rolling back a
combination (DESIGN.md sections 8.3 and 8.4). They check shape only; the services check rules."""

from __future__ import annotations

import math

from django import forms

from runtime.rollout.admission_thresholds import LABELS, NAMES


class ThresholdForm(forms.Form):
    """One threshold override of a scope; an empty ``value`` removes the override. ``confirm``
    is set by the confirmation page: without it the view shows what would change."""

    name = forms.ChoiceField(choices=[(n, LABELS[n]) for n in NAMES])
    value = forms.CharField(required=False, max_length=40,
                            help_text="Empty: remove this scope's override (the wider scope or setting applies).")
    reason = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    confirm = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_value(self) -> float | None:
        raw = self.cleaned_data["value"].strip()
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise forms.ValidationError("Give a number, or leave it empty to remove the override.") from None
        if not math.isfinite(value):
            raise forms.ValidationError("Give a finite number.")
        return value

    @property
    def confirmed(self) -> bool:
        return self.cleaned_data.get("confirm") == "yes"


class ReopenForm(forms.Form):
    """An admin's re-open decision: why, and that the pending side effects were checked."""

    reason = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    checked = forms.BooleanField(label="I checked the runs with unresolved pending side effects one by one")


class PromoteForm(forms.Form):
    """Promote a canary: share 1 makes it active; below 1 only widens its share."""

    reason = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    share = forms.FloatField(min_value=0.0, max_value=1.0, required=False, initial=1.0)


class RollbackForm(forms.Form):
    """Roll a combination back: why, and an explicit confirmation (it stops its new runs)."""

    reason = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    confirm = forms.BooleanField(label="Roll back the whole combination: it takes no new run")
