"""The design document as the site's concepts, one page per chapter, generated at build time.

The design document in ``runtime/`` stays the one source: each build splits it at its chapter headings into
``concepts/design/<chapter>.md`` and writes an index that links every numbered section, so the
site never holds a copy that could fall behind. The house style and the changelog it links to
are included the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import mkdocs_gen_files
from markdown.extensions.toc import slugify

RUNTIME = Path(__file__).resolve().parents[2]
DESIGN = (RUNTIME / "DESIGN").with_suffix(".md")
LINKS = {"](STYLE.md)": "](../style.md)", "](CHANGELOG.md)": "](../changelog.md)"}


def _chapters(text: str) -> list[tuple[str, str]]:
    """``(title, body)`` per ``## `` heading; the text before the first one joins the first chapter."""
    parts = re.split(r"(?m)^(?=## )", text)
    head, chapters = parts[0], parts[1:]
    out = []
    for i, chapter in enumerate(chapters):
        title = chapter.splitlines()[0][3:].strip()
        out.append((title, (head if i == 0 else "") + chapter))
    return out


def _file_name(title: str) -> str:
    number = re.match(r"(\d+)\.", title)
    return (f"{int(number.group(1)):02d}-" if number else "") + slugify(re.sub(r"^\d+\.\s*", "", title), "-") + ".md"


def write_all() -> None:
    """Write the design chapters, their index, the style guide and the changelog pages."""
    text = DESIGN.read_text(encoding="utf-8")
    for old, new in LINKS.items():
        text = text.replace(old, new)
    index = ["# Concepts", "",
             "The design document, one page per chapter, linked here section by section. The code "
             "cites these sections by number (for example \"DESIGN.md section 4.3\").", ""]
    for title, body in _chapters(text):
        name = _file_name(title)
        body = re.sub(r"(?m)^## ", "# ", body, count=1) if not body.startswith("# ") else body
        with mkdocs_gen_files.open(f"concepts/design/{name}", "w") as out:
            out.write(body)
        index.append(f"- [{title}](design/{name})")
        for line in body.splitlines():
            if line.startswith("### "):
                sub = line[4:].strip()
                index.append(f"    - [{sub}](design/{name}#{slugify(sub, '-')})")
    index += ["", "Beside it: [the house style](style.md) and [the changelog](changelog.md).", ""]
    with mkdocs_gen_files.open("concepts/index.md", "w") as out:
        out.write("\n".join(index))
    for stem, page in (("STYLE", "style.md"), ("CHANGELOG", "changelog.md")):
        body = (RUNTIME / stem).with_suffix(".md").read_text(encoding="utf-8")
        body = (body.replace("](DESIGN.md)", "](index.md)").replace("](STYLE.md)", "](style.md)")
                .replace("](CHANGELOG.md)", "](changelog.md)"))
        with mkdocs_gen_files.open(f"concepts/{page}", "w") as out:
            out.write(body)
