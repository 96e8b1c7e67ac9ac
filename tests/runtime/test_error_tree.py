"""The shape of the exception tree in ``runtime/errors/``.

Story: an operator reads an error in a log or an API answer and must know what kind of failure it
is, which run or key it is about, what to do and whether waiting helps. An engineer adds an error
by copying the nearest one. These tests keep the tree a reader can hold: a handful of category
bases under the root, every error under one of them with a hint and a boolean ``retryable``,
every error surviving a pickle round trip (errors cross process boundaries), and one definition
per name so ``from runtime.errors import X`` is never ambiguous.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

import runtime.errors
from runtime.errors import CATEGORIES, REDACTED, GatewayError, RatchetError

MAX_CATEGORIES = 9
PACKAGE_DIR = Path(runtime.errors.__file__).parent


def _all_error_classes() -> list[type[RatchetError]]:
    """The root and every subclass defined in the package, depth first, each once."""
    seen: dict[type[RatchetError], None] = {}
    todo: list[type[RatchetError]] = [RatchetError]
    while todo:
        cls = todo.pop()
        if cls in seen or not cls.__module__.startswith("runtime.errors"):
            continue
        seen[cls] = None
        todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: c.__name__)


ERRORS = _all_error_classes()
CONCRETE = [cls for cls in ERRORS if cls is not RatchetError and cls not in CATEGORIES]


def test_it_keeps_few_categories_directly_under_the_root():
    direct = {cls for cls in ERRORS if RatchetError in cls.__bases__}
    assert direct == set(CATEGORIES), sorted(c.__name__ for c in direct ^ set(CATEGORIES))
    assert len(CATEGORIES) <= MAX_CATEGORIES


def test_it_names_each_category_once():
    names = [cls.category for cls in CATEGORIES]
    assert all(names) and len(set(names)) == len(names), names


@pytest.mark.parametrize("cls", CONCRETE, ids=lambda cls: cls.__name__)
def test_it_puts_every_error_under_a_category(cls):
    categories = [base for base in cls.__mro__ if base in CATEGORIES]
    assert categories, f"{cls.__name__} sits directly under RatchetError without a category base"
    assert cls.category == categories[0].category


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_it_gives_every_error_a_hint_and_a_boolean_retryable(cls):
    assert isinstance(cls.hint, str) and cls.hint.strip(), f"{cls.__name__} has no hint"
    assert type(cls.retryable) is bool, f"{cls.__name__}.retryable is {cls.retryable!r}"
    assert isinstance(cls.default_message, str) and cls.default_message.strip()


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_it_pickles_every_error_with_its_attributes(cls):
    error = cls("the step could not go on", run_id="run-7", generation=3, key_id="ck-2")

    again = pickle.loads(pickle.dumps(error))

    assert type(again) is cls
    assert (again.message, again.context) == ("the step could not go on", {"run_id": "run-7", "generation": 3,
                                                                             "key_id": "ck-2"})
    assert str(again) == str(error)
    assert (again.hint, again.retryable, again.category) == (error.hint, error.retryable, error.category)
    if isinstance(error, GatewayError):
        assert (again.code, again.status) == (error.code, error.status)


def test_it_uses_the_default_message_and_shows_identifiers_and_hint():
    error = runtime.errors.LeaseHeldError(run_id="run-1", holder="worker-a", unused=None)

    assert error.message == runtime.errors.LeaseHeldError.default_message
    assert error.context == {"run_id": "run-1", "holder": "worker-a"}
    assert str(error) == (f"{error.message} (holder=worker-a, run_id=run-1). Hint: {error.hint}")
    assert error.retryable is True and error.category == "ownership"


def test_it_never_keeps_a_secret_passed_as_context():
    error = runtime.errors.GatewayTokenError(run_id="run-1", token="rgw_live_s3cr3t", api_key="sk-123")

    shown = str(error) + repr(error) + repr(pickle.dumps(error))
    assert "s3cr3t" not in shown and "sk-123" not in shown
    assert error.context == {"run_id": "run-1", "token": REDACTED, "api_key": REDACTED}


def test_it_defines_each_error_name_once_and_exports_it():
    defined: dict[str, list[str]] = {}
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(path.name)
    twice = {name: files for name, files in defined.items() if len(files) > 1}
    assert not twice, twice
    for cls in ERRORS:
        assert getattr(runtime.errors, cls.__name__) is cls
        assert cls.__name__ in runtime.errors.__all__
    assert len(ERRORS) == len(defined)


def test_it_draws_every_category_in_the_package_docstring():
    tree = runtime.errors.__doc__ or ""
    missing = [cls.__name__ for cls in CATEGORIES if f"|-- {cls.__name__}" not in tree
               and f"`-- {cls.__name__}" not in tree]
    assert not missing, missing

