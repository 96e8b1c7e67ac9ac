"""Persistence of the durable runtime (DESIGN.md sections 3-5).

* ``Run``: identity, phase and the lease (``owner_worker``, ``lease_version``, ``lease_expires_at``,
  ``state_version``) judged by the database clock.
* ``Checkpoint``: append-only signed envelopes; several rows may share a generation (an orphan
  left by a crash before the HWM CAS), only the one the HWM names is committed.
* ``HighWaterMark``: the external monotonic generation per
  (task_id, run_id, environment_instance_id), possibly in its own database
  (``RATCHET_HWM_DATABASE_URL``), so it has no foreign keys.
* ``TraceEvent``: append-only, hash-chained evidence; the chain head is mirrored on the run.
* ``LedgerEntry``: the receipts ledger (executed writes, consumed nonces, quarantined keys), one
  hash-chained row per entry, written with the checkpoint that commits to it (section 3.1).
* ``Attachment``: content-addressed bytes (sha256), stored once through the storage API.

State changes go through the services (``checkpoints``, ``leases``, ``trace``, ``attachments``);
append-only models refuse updates and deletes at the model layer too.

Over 400 lines: Django finds an app's models in one module, and a models module split across
files would import ``Run`` back from here (an import circle).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import Now

from runtime.core.checkpoint import Phase as CorePhase


class Phase(models.TextChoices):
    RUNNING = CorePhase.RUNNING.value, "running"
    PENDING = CorePhase.PENDING.value, "pending"
    AWAITING_APPROVAL = CorePhase.AWAITING_APPROVAL.value, "awaiting approval"
    NEEDS_REVIEW = CorePhase.NEEDS_REVIEW.value, "needs review"
    COMPLETED = CorePhase.COMPLETED.value, "completed"
    FAILED = CorePhase.FAILED.value, "failed"
    CANCELLED = CorePhase.CANCELLED.value, "cancelled"


class AppendOnlyError(Exception):
    """Raised when code tries to update or delete an append-only row."""


class AppendOnly(models.Model):
    """Rows are written once; ``save`` on an existing row and ``delete`` raise."""

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only")


class Run(models.Model):
    """One agent run and its lease. ``state_version`` advances with every committed checkpoint."""

    run_id = models.CharField(max_length=64, primary_key=True)
    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    task_version = models.CharField(max_length=200)
    policy_id = models.CharField(max_length=200)
    policy_version = models.CharField(max_length=200)
    environment_instance_id = models.CharField(max_length=200)
    scenario_fingerprint = models.CharField(max_length=71)
    phase = models.CharField(max_length=32, choices=Phase.choices, default=Phase.RUNNING)
    stop_reason = models.CharField(max_length=64, blank=True, default="")
    spec = models.JSONField(default=dict, blank=True)
    """The task spec the run was started with (so ``resume RUN_ID`` needs nothing else)."""

    owner_worker = models.CharField(max_length=200, blank=True, default="")
    lease_version = models.BigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    state_version = models.BigIntegerField(default=0)
    generation = models.BigIntegerField(default=0)
    checkpoint_digest = models.CharField(max_length=71, blank=True, default="")
    """The generation the main database committed last and the digest of its envelope. The mark
    (the HWM, in its own database) is authoritative; between a commit's main transaction and the
    mark's compare-and-set it is one behind, and ``runtime.checkpoints.mark_completion`` moves it to exactly
    this pair (DESIGN.md section 4.3)."""
    cancel_requested = models.BooleanField(default=False)
    """Set by an operator; the worker driving the run settles any pending write, then cancels."""

    trace_seq = models.BigIntegerField(default=0)
    trace_head = models.CharField(max_length=71, blank=True, default="")
    """Sequence number and hash of the newest trace event. Anchoring the chain's head here is what
    lets ``trace_verify`` notice a deleted *last* event, which no hash chain can see on its own."""

    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    again_of = models.CharField(max_length=64, blank=True, default="", db_index=True)
    """The failed or cancelled run this run was started again from, by an operator's "run again"
    (``runtime.decisions.second_chances``, DESIGN.md section 6.12); the earlier run finds it back
    by this column."""

    archived_at = models.DateTimeField(null=True, blank=True)
    archive_location = models.CharField(max_length=500, blank=True, default="")
    archive_digest = models.CharField(max_length=71, blank=True, default="")
    """Set when the run was archived (``runtime.archive``, DESIGN.md section 4.11): its signed
    evidence bundle is at ``archive_location`` in the archive storage and hashes to
    ``archive_digest``; its checkpoints, trace, ledger and receipts rows are gone."""

    class Meta:
        indexes = [
            models.Index(fields=["phase", "lease_expires_at"]),
            models.Index(fields=["tenant_id", "task_id"]),
            # Dashboard keyset pages (DESIGN.md section 6.8): the runs list order, per phase,
            # and the approvals queue order.
            models.Index(fields=["-created_at", "-run_id"], name="run_list_order"),
            models.Index(fields=["phase", "-created_at", "-run_id"], name="run_phase_list_order"),
            models.Index(fields=["phase", "updated_at", "run_id"], name="run_phase_updated"),
            models.Index(fields=["-updated_at", "-run_id"], name="run_updated_order"),
            # Archiving skips a run whose environment an unfinished run acts on (DESIGN.md
            # section 4.11): one index probe per candidate.
            models.Index(fields=["environment_instance_id", "phase"], name="run_environment_phase"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} ({self.phase})"


class Checkpoint(AppendOnly):
    """One signed checkpoint envelope (canonical JSON bytes) as written."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="checkpoints")
    generation = models.BigIntegerField()
    envelope = models.BinaryField()
    digest = models.CharField(max_length=71)
    key_id = models.CharField(max_length=64)
    schema_version = models.IntegerField()
    lease_version = models.BigIntegerField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["run", "generation"])]
        constraints = [
            models.UniqueConstraint(fields=["run", "digest"], name="checkpoint_unique_digest")
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.run_id}@{self.generation}"


