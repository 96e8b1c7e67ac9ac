"""Read-only queries behind the dashboard pages. Nothing here writes a runtime table.

The approvals queue and the review case pages read through the runtime's services
(``runtime.approvals.approvals_waiting``, ``runtime.reviews.decision_prepare``); their lists are
paginated with a fixed page size, so their query counts do not grow with the number of runs.

Query counts are independent of how many runs, checkpoints and trace events exist (issue: "query
counts ... stay constant as runs and trace events grow tenfold"): lists are paginated with
Django's ``Paginator``, the runs list verifies the committed checkpoint of *the page's rows only*
with one query for their high-water marks and one for their envelopes, and the run detail reads
each table a fixed number of times.

The runtime's own services are the authority for verdicts: the run detail uses
``checkpoint_verify`` (the full restore checks), ``checkpoint_inspect`` (every stored row) and
``trace_verify`` (the hash chain). The runs list, which cannot afford four queries per row,
re-checks the committed envelope in bulk (:func:`_committed_statuses`): MAC, schema, HWM
generation and digest, identity and scenario fingerprint.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import OperationalError, ProgrammingError
from django.db.models import BooleanField, Case, Count, Q, QuerySet, Value, When
from django.db.models.functions import Now

from runtime.approvals import WaitingApproval, approvals_waiting
from runtime.attachments import attachment_get
from runtime.checkpoints import CheckpointReport, Restored, checkpoint_inspect, checkpoint_verify
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import RunState, open_envelope
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError, ReviewCaseNotFoundError, RunNotFoundError, SigningError
from runtime.keys import keyring_for
from runtime.models import (
    Attachment,
    CaseStatus,
    Checkpoint,
    HighWaterMark,
    Phase,
    ReviewCase,
    Run,
    TraceEvent,
)
from runtime.reviews import decision_prepare
from runtime.routers import hwm_alias
from runtime.stats import RecoveryStats, recovery_stats
from runtime.trace import ChainReport, trace_verify

RUNS_PER_PAGE = 25
EVENTS_PER_PAGE = 50
CHECKPOINTS_PER_PAGE = 10
POLL_SECONDS = 5
"""How often (seconds) pages with live runs refresh themselves."""

LIVE_PHASES = frozenset({Phase.RUNNING.value, Phase.PENDING.value})
CANCELLABLE_PHASES = frozenset({*LIVE_PHASES, "awaiting_approval", "needs_review"})
"""Phases an operator may cancel: live runs, and runs frozen for an approval or a review."""
"""Phases in which a worker is advancing the run, so its status changes without a human."""

_CHOICES_LIMIT = 200


# --- runs list ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFilters:
    """Runs list filters; empty strings mean "any". ``q`` matches part of the run id."""

    phase: str = ""
    tenant: str = ""
    task: str = ""
    q: str = ""

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` narrowed by every non-empty filter (exact phase/tenant/task, run id part)."""
        if self.phase:
            runs = runs.filter(phase=self.phase)
        if self.tenant:
            runs = runs.filter(tenant_id=self.tenant)
        if self.task:
            runs = runs.filter(task_id=self.task)
        if self.q:
            runs = runs.filter(run_id__icontains=self.q)
        return runs


@dataclass(frozen=True)
class CheckpointStatus:
    """Verdict on a run's committed checkpoint, for display.

    Attributes:
        tone: ``"ok"``, ``"bad"`` (fails closed: a resume would refuse) or ``"neutral"``.
        label: a short badge text, e.g. ``"verified"``, ``"signature invalid"``.
        detail: the error text (identifiers only, never key material), or ``""``.
    """

    tone: str
    label: str
    detail: str = ""


@dataclass(frozen=True)
class RunRow:
    """One runs-list row: the run (with ``lease_current`` judged by the database clock), the HWM
    generation (``None`` when the HWM row is missing) and the committed checkpoint's status."""

    run: Run
    hwm_generation: int | None
    checkpoint: CheckpointStatus


@dataclass(frozen=True)
class RunsPage:
    """A page of :class:`RunRow` (``page.object_list``); ``live``: a row is in a live phase."""

    page: Page
    live: bool


