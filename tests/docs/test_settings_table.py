"""Story: a setting added to settings.py without a row in the table would be missing from the docs.

``runtime/project/environment.py`` is the one table of environment variables the settings
reference is generated from; ``settings.py`` reads its variables through it. These checks keep
the two in step: every variable name ``settings.py`` names is a row, every row of the settings
part is read there, and a row's literal default is what Django gets when the variable is unset.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from django.conf import settings

from runtime.project.environment import VARIABLES, VARIABLES_BY_NAME

SETTINGS = Path(__file__).resolve().parents[2] / "runtime" / "project" / "settings.py"
NAME = re.compile(r"^(RATCHET|DJANGO|CELERY)_[A-Z0-9_]+$|^(DATABASE_URL|ALLOWED_HOSTS|CSRF_TRUSTED_ORIGINS)$")
# Django's test set-up appends "testserver" to ALLOWED_HOSTS, so it cannot be compared here.
CHANGED_BY_THE_TEST_RUNNER = {"ALLOWED_HOSTS"}


def names_in_settings() -> set[str]:
    """String constants of settings.py that are environment variable names (first call arguments)."""
    tree = ast.parse(SETTINGS.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if isinstance(value, str) and NAME.match(value):
                found.add(value)
    return found


def test_every_variable_settings_reads_has_a_row() -> None:
    missing = sorted(names_in_settings() - set(VARIABLES_BY_NAME))
    assert not missing, f"add a row to runtime/project/environment.py for: {missing}"


def test_every_row_is_read_by_settings() -> None:
    unread = sorted(set(VARIABLES_BY_NAME) - names_in_settings())
    assert not unread, f"rows settings.py never reads: {unread}"


def test_a_literal_default_is_what_django_gets_when_the_variable_is_unset() -> None:
    checked = 0
    for row in VARIABLES:
        name = row.setting or row.name
        if (row.default is None or row.name in os.environ or row.name in CHANGED_BY_THE_TEST_RUNNER
                or row.setting or not hasattr(settings, name)):
            continue
        assert getattr(settings, name) == row.default, row.name
        checked += 1
    assert checked > 30
