"""The runs pages: the runs list, one run (status, checkpoints, trace timeline), cancelling a run,
its evidence bundle and its attachments.

Each page parses its input (``review.filters`` for the list), calls its ``review.queries``
module and renders; an htmx request gets the partial of the same template it names. Cancelling
is a POST calling ``runtime.decisions.cancellation.run_request_cancel`` as the signed-in user.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from review.filters import RunFilterForm, query_parse
from review.permissions import Perm, require_perm
from review.queries.live import TERMINAL_PHASES, nav_counts, run_token
from review.queries.run_detail import attachment_find, checkpoint_committed, checkpoint_list
from review.queries.runs import CANCELLABLE_PHASES, LIVE_PHASES, ScopedRunFilters, run_choices_scoped, run_get
from review.queries.runs_list import run_filter_choices, run_list
from review.queries.search import search_runs
from review.queries.second_chances import second_chance_context
from review.queries.trace import trace_timeline
from review.scope import scope_run_check, scope_sees_all
from review.views.common import fragment_requested, page_render, poll_context, polled, see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404, text_refused
from runtime.bundles.export import bundle_export
from runtime.decisions import cancellation as cancel_service
from runtime.errors import AttachmentError, RatchetError, RunNotFoundError
from runtime.evidence.attachments import attachment_get
from runtime.models import Run

RUN_DETAIL_PARTIALS = {"run-status": "status", "checkpoints": "checkpoints", "timeline": "timeline"}
"""htmx target id -> partial of ``review/run_detail.html`` that answers it."""

SAFE_ATTACHMENT_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "application/json"}
)


@require_perm(Perm.VIEW_RUNS)
@require_safe
def runs_list(request: HttpRequest) -> HttpResponse:
    """Runs list: filter by phase, tenant, task, date range; search by content or a partial run
    id, or by idempotency key prefix; sortable columns (``?sort=``) with keyset pages; new runs
    and changed rows appear on their own (one poll every ``POLL_SECONDS`` while the tab is
    visible). A bad filter value is shown as a form error (``400`` for a whole page)."""
    parsed = query_parse(RunFilterForm, request.GET)
    counts = nav_counts(user=request.user)
    context: dict[str, Any] = {"nav": counts, "form": parsed.form, "runs": None, "filters": parsed.filters}
    if parsed.valid:
        filters = _searched(parsed.filters, request.user)
        runs = run_list(filters=ScopedRunFilters(filters, request.user), cursor=parsed.cursor,
                        since=request.GET["since"] if polled(request) else None, extra=counts,
                        sort=parsed.form.sort_value())
        if runs is None:
            return HttpResponse(status=204)
        context.update(poll_context(request, token=runs.token) or {}, runs=runs, filters=filters)
    if parsed.valid and polled(request):
        context["announce"] = "Runs list updated."
        return render(request, "review/runs.html#live", context)
    if not fragment_requested(request):
        context["choices"] = run_choices_scoped(user=request.user, choices=run_filter_choices())
    return page_render(request, "review/runs.html", context, fragment="runs-table", status=parsed.status)


def _searched(filters: Any, user: Any) -> Any:
    """``filters`` with the runs the content search ``q`` names (``review.queries.search``)."""
    if not filters.q:
        return filters
    hits = search_runs(text=filters.q, user=user)
    return dataclasses.replace(filters, matched=hits.run_ids, capped=hits.capped)


@require_perm(Perm.VIEW_RUNS)
@require_safe
@not_found_is_404
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """One run: status and lease, committed state, checkpoints, attachments, trace timeline.

    An htmx request names the fragment it wants by its target id (``HX-Target``) and only that
    fragment's data is read. A poll re-renders every region that can change, out of band, so
    the status card never says "completed" above a stale checkpoint or trace.
    """
    run = run_get(run_id=run_id, user=request.user)
    counts = nav_counts(user=request.user)
    live = poll_context(request, token=run_token(run, counts))
    if live is None:
        return HttpResponse(status=204)  # nothing on the page changed: htmx swaps nothing
    partial = None
    if fragment_requested(request) and not live["announce"]:
        partial = RUN_DETAIL_PARTIALS.get(request.htmx.target or "")
    context = {**live, **_run_context(request, run), "nav": counts, **_run_regions(request, run, partial)}
    if live["announce"]:
        context["announce"] = (f"Run updated: {run.phase}" + (f" ({run.stop_reason})" if run.stop_reason else "")
                               + f", generation {run.generation}, {run.trace_seq} trace events.")
        return render(request, "review/run_detail.html#live", context)
    return render(request, "review/run_detail.html" + (f"#{partial}" if partial else ""), context)


def _run_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    """What the run page shows about the run and what the user may do with it."""
    user = request.user
    return {
        "run": run,
        "polling": run.phase not in TERMINAL_PHASES,
        "live": run.phase in LIVE_PHASES,
        "cancellable": run.phase in CANCELLABLE_PHASES,
        "can_view_trace": user.has_perm(Perm.VIEW_TRACE.value),
        "can_cancel": user.has_perm(Perm.CANCEL_RUN.value),
        "can_approve": user.has_perm(Perm.APPROVE_ACTION.value),
        "can_decide": user.has_perm(Perm.DECIDE_CASE.value),
        "password_fallback": settings.RATCHET_REVIEW_PASSWORD_FALLBACK,  # re-registration's step-up
        "scoped": not scope_sees_all(user=user),  # attachment links carry ?run=
    }


def _run_regions(request: HttpRequest, run: Run, partial: str | None) -> dict[str, Any]:
    """The data of the regions ``partial`` shows (``None``: the whole page, or a poll)."""
    regions: dict[str, Any] = {}
    if partial in (None, "status"):  # only the status card shows second chances
        regions.update(second_chance_context(run=run, user=request.user))
    if partial in (None, "checkpoints"):
        regions["checkpoints"] = checkpoint_list(run=run, page_number=request.GET.get("checkpoints_page"))
    if partial in (None, "timeline"):
        regions["timeline"] = trace_timeline(run=run, page_number=request.GET.get("events_page"),
                                             verify=request.GET.get("verify") == "chain")
    if partial is None:
        regions["committed"] = checkpoint_committed(run_id=run.run_id)
    return regions


@require_perm(Perm.CANCEL_RUN)
@require_POST
@not_found_is_404
def run_cancel(request: HttpRequest, run_id: str) -> HttpResponse:
    """Stop a run (``runtime.decisions.cancellation.run_request_cancel``). A live run is stopped by the worker
    driving it, which settles any pending write by its receipt first; a run frozen for an approval
    or a review is cancelled at once, keeping its evidence."""
    run = run_get(run_id=run_id, user=request.user)
    page = reverse("review:run", args=[run_id])
    if run.phase not in CANCELLABLE_PHASES:
        messages.error(request, f"Run {run_id} is {run.phase}: there is nothing to cancel.")
        return see_other(page)
    try:
        phase = cancel_service.run_request_cancel(run_id=run_id, requested_by=request.user.get_username())
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed=f"Could not cancel run {run_id}", back=page, result=page))
    if phase == "cancelled":
        messages.success(request, "Run cancelled. Its pending write and evidence are kept in the checkpoint.")
    else:
        messages.success(request, "Cancellation requested. The worker settles any pending write by its "
                                  "receipt, then stops the run.")
    return see_other(page)


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
        return text_refused(f"attachment not served: {exc.message}", status=500)
    content_type = row.content_type if row.content_type in SAFE_ATTACHMENT_TYPES else "application/octet-stream"
    return _download(data, content_type=content_type, filename=f"{digest.removeprefix('sha256:')[:16]}.bin")


@require_perm(Perm.VIEW_TRACE)
@require_safe
@not_found_is_404
def run_bundle(request: HttpRequest, run_id: str) -> HttpResponse:
    """Download the run's signed evidence bundle (``runtime.bundles.export.bundle_export``) as JSON.

    Admin only (it is trace evidence). ``manage.py verify_bundle FILE`` checks the file offline.
    A run whose committed checkpoint or trace chain does not verify gets 409 with the reason
    instead of a signed bundle.
    """
    scope_run_check(user=request.user, run_id=run_id)
    try:
        bundle = bundle_export(run_id=run_id, exported_by=request.user.get_username())
    except RunNotFoundError:
        raise  # a 404 (not_found_is_404), not a refused bundle
    except RatchetError as exc:
        return text_refused(f"no evidence bundle for this run: {exc}", status=409)
    text = json.dumps(bundle, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    safe_name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:64]
    return _download(text, content_type="application/json", filename=f"ratchet-bundle-{safe_name}.json")


def _download(data: bytes | str, *, content_type: str, filename: str) -> HttpResponse:
    """``data`` as a download that can never run as a page of this origin (sandboxing CSP)."""
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
