"""No comment, docstring, test or document points at a tracker issue instead of giving the reason.

Story: a reader of the repository finds "(issue 13, point 7)" in a test docstring. The tracker is
not in the repository, so the words tell them nothing: the reason a rule exists must be written
where the rule is, or cited by number as a section of the design document or a rule of the
house style. This test reads every text file under
``runtime/``, ``review/``, ``templates/``, ``tests/`` and ``README.md`` and fails, listing
``file:line``, on a reference to an issue: "issue" or "issues" followed by a number (``#`` allowed),
``(issue:`` or ``issue "..."`` quoting one, and "the/this/that issue" standing in for a reason.

Words that merely contain the letters are fine: "issued", "issuer", the ``gateway_tokens issue``
command, "issue a token", Django's "identified no issues". This file, which spells the patterns,
is not scanned.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.repo_text import line_of, repo_citing, scanned_files

REPO = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()

_WORD = "issue"
_REFERENCE = re.compile(
    "|".join((
        rf"\b{_WORD}s?\s*#?\s*\d+",  # issue 13, issue #9, issues 13 and 14
        rf"\({_WORD}\s*:",  # (issue: "Roles")
        rf"\b{_WORD}\s+\"",  # issue "exactly-once actions"
        # "the constant-cost issue"
        rf"\b(?:the|this|that)\s+(?:[\w-]+\s+)?{_WORD}\b(?!\s+(?:a|an|one|it|them|tokens?)\b)",
        rf"\b{_WORD}\)|-\w+\s+{_WORD}\b",  # (exactly-once issue), the exactly-once issue:
    )),
    re.IGNORECASE,
)


def reference_problems(repo: Path = REPO) -> list[str]:
    """``file:line: text`` for every reference to an issue in the scanned files of ``repo``."""
    problems = []
    for path in scanned_files(repo, skip={THIS_FILE}):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in _REFERENCE.finditer(text):
            snippet = " ".join(text[max(0, match.start() - 20) : match.end() + 20].split())
            problems.append(f"{path.relative_to(repo)}:{line_of(text, match.start())}: {snippet!r}")
    return problems


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Story (issue 13, point 7): a worker", True),
        ("fuzzed (issues 13 and 14)", True),
        ("see issue #9", True),
        ("Issue 10 changed this", True),
        ('(issue: "The Django admin stays read-only")', True),
        ('(issue "exactly-once actions", part 2)', True),
        ("the constant-cost issue asks for it", True),
        ("receipts (exactly-once issue)", True),
        ("the approval was issued at noon", False),
        ("the issuer signs", False),
        ("`manage.py gateway_tokens issue RUN_ID` prints a token", False),
        ("an operator can issue one with the action allowed", False),
        ("Issue a token for the run", False),
        ("System check identified no issues (0 silenced).", False),
    ],
)
def test_it_tells_a_reference_from_the_word(tmp_path, text, found):
    assert bool(reference_problems(repo_citing(tmp_path, text))) is found


def test_it_finds_no_issue_reference_in_the_repository():
    problems = reference_problems()
    assert not problems, (
        "references to tracker issues; write the reason instead, or cite the design document's "
        "section or the house style's rule by number:\n" + "\n".join(problems)
    )