class HighWaterMark(models.Model):
    """External monotonic generation per (task_id, run_id, environment_instance_id) (DESIGN.md section 4.2).

    Only compare-and-set updates touch ``generation``; see ``runtime.checkpoints.high_water_marks``.
    """

    task_id = models.CharField(max_length=200)
    run_id = models.CharField(max_length=64)
    environment_instance_id = models.CharField(max_length=200)
    generation = models.BigIntegerField(default=0)
    checkpoint_digest = models.CharField(max_length=71, blank=True, default="")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["task_id", "run_id", "environment_instance_id"], name="hwm_unique_scope"
            )
        ]

    def __str__(self) -> str:
        return f"hwm {self.task_id}/{self.run_id}/{self.environment_instance_id}={self.generation}"


class EnvironmentRegistration(models.Model):
    """An environment instance as the control plane knows it (DESIGN.md sections 4.6 and 5.4).

    ``fencing_token`` is the newest fencing token issued for the instance: every lease on a run
    that acts on it advances this one counter, so tokens are monotonic per environment, not per
    run. ``location`` and ``identity`` (``"<device>:<inode>"`` of the directory) are recorded when
    a filesystem environment is first registered and checked on every observation, so a byte copy
    (which carries the instance id file along) is not taken for the registered instance.
    Service: ``runtime.ownership.environments``.
    """

    instance_id = models.CharField(max_length=200, primary_key=True)
    fencing_token = models.BigIntegerField(default=0)
    location = models.CharField(max_length=4096, blank=True, default="")
    identity = models.CharField(max_length=64, blank=True, default="")
    registered_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"environment {self.instance_id} (fence {self.fencing_token})"


class TraceEvent(AppendOnly):
    """One hash-chained trace event: ``hash = H(prev_hash, seq, type, payload, env version, at)``.

    The run row mirrors the newest ``seq`` and ``hash`` so a deleted tail is evident too.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="trace_events")
    seq = models.BigIntegerField()
    event_type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    environment_version = models.CharField(max_length=200, blank=True, default="")
    prev_hash = models.CharField(max_length=71)
    hash = models.CharField(max_length=71)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="trace_unique_seq")]
        indexes = [
            models.Index(fields=["run", "event_type"]),
            # Trace browser keyset pages by type or environment version (DESIGN.md section 6.8).
            models.Index(fields=["event_type", "-id"], name="trace_type_recent"),
            models.Index(fields=["environment_version", "-id"], name="trace_envver_recent"),
        ]
        ordering = ["run", "seq"]

    def __str__(self) -> str:
        return f"trace {self.run_id}#{self.seq} {self.event_type}"


class LedgerEntry(AppendOnly):
    """One receipts-ledger entry (DESIGN.md section 3.1): ``body`` is its canonical JSON as hashed.

    ``entry_hash = H(run, seq, kind, key, sha256(body), prev_hash)`` (``runtime.core.ledger``);
    the checkpoint signs the ``(length, head)`` it commits to. ``(run, kind, key)`` is unique, so
    a key executed twice or a nonce consumed twice cannot even be stored, and it is the index
    the engine's lookups use. ``generation`` is the checkpoint that recorded the entry.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="ledger_entries")
    seq = models.BigIntegerField()
    kind = models.CharField(max_length=32)
    key = models.CharField(max_length=200)
    body = models.TextField()
    prev_hash = models.CharField(max_length=71)
    entry_hash = models.CharField(max_length=71)
    generation = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="ledger_unique_seq"),
            models.UniqueConstraint(fields=["run", "kind", "key"], name="ledger_unique_key"),
        ]

    def __str__(self) -> str:
        return f"ledger {self.run_id}#{self.seq} {self.kind} {self.key}"


