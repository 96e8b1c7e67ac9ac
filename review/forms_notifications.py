"""Forms of the notification settings page (DESIGN.md section 6.10): add an endpoint, and change
one of your own (switch it on or off, choose its events, delete it)."""

from __future__ import annotations

from django import forms

from review.models import ChannelKind, NotificationKind


class EndpointForm(forms.Form):
    """A new endpoint of the signed-in user: a label, a channel, its target and the events."""

    name = forms.CharField(max_length=100, required=False, label="Name")
    channel = forms.ChoiceField(choices=ChannelKind.choices, label="Channel")
    target = forms.CharField(max_length=2000, label="Target (webhook URL, e-mail address or apprise URL)")
    kinds = forms.MultipleChoiceField(choices=NotificationKind.choices, widget=forms.CheckboxSelectMultiple,
                                      label="Events")


class EndpointChangeForm(forms.Form):
    """A change to one endpoint: ``toggle`` on/off, ``kinds`` (replace the events) or ``delete``."""

    endpoint_id = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    change = forms.ChoiceField(choices=[("toggle", "toggle"), ("kinds", "kinds"), ("delete", "delete")])
    kinds = forms.MultipleChoiceField(choices=NotificationKind.choices, required=False,
                                      widget=forms.CheckboxSelectMultiple)
