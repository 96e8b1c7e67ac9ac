"""Story: a typo in a numeric option is a usage error (exit 2), never a silent run.

A fresh user typed ``manage.py resume RUN --wait nan``, ``--wait -1`` and ``manage.py run
TASK --max-steps -1``: each was accepted and the command did something undefined. Every
numeric option of the runtime's commands now goes through ``runtime.management.cli_numbers``:
``nan``, ``inf``, negative numbers, and ``0`` where it means nothing are refused while the
arguments are parsed, naming the option, before anything is opened or created (DESIGN.md
section 7).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

from runtime.models import Run
from tests.engine.support import write_scripted_task
from tests.helpers.procs import run_manage

# Commands whose numeric options other parts of the project own and check themselves.
NOT_HERE = {"chaos", "admission", "combinations", "gateway", "gateway_tokens", "bench_gateway"}

APPROVE = ["approve", "RUN", "--approver", "olivia", "--fingerprint", "sha256:" + "0" * 64]

REFUSED = [
    ("resume", ["RUN", "--wait", "nan"], "--wait"),
    ("resume", ["RUN", "--wait", "-1"], "--wait"),
    ("resume", ["RUN", "--wait", "inf"], "--wait"),
    ("resume", ["RUN", "--wait", "1e999"], "--wait"),
    ("resume", ["RUN", "--max-steps", "-1"], "--max-steps"),
    ("resume", ["RUN", "--max-steps", "0"], "--max-steps"),
    ("resume", ["--all-orphaned", "--jobs", "0"], "--jobs"),
    ("run", ["task.toml", "--max-steps", "-1"], "--max-steps"),
    ("run", ["task.toml", "--max-steps", "0"], "--max-steps"),
    ("run", ["task.toml", "--max-steps", "inf"], "--max-steps"),
    ("run", ["task.toml", "--max-steps", "2.5"], "--max-steps"),
    ("runs", ["--limit", "-1"], "--limit"),
    ("runs", ["--limit", "0"], "--limit"),
    ("checkpoint", ["show", "RUN", "--generation", "-1"], "--generation"),
    ("approvals", [*APPROVE, "--ttl", "nan"], "--ttl"),
    ("approvals", [*APPROVE, "--ttl", "-5"], "--ttl"),
    ("approvals", [*APPROVE, "--ttl", "0"], "--ttl"),
    ("bench", ["--repeat", "0"], "--repeat"),
    ("bench", ["--commits", "-3"], "--commits"),
    ("bench", ["--orphans", "0"], "--orphans"),
    ("bench", ["--long-run-steps", "-1"], "--long-run-steps"),
    ("bench", ["--long-run-seconds", "nan"], "--long-run-seconds"),
    ("demo", ["--port", "0"], "--port"),
    ("demo", ["--port", "70000"], "--port"),
    ("demo", ["--concurrency", "0"], "--concurrency"),
    ("replay_check", ["repo", "--kills", "-1"], "--kills"),
    ("replay_check", ["repo", "--lease-seconds", "0"], "--lease-seconds"),
    ("replay_check", ["repo", "--git-share", "nan"], "--git-share"),
    ("replay_check", ["repo", "--git-share", "1.5"], "--git-share"),
    ("replay_check", ["repo", "--child-timeout", "inf"], "--child-timeout"),
    ("worker", ["--concurrency", "0"], "--concurrency"),
]


def _parser(name: str) -> argparse.ArgumentParser:
    """The command's parser as ``manage.py`` builds it (argparse errors exit 2, as on a terminal)."""
    command = load_command_class(get_commands()[name], name)
    command._called_from_command_line = True
    return command.create_parser("manage.py", name)


def _all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    actions = []
    for action in parser._actions:
        actions.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                actions.extend(_all_actions(sub))
    return actions


@pytest.mark.parametrize(("name", "args", "option"), REFUSED, ids=[f"{n} {' '.join(a[-2:])}" for n, a, _ in REFUSED])
def test_it_refuses_a_meaningless_number_as_a_usage_error(name: str, args: list[str], option: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        _parser(name).parse_args(args)

    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: manage.py ")
    assert f"argument {option}: " in err and args[-1] in err


def test_it_still_takes_the_meaningful_edge_values() -> None:
    resume = _parser("resume").parse_args(["RUN", "--wait", "0", "--max-steps", "1"])
    replay = _parser("replay_check").parse_args(["repo", "--kills", "0", "--git-share", "1", "--seed", "0"])
    approve = _parser("approvals").parse_args([*APPROVE, "--ttl", "0.5"])

    assert (resume.wait, resume.max_steps) == (0.0, 1)
    assert (replay.kills, replay.git_share, replay.seed) == (0, 1.0, 0)
    assert approve.ttl == 0.5


def test_it_leaves_no_runtime_command_with_a_bare_int_or_float_option() -> None:
    """A new option written as ``type=int``/``type=float`` would take ``-1``, ``nan`` and ``inf``."""
    names = [n for n, app in get_commands().items() if app == "runtime" and n not in NOT_HERE]
    bare = [f"{name} {'/'.join(a.option_strings) or a.dest}" for name in sorted(names)
            for a in _all_actions(_parser(name)) if a.type in (int, float) and a.choices is None]

    assert "resume" in names and "run" in names
    assert bare == []


@pytest.mark.django_db(transaction=True)
def test_it_exits_2_from_the_shell_and_creates_nothing(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path)

    runs = [run_manage("run", str(task), "--max-steps", "-1"),
            run_manage("resume", "no-such-run", "--wait", "nan"),
            run_manage("resume", "no-such-run", "--wait", "-1")]

    assert [r.returncode for r in runs] == [2, 2, 2], [r.stderr for r in runs]
    assert "argument --max-steps: must be a whole number at least 1; got -1" in runs[0].stderr
    assert "argument --wait: must be a finite number of seconds, 0 or more; got 'nan'" in runs[1].stderr
    assert "argument --wait: must be a finite number of seconds, 0 or more; got '-1'" in runs[2].stderr
    assert all("Traceback" not in r.stderr for r in runs)
    assert not Run.objects.exists()
