"""Recording what the dashboard's content search reads, when a write's intent is committed
(DESIGN.md section 6.8).

The terms (``runtime.core.search_text``) of every ``intent.proposed`` event go into
``RunSearchTerm`` inside the transaction that appends the event, so a search never sees a term
whose intent rolled back, nor misses one that committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import router

from runtime.core.search_text import events_terms
from runtime.database.statements import compiled_insert
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
        # Compiled once per row count (runtime.database.statements): the same INSERT as
        # bulk_create(ignore_conflicts=True), and one a batched commit can send (DESIGN.md
        # section 4.13).
        compiled_insert(alias=router.db_for_write(RunSearchTerm), ignore_conflicts=True,
                        objs=[RunSearchTerm(run_id=run_id, kind=kind, term=term) for kind, term in terms])
    return len(terms)
