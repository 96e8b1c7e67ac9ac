"""A run's gateway tokens in the dashboard: list them, issue one, revoke one (DESIGN.md sections
5.12 and 5.13).

GET lists the run's tokens (ids, agent, actions, live or revoked; never a secret); POST (with
CSRF) revokes the token named in the form, effective for the agent's next call, or, with
``intent=issue``, issues a token and answers the page with its secret shown this once (never
stored, never in a redirect, ``Cache-Control: no-store``). Operators only
(the cancel permission: revoking stops an agent the way cancelling stops a run). Thin: the
work is ``runtime.gateway.tokens``. The dashboard session never authorises the gateway's API,
and a gateway token never opens this page (the page reads only the session).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from review.forms import TokenIssueForm
from review.permissions import Perm, require_perm
from review.scope import scope_run_check
from review.views.common import see_other
from review.views.errors import not_found_is_404
from runtime.gateway.tokens import token_issue, token_revoke, tokens_for_run
from runtime.models import Run


@require_perm(Perm.CANCEL_RUN)
@require_http_methods(["GET", "HEAD", "POST"])
@not_found_is_404
def run_tokens(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's gateway tokens; a POST with ``token_id`` revokes that token (303 back here)."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6
    allowed = _allowed_actions(run_id)
    if request.method == "POST" and request.POST.get("intent") == "issue":
        form = TokenIssueForm(request.POST, allowed_actions=allowed)
        issued = None
        if form.is_valid():
            issued = token_issue(run_id=run_id, agent=form.cleaned_data["agent"] or f"dashboard:{request.user}",
                                 actions=list(form.cleaned_data["actions"]))
            messages.success(request, f"Token {issued.token_id} is issued; copy it now: it is shown only once.")
            form = TokenIssueForm(allowed_actions=allowed)
        response = render(request, "review/tokens.html", {"run_id": run_id, "tokens": tokens_for_run(run_id=run_id),
                                                          "form": form, "issued": issued},
                          status=200 if issued else 422)
        add_never_cache_headers(response)  # the secret must not be kept by a cache or the back button
        return response
    if request.method == "POST":
        token_id = str(request.POST.get("token_id", ""))[:32]
        known = {t.token_id for t in tokens_for_run(run_id=run_id)}
        if token_id in known and token_revoke(token_id=token_id):
            messages.success(request, f"Token {token_id} is revoked: the agent's next call is refused.")
        else:
            messages.error(request, "No live token with that id on this run; nothing was changed.")
        return see_other(reverse("review:run-tokens", args=[run_id]))
    return render(request, "review/tokens.html", {"run_id": run_id, "tokens": tokens_for_run(run_id=run_id),
                                                  "form": TokenIssueForm(allowed_actions=allowed)})


def _allowed_actions(run_id: str) -> list[str]:
    """The action kinds the run's policy allows (the choices a token may be limited to)."""
    spec = Run.objects.filter(run_id=run_id).values_list("spec", flat=True).first() or {}
    policy = (spec.get("task") or {}).get("policy") or {}
    return [str(kind) for kind in policy.get("allowed_actions") or []]
