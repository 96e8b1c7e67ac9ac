"""One mapping from the runtime's typed errors to what the dashboard answers.

===================================================  ============================================
raised by a service or a check                       answer
===================================================  ============================================
``RunNotFoundError``, ``ReviewCaseNotFoundError``,   404, exactly as for a run or case outside
``CombinationNotFoundError``                         the user's tenants (DESIGN.md section 6.6)
``LeaseHeldError``                                   303 back to the form's page, a warning naming
                                                     the lease holder (:func:`lease_held_message`)
``LeaseError`` (lost lease, fencing),                303 to the result page: another session
``StaleGenerationError``                             changed the run at the same moment
broker unreachable (kombu ``OperationalError``)      303 to the result page: the change is saved,
                                                     the sweeper re-queues the run
``ApprovalRefusedError``, ``DecisionRefusedError``   303 back: "<what failed>: <the rule's
                                                     reason>. Nothing was changed."
any other ``RatchetError`` (or a ``ValueError`` a    303 back: the same with the error's context
view chose to catch)                                 and hint
===================================================  ============================================

A view that calls a service catches ``ACTION_ERRORS`` and returns :func:`action_failed` with the
:class:`Action` that says where each answer goes; views that read a run or case are wrapped in
:func:`not_found_is_404`. The passkey ceremonies (JSON) answer ``400 {"error": reason}``
(:func:`json_refused`); downloads a plain-text reason (:func:`text_refused`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from kombu.exceptions import OperationalError as BrokerUnavailableError

from review.views.common import see_other
from runtime.errors import (
    ApprovalRefusedError,
    CombinationNotFoundError,
    DecisionRefusedError,
    LeaseError,
    LeaseHeldError,
    RatchetError,
    ReviewCaseNotFoundError,
    RunNotFoundError,
    StaleGenerationError,
)

View = TypeVar("View", bound=Callable[..., HttpResponse])

NOT_FOUND: dict[type[RatchetError], str] = {
    RunNotFoundError: "no such run",
    ReviewCaseNotFoundError: "no such review case",
    CombinationNotFoundError: "no such combination",
}
"""Not-found errors -> the 404's text."""

ACTION_ERRORS: tuple[type[BaseException], ...] = (RatchetError, BrokerUnavailableError)
"""What a view catches around a service call and hands to :func:`action_failed`."""

REFUSALS = (ApprovalRefusedError, DecisionRefusedError)
"""A rule said no: the person is shown the rule's reason alone."""

TAKEN_OVER = (
    "Another session changed this run at the same moment (possibly you, in another tab or "
    "window), so nothing from this attempt was applied. The page shows what the other "
    "session did."
)
QUEUE_DOWN = (
    "The change is saved, but the worker queue could not be reached; the sweeper re-queues the "
    "run within its next period."
)


@dataclass(frozen=True)
class Action:
    """Where an action's failures are answered.

    Attributes:
        failed: opens a refusal's message, e.g. ``"Could not approve run r1"``.
        back: the page the form was on (a refusal, a busy run).
        result: the page showing the current state (a change overtaken by another session, or
            saved while the queue was down).
        unchanged: what did not happen, as a clause (``"nothing was changed"``).
    """

    failed: str
    back: str
    result: str
    unchanged: str = "nothing was changed"


def not_found_is_404(view: View) -> View:
    """Answer 404 for a not-found error (``NOT_FOUND``) raised anywhere in ``view``. Put it
    below ``require_perm``: the permission is checked before anything about the object is said."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except tuple(NOT_FOUND) as exc:
            raise Http404(_not_found_text(exc)) from None

    return wrapped  # type: ignore[return-value]


def _not_found_text(exc: BaseException) -> str:
    return next(text for cls, text in NOT_FOUND.items() if isinstance(exc, cls))


def lease_held_message(exc: LeaseHeldError, *, unchanged: str = "nothing was changed") -> str:
    """The one wording of a run whose lease someone else holds (``LeaseHeldError.busy_text``, which
    ``manage.py approvals`` shows too), naming the holder as the run page does ("Lease holder"): a
    worker id, or ``<role>:<person>:<random>`` for a person's session
    (``runtime.checkpoints.session.person_worker_id``)."""
    return exc.busy_text(unchanged=unchanged, then="Reload in a few seconds to see the current state.")


def refusal_message(exc: BaseException, *, failed: str, unchanged: str = "nothing was changed") -> str:
    """``"<failed>: <reason>. <Unchanged>."``: a rule's reason alone for a refusal, the error
    with its context and hint otherwise."""
    reason = exc.message if isinstance(exc, REFUSALS) else str(exc)
    return f"{failed}: {reason.rstrip('.')}. {unchanged[:1].upper()}{unchanged[1:]}."


def action_failed(request: HttpRequest, exc: BaseException, action: Action) -> HttpResponse:
    """The answer to ``exc`` raised by an action's service: a message and a 303 (see the
    module's table).

    Raises:
        Http404: ``exc`` is a not-found error.
    """
    if isinstance(exc, tuple(NOT_FOUND)):
        raise Http404(_not_found_text(exc)) from None
    if isinstance(exc, LeaseHeldError):
        messages.warning(request, lease_held_message(exc, unchanged=action.unchanged))
        return see_other(action.back)
    if isinstance(exc, LeaseError | StaleGenerationError):
        messages.warning(request, TAKEN_OVER)
        return see_other(action.result)
    if isinstance(exc, BrokerUnavailableError):
        messages.warning(request, QUEUE_DOWN)
        return see_other(action.result)
    messages.error(request, refusal_message(exc, failed=action.failed, unchanged=action.unchanged))
    return see_other(action.back)


def json_refused(reason: str) -> JsonResponse:
    """``400 {"error": reason}``: a passkey ceremony that cannot start or finish."""
    return JsonResponse({"error": reason}, status=400)


def text_refused(text: str, *, status: int) -> HttpResponse:
    """A download that cannot be served: ``status`` with ``text`` as plain text."""
    return HttpResponse(text, status=status, content_type="text/plain")