class Attachment(AppendOnly):
    """Content-addressed bytes; ``digest`` is ``sha256:<hex>`` of the content."""

    digest = models.CharField(max_length=71, primary_key=True)
    size = models.BigIntegerField()
    content_type = models.CharField(max_length=100, default="application/octet-stream")
    storage_name = models.CharField(max_length=300)
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"attachment {self.digest} ({self.size} bytes)"


class IdempotencyRecord(models.Model):
    """The runtime's idempotency cache: a rebuildable copy of one adapter receipt per key.

    Keyed by ``idempotency_key`` and carrying the ``intent_digest`` it was used for, so the same
    key with another intent is detectable (DESIGN.md section 5). ``quarantined`` keys (a
    reviewer's replan) are never used again. Service: ``runtime.checkpoints.receipts``.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="idempotency_records")
    idempotency_key = models.CharField(max_length=200, unique=True)
    intent_digest = models.CharField(max_length=71)
    receipt = models.JSONField(null=True, blank=True)
    receipt_fingerprint = models.CharField(max_length=71, blank=True, default="")
    quarantined = models.BooleanField(default=False)
    quarantine_reason = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"idempotency {self.idempotency_key} ({'quarantined' if self.quarantined else 'active'})"


class CaseStatus(models.TextChoices):
    OPEN = "open", "open"
    REPLANNED = "replanned", "replanned"
    ABORTED = "aborted", "aborted"


class ReviewCase(models.Model):
    """A frozen run waiting for a human decision, with all the evidence (DESIGN.md section 6).

    Opened by the engine whenever a run freezes in ``needs_review``; the checkpoint holds a
    ``ReviewCaseRef`` with the same ``case_id``. The signed checkpoint is authoritative: this row
    is the dashboard's index and evidence locker, repaired from the checkpoint if a crash left it
    behind. Service: ``runtime.decisions.reviews``.
    """

    case_id = models.CharField(max_length=64, primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="review_cases")
    status = models.CharField(max_length=16, choices=CaseStatus.choices, default=CaseStatus.OPEN)
    reason = models.CharField(max_length=64)
    detail = models.TextField(blank=True, default="")
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    pending = models.JSONField(null=True, blank=True)
    """The pending action, intent digest and key at the time of the freeze."""
    receipt = models.JSONField(null=True, blank=True)
    """The full conflicting (or drifted) adapter receipt, if any."""
    receipt_fingerprint = models.CharField(max_length=71, blank=True, default="")
    environment = models.JSONField(default=dict)
    """The checkpointed environment reference (instance, version, fingerprint) at the freeze."""
    observed = models.JSONField(null=True, blank=True)
    """What was observed when the engine froze the run, when it differs from the checkpoint."""
    trace_excerpt = models.JSONField(default=list)
    sealed = models.JSONField(null=True, blank=True)
    """Pending + receipt + decision, sealed when the case is decided."""
    decision = models.JSONField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    opened_at = models.DateTimeField(db_default=Now())
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "opened_at"]),
            models.Index(fields=["-opened_at", "case_id"], name="case_recent"),
        ]

    def __str__(self) -> str:
        return f"case {self.case_id} ({self.status}, {self.reason})"


class MetricCounter(models.Model):
    """One counter cell kept as trace events happen (DESIGN.md section 8.1).

    Incremented (``INSERT ... ON CONFLICT DO UPDATE``) in the transaction that appends the event
    that causes it, so it commits or rolls back with that event. ``window_start`` is the start
    (unix seconds) of the time bucket the increment fell in: totals sum every bucket, the
    admission gate sums the buckets of its sliding window. Service: ``runtime.observability.metrics``.
    """

    name = models.CharField(max_length=64)
    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    label = models.CharField(max_length=64, blank=True, default="")
    """A histogram bucket's upper bound (``le``), or ``""``."""
    window_start = models.BigIntegerField()
    value = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "tenant_id", "task_id", "label", "window_start"],
                                               name="metric_counter_cell")]
        # The health page's charts and the admission window read recent buckets only.
        indexes = [models.Index(fields=["window_start", "name"], name="metric_counter_window")]

    def __str__(self) -> str:
        return f"{self.name}{{{self.tenant_id}/{self.task_id} {self.label}}}@{self.window_start}={self.value}"


