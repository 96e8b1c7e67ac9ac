"""The adapter protocol (DESIGN.md sections 4 and 5).

An adapter is the only way a run touches its environment. It answers four questions the step
engine needs to keep side effects exactly-once:

* ``observe()``: which instance is this, at which version, with which content fingerprint?
  An :class:`Observation` never copies the environment; it names it.
* ``execute()``: apply one write, idempotent by key, fenced by the lease version, and return the
  adapter's own receipt -- the authoritative evidence that the write committed.
* ``lookup_receipt()`` / ``receipts()``: read receipts back from the adapter's *own* store (a
  journal, the git history), never from the runtime's cache, so a crash that lost the runtime's
  copy can be reconciled and a cache that disagrees with the adapter can be caught.
* ``predict_post_state()`` / ``dry_run_diff()``: the one state a single pending write would
  produce, computed without changing anything, so recovery can tell "the pending write landed"
  from drift.

What both concrete adapters validate identically lives beside this module, each piece named for
what it is: :mod:`runtime.adapters.paths`, :mod:`runtime.adapters.actions`,
:mod:`runtime.adapters.blobs`, :mod:`runtime.adapters.receipt_json`,
:mod:`runtime.adapters.locking`, :mod:`runtime.adapters.fence`. It imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from runtime.adapters.deadline import CommitDeadline
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Action, EnvironmentRef, Receipt

BlobSource = Callable[[str], bytes]
"""``digest -> content``: the engine passes its attachment store's getter.

Adapters call it with the ``sha256:<hex>`` digest an action names and check the returned bytes
against that digest before writing anything.
"""


@dataclass(frozen=True)
class AdapterContext:
    """What an adapter plug-in is constructed with, beside its options (DESIGN.md section 5.10).

    Attributes:
        target: the spec's ``environment.target`` (a directory for the built-in adapters; a
            plug-in may read it as it documents, e.g. the directory of its own store).
    """

    target: Path


@dataclass(frozen=True)
class Observation:
    """What an adapter saw of its environment at one moment (DESIGN.md section 3, environment).

    Attributes:
        instance_id: the concrete environment instance (a workspace's id file, a repository's
            ``ratchet.instance-id``); a copy of the environment has another one.
        version: the adapter's own revision: ``"w<N>"`` for a workspace journal, the HEAD sha
            for git. It only moves through the adapter; out-of-band edits do not move it.
        state_fingerprint: ``"sha256:..."`` typed digest (``DigestKind.ENVIRONMENT``) of the
            content; out-of-band edits change it.
        kind: the adapter kind, ``"workspace"`` or ``"git"``.
        attachments: ``name -> bytes`` evidence the engine stores content-addressed (a listing,
            a status); each is kept small (at most a few tens of KiB).
    """

    instance_id: str
    version: str
    state_fingerprint: str
    kind: str
    attachments: dict[str, bytes] = field(default_factory=dict)

    def attachment_digests(self) -> dict[str, str]:
        """``name -> sha256:<hex>`` of each attachment, as the engine would store them."""
        return {name: digest_bytes(data) for name, data in sorted(self.attachments.items())}

    def ref(
        self,
        *,
        adapter_generation: int = 0,
        observation_version: int = 0,
        attachment_digests: Iterable[str] = (),
    ) -> EnvironmentRef:
        """This observation as the checkpoint's :class:`EnvironmentRef`.

        Args:
            adapter_generation: the lease version the observation was made under (>= 0).
            observation_version: the run's observation counter (>= 0).
            attachment_digests: digests of the attachments as stored by the engine.
        """
        return EnvironmentRef(
            adapter_kind=self.kind,
            instance_id=self.instance_id,
            version=self.version,
            state_fingerprint=self.state_fingerprint,
            adapter_generation=adapter_generation,
            observation_version=observation_version,
            attachments=list(attachment_digests),
        )


@runtime_checkable
class Adapter(Protocol):
    """What the step engine needs from an environment (DESIGN.md sections 4-6).

    An adapter plug-in (DESIGN.md section 5.10) implements this protocol; it may raise the
    :class:`~runtime.errors.AdapterError` subclasses named below (``retryable`` ones make the
    engine try the step again later; any other freezes the run for review). Any other exception
    leaves the step like a crash would: the next attempt asks the adapter by key first (section
    5.3), so an adapter must keep its receipts before it returns, never after.

    Attributes:
        kind: the adapter's name (``"workspace"``, ``"git"``, a plug-in's name).
        namespace: receipt namespace, ``"<kind>:<instance id>"``.
        adapter_version: receipt format/version tag, e.g. ``"ratchet-git/1"``.
    """

    kind: str
    namespace: str
    adapter_version: str

    def instance_id(self) -> str:
        """The environment instance's identity (stable for this instance, new for a copy)."""
        ...

    def observe(self) -> Observation:
        """Instance, version, content fingerprint and small evidence attachments."""
        ...

    def execute(
        self,
        action: Action,
        *,
        idempotency_key: str,
        intent_digest: str,
        fencing_token: int,
        blobs: BlobSource,
        approval_digest: str | None = None,
        not_after: CommitDeadline | None = None,
    ) -> Receipt:
        """Apply one write exactly once per idempotency key and return its receipt.

        If the adapter's own store already holds a receipt for ``idempotency_key`` it is returned
        unchanged and nothing is written, even when its intent digest differs (the engine
        compares and freezes the run on a conflict, DESIGN.md section 6).

        ``not_after`` (optional for plug-ins, DESIGN.md section 5.5): an approved write's
        deadline. An adapter that takes it declares ``accepts_not_after = True``, calls
        ``not_after.check()`` immediately before its commit point and records the receipt's
        ``committed_at`` on ``not_after.now()``'s clock; the engine passes it only to adapters
        that take it (:func:`runtime.adapters.deadline.adapter_takes_deadline`).

        Raises:
            FencingTokenError: ``fencing_token`` is older than the newest the adapter has seen
                (DESIGN.md section 4, Ownership); nothing written.
            CommitDeadlinePassedError: ``not_after`` passed before the commit point; nothing
                written.
            InvalidActionError: nothing written.
            PathEscapeError: nothing written.
            BlobDigestMismatchError: nothing written.
            PreconditionFailedError: nothing written.
        """
        ...

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The receipt for ``idempotency_key`` from the adapter's own store, or None."""
        ...

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """Fingerprint the environment would have after this one write, changing nothing."""
        ...

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """Unified diff text of what this one write would change, changing nothing."""
        ...

    def receipts(self) -> list[Receipt]:
        """Every receipt in the adapter's store, oldest first."""
        ...
