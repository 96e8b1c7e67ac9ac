"""Every citation of the design document names a section that exists in ``runtime/DESIGN.md``.

Story: a platform engineer reads a docstring that says "see section 4.2" and opens the design
document. The section must be there, and must be the one meant. Code, templates, tests and the
README cite the document as ``DESIGN.md section N``; this test finds every such citation in
``runtime/``, ``review/``, ``templates/``, ``tests/`` and ``README.md`` and fails, listing
``file:line``, when one does not name a section or names one the document does not have.

Accepted forms (the words ``section``/``sections`` are required; separators may wrap onto the
next line, also inside a ``#`` comment)::

    DESIGN.md section 4
    DESIGN.md section 4.2
    DESIGN.md sections 4 and 5
    DESIGN.md sections 3, 6
    DESIGN.md sections 3-5 and 8          (a range of whole sections)
    DESIGN.md section "Approvals and the review state machine"   (a heading, number optional)

Not accepted: a bare ``DESIGN.md``, ``DESIGN.md 5``, ``DESIGN.md s.4``, or a number with no
section behind it. A Markdown link whose target is the document (``[text](runtime/DESIGN.md)``)
is a link to the whole document, not a citation, and is allowed. The design document itself and
this file (whose patterns spell the name) are not scanned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.repo_text import assert_judged, line_of, repo_citing, scanned_files

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = REPO / "runtime" / "DESIGN.md"
THIS_FILE = Path(__file__).resolve()

NAME = "DESIGN.md"
_SEP = r"[\s#]+"
"""Between words: whitespace, including a line break and a ``#`` comment marker after it."""
_NUMBER = r"\d+(?:\.\d+)*"
_LIST_JOIN = r"(?:[\s#]*,[\s#]*(?:and[\s#]+)?|[\s#]+and[\s#]+|[\s#]*[-\u2013][\s#]*)"
_CITATION = re.compile(
    re.escape(NAME)
    + r"(?P<rest>"
    + _SEP
    + r"sections?"
    + _SEP
    + r"(?:(?P<numbers>"
    + _NUMBER
    + r"(?:"
    + _LIST_JOIN
    + _NUMBER
    + r")*)"
    + r"|\"(?P<heading>[^\"\n]+)\")"
    + r")?"
)
_LINK_TARGET = re.compile(r"\]\([^)\s]*" + re.escape(NAME) + r"(?:#[^)\s]*)?\)")
_SECTION_HEADING = re.compile(r"^## (?P<number>\d+)\. (?P<title>.+?)\s*$")
_SUBSECTION_HEADING = re.compile(r"^### (?P<number>\d+\.\d+)\.? (?P<title>.+?)\s*$")


@dataclass(frozen=True)
class Heading:
    number: str
    title: str


def document_headings(document: Path = DOCUMENT) -> list[Heading]:
    """Numbered ``## N. Title`` and ``### N.M Title`` headings of ``document``, in order."""
    headings = []
    for line in document.read_text(encoding="utf-8").splitlines():
        match = _SECTION_HEADING.match(line) or _SUBSECTION_HEADING.match(line)
        if match:
            headings.append(Heading(match["number"], match["title"]))
    return headings


def _expand(numbers: str) -> list[str]:
    """``"3-5 and 8"`` -> ``["3", "4", "5", "8"]``. Ranges run between whole sections only; a
    range of subsections is kept as one token, which matches no heading."""
    text = re.sub(r"[\s#]*[-\u2013][\s#]*", "-", numbers.strip())
    found: list[str] = []
    for token in re.split(r"[\s#]*,[\s#]*(?:and[\s#]+)?|[\s#]+and[\s#]+", text):
        low, dash, high = token.partition("-")
        if dash and low.isdigit() and high.isdigit() and int(low) <= int(high):
            found.extend(str(n) for n in range(int(low), int(high) + 1))
        else:
            found.append(token)
    return found


def citation_problems(repo: Path = REPO, document: Path = DOCUMENT) -> list[str]:
    """``file:line: problem`` for every citation under ``repo`` that does not name an existing
    section of ``document``."""
    headings = document_headings(document)
    numbers = {h.number for h in headings}
    titles = {h.title.casefold() for h in headings} | {f"{h.number}. {h.title}".casefold() for h in headings}
    problems = []
    for path in scanned_files(repo, skip={document, THIS_FILE}):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if NAME not in text:
            continue
        links = {m.start() + m.group(0).index(NAME) for m in _LINK_TARGET.finditer(text)}
        where = path.relative_to(repo)
        for match in _CITATION.finditer(text):
            if match.start() in links:
                continue
            line = line_of(text, match.start())
            snippet = " ".join(text[match.start() : match.start() + 60].split())
            if match["rest"] is None:
                problems.append(f"{where}:{line}: names no section: {snippet!r}")
                continue
            if match["heading"] is not None:
                if match["heading"].casefold() not in titles:
                    problems.append(f"{where}:{line}: no heading {match['heading']!r}: {snippet!r}")
                continue
            missing = [n for n in _expand(match["numbers"]) if n not in numbers]
            if missing:
                problems.append(f"{where}:{line}: no section {', '.join(missing)}: {snippet!r}")
    return problems


def test_it_numbers_the_design_document_sections_in_order():
    headings = document_headings()
    top = [h.number for h in headings if "." not in h.number]
    assert top == [str(n) for n in range(1, len(top) + 1)], f"sections are numbered {top}"
    assert len(top) >= 8, "sections 1-8 are cited across the code"
    parent = None
    expected_sub = 1
    for heading in headings:
        if "." not in heading.number:
            parent, expected_sub = heading.number, 1
            continue
        assert heading.number == f"{parent}.{expected_sub}", (
            f"subsection {heading.number} {heading.title!r} follows section {parent}.{expected_sub - 1}"
        )
        expected_sub += 1


@pytest.mark.parametrize(
    ("cited", "expected"),
    [
        ("3-5 and 8", ["3", "4", "5", "8"]),
        ("4 and 5", ["4", "5"]),
        ("3, 6", ["3", "6"]),
        ("4.2", ["4.2"]),
        ("5-7", ["5", "6", "7"]),
        ("1, 6 and 8", ["1", "6", "8"]),
    ],
)
def test_it_reads_lists_and_ranges_of_sections(cited, expected):
    assert _expand(cited) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("see DESIGN.md section 4.", None),
        ("(DESIGN.md\n    section 6, trust boundary)", None),
        ("# DESIGN.md section\n    # 5: never retry", None),
        ("(DESIGN.md sections 3-5 and 8)", None),
        ('DESIGN.md section "Failures that are tests"', None),
        ("[the design](runtime/DESIGN.md)", None),
        ("(DESIGN.md 5).", "names no section"),
        ("(DESIGN.md s.4).", "names no section"),
        ("DESIGN.md has operators", "names no section"),
        ("DESIGN.md section 42", "no section 42"),
        ("DESIGN.md section 4.99", "no section 4.99"),
        ('DESIGN.md section "Nothing like this"', "no heading"),
    ],
)
def test_it_judges_each_form_of_citation(tmp_path, text, problem):
    assert_judged(citation_problems(repo=repo_citing(tmp_path, text), document=DOCUMENT), problem)


def test_it_finds_every_citation_in_the_document():
    problems = citation_problems()
    assert not problems, (
        "citations of the design document that name no existing section of runtime/DESIGN.md "
        "(write 'DESIGN.md section N'):\n" + "\n".join(problems)
    )
