"""A run's gateway tokens in the dashboard: list them and revoke one (DESIGN.md section 5.12).

GET lists the run's tokens (ids, agent, actions, live or revoked; never a secret); POST (with
CSRF) revokes the token named in the form, effective for the agent's next call. Operators only
(the cancel permission: revoking stops an agent the way cancelling stops a run). Thin: the
work is ``runtime.gateway.tokens``. The dashboard session never authorises the gateway's API,
and a gateway token never opens this page (the page reads only the session).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from review.permissions import Perm, require_perm
from review.scope import scope_run_check
from review.views.common import see_other
from review.views.errors import not_found_is_404
from runtime.gateway.tokens import token_revoke, tokens_for_run


@require_perm(Perm.CANCEL_RUN)
@require_http_methods(["GET", "HEAD", "POST"])
@not_found_is_404
def run_tokens(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run's gateway tokens; a POST with ``token_id`` revokes that token (303 back here)."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6
    if request.method == "POST":
        token_id = str(request.POST.get("token_id", ""))[:32]
        known = {t.token_id for t in tokens_for_run(run_id=run_id)}
        if token_id in known and token_revoke(token_id=token_id):
            messages.success(request, f"Token {token_id} is revoked: the agent's next call is refused.")
        else:
            messages.error(request, "No live token with that id on this run; nothing was changed.")
        return see_other(reverse("review:run-tokens", args=[run_id]))
    return render(request, "review/tokens.html", {"run_id": run_id, "tokens": tokens_for_run(run_id=run_id)})
