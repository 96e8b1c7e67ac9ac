"""The one filter parser (``review.filters``): the runs list's and the trace browser's query
strings become typed filters and a page cursor by the same rules (DESIGN.md section 6.8)."""

from __future__ import annotations

from datetime import date

from django.http import QueryDict

from review.filters import RunFilterForm, TraceFilterForm, query_parse
from review.queries.runs_list import DEFAULT_SORT, RunFilters
from review.queries.trace import TraceFilters


def test_it_parses_the_runs_list_query_into_typed_filters() -> None:
    parsed = query_parse(RunFilterForm, QueryDict(
        "phase=running&tenant=%20acme%20&q=&from=2026-01-02&to=2026-01-03&after=run-9&sort=-tenant"))

    assert parsed.valid and parsed.status == 200
    assert parsed.filters == RunFilters(phase="running", tenant="acme", date_from=date(2026, 1, 2),
                                        date_to=date(2026, 1, 3))
    assert parsed.filters.date_field == "created", "an empty field keeps the filter's default"
    assert parsed.cursor == "run-9"
    assert parsed.form.sort_value() == "-tenant"


def test_it_parses_the_trace_query_by_the_same_rules() -> None:
    parsed = query_parse(TraceFilterForm, QueryDict("run=%20merge-&event_type=write.executed&before=120"))

    assert parsed.valid
    assert parsed.filters == TraceFilters(run="merge-", event_type="write.executed")
    assert parsed.cursor == "120"


def test_it_keeps_the_valid_fields_and_answers_400_for_a_refused_value() -> None:
    runs = query_parse(RunFilterForm, QueryDict("tenant=acme&from=yesterday&sort=sideways"))
    trace = query_parse(TraceFilterForm, QueryDict("event_type=x&before=not-an-id"))

    assert not runs.valid and runs.status == 400
    assert runs.filters == RunFilters(tenant="acme")
    assert "from" in runs.form.errors and runs.form.sort_value() == DEFAULT_SORT
    assert not trace.valid and trace.status == 400
    assert trace.filters == TraceFilters(event_type="x")
    assert trace.cursor == "", "a refused cursor is the first page"


def test_it_names_a_parameter_the_page_does_not_know() -> None:
    for form, query in ((RunFilterForm, "created_from=2026-01-01"), (TraceFilterForm, "runid=r1")):
        parsed = query_parse(form, QueryDict(query))
        assert not parsed.valid
        assert "unknown filter" in str(parsed.form.non_field_errors())


def test_it_accepts_the_parameters_each_page_reads_outside_the_form() -> None:
    assert query_parse(RunFilterForm, QueryDict("since=abc")).valid
    assert query_parse(TraceFilterForm, QueryDict("verify=chain")).valid
    assert not query_parse(TraceFilterForm, QueryDict("since=abc")).valid


def test_it_refuses_a_date_range_that_ends_before_it_starts() -> None:
    parsed = query_parse(RunFilterForm, QueryDict("from=2026-02-01&to=2026-01-01"))

    assert not parsed.valid
    assert "the range ends before it starts" in str(parsed.form.errors["to"])
    assert parsed.filters.date_to is None
