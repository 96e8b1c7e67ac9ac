"""Where a command writes the document it made: stdout, or the file its ``--out`` names
(``manage.py export_bundle``, ``manage.py keys export-public``)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


def document_write(cmd: BaseCommand, *, text: str, out: str, what: str) -> None:
    """Write ``text`` to stdout when ``out`` is ``"-"``; else to the file ``out`` (UTF-8), then
    say ``wrote <what> to <out>`` on stderr, so stdout stays empty for a pipeline.

    Raises:
        CommandError: the file cannot be written (exit 1, the reason in the message).
    """
    if out == "-":
        cmd.stdout.write(text, ending="")
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {out}: {exc.strerror}") from None
    cmd.stderr.write(f"wrote {what} to {out}")