class RecoveryWatch(models.Model):
    """A run's recoveries not decided yet (DESIGN.md section 8.1; ``runtime.observability.rules``).

    Written with ``recovery.started``, read when a worker takes the run's lease, and deleted
    with the event that decides them. No foreign key: discarding a run must not be blocked.
    """

    run_id = models.CharField(max_length=64, primary_key=True)
    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    open = models.IntegerField(default=0)
    durations = models.JSONField(default=list)
    """``duration_seconds`` of each open recovery's ``recovery.succeeded`` (seconds)."""
    nothing_to_recover = models.BooleanField(default=False)
    """The newest recovery started on a run already frozen for review."""

    def __str__(self) -> str:
        return f"recovery watch {self.run_id} ({self.open} open)"


class AdmissionDecision(AppendOnly):
    """An admin's signed decision re-opening admission for a tenant and task (DESIGN.md section 8.3).

    ``body`` is exactly what was signed (canonical JSON) with the reviewer root's key
    ``key_id``; counters in buckets that started before ``decided_at`` no longer count against
    the scope. Service: ``runtime.rollout.admission``.
    """

    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    decided_by = models.CharField(max_length=200)
    reason = models.TextField()
    decided_at = models.DateTimeField()
    body = models.JSONField()
    key_id = models.CharField(max_length=200)
    signature = models.CharField(max_length=256)

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "task_id", "decided_at"])]

    def __str__(self) -> str:
        return f"admission re-opened for {self.tenant_id}/{self.task_id} by {self.decided_by}"


class GatewayToken(models.Model):
    """An agent's token for the gateway (DESIGN.md section 5.12): scoped to one tenant and one
    run (``run``) or, a per-agent token, to several runs of that tenant (``run_ids``, or every
    run of ``task_id``), optionally to some actions; stored as a digest only, revocable, rate
    limited by a fixed-window counter on this row. Service: ``runtime.gateway.tokens``."""

    token_id = models.CharField(max_length=32, primary_key=True)
    """Public handle shown in the dashboard and in errors; the secret is never stored."""
    secret_digest = models.CharField(max_length=71)
    tenant_id = models.CharField(max_length=200)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="gateway_tokens", null=True, blank=True)
    """The one run of a per-run token; empty for a per-agent token."""
    run_ids = models.JSONField(default=list, blank=True)
    """A per-agent token's runs (all of ``tenant_id``)."""
    task_id = models.CharField(max_length=200, blank=True, default="")
    """A per-agent token for every run of this task in ``tenant_id``."""
    agent = models.CharField(max_length=200, blank=True, default="")
    actions = models.JSONField(default=list, blank=True)
    """Action kinds the token may call; empty: every kind the run's policy allows."""
    created_at = models.DateTimeField(db_default=Now())
    revoked_at = models.DateTimeField(null=True, blank=True)
    window_started_at = models.DateTimeField(null=True, blank=True)
    window_calls = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"gateway token {self.token_id} (run {self.run_id or 'several'})"


class OperatorCredential(models.Model):
    """An operator's credential for the JSON API's operator endpoints (DESIGN.md section 5.13):
    start and cancel runs, issue and revoke gateway tokens, all in one tenant. ``rop_<id>_<secret>``,
    stored as a digest only, revocable. Service: ``runtime.gateway.operator_credentials``."""

    credential_id = models.CharField(max_length=32, primary_key=True)
    secret_digest = models.CharField(max_length=71)
    tenant_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"operator credential {self.credential_id} ({self.tenant_id})"


class Combination(models.Model):
    """A deployable version combination (DESIGN.md section 8.4): the digest of its pinned fields
    is its id; ``state`` is canary, active, retired or rolled_back; ``share`` is the fraction of
    new runs (0..1) it receives while a canary. Service: ``runtime.rollout.combinations``."""

    combination_id = models.CharField(max_length=71, primary_key=True)
    fields = models.JSONField()
    """model, prompt, rules, tool_schema, inputs (data fingerprints), code_version, plugins."""
    state = models.CharField(max_length=16, default="canary")
    share = models.FloatField(default=0.0)
    created_at = models.DateTimeField(db_default=Now())
    changed_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"combination {self.combination_id[:19]} ({self.state})"


class CombinationEvent(AppendOnly):
    """One entry of a combination's append-only history: who changed what, when and why."""

    combination = models.ForeignKey(Combination, on_delete=models.PROTECT, related_name="history")
    kind = models.CharField(max_length=64)
    actor = models.CharField(max_length=200)
    reason = models.TextField(blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor}"


