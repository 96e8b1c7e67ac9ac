"""Ownership errors: the run's lease and the environment's fencing tokens.

Each sits under :class:`~runtime.errors.base.LeaseError` (DESIGN.md sections 4.5 and 4.6).
Context: ``run_id``, ``worker``, ``holder``, ``lease_version``, ``fencing_token``,
``newest_seen``.
"""

from __future__ import annotations

from runtime.errors.base import LeaseError


class LeaseHeldError(LeaseError):
    default_message = "the run's lease is held by another worker and has not expired"
    retryable = True
    hint = "wait for the lease to expire or for the holder to release it"


class LeaseLostError(LeaseError):
    default_message = "this worker no longer holds the run's lease"
    hint = "stop working on the run; another worker has taken it over"


class FencingTokenError(LeaseError):
    default_message = "fencing token is older than the newest the adapter has seen"
    hint = "a newer lease holder exists; this worker must stop"
