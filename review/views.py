"""Dashboard views: thin, function-based, one view per page and its htmx fragments (STYLE.md rule 5).

Each view parses its input, calls its page's ``review.queries`` module and renders; a fragment
request (htmx) gets ``template#partial`` of the same template. Every view is wrapped in
``require_perm`` so a fragment is checked exactly like its page (STYLE.md rule 6). Pages here are
GET only; the changes (sign-in, sign-out, and the operator and reviewer actions in
``views_approvals`` and ``views_cases``) are POSTs, CSRF-protected by the middleware.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from review.forms import RunFilterForm, TraceFilterForm
from review.permissions import Perm, require_perm
from review.queries.health import DEFAULT_RANGE, RANGES, health_summary_cached
from review.queries.live import POLL_SECONDS as LIVE_POLL_SECONDS
from review.queries.live import TERMINAL_PHASES, nav_counts, run_token
from review.queries.run_detail import attachment_find, checkpoint_committed, checkpoint_list
from review.queries.runs import (
    CANCELLABLE_PHASES,
    LIVE_PHASES,
    ScopedRunFilters,
    run_choices_scoped,
    run_get,
)
from review.queries.runs_list import run_filter_choices, run_list
from review.queries.search import search_runs
from review.queries.trace import trace_event_types, trace_search, trace_timeline
from review.queries.workers import workers_view
from review.scope import scope_run_check, scope_sees_all
from review.throttle import login_failure_record, login_success_record, login_throttle_check
from runtime.evidence.attachments import attachment_get
from runtime.bundles.export import bundle_export
from runtime.errors import AttachmentError, RatchetError, RunNotFoundError

RUN_DETAIL_PARTIALS = {"run-status": "status", "checkpoints": "checkpoints", "timeline": "timeline"}
"""htmx target id -> partial of ``review/run_detail.html`` that answers it."""

SAFE_ATTACHMENT_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "application/json"}
)


def fragment_requested(request: HttpRequest) -> bool:
    """An htmx swap (not a history restore, which needs the whole page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


@require_perm(Perm.VIEW_RUNS)
@require_safe
def runs_list(request: HttpRequest) -> HttpResponse:
    """Runs list: filter by phase, tenant, task, date range; search by content or a partial run
    id, or by idempotency key prefix; sortable columns (``?sort=``) with keyset pages; new runs
    and changed rows appear on their own (one poll every ``POLL_SECONDS`` while the tab is
    visible). A bad filter value is shown as a form error (``400`` for a whole page)."""
    form = RunFilterForm(request.GET)
    polled = fragment_requested(request) and "since" in request.GET
    counts = nav_counts(user=request.user)
    if not form.is_valid():
        context = {"nav": counts, "form": form, "runs": None, "filters": form.filters()}
        if fragment_requested(request):  # htmx swaps only 2xx answers: the error replaces the table
            return render(request, "review/runs.html#runs-table", context)
        context["choices"] = run_choices_scoped(user=request.user, choices=run_filter_choices())
        return render(request, "review/runs.html", context, status=400)
    filters = form.filters()
    if filters.q:
        hits = search_runs(text=filters.q, user=request.user)
        filters = dataclasses.replace(filters, matched=hits.run_ids, capped=hits.capped)
    runs = run_list(filters=ScopedRunFilters(filters, request.user), cursor=form.cleaned_data["after"],
                    since=request.GET["since"] if polled else None, extra=counts, sort=form.sort_value())
    if runs is None:
        return HttpResponse(status=204)
    live = poll_context(request, token=runs.token)
    context = {**(live or {}), "nav": counts, "form": form, "runs": runs, "filters": filters}
    if polled:
        context["announce"] = "Runs list updated."
        return render(request, "review/runs.html#live", context)
    if fragment_requested(request):
        return render(request, "review/runs.html#runs-table", context)
    context["choices"] = run_choices_scoped(user=request.user, choices=run_filter_choices())
    return render(request, "review/runs.html", context)


@require_perm(Perm.VIEW_RUNS)
@require_safe
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """One run: status and lease, committed state, checkpoints, attachments, trace timeline.

    An htmx request names the fragment it wants by its target id (``HX-Target``) and only that
    fragment's data is read.
    """
    try:
        run = run_get(run_id=run_id, user=request.user)
    except RunNotFoundError:
        raise Http404("no such run") from None
    polled = fragment_requested(request) and "since" in request.GET
    counts = nav_counts(user=request.user)
    token = run_token(run, counts)
    if polled and request.GET["since"] == token:
        return HttpResponse(status=204)  # nothing on the page changed: htmx swaps nothing
    context = {
        "run": run,
        "nav": counts,
        "token": token,
        "polling": run.phase not in TERMINAL_PHASES,
        "poll_url": request.path + _query_without_since(request),
        "live": run.phase in LIVE_PHASES,
        "cancellable": run.phase in CANCELLABLE_PHASES,
        "poll_seconds": LIVE_POLL_SECONDS,
        "can_view_trace": request.user.has_perm(Perm.VIEW_TRACE.value),
        "can_cancel": request.user.has_perm(Perm.CANCEL_RUN.value),
        "can_approve": request.user.has_perm(Perm.APPROVE_ACTION.value),
        "can_decide": request.user.has_perm(Perm.DECIDE_CASE.value),
        "scoped": not scope_sees_all(user=request.user),  # attachment links carry ?run=
    }
    partial = (
        RUN_DETAIL_PARTIALS.get(request.htmx.target or "") if fragment_requested(request) else None
    )
    if polled:
        partial = None
    if partial in (None, "checkpoints"):
        context["checkpoints"] = checkpoint_list(
            run=run, page_number=request.GET.get("checkpoints_page")
        )
    if partial in (None, "timeline"):
        context["timeline"] = trace_timeline(
            run=run, page_number=request.GET.get("events_page"),
            verify=request.GET.get("verify") == "chain",
        )
    if partial is None:
        context["committed"] = checkpoint_committed(run_id=run_id)
    if polled:
        # Every region that can change is re-rendered and swapped together (out of band), so
        # the status card never says "completed" above a stale checkpoint or trace.
        context["announce"] = (
            f"Run updated: {run.phase}"
            + (f" ({run.stop_reason})" if run.stop_reason else "")
            + f", generation {run.generation}, {run.trace_seq} trace events."
        )
        return render(request, "review/run_detail.html#live", context)
    if partial is None:
        return render(request, "review/run_detail.html", context)
    return render(request, f"review/run_detail.html#{partial}", context)


def poll_context(request: HttpRequest, *, token: str) -> dict[str, Any] | None:
    """The poller's context for a list page showing ``token`` (DESIGN.md section 6.8), or
    ``None`` when this is a poll whose ``since`` equals ``token`` (answer 204: nothing changed).

    ``announce`` is True for a poll that must re-render the page's regions out of band.
    """
    polled = fragment_requested(request) and "since" in request.GET
    if polled and request.GET["since"] == token:
        return None
    return {
        "token": token,
        "polling": True,
        "poll_url": request.path + _query_without_since(request),
        "poll_seconds": LIVE_POLL_SECONDS,
        "announce": polled,
    }


def _query_without_since(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("since", None)
    query.pop("verify", None)  # a poll never re-hashes a whole trace
    return f"?{query.urlencode()}" if query else ""


@require_perm(Perm.VIEW_RUNS)
@require_safe
def attachment_download(request: HttpRequest, digest: str) -> HttpResponse:
    """The bytes of one attachment, re-hashed before they are sent (``attachment_get``).

    Always a download (``Content-Disposition: attachment``) under a sandboxing CSP, so stored
    content can never run as a page of this origin.
    """
    row = attachment_find(digest=digest, user=request.user, run_id=request.GET.get("run", ""))
    if row is None:
        raise Http404("no such attachment")
    try:
        data = attachment_get(digest=digest)
    except AttachmentError as exc:
        return HttpResponse(
            f"attachment not served: {exc.message}", status=500, content_type="text/plain"
        )
    content_type = (
        row.content_type
        if row.content_type in SAFE_ATTACHMENT_TYPES
        else "application/octet-stream"
    )
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="{digest.removeprefix("sha256:")[:16]}.bin"'
    )
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_perm(Perm.VIEW_TRACE)
@require_safe
def run_bundle(request: HttpRequest, run_id: str) -> HttpResponse:
    """Download the run's signed evidence bundle (``runtime.bundles.export.bundle_export``) as JSON.

    Admin only (it is trace evidence). ``manage.py verify_bundle FILE`` checks the file offline.
    A run whose committed checkpoint or trace chain does not verify gets 409 with the reason
    instead of a signed bundle.
    """
    try:
        scope_run_check(user=request.user, run_id=run_id)
        bundle = bundle_export(run_id=run_id, exported_by=request.user.get_username())
    except RunNotFoundError:
        raise Http404("no such run") from None
    except RatchetError as exc:
        return HttpResponse(
            f"no evidence bundle for this run: {exc}", status=409, content_type="text/plain"
        )
    response = HttpResponse(
        json.dumps(bundle, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        content_type="application/json",
    )
    safe_name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:64]
    response["Content-Disposition"] = f'attachment; filename="ratchet-bundle-{safe_name}.json"'
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_perm(Perm.VIEW_TRACE)
@require_safe
def trace_browser(request: HttpRequest) -> HttpResponse:
    """Trace evidence across runs, filtered by a partial run id, content search, event type and
    environment version (admin). A bad filter value is a form error (``400`` for a whole page)."""
    form = TraceFilterForm(request.GET)
    valid = form.is_valid()
    filters = form.filters()
    result = (trace_search(user=request.user, filters=filters, before=form.cleaned_data["before"],
                           verify=request.GET.get("verify") == "chain") if valid else None)
    context = {"form": form, "filters": filters, "result": result}
    if fragment_requested(request):
        return render(request, "review/trace.html#events", context)
    context["event_types"] = trace_event_types()
    return render(request, "review/trace.html", context, status=200 if valid else 400)


@require_perm(Perm.VIEW_RUNS)
@require_safe
def health(request: HttpRequest) -> HttpResponse:
    """Rollout metrics from the counters, charts over ``?range=24h|7d`` and run counts."""
    range_name = request.GET.get("range", DEFAULT_RANGE)
    summary = health_summary_cached(range_name=range_name, user=request.user)
    return render(request, "review/health.html", {
        "health": summary, "nav": nav_counts(user=request.user),
        "ranges": list(RANGES), "range": summary.series.range_name,
        "chart_json": json.dumps(summary.series.as_json(), separators=(",", ":")),
        "can_view_workers": request.user.has_perm(Perm.CANCEL_RUN.value),
    })


@require_perm(Perm.CANCEL_RUN)
@require_safe
def workers(request: HttpRequest) -> HttpResponse:
    """Live workers, the queues they consume and queue depths (operators: it names machines)."""
    return render(request, "review/workers.html",
                  {"view": workers_view(user=request.user), "nav": nav_counts(user=request.user)})


# --- sign-in / sign-out ----------------------------------------------------------------------


def _next_url(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("review:runs")


@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    """Sign in, throttled per username and per client address (``review.throttle``).

    While locked the credentials are not checked at all; the answer is 429 with ``Retry-After``.
    """
    next_url = _next_url(request)
    asked_for = request.GET.get("next")
    # Signed in and sent here by a page this account may not open (the Django admin for a user
    # who is not staff): show the form to switch accounts; redirecting back would loop.
    if request.method == "GET" and request.user.is_authenticated and not asked_for:
        return redirect(next_url)
    form = AuthenticationForm(request, data=request.POST if request.method == "POST" else None)
    lockout = None
    if request.method == "POST":
        username = request.POST.get("username", "")[:200]
        ip = request.META.get("REMOTE_ADDR", "")
        lockout = login_throttle_check(username=username, ip=ip)
        if lockout is None:
            if form.is_valid():
                login(request, form.get_user())
                login_success_record(username=username)
                return redirect(next_url)
            lockout = login_failure_record(username=username, ip=ip)
        if lockout is not None:
            form = AuthenticationForm(request)  # drop the typed values and the field errors
    response = render(
        request,
        "review/login.html",
        {
            "form": form,
            "next": next_url,
            "lockout": lockout,
            "switching": request.user.is_authenticated,
        },
        status=429 if lockout else 200,
    )
    if lockout:
        response["Retry-After"] = str(lockout.retry_after_seconds)
    add_never_cache_headers(response)
    return response


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Sign out (POST with CSRF only, so a link or image on another site cannot sign you out)."""
    logout(request)
    return redirect(settings.LOGIN_URL)


def admin_login_redirect(request: HttpRequest) -> HttpResponse:
    """Send the Django admin's sign-in to the throttled dashboard sign-in, keeping ``next``."""
    target = request.GET.get("next", "/admin/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/admin/"
    return redirect_to_login(target)