def _runs() -> QuerySet[Run]:
    """Runs with ``lease_current`` computed by the database clock (DESIGN.md section 4)."""
    return Run.objects.defer("spec").annotate(
        lease_current=Case(
            When(lease_expires_at__gt=Now(), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
    )


def run_list(*, filters: RunFilters, page_number: Any = 1) -> RunsPage:
    """The runs matching ``filters``, newest first, one page at a time.

    Args:
        filters: what to match.
        page_number: 1-based page; anything invalid gives the first or last page.
    """
    runs = filters.apply(_runs()).order_by("-created_at", "-run_id")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(page_number)
    page_runs = list(page.object_list)
    statuses = _committed_statuses(page_runs)
    page.object_list = [
        RunRow(run=r, hwm_generation=statuses[r.run_id][0], checkpoint=statuses[r.run_id][1])
        for r in page_runs
    ]
    return RunsPage(page=page, live=any(r.phase in LIVE_PHASES for r in page_runs))


def run_filter_choices() -> dict[str, list[str]]:
    """Known tenants and tasks (at most 200 each) to suggest in the runs list filters."""
    distinct = Run.objects.order_by()
    return {
        "tenants": list(
            distinct.values_list("tenant_id", flat=True)
            .distinct()
            .order_by("tenant_id")[:_CHOICES_LIMIT]
        ),
        "tasks": list(
            distinct.values_list("task_id", flat=True)
            .distinct()
            .order_by("task_id")[:_CHOICES_LIMIT]
        ),
    }


def _committed_statuses(runs: list[Run]) -> dict[str, tuple[int | None, CheckpointStatus]]:
    """HWM generation and committed-checkpoint verdict of each run, in two queries in total."""
    if not runs:
        return {}
    keyring_error = ""
    try:
        keyring = keyring_for(TrustRoot.CHECKPOINT)
    except RatchetError as exc:
        keyring, keyring_error = None, str(exc)
    try:
        hwms = {
            (h["task_id"], h["run_id"], h["environment_instance_id"]): (
                h["generation"],
                h["checkpoint_digest"],
            )
            for h in HighWaterMark.objects.using(hwm_alias())
            .filter(run_id__in=[r.run_id for r in runs])
            .values(
                "task_id", "run_id", "environment_instance_id", "generation", "checkpoint_digest"
            )
        }
    except (OperationalError, ProgrammingError) as exc:
        down = CheckpointStatus("bad", "HWM store unavailable", type(exc).__name__)
        return {r.run_id: (None, down) for r in runs}

    wanted = {}
    for run in runs:
        hwm = hwms.get((run.task_id, run.run_id, run.environment_instance_id))
        if hwm is not None and hwm[0] > 0:
            wanted[run.run_id] = hwm[0]
    envelopes: dict[str, list[bytes]] = {}
    if wanted:
        pairs = reduce(operator.or_, (Q(run_id=rid, generation=gen) for rid, gen in wanted.items()))
        for run_id, raw in (
            Checkpoint.objects.filter(pairs).order_by("id").values_list("run_id", "envelope")
        ):
            envelopes.setdefault(run_id, []).append(bytes(raw))

    result: dict[str, tuple[int | None, CheckpointStatus]] = {}
    for run in runs:
        hwm = hwms.get((run.task_id, run.run_id, run.environment_instance_id))
        if hwm is None:
            result[run.run_id] = (
                None,
                CheckpointStatus("bad", "HWM missing", "no high-water mark row"),
            )
            continue
        generation, hwm_digest = hwm
        if generation == 0:
            result[run.run_id] = (0, CheckpointStatus("neutral", "none yet"))
        elif keyring is None:
            result[run.run_id] = (
                generation,
                CheckpointStatus("bad", "keyring unavailable", keyring_error),
            )
        else:
            status = _verdict(run, generation, hwm_digest, envelopes.get(run.run_id, []), keyring)
            result[run.run_id] = (generation, status)
    return result


def _verdict(
    run: Run, generation: int, hwm_digest: str, candidates: list[bytes], keyring: Any
) -> CheckpointStatus:
    if not candidates:
        return CheckpointStatus(
            "bad", "missing", f"no stored checkpoint at generation {generation}"
        )
    raw = next((c for c in candidates if digest_bytes(c) == hwm_digest), None)
    if raw is None:
        return CheckpointStatus(
            "bad",
            "bytes altered",
            f"no checkpoint at generation {generation} hashes to the HWM's digest",
        )
    try:
        envelope = open_envelope(raw, keyring=keyring)
    except SigningError as exc:
        return CheckpointStatus("bad", "signature invalid", str(exc))
    except RatchetError as exc:
        return CheckpointStatus("bad", "invalid", str(exc))
    identity = envelope.payload.identity
    if (
        envelope.run_id != run.run_id
        or envelope.tenant_id != run.tenant_id
        or envelope.task_id != run.task_id
        or envelope.environment_instance_id != run.environment_instance_id
        or envelope.generation != generation
    ):
        return CheckpointStatus(
            "bad", "identity mismatch", "the envelope belongs to another run or generation"
        )
    if identity.scenario_fingerprint != run.scenario_fingerprint:
        return CheckpointStatus(
            "bad", "scenario mismatch", "scenario fingerprint differs from the run's"
        )
    return CheckpointStatus("ok", "verified")


# --- run detail -----------------------------------------------------------------------------


def run_get(*, run_id: str) -> Run:
    """One run with ``lease_current`` (database clock).

    Raises:
        RunNotFoundError: no such run.
    """
    run = _runs().filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    return run


@dataclass(frozen=True)
class AttachmentRef:
    """An attachment digest the committed state references, where, and its stored row (or None)."""

    digest: str
    where: str
    row: Attachment | None


@dataclass(frozen=True)
class Committed:
    """The run's committed checkpoint as ``checkpoint_verify`` judged it.

    ``restored`` is set only when every check passed; otherwise ``error`` holds the reason and the
    page shows nothing from the payload (an unverified payload is not evidence).
    """

    restored: Restored | None
    error: str = ""
    attachments: list[AttachmentRef] = field(default_factory=list)

    @property
    def state(self) -> RunState | None:
        """The verified run state, or ``None`` when verification failed."""
        return self.restored.state if self.restored else None


def checkpoint_committed(*, run_id: str) -> Committed:
    """Verify and load the committed checkpoint of ``run_id`` (DESIGN.md section 4), plus the
    attachments its state references (one query)."""
    try:
        restored = checkpoint_verify(run_id=run_id)
    except RatchetError as exc:
        return Committed(restored=None, error=str(exc))
    return Committed(restored=restored, attachments=_attachments(restored.state))


def _attachments(state: RunState) -> list[AttachmentRef]:
    found: dict[str, str] = {}
    for digest in state.environment.attachments:
        found.setdefault(digest, "environment")
    if state.pending is not None:
        for digest in state.pending.pre_state.attachments:
            found.setdefault(digest, "pending pre-state")
    if not found:
        return []
    rows = {a.digest: a for a in Attachment.objects.filter(digest__in=list(found))}
    return [AttachmentRef(digest=d, where=w, row=rows.get(d)) for d, w in found.items()]


def attachment_find(*, digest: str) -> Attachment | None:
    """The stored row of one attachment, or ``None``."""
    return Attachment.objects.filter(digest=digest).first()


@dataclass(frozen=True)
class CheckpointRow:
    """One stored checkpoint and its place relative to the high-water mark.

    ``role``: ``"committed"`` (the HWM names it), ``"earlier"`` (a lower generation: committed
    once, or an orphan beside the one that was), or ``"uncommitted"`` (at or above the HWM's
    generation but not named by it: left by a crashed or fenced commit).
    """

    report: CheckpointReport
    role: str


def checkpoint_list(*, run_id: str, page_number: Any = 1) -> Page:
    """Every stored checkpoint of the run, newest generation first, each verified
    (``checkpoint_inspect``); a page of :class:`CheckpointRow`."""
    reports: list[CheckpointReport] = checkpoint_inspect(run_id=run_id)
    committed = max((r.generation for r in reports if r.committed), default=None)
    rows = [
        CheckpointRow(
            report=r,
            role="committed"
            if r.committed
            else "earlier"
            if committed is not None and r.generation < committed
            else "uncommitted",
        )
        for r in reversed(reports)
    ]
    return Paginator(rows, CHECKPOINTS_PER_PAGE).get_page(page_number)


@dataclass(frozen=True)
class Timeline:
    """A page of a run's trace events (newest first) and whether its whole chain verifies."""

    page: Page
    chain: ChainReport


def trace_timeline(*, run_id: str, page_number: Any = 1) -> Timeline:
    """The run's trace, newest event first, with the hash-chain verdict (``trace_verify``)."""
    chain = trace_verify(run_id=run_id)
    events = TraceEvent.objects.filter(run_id=run_id).order_by("-seq")
    return Timeline(page=Paginator(events, EVENTS_PER_PAGE).get_page(page_number), chain=chain)


# --- trace evidence browser ------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFilters:
    """Trace browser filters; empty strings mean "any"."""

    run: str = ""
    event_type: str = ""
    environment_version: str = ""


@dataclass(frozen=True)
class TraceBrowserPage:
    """A page of trace events; ``chain`` is the verdict when filtered to one existing run."""

    page: Page
    chain: ChainReport | None


def trace_search(*, filters: TraceFilters, page_number: Any = 1) -> TraceBrowserPage:
    """Trace events across runs matching ``filters``, newest first."""
    events = TraceEvent.objects.order_by("-id")
    if filters.run:
        events = events.filter(run_id=filters.run)
    if filters.event_type:
        events = events.filter(event_type=filters.event_type)
    if filters.environment_version:
        events = events.filter(environment_version=filters.environment_version)
    chain = None
    if filters.run:
        try:
            chain = trace_verify(run_id=filters.run)
        except RunNotFoundError:
            chain = None
    return TraceBrowserPage(
        page=Paginator(events, EVENTS_PER_PAGE).get_page(page_number), chain=chain
    )


def trace_event_types() -> list[str]:
    """Distinct trace event types (at most 200), for the browser's filter."""
    return list(
        TraceEvent.objects.order_by("event_type")
        .values_list("event_type", flat=True)
        .distinct()[:_CHOICES_LIMIT]
    )


# --- health ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    """Operator metrics (DESIGN.md section 8) and run counts.

    Attributes:
        stats: recovery success rate, recovery duration (seconds), duplicate submissions.
        phases: ``(phase value, label, count)`` for every phase, in state-machine order.
        total_runs: all runs.
        unleased_live: runs in a live phase whose lease is absent or expired by the database
            clock: they are waiting for a worker to recover them.
    """

    stats: RecoveryStats
    phases: list[tuple[str, str, int]]
    total_runs: int
    unleased_live: int


def health_summary() -> Health:
    """Compute :class:`Health` (three queries, whatever the number of runs and events)."""
    counts = dict(Run.objects.order_by().values_list("phase").annotate(n=Count("pk")))
    unleased = (
        Run.objects.filter(phase__in=sorted(LIVE_PHASES))
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .count()
    )
    return Health(
        stats=recovery_stats(),
        phases=[(p.value, p.label, counts.get(p.value, 0)) for p in Phase],
        total_runs=sum(counts.values()),
        unleased_live=unleased,
    )


# --- approvals queue -------------------------------------------------------------------------

APPROVALS_PER_PAGE = 10
"""Cards per approvals page. Each card verifies its run's committed checkpoint and reads its
dry-run diff, so the page's query count is bounded by this, never by how many runs wait."""

CASES_PER_PAGE = 25
DIFF_LINE_LIMIT = 400
"""Lines of a dry-run diff shown on a card; the full diff is one download away."""


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff and its kind: ``add``, ``del``, ``hunk``, ``meta`` or ``ctx``."""

    kind: str
    text: str


@dataclass(frozen=True)
class DiffView:
    """A dry-run diff ready to render as ``<pre>``: its lines (at most ``DIFF_LINE_LIMIT``), how
    many were left out, and an error text when the diff could not be read (then no lines)."""

    digest: str
    lines: list[DiffLine]
    omitted: int = 0
    error: str = ""


def diff_lines(text: str) -> list[DiffLine]:
    """Classify the lines of a unified diff (``git diff`` / ``diff -u`` output) for display."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file",
                            "old mode", "new mode", "similarity", "rename ", "Binary files")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append(DiffLine(kind, line))
    return out


def _diff_view(digest: str | None) -> DiffView | None:
    if not digest:
        return None
    try:
        data = attachment_get(digest=digest)
    except RatchetError as exc:
        # A diff that fails its digest check is not evidence: say so instead of showing it.
        return DiffView(digest=digest, lines=[], error=exc.message)
    lines = diff_lines(data.decode("utf-8", "replace"))
    return DiffView(digest=digest, lines=lines[:DIFF_LINE_LIMIT],
                    omitted=max(0, len(lines) - DIFF_LINE_LIMIT))


@dataclass(frozen=True)
class ApprovalCard:
    """One run waiting for an approval, as the queue shows it.

    ``waiting`` is the runtime's view (``runtime.approvals.WaitingApproval``: action, risk,
    digests, environment fingerprint and version, approval state); ``diff`` the dry-run diff.
    """

    waiting: WaitingApproval
    diff: DiffView | None

    @property
    def run_id(self) -> str:
        return self.waiting.run_id

    @property
    def summary(self) -> str:
        """The first line of a commit action's message, or ``""``."""
        message = self.waiting.action.get("params", {}).get("message")
        if not isinstance(message, str) or not message.strip():
            return ""
        return message.strip().splitlines()[0]

    @property
    def params(self) -> dict[str, Any]:
        """The action's parameters without the file changes (those are in the diff)."""
        return {k: v for k, v in self.waiting.action.get("params", {}).items() if k != "changes"}


@dataclass(frozen=True)
class ApprovalsQueue:
    """A page of :class:`ApprovalCard` (``page.object_list``).

    ``left_out``: run ids on this page that the runtime did not list: their committed checkpoint
    does not verify (they need forensic handling, not an approval) or they stopped waiting
    between the two reads.
    """

    page: Page
    left_out: list[str]


def approvals_queue(*, run: str = "", page_number: Any = 1) -> ApprovalsQueue:
    """Runs in ``awaiting_approval``, longest waiting first, one page at a time.

    Args:
        run: only this run id (``""``: all).
        page_number: 1-based page; anything invalid gives the first or last page.
    """
    ids = Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value)
    if run:
        ids = ids.filter(run_id=run)
    ids = ids.order_by("updated_at", "run_id").values_list("run_id", flat=True)
    page = Paginator(ids, APPROVALS_PER_PAGE).get_page(page_number)
    page_ids = list(page.object_list)
    waiting = {w.run_id: w for w in approvals_waiting(run_ids=page_ids)} if page_ids else {}
    page.object_list = [
        ApprovalCard(waiting=waiting[run_id], diff=_diff_view(waiting[run_id].dry_run_diff))
        for run_id in page_ids
        if run_id in waiting
    ]
    return ApprovalsQueue(page=page, left_out=[r for r in page_ids if r not in waiting])


