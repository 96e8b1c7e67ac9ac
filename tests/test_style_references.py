"""Every citation of the house style names a rule that exists in ``runtime/STYLE.md``.

Story: a contributor reads a docstring that says "STYLE.md rule 7" and opens the style document
to learn the habit. The rule must be there. Code, templates, tests and the README cite the
document as ``STYLE.md rule N``; this test finds every such citation in ``runtime/``,
``review/``, ``templates/``, ``tests/`` and ``README.md`` and fails, listing ``file:line``, when
one names a rule the document does not have, or when a citation still uses the old unnumbered
"house style N" form, which pointed at a document outside the repository.

Accepted forms (the word ``rule``/``rules`` is required; separators may wrap onto the next line,
also inside a ``#`` comment)::

    STYLE.md rule 4
    STYLE.md rules 4 and 7
    STYLE.md rules 3, 13

A Markdown link to the document (``[text](runtime/STYLE.md)``) is a link to the whole document
and is allowed. The style document itself and this file (whose patterns spell the name) are not
scanned.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.repo_text import assert_judged, line_of, repo_citing, scanned_files

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = REPO / "runtime" / "STYLE.md"
THIS_FILE = Path(__file__).resolve()

NAME = "STYLE.md"
_SEP = r"[\s#]+"
_LIST_JOIN = r"(?:[\s#]*,[\s#]*(?:and[\s#]+)?|[\s#]+and[\s#]+)"
_CITATION = re.compile(
    re.escape(NAME) + r"(?P<rest>" + _SEP + r"rules?" + _SEP
    + r"(?P<numbers>\d+(?:" + _LIST_JOIN + r"\d+)*)" + r")?"
)
_LINK_TARGET = re.compile(r"\]\([^)\s]*" + re.escape(NAME) + r"(?:#[^)\s]*)?\)")
_OLD_FORM = re.compile(r"\bhouse" + r"[\s#]+style[\s#]*\d+", re.IGNORECASE)
_RULE_HEADING = re.compile(r"^## (?P<number>\d+)\. (?P<title>.+?)\s*$")


def document_rules(document: Path = DOCUMENT) -> list[str]:
    """The numbers of the ``## N. Title`` headings of ``document``, in order."""
    return [m["number"] for line in document.read_text(encoding="utf-8").splitlines()
            if (m := _RULE_HEADING.match(line))]


def citation_problems(repo: Path = REPO, document: Path = DOCUMENT) -> list[str]:
    """``file:line: problem`` for every style citation under ``repo`` that names no existing
    rule of ``document``, and for every citation still in the old "house style N" form."""
    rules = set(document_rules(document))
    problems = []
    for path in scanned_files(repo, skip={document, THIS_FILE}):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        where = path.relative_to(repo)
        for match in _OLD_FORM.finditer(text):
            problems.append(f"{where}:{line_of(text, match.start())}: old form, write 'STYLE.md rule N': "
                            f"{match.group(0)!r}")
        if NAME not in text:
            continue
        links = {m.start() + m.group(0).index(NAME) for m in _LINK_TARGET.finditer(text)}
        for match in _CITATION.finditer(text):
            if match.start() in links:
                continue
            line = line_of(text, match.start())
            snippet = " ".join(text[match.start() : match.start() + 40].split())
            if match["rest"] is None:
                problems.append(f"{where}:{line}: names no rule: {snippet!r}")
                continue
            cited = re.findall(r"\d+", match["numbers"])
            missing = [n for n in cited if n not in rules]
            if missing:
                problems.append(f"{where}:{line}: no rule {', '.join(missing)}: {snippet!r}")
    return problems


def test_it_numbers_the_rules_in_order():
    rules = document_rules()
    assert rules, "runtime/STYLE.md has no '## N. Title' rules"
    assert rules == [str(n) for n in range(1, len(rules) + 1)], f"rules are numbered {rules}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("see STYLE.md rule 4.", None),
        ("(STYLE.md\n    rule 7: inside the caller's transaction)", None),
        ("# STYLE.md rules\n    # 1 and 3", None),
        ("(STYLE.md rules 3, 13)", None),
        ("[the style](runtime/STYLE.md)", None),
        ("STYLE.md has habits", "names no rule"),
        ("STYLE.md rule 99", "no rule 99"),
        ("STYLE.md rules 2 and 98", "no rule 98"),
        ("(house style 3)", "old form"),
    ],
)
def test_it_judges_each_form_of_citation(tmp_path, text, problem):
    assert_judged(citation_problems(repo=repo_citing(tmp_path, text), document=DOCUMENT), problem)


def test_it_finds_every_citation_in_the_repository():
    problems = citation_problems()
    assert not problems, (
        "citations of the house style that name no rule of runtime/STYLE.md "
        "(write 'STYLE.md rule N'):\n" + "\n".join(problems)
    )
