"""Story: the high-water mark lives in a store of its own, always (DESIGN.md section 4.2).

The mark is what makes a restore of the main database fail closed, so there is no mode in which
its compare-and-set runs inside the main database's transaction: settings without a mark store
are refused by name, and a commit's mark moves in a transaction of the mark store's own, after
the main transaction committed (so a crash between the two leaves the mark one behind, which the
next reader completes; tests/runtime/test_mark_completion.py).
"""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.database.routers import HWM_ALIAS, hwm_alias
from runtime.errors import ConfigurationError
from runtime.models import HighWaterMark
from tests.helpers.db_counts import db_counting
from tests.runtime.conftest import advance


def test_it_refuses_settings_that_keep_no_mark_store(monkeypatch) -> None:
    from django.conf import settings

    monkeypatch.delitem(settings.DATABASES, HWM_ALIAS)

    with pytest.raises(ConfigurationError, match="high-water mark store"):
        hwm_alias()


def test_it_routes_the_mark_and_nothing_else_to_its_own_store() -> None:
    from django.db import router

    from runtime.models import Run

    assert hwm_alias() == HWM_ALIAS
    assert router.db_for_write(HighWaterMark) == HWM_ALIAS
    assert router.db_for_write(Run) == DEFAULT_DB_ALIAS


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_it_commits_each_advance_on_the_main_database_and_then_on_the_mark_store(start_run) -> None:
    state, first = start_run()
    run_id = state.identity.run_id

    with db_counting() as counts:
        result = checkpoint_commit(lease=first.lease, state=advance(state, planner_state={"g": 2}),
                                   expected_generation=1)

    assert (counts.transactions, counts.mark_transactions) == (1, 1)
    assert HighWaterMark.objects.using(HWM_ALIAS).get(run_id=run_id).generation == result.generation == 2


@pytest.mark.django_db(databases="__all__", transaction=True)
@pytest.mark.parametrize("expected", [0, 2, 5])
def test_the_marks_compare_and_set_refuses_any_generation_but_the_expected_one(start_run, expected) -> None:
    """The mark's own check, apart from the run row's fence (which would mask it in every commit
    test): a compare-and-set naming another generation than the mark holds moves nothing."""
    from runtime.checkpoints.high_water_marks import hwm_advance
    from runtime.errors import StaleGenerationError
    from runtime.models import Run

    state, first = start_run()
    run_id = state.identity.run_id
    before = HighWaterMark.objects.using(HWM_ALIAS).values_list("generation", "checkpoint_digest").get(run_id=run_id)
    assert before[0] == 1

    with pytest.raises(StaleGenerationError):
        hwm_advance(run=Run.objects.get(run_id=run_id), expected=expected, generation=expected + 1,
                    digest="sha256:" + "1" * 64)

    after = HighWaterMark.objects.using(HWM_ALIAS).values_list("generation", "checkpoint_digest").get(run_id=run_id)
    assert after == before
