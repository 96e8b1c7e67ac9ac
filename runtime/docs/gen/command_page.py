"""One management command's reference section, read from its argument parser (gen/reference.py)."""

from __future__ import annotations

import argparse

from django.core.management import get_commands, load_command_class

# Options every Django command has; the reference lists each command's own.
DJANGO_OPTIONS = {"--version", "--verbosity", "--settings", "--pythonpath", "--traceback", "--no-color",
                  "--force-color", "--skip-checks", "--help"}


def _parser(name: str) -> tuple[object, argparse.ArgumentParser]:
    command = load_command_class(get_commands()[name], name)
    return command, command.create_parser("manage.py", name)


def summary(name: str) -> str:
    """The command's ``help`` text up to the end of its first sentence outside a code span."""
    command, _ = _parser(name)
    text = " ".join(str(command.help or "").split())
    end = 0
    while True:
        end = text.find(". ", end + 1)
        if end < 0:
            return text
        if text[:end].count("`") % 2 == 0:
            return text[: end + 1]


def prose(text: object) -> str:
    """``text`` on one line, safe in Markdown: ``<`` and ``>`` outside code spans are escaped
    (``<point>`` would otherwise be read as an HTML tag and vanish)."""
    parts = " ".join(str(text).split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: object) -> str:
    return prose(text).replace("|", "\\|")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or set(action.option_strings) & DJANGO_OPTIONS:
            continue
        if action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest.upper()}`"
        if action.nargs in ("*", "+"):
            name += " ..."
        default = action.default
        shown = "" if default in (None, argparse.SUPPRESS, False, [], "") else f"`{default}`"
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        rows.append(f"| {name} | {_cell(action.help or '')} | {shown} | {choices} |")
    if not rows:
        return ["No arguments of its own.", ""]
    return ["| argument | what it does | default | choices |", "|---|---|---|---|", *rows, ""]


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().split()).removeprefix("usage: ")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def render(name: str) -> str:
    """Markdown for ``manage.py NAME``: its help, usage, its own arguments, each subcommand's."""
    command, parser = _parser(name)
    lines = [f"## {name}", "", prose(command.help or ""), "", "```text", _usage(parser), "```", ""]
    lines += _arguments(parser)
    for sub, subparser in _subcommands(parser):
        lines += [f"### {name} {sub}", ""]
        if subparser.description:
            lines += [prose(subparser.description), ""]
        lines += ["```text", _usage(subparser), "```", "", *_arguments(subparser)]
        for inner, innerparser in _subcommands(subparser):
            lines += [f"#### {name} {sub} {inner}", "", "```text", _usage(innerparser), "```", "",
                      *_arguments(innerparser)]
    return "\n".join(lines) + "\n"