# --- review cases ------------------------------------------------------------------------------


def case_list(*, status: str = "", page_number: Any = 1) -> Page:
    """Review cases, open ones first then newest first, filtered by ``status`` (``""``: any); a
    page of ``ReviewCase`` rows with their run (one query for the rows, one for the count)."""
    rows = ReviewCase.objects.select_related("run").defer(
        "run__spec", "pending", "receipt", "environment", "observed", "trace_excerpt", "sealed",
        "decision",
    )
    if status:
        rows = rows.filter(status=status)
    rows = rows.order_by(
        Case(When(status=CaseStatus.OPEN, then=Value(0)), default=Value(1)), "-opened_at", "case_id"
    )
    return Paginator(rows, CASES_PER_PAGE).get_page(page_number)


def case_counts() -> dict[str, int]:
    """Number of cases per status (one query)."""
    counts = dict(ReviewCase.objects.order_by().values_list("status").annotate(n=Count("pk")))
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
            (``runtime.reviews.decision_prepare``: from the committed checkpoint and the
            environment as observed now); ``None`` for a closed case or when it cannot be read.
        binding_error: why the binding could not be prepared (the run's checkpoint fails to
            verify, the environment cannot be observed), or ``""``.
        refusals: the run's newest ``review.refused`` trace payloads (at most 5), newest first.
    """

    case: ReviewCase
    comparison: list[Compared]
    binding: dict[str, Any] | None
    binding_error: str
    refusals: list[dict[str, Any]]


def case_get(*, case_id: str, prepare: bool = True) -> CaseDetail:
    """One case for the detail page. For an open case (and ``prepare``), also the binding a
    decision would be signed over, observed now.

    Raises:
        ReviewCaseNotFoundError: no such case.
    """
    case = (
        ReviewCase.objects.select_related("run").defer("run__spec").filter(case_id=case_id).first()
    )
    if case is None:
        raise ReviewCaseNotFoundError(case_id=case_id)
    binding, error = None, ""
    if prepare and case.status == CaseStatus.OPEN:
        try:
            binding = decision_prepare(case_id=case_id)
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
    )
