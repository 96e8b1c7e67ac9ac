"""The review case pages: the case list with counts per status, and one case with the intent
beside the conflicting receipt and the binding a decision would be signed over (DESIGN.md
section 6). The binding comes from the runtime's service, ``runtime.decisions.reviews.decision_prepare``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import BooleanField, Case, Count, Value, When

from review.scope import scope_filter
from runtime.checkpoints.cases import cases_awaiting_review
from runtime.decisions.case_sides import CaseSides, case_sides
from runtime.decisions.reviews import decision_binding_recorded, decision_prepare
from runtime.errors import PluginError, RatchetError, ReviewCaseNotFoundError, TaskSpecError
from runtime.models import CaseStatus, ReviewCase, TraceEvent

CASES_PER_PAGE = 25


def case_list(*, user: Any, status: str = "", page_number: Any = 1) -> Page:
    """Review cases of the tenants ``user`` may see (DESIGN.md section 6.6), open ones first then
    newest first, filtered by ``status`` (``""``: any); a page of ``ReviewCase`` rows with their
    run (one query for the rows, one for the count)."""
    rows = scope_filter(user=user, queryset=ReviewCase.objects.all(),
                        field="run__tenant_id").select_related("run").defer(
        "run__spec", "pending", "receipt", "environment", "observed", "trace_excerpt", "sealed",
        "decision",
    )
    awaiting = cases_awaiting_review()
    rows = rows.annotate(awaiting=Case(When(awaiting, then=Value(True)), default=Value(False),
                                       output_field=BooleanField()))
    if status == CaseStatus.OPEN:
        rows = rows.filter(awaiting)  # a run still frozen keeps its case here whatever its row says
    elif status:
        rows = rows.filter(status=status).exclude(awaiting)
    rows = rows.order_by(
        Case(When(awaiting, then=Value(0)), default=Value(1)), "-opened_at", "case_id"
    )
    return Paginator(rows, CASES_PER_PAGE).get_page(page_number)


def case_counts(*, user: Any) -> dict[str, int]:
    """Number of cases per status among the tenants ``user`` may see (two queries); a case still
    awaiting review counts as open whatever its row says (``cases_awaiting_review``)."""
    cases = scope_filter(user=user, queryset=ReviewCase.objects.all(), field="run__tenant_id")
    awaiting = cases_awaiting_review()
    counts = dict(cases.exclude(awaiting).order_by().values_list("status").annotate(n=Count("pk")))
    counts[CaseStatus.OPEN.value] = cases.filter(awaiting).count()
    return {s.value: counts.get(s.value, 0) for s in CaseStatus}


@dataclass(frozen=True)
class Compared:
    """One row of the intent/receipt comparison.

    ``differs`` (the page highlights the row) when the two sides say the same kind of thing,
    both are known, and they are not equal. ``comparable`` is False for a row whose two sides
    are different facts shown together (the environment version before vs after the write).
    """

    label: str
    intent: Any
    receipt: Any
    comparable: bool = True

    @property
    def differs(self) -> bool:
        return (self.comparable and self.intent is not None and self.receipt is not None
                and self.intent != self.receipt)


def _comparison(pending: dict[str, Any] | None, receipt: dict[str, Any] | None) -> list[Compared]:
    """The pending intent beside the conflicting receipt (DESIGN.md section 6), field by field.

    The intent side holds what the run planned: its key and intent digest, the adapter namespace
    and environment version it expected to write against; the receipt side what the adapter
    recorded. Fields an intent does not have (receipt id, adapter version) show as unknown.
    """
    pending = pending or {}
    receipt = receipt or {}
    pre = pending.get("pre_state") or {}
    action = pending.get("action") or {}
    namespace = f"{pre['adapter_kind']}:{pre['instance_id']}" if pre.get("instance_id") else None
    return [
        Compared("Idempotency key", pending.get("idempotency_key"), receipt.get("idempotency_key")),
        Compared("Intent digest", pending.get("intent_digest"), receipt.get("intent_digest")),
        Compared("Action", action.get("kind"), None),
        Compared("Target / business object", action.get("target") or None,
                 receipt.get("business_object")),
        Compared("Namespace", namespace, receipt.get("namespace")),
        Compared("Adapter version", None, receipt.get("adapter_version")),
        Compared("Receipt id", None, receipt.get("receipt_id")),
        Compared("Result", None, receipt.get("result")),
        Compared("Environment version (intent: before the write; receipt: after it)",
                 pre.get("version"), receipt.get("environment_version_after"), comparable=False),
    ]


@dataclass(frozen=True)
class CaseDetail:
    """A review case with what the page shows beside it.

    Attributes:
        case: the ``ReviewCase`` row (with its run).
        comparison: intent vs receipt, field by field (:class:`Compared`).
        binding: for an open case, the exact fields a decision will be signed over
            (``runtime.decisions.reviews.decision_prepare``: from the committed checkpoint and the
            environment as observed now); ``None`` for a closed case or when it cannot be read.
        binding_error: why the binding could not be prepared (the run's checkpoint fails to
            verify, the environment cannot be observed), or ``""``.
        refusals: the run's newest ``review.refused`` trace payloads (at most 5), newest first.
        sides: both sides of what the case is about (``runtime.decisions.case_sides``).
        recorded_binding: when this process cannot load the run's plug-in, the binding as the
            verified checkpoint records it (DESIGN.md section 6.11); otherwise ``None``.
    """

    case: ReviewCase
    comparison: list[Compared]
    binding: dict[str, Any] | None
    binding_error: str
    refusals: list[dict[str, Any]]
    sides: CaseSides | None = None
    recorded_binding: dict[str, Any] | None = None


def case_get(*, case_id: str, prepare: bool = True) -> CaseDetail:
    """One case for the detail page. For an open case (and ``prepare``), also the binding a
    decision would be signed over, observed now.

    Raises:
        ReviewCaseNotFoundError: no such case.
    """
    case = (
        ReviewCase.objects.select_related("run").filter(case_id=case_id).first()
    )
    if case is None:
        raise ReviewCaseNotFoundError(case_id=case_id)
    binding, error, recorded = None, "", None
    if prepare and case.status == CaseStatus.OPEN:
        try:
            binding = decision_prepare(case_id=case_id)
        except (PluginError, TaskSpecError) as exc:
            # The case stays readable and its binding checkable here; deciding needs a process
            # that can load the plug-in (DESIGN.md section 6.11).
            error = (f"this web process cannot load the run's plug-in ({type(exc).__name__}: {exc}). "
                     "The binding below is the one the verified checkpoint records; to decide, install the "
                     "plug-in where the dashboard runs, or use `manage.py cases decide` where it is installed.")
            recorded = _recorded_binding(case_id)
        except RatchetError as exc:
            error = str(exc)
    refusals = [
        payload
        for payload in TraceEvent.objects.filter(
            run_id=case.run_id, event_type="review.refused"
        ).order_by("-seq").values_list("payload", flat=True)[:5]
        if payload.get("case_id") == case_id
    ]
    return CaseDetail(
        case=case,
        comparison=_comparison(case.pending, case.receipt),
        binding=binding,
        binding_error=error,
        refusals=refusals,
        sides=case_sides(case=case),
        recorded_binding=recorded,
    )


def _recorded_binding(case_id: str) -> dict[str, Any] | None:
    try:
        return decision_binding_recorded(case_id=case_id)
    except RatchetError:
        return None
