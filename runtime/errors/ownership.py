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

    def busy_text(self, *, unchanged: str = "nothing was changed", then: str = "Try again in a few seconds.") -> str:
        """The one wording a person is shown when someone else holds the run's lease: the
        dashboard's (``review.views.errors.lease_held_message``) and ``manage.py approvals``'.

        Args:
            unchanged: what did not happen, e.g. ``"nothing was approved"``.
            then: what to do next, as a sentence (reload the page, run the command again).

        Returns:
            The text, naming the holder as the run page does ("Lease holder"): a worker id, or
            ``<role>:<person>:<random>`` for a person's session (DESIGN.md section 4.5).
        """
        holder = self.context.get("holder") or "another worker"
        return (f"Lease holder {holder} is changing this run right now (a worker, another person, or "
                f"you in another tab or window), so {unchanged}. {then}")


class LeaseLostError(LeaseError):
    default_message = "this worker no longer holds the run's lease"
    hint = "stop working on the run; another worker has taken it over"


class FencingTokenError(LeaseError):
    default_message = "fencing token is older than the newest the adapter has seen"
    hint = "a newer lease holder exists; this worker must stop"
