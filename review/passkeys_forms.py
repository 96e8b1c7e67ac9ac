"""The passkey form of a decision: the decision and the binding the page showed, no password
(the reviewer's authenticator is the proof; DESIGN.md section 6.9)."""

from __future__ import annotations

from review.forms import DecisionForm


class PasskeyDecisionForm(DecisionForm):
    """:class:`review.forms.DecisionForm` without the password: ``decision`` and ``binding``
    (the Django-signed binding the case page showed, checked by ``clean_binding``)."""

    password = None
