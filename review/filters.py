"""The one parser of filter query strings: the runs list's and the trace browser's ``?...``
parameters become a typed filter (``RunFilters``, ``TraceFilters``) and a page cursor, parsed
once here (DESIGN.md section 6.8).

A filter page declares its fields on a :class:`QueryFilterForm` and names the dataclass they
fill (``FILTERS``); :func:`query_parse` binds the query string, validates it and returns a
:class:`ParsedQuery`. The rules are the same on every filter page:

* a value is stripped and checked by its form field, and arrives typed (a day is a ``date``);
  an empty one is left out, so the dataclass default ("any") applies;
* a bad value is a form error shown next to its field, and the page answers ``400``; the valid
  fields still filter (nothing else is silently dropped);
* a parameter the page does not know is an error too (a misspelt ``created_from`` must not look
  like a working filter);
* the page cursor (``CURSOR``) is a checked form field too: a refused one means the first page.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from django import forms
from django.http import QueryDict

from review.queries.runs_list import DEFAULT_SORT, SORTS, RunFilters
from review.queries.trace import TraceFilters
from runtime.models import Phase

F = TypeVar("F")

_DAY_ERRORS = {"invalid": "enter a day as YYYY-MM-DD (UTC)"}


class QueryFilterForm(forms.Form):
    """A GET filter form whose valid fields fill a typed filter.

    Class attributes:
        FILTERS: the frozen dataclass :meth:`filters` builds.
        FIELD_NAMES: dataclass field -> form field, where the two names differ.
        CURSOR: the form field holding the page cursor (``""``: the page has none).
        EXTRA: parameters the page reads outside the form (polling, the chain check).
    """

    FILTERS: ClassVar[type[Any]]
    FIELD_NAMES: ClassVar[dict[str, str]] = {}
    CURSOR: ClassVar[str] = ""
    EXTRA: ClassVar[frozenset[str]] = frozenset()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        unknown = sorted(set(self.data) - set(self.fields) - self.EXTRA)
        if unknown:
            known = ", ".join(sorted({*self.fields, *self.EXTRA} - {"since"}))
            raise forms.ValidationError(
                f"unknown filter: {', '.join(unknown)}; this page takes {known}")
        return data

    def filters(self) -> Any:
        """The valid, non-empty fields as a ``FILTERS`` instance (strings stripped; a field
        that is empty or refused keeps the dataclass default)."""
        data = self._valid_data()
        values = {}
        for field in dataclasses.fields(self.FILTERS):
            value = data.get(self.FIELD_NAMES.get(field.name, field.name))
            if isinstance(value, str):
                value = value.strip()
            if value not in (None, ""):
                values[field.name] = value
        return self.FILTERS(**values)

    def cursor(self) -> str:
        """The page cursor if it is valid, else ``""`` (the first page)."""
        return (self._valid_data().get(self.CURSOR) or "") if self.CURSOR else ""

    def _valid_data(self) -> dict[str, Any]:
        self.is_valid()
        return getattr(self, "cleaned_data", {})


class RunFilterForm(QueryFilterForm):
    """Runs list filters and order (GET, DESIGN.md section 6.8) -> :class:`RunFilters`."""

    FILTERS = RunFilters
    FIELD_NAMES = {"date_from": "from", "date_to": "to"}
    CURSOR = "after"
    EXTRA = frozenset({"since"})

    q = forms.CharField(max_length=200, required=False, label="Search")
    key = forms.CharField(max_length=200, required=False, label="Idempotency key")
    phase = forms.ChoiceField(choices=[("", "any phase"), *Phase.choices], required=False)
    tenant = forms.CharField(max_length=200, required=False)
    task = forms.CharField(max_length=200, required=False)
    date_field = forms.ChoiceField(choices=[("created", "created"), ("updated", "updated")],
                                   required=False, label="Date")
    sort = forms.ChoiceField(choices=[(s, s) for key in SORTS for s in (key, f"-{key}")], required=False)
    after = forms.CharField(max_length=64, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # ``from`` is a Python keyword: these two are added by name.
        self.fields["from"] = forms.DateField(required=False, label="From (UTC)", error_messages=_DAY_ERRORS,
                                              input_formats=["%Y-%m-%d"])
        self.fields["to"] = forms.DateField(required=False, label="To (UTC, inclusive)",
                                            error_messages=_DAY_ERRORS, input_formats=["%Y-%m-%d"])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("from"), data.get("to")
        if start and end and end < start:
            self.add_error("to", "the range ends before it starts; swap the two days")
        return data

    def sort_value(self) -> str:
        """The order asked for (``key`` or ``-key``), ``DEFAULT_SORT`` when none or refused."""
        return self._valid_data().get("sort") or DEFAULT_SORT


class TraceFilterForm(QueryFilterForm):
    """Trace evidence browser filters (GET): a partial run id, content search, event type,
    environment version -> :class:`TraceFilters`; ``before``: the page cursor (an event id)."""

    FILTERS = TraceFilters
    CURSOR = "before"
    EXTRA = frozenset({"verify"})

    run = forms.CharField(max_length=64, required=False, label="Run id")
    q = forms.CharField(max_length=200, required=False, label="Search")
    event_type = forms.CharField(max_length=64, required=False, label="Event type")
    environment_version = forms.CharField(
        max_length=200, required=False, label="Environment version"
    )
    before = forms.RegexField(regex=r"^[0-9]{1,19}$", required=False,
                              error_messages={"invalid": "a page cursor is an event id (digits); "
                                                         "go back to the first page"})


@dataclass(frozen=True)
class ParsedQuery(Generic[F]):
    """A filter page's query string, parsed once.

    Attributes:
        form: the bound form (its errors are shown next to the fields).
        filters: the typed filter of the valid fields.
        cursor: the page cursor, ``""`` for the first page (or a refused cursor).
        valid: every parameter was accepted.
    """

    form: QueryFilterForm
    filters: F
    cursor: str
    valid: bool

    @property
    def status(self) -> int:
        """What a whole page answers: 200, or 400 when a parameter was refused."""
        return 200 if self.valid else 400


def query_parse(form_class: type[QueryFilterForm], query: QueryDict) -> ParsedQuery[Any]:
    """Parse ``query`` (``request.GET``) with ``form_class`` into a :class:`ParsedQuery`.

    Never raises for bad input: a refused value is a form error and ``valid`` is False.
    """
    form = form_class(query)
    valid = form.is_valid()
    return ParsedQuery(form=form, filters=form.filters(), cursor=form.cursor(), valid=valid)
