"""Reviewers' passkeys in the dashboard: the Passkeys page, registration, and signing a decision
with one (DESIGN.md section 6.9). Thin: the ceremonies are ``review.passkeys``; the browser half
is ``static/review/passkeys.js`` (no inline script: the CSP forbids it).

JSON endpoints answer 400 with ``{"error": ...}`` when a ceremony cannot start or finish; signing
a decision answers ``{"redirect": <case page>}`` with the outcome as a message, as the password
form does with a 303.
Every POST needs the CSRF token (the script sends the form's).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from pydantic import ValidationError

from review import passkeys as passkey_service
from review.passkeys_forms import PasskeyDecisionForm
from review.permissions import Perm, require_perm
from review.scope import scope_case_check
from review.views.cases import decision_apply
from review.views.errors import json_refused, not_found_is_404
from runtime.errors import PasskeyError, RatchetError

REGISTRATION_KEY = "ratchet.passkey.registration"
DECISION_KEY = "ratchet.passkey.decision"
MAX_BODY_BYTES = 65_536
"""Largest credential JSON accepted (bytes); an authenticator's answer is a few kilobytes."""


def _origin(request: HttpRequest) -> tuple[str, str]:
    return passkey_service.passkey_origin(request_origin=f"{request.scheme}://{request.get_host()}")


def _credential(request: HttpRequest) -> tuple[str, dict[str, Any]]:
    if request.content_type != "application/json":
        # A form post has had its stream read by the CSRF check: only JSON carries a credential.
        raise PasskeyError("the passkey answer must be sent as application/json")
    if len(request.body) > MAX_BODY_BYTES:
        raise PasskeyError("the passkey answer is too large")
    try:
        body = json.loads(request.body)
    except (ValueError, RecursionError):
        raise PasskeyError("the passkey answer is not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("credential"), dict):
        raise PasskeyError("the passkey answer has no credential")
    return json.dumps(body["credential"]), body


@require_perm(Perm.DECIDE_CASE)
@require_safe
def passkeys(request: HttpRequest) -> HttpResponse:
    """The signed-in reviewer's registered passkeys and a button to register one."""
    return render(request, "review/passkeys.html", {
        "passkeys": passkey_service.passkey_list(reviewer=request.user.get_username()),
        "rp_id": _origin(request)[1],
    })


@require_perm(Perm.DECIDE_CASE)
@require_POST
def passkey_register_options(request: HttpRequest) -> HttpResponse:
    """Creation options (JSON) for a new passkey of the signed-in reviewer."""
    options, state = passkey_service.passkey_registration_begin(
        reviewer=request.user.get_username(), rp_id=_origin(request)[1])
    request.session[REGISTRATION_KEY] = state
    return HttpResponse(options, content_type="application/json")


@require_perm(Perm.DECIDE_CASE)
@require_POST
def passkey_register(request: HttpRequest) -> HttpResponse:
    """Verify the browser's creation response (JSON ``{"credential": ..., "name": ...}``) and
    store the passkey; ``{"redirect": <Passkeys page>}`` or 400 ``{"error": ...}``."""
    origin, rp_id = _origin(request)
    try:
        credential, body = _credential(request)
        name = body.get("name") if isinstance(body.get("name"), str) else ""
        passkey_service.passkey_register(
            reviewer=request.user.get_username(), credential=credential,
            state=request.session.pop(REGISTRATION_KEY, None), origin=origin, rp_id=rp_id,
            name=name)
    except PasskeyError as exc:
        return json_refused(exc.message)
    messages.success(request, "Passkey registered. You can now sign decisions with it.")
    return JsonResponse({"redirect": reverse("review:passkeys")})


@require_perm(Perm.DECIDE_CASE)
@require_POST
@not_found_is_404
def passkey_decision_options(request: HttpRequest, case_id: str) -> HttpResponse:
    """Request options (JSON) whose challenge is the digest of the decision the form names
    (``decision``, ``binding``), fixed now for the signed-in reviewer."""
    scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
    form = PasskeyDecisionForm(request.POST, case_id=case_id)
    if not form.is_valid():
        return json_refused("; ".join(str(e) for errs in form.errors.values() for e in errs))
    try:
        options, state = passkey_service.passkey_decision_begin(
            case_id=case_id, reviewer=request.user.get_username(),
            decision=form.cleaned_data["decision"], binding=form.cleaned_data["binding"],
            rp_id=_origin(request)[1])
    except ValidationError:
        return json_refused("the decision binding is not valid; reload the case")
    except RatchetError as exc:
        return json_refused(exc.message)
    request.session[DECISION_KEY] = state
    return HttpResponse(options, content_type="application/json")


@require_perm(Perm.DECIDE_CASE)
@require_POST
@not_found_is_404
def passkey_decide(request: HttpRequest, case_id: str) -> HttpResponse:
    """Check the assertion (JSON ``{"credential": ...}``) over the fixed decision, sign it with
    the passkey evidence inside and apply it; ``{"redirect": <case page>}``, the outcome in a
    message."""
    origin, rp_id = _origin(request)
    state = request.session.pop(DECISION_KEY, None)
    if state is not None and state.get("case_id") != case_id:
        state = None
    try:
        credential, _ = _credential(request)
    except PasskeyError as exc:
        messages.error(request, f"Nothing was signed: {exc.message}")
        return JsonResponse({"redirect": reverse("review:case", args=[case_id])})
    response = decision_apply(request, case_id, sign=lambda: passkey_service.passkey_decision_finish(
        reviewer=request.user.get_username(), credential=credential, state=state,
        origin=origin, rp_id=rp_id))
    # The script navigates itself: a redirect followed by fetch() would consume the message.
    return JsonResponse({"redirect": response.get("Location", reverse("review:case", args=[case_id]))})
