"""Recording what the dashboard's content search reads, when a write's intent is committed
(DESIGN.md section 6.8).

The terms (``runtime.core.search_text``) of every ``intent.proposed`` event go into
``RunSearchTerm`` inside the transaction that appends the event, so a search never sees a term
whose intent rolled back, nor misses one that committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtime.core.search_text import events_terms
from runtime.models import RunSearchTerm


def search_terms_record(*, run_id: str, events: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
    """Store the search terms of ``events`` (``(event_type, payload)`` pairs) for ``run_id``.

    Called inside the caller's transaction (STYLE.md rule 7); events other than
    ``intent.proposed`` cost nothing. A term the run already has is skipped by the unique
    ``(run, kind, term)`` constraint (one ``INSERT ... ON CONFLICT DO NOTHING``), so a replayed
    intent adds nothing. Returns the number of terms offered.
    """
    terms = events_terms(events)
    if terms:
        RunSearchTerm.objects.bulk_create(
            [RunSearchTerm(run_id=run_id, kind=kind, term=term) for kind, term in terms],
            ignore_conflicts=True,
        )
    return len(terms)