class CombinationRun(models.Model):
    """Which combination a run was assigned at start (DESIGN.md section 8.4)."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="combination_pin")
    combination = models.ForeignKey(Combination, on_delete=models.PROTECT, related_name="runs")

    def __str__(self) -> str:
        return f"run {self.run_id} on {self.combination_id[:19]}"


class RegressRecord(AppendOnly):
    """The result of one ``manage.py regress COMBINATION`` (DESIGN.md section 8.5)."""

    combination = models.ForeignKey(Combination, on_delete=models.PROTECT, related_name="regress_records")
    passed = models.BooleanField()
    results = models.JSONField()
    at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"regress of {self.combination_id[:19]}: {'pass' if self.passed else 'fail'}"


class AdmissionThreshold(models.Model):
    """An admin's override of one admission threshold for a scope, edited in the dashboard
    (DESIGN.md section 8.3). ``tenant_id`` / ``task_id`` may be ``"*"`` (every tenant, every
    task of the tenant); ``name`` is one of ``runtime.rollout.admission_thresholds.NAMES``. Overrides win
    over settings, which win over the defaults. Every change also appends an
    ``AdmissionThresholdChange``. Service: ``runtime.rollout.admission_thresholds``."""

    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    name = models.CharField(max_length=32)
    value = models.FloatField()
    changed_by = models.CharField(max_length=200)
    changed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant_id", "task_id", "name"],
                                               name="admission_threshold_scope_name")]

    def __str__(self) -> str:
        return f"{self.name} = {self.value:g} for {self.tenant_id}/{self.task_id}"


class AdmissionThresholdChange(AppendOnly):
    """The audit trail of threshold overrides: who changed which one, when, from what to what
    and why (``old_value`` / ``new_value`` None: no override before / override removed)."""

    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    name = models.CharField(max_length=32)
    old_value = models.FloatField(null=True, blank=True)
    new_value = models.FloatField(null=True, blank=True)
    changed_by = models.CharField(max_length=200)
    changed_at = models.DateTimeField()
    reason = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "task_id", "changed_at"])]

    def __str__(self) -> str:
        return f"{self.name} {self.old_value} -> {self.new_value} for {self.tenant_id}/{self.task_id}"


class AdmissionClosing(AppendOnly):
    """The first refusal of a scope's new runs after its last re-open: which metric closed
    admission, its value and threshold (DESIGN.md section 8.3). Service: ``runtime.rollout.admission``."""

    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200)
    metric = models.CharField(max_length=64)
    value = models.FloatField()
    threshold = models.FloatField()
    closed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "task_id", "closed_at"])]

    def __str__(self) -> str:
        return f"admission closed for {self.tenant_id}/{self.task_id} on {self.metric}"


class RunSearchTerm(models.Model):
    """One normalised piece of a run's content the dashboard's search matches by its start: an
    idempotency key, an action kind or target, a commit message or one of its words, a changed
    path (``runtime.core.search_text``; DESIGN.md section 6.8). Written with the checkpoint commit
    that records the intent (``runtime.evidence.search_terms``); derived data, not evidence, so it goes
    with its run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="search_terms", db_index=False)
    kind = models.CharField(max_length=16)
    term = models.CharField(max_length=200)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "kind", "term"], name="run_search_term_unique")]
        # varchar_pattern_ops (PostgreSQL only; other databases ignore it): a LIKE 'prefix%'
        # is an index range scan under any collation.
        indexes = [models.Index(fields=["term", "run"], opclasses=["varchar_pattern_ops", "varchar_pattern_ops"],
                                name="run_search_term_prefix")]

    def __str__(self) -> str:
        return f"{self.kind} {self.term!r} of {self.run_id}"


class WorkerPresence(models.Model):
    """A Celery worker that says it is alive (DESIGN.md section 5.15; ``runtime.workers.presence``).

    Brokers without broadcast (the embedded SQLAlchemy transport) cannot answer Celery's ping,
    so every worker writes this row when ready and again every ``RATCHET_WORKER_PRESENCE_SECONDS``
    by the database clock, and deletes it when it shuts down. A row not renewed for a few
    periods belongs to a worker that died without saying so; it is ignored, then overwritten.
    """

    name = models.CharField(max_length=200, primary_key=True)
    """The worker's node name (``RATCHET_WORKER_ID`` or Celery's hostname): the prefix of the
    lease identities of its pool processes."""
    pid = models.IntegerField(default=0)
    queues = models.JSONField(default=list)
    started_at = models.DateTimeField(db_default=Now())
    seen_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"worker {self.name} (pid {self.pid})"
