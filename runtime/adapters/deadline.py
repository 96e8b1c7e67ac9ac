"""The commit deadline an approved write carries into its adapter (DESIGN.md sections 4.7 and 5.5).

An approval expires at a time on the database clock. The adapter runs on this machine's clock,
which may be slow or fast, so the engine hands it a :class:`CommitDeadline`: the expiry itself
plus the offset between the database clock and this process's clock, measured when the call
starts. ``deadline.now()`` is then this process's estimate of the database clock, used for two
things only: the check immediately before the adapter's commit point (:meth:`CommitDeadline.check`)
and the ``committed_at`` the receipt records. The offset is measured so that the estimate is never
earlier than the database's real time (see :func:`deadline_measure`): a late check refuses a
little early, a receipt stamp errs a little late, and both err towards review, never towards a
write that landed after its approval expired.

Adapters opt in by taking a ``not_after`` keyword on ``execute``; plug-ins that do not are
called without it (:func:`adapter_takes_deadline`). Imports nothing from Django.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.errors import CommitDeadlinePassedError

DEADLINE_ATTRIBUTE = "accepts_not_after"
"""Adapter class attribute: True when ``execute`` takes ``not_after`` (a :class:`CommitDeadline`)."""


CLOCK_RESOLUTION = timedelta(milliseconds=1)
"""The coarsest database clock's step (SQLite's ``strftime('%f')`` keeps milliseconds): added to the
measured offset so a truncated reading cannot put the estimate behind the database."""


def _local_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class CommitDeadline:
    """The latest moment an approved write may commit, with the clock to judge it by.

    Attributes:
        not_after: the approval's ``expires_at`` (aware UTC, database clock).
        clock_offset: database clock minus this process's clock (a :class:`timedelta`; positive
            when this machine is slow), measured by :func:`deadline_measure`.
    """

    not_after: datetime
    clock_offset: timedelta

    def now(self) -> datetime:
        """This process's clock moved onto the database clock (aware UTC)."""
        return _local_now() + self.clock_offset

    def remaining_seconds(self) -> float:
        """Seconds left before ``not_after`` by :meth:`now` (negative once past)."""
        return (self.not_after - self.now()).total_seconds()

    def check(self, **context: Any) -> datetime:
        """Refuse when the deadline has passed; call it immediately before the commit point.

        Args:
            context: identifiers for the error (``instance_id=...``, ``idempotency_key=...``).

        Returns:
            The time of the check on the database clock (aware UTC), no later than ``not_after``;
            an adapter that must write its commit time before committing uses it.

        Raises:
            CommitDeadlinePassedError: :meth:`now` is at or after ``not_after``; the caller must
                leave nothing written.
        """
        now = self.now()
        if now >= self.not_after:
            raise CommitDeadlinePassedError(
                not_after=self.not_after.isoformat(),
                late_by_seconds=round((now - self.not_after).total_seconds(), 3), **context)
        return now

    def check_whole_seconds(self, **context: Any) -> int:
        """Like :meth:`check` for stores that keep whole seconds (a git trailer): the check time
        rounded up, refused when the rounded stamp would pass ``not_after``.

        Raises:
            CommitDeadlinePassedError: as for :meth:`check`, or the rounded stamp is past it.
        """
        stamp = math.ceil(self.check(**context).timestamp())
        if datetime.fromtimestamp(stamp, UTC) > self.not_after:
            raise CommitDeadlinePassedError(
                "the approval expires within the second the write would be stamped with; nothing was written",
                not_after=self.not_after.isoformat(), **context)
        return stamp


def deadline_measure(*, not_after: datetime, database_now: Callable[[], datetime]) -> CommitDeadline:
    """A :class:`CommitDeadline` for ``not_after`` with the clock offset measured now.

    The local clock is read before the database's; whatever the round trip took, the database
    read happened at or after that local reading, so ``database - local_before`` (plus
    :data:`CLOCK_RESOLUTION`, the coarsest database clock's step) is never smaller than the true
    offset and :meth:`CommitDeadline.now` never runs behind the database.

    Args:
        not_after: the approval's expiry (aware, database clock).
        database_now: reads the database clock (``runtime.database.clock.db_now``).

    Raises:
        whatever ``database_now`` raises (the caller fails closed).
    """
    before = _local_now()
    database = database_now()
    return CommitDeadline(not_after=not_after, clock_offset=database - before + CLOCK_RESOLUTION)


def adapter_takes_deadline(adapter: object) -> bool:
    """Whether ``adapter.execute`` takes ``not_after`` (DESIGN.md section 5.5).

    True when the adapter declares ``accepts_not_after = True`` (the built-in adapters; a wrapper
    that forwards attributes reports its inner adapter's) or, undeclared, when ``execute`` names a
    ``not_after`` parameter. A plug-in written before deadlines existed is called without it.
    """
    declared = getattr(adapter, DEADLINE_ATTRIBUTE, None)
    if declared is not None:
        return declared is True
    execute = getattr(adapter, "execute", None)
    if execute is None:
        return False
    try:
        parameters = inspect.signature(execute).parameters
    except (TypeError, ValueError):
        return False
    return "not_after" in parameters
