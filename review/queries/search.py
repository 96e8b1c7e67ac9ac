"""The dashboard's content search: which runs a search box names (DESIGN.md section 6.8).

What the user types is matched three ways, each read bounded by a fixed limit: as the start of a
run id and as the start of one of the runs' search terms (an idempotency key, an action, a commit
message's first line, a path from any directory boundary: ``runtime.core.search_text``), each an
index range scan, and, when it is several words, as words that each start a term of the same run
(the longest word's runs, then their own terms). At most four queries, whatever the size of the
data; the caller then reads only the matched runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Substr

from review.scope import AllTenants, scope_filter, scope_tenants
from runtime.core.search_text import TERM_CHARS, search_normalize, search_words
from runtime.models import Run, RunSearchTerm

SEARCH_MATCHES = 200
"""A search names at most this many runs per way of matching (so at most 400 in all)."""
QUERY_WORDS = 4
"""At most this many words of a query are matched (the longest ones: the most selective)."""
TOP_CHAR = "\U0010ffff"


@dataclass(frozen=True)
class SearchHits:
    """The runs a search matched: ``run_ids`` (unordered, distinct), and ``capped`` when a way of
    matching reached ``SEARCH_MATCHES`` (more runs may match; the page says to narrow it)."""

    run_ids: tuple[str, ...]
    capped: bool


def _starting(field: str, prefix: str) -> Q:
    """``field`` starts with ``prefix``, as an index range scan on either database: ``LIKE
    'prefix%'`` on PostgreSQL (the ``varchar_pattern_ops`` index), a ``>= prefix AND < prefix ||
    U+10FFFF`` range elsewhere (SQLite's ``LIKE`` is case-insensitive and skips a plain index)."""
    if connection.vendor == "postgresql":
        return Q(**{f"{field}__startswith": prefix})
    return Q(**{f"{field}__gte": prefix, f"{field}__lt": prefix + TOP_CHAR})


def _terms(user: Any) -> QuerySet[RunSearchTerm]:
    """Search terms of the runs ``user`` may see (a join to the run only for a scoped user)."""
    scope = scope_tenants(user=user)
    terms = RunSearchTerm.objects.order_by()
    if isinstance(scope, AllTenants):
        return terms
    return terms.filter(run__tenant_id__in=sorted(scope)) if scope else terms.none()


WORD_CANDIDATES = 1_000
"""Several words are matched among at most this many runs having the longest word."""


def _all_words(terms: QuerySet[RunSearchTerm], words: list[str], *, limit: int) -> list[str]:
    """Runs with a term starting with each of ``words`` (longest first): the runs of the
    longest word (at most ``WORD_CANDIDATES``, one index range scan), narrowed by all the other
    words at once: one read of the candidates' terms through the ``(run, kind, term)`` index.
    Two queries, each bounded by the candidates, however common the words are."""
    candidates = list(dict.fromkeys(terms.filter(_starting("term", words[0]))
                                    .values_list("run_id", flat=True)[:WORD_CANDIDATES]))
    others = set(words[1:])
    if not candidates or not others:
        return candidates[:limit]
    # The other words are compared as ``substr(term, 1, n) = word``, which no index on ``term``
    # can serve, so the only plan is the candidates' own terms by run id. As ``LIKE 'word%'``
    # PostgreSQL could walk a common word's whole prefix range instead whenever its statistics
    # were stale (20-34 ms a word right after a bulk load, against about 5 for this read).
    starts = {f"start_{n}": Substr("term", 1, n) for n in {len(word) for word in others}}
    match = Q()
    for word in others:
        match |= Q(**{f"start_{len(word)}": word})
    found: dict[str, set[str]] = {}
    rows = (RunSearchTerm.objects.order_by().filter(run_id__in=candidates).alias(**starts)
            .filter(match).values_list("run_id", "term"))
    for run_id, term in rows:
        found.setdefault(run_id, set()).update(word for word in others if term.startswith(word))
    return [run_id for run_id in candidates if found.get(run_id, set()) >= others][:limit]


def search_runs(*, text: str, user: Any, limit: int = SEARCH_MATCHES) -> SearchHits:
    """The runs ``user`` may see (DESIGN.md section 6.6) that ``text`` names (DESIGN.md section
    6.8): a run id starting with it, a search term starting with it (case-insensitive), or, for
    several words, a run with a term starting with each of the (up to ``QUERY_WORDS`` longest)
    words.

    Args:
        text: what the user typed (a partial run id, key, path, action or message words).
        user: a Django user; other tenants' runs are never matched.
        limit: at most this many runs per way of matching.

    Returns:
        :class:`SearchHits`; empty for blank text. One query per way of matching, two for
        several words (at most four).
    """
    raw = text.strip()[:TERM_CHARS]
    whole = search_normalize(raw)
    if not whole:
        return SearchHits((), False)
    found: dict[str, None] = {}
    capped = False
    batches: list[list[str]] = []
    if " " not in raw:
        visible = scope_filter(user=user, queryset=Run.objects.order_by())
        batches.append(list(visible.filter(_starting("run_id", raw)).order_by("run_id")
                            .values_list("run_id", flat=True)[:limit]))
    terms = _terms(user)
    # No ORDER BY: the rows come in the prefix index's own order and the scan stops at ``limit``
    # (on PostgreSQL the pattern index cannot serve ORDER BY term, so one would sort every match).
    batches.append(list(terms.filter(_starting("term", whole)).values_list("run_id", flat=True)[:limit]))
    words = sorted(search_words(whole), key=len, reverse=True)[:QUERY_WORDS]
    if len(words) > 1 and " " in raw:
        batches.append(_all_words(terms, words, limit=limit))
    for batch in batches:
        capped = capped or len(batch) >= limit
        found.update(dict.fromkeys(batch))
    return SearchHits(tuple(found), capped)
