"""Running the ``git`` CLI for the git adapter: one fixed environment, typed errors.

Every child runs with no system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``),
``HOME`` and ``XDG_CONFIG_HOME`` pointing nowhere (no user excludes or attributes), no prompts,
``LC_ALL=C``, literal pathspecs (a path named ``*`` or ``:(glob)x`` is a name, not a pattern),
and ``-c`` overrides so repository config cannot start daemons, sign, convert line endings or
run background maintenance inside our calls.

While the adapter holds its environment lock, every child inherits the locked descriptor
(``pass_fds``). ``flock`` locks belong to the open file description, so a git child orphaned by a
SIGKILLed worker keeps the lock held until it exits: whoever takes the lock next knows that no
git process Ratchet started on this repository is still running (see
:mod:`runtime.adapters.git.recovery`). Imports nothing from Django.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from runtime.errors import AdapterCommandError, AdapterTimeoutError

GIT_TIMEOUT_SECONDS = 120.0
"""Upper bound for one git child; a hung git must not hold the lock (and a lease) forever."""

# Repository config must not change what the adapter does: no fsmonitor daemons or hooks run
# from config, no signing prompts, no line-ending conversion, no background gc in our calls.
_GIT_OPTIONS = (
    "--literal-pathspecs",
    "-c", "core.fsmonitor=false",
    "-c", "commit.gpgSign=false",
    "-c", "core.autocrlf=false",
    "-c", "core.quotePath=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)


def _base_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.devnull,
        "XDG_CONFIG_HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ADVICE": "0",
        "LC_ALL": "C",
        "LANG": "C",
    }


PROCESSES_STARTED = [0]
"""git children started by every :class:`GitProcess` of this Python process (``manage.py bench``
divides it by the writes of a replay); a one-element list so readers see the live count."""


class GitProcess:
    """Runs ``git -C <root> ...`` children for one repository.

    Args:
        root: the working tree's top directory.
        git: the ``git`` executable (a name on ``PATH`` or a path).

    Attributes:
        lock_fd: the adapter's locked descriptor while it holds the environment lock, else
            None; children inherit it (see the module docstring).
    """

    def __init__(self, root: Path, *, git: str = "git") -> None:
        self.root = root
        self.git = git
        self.lock_fd: int | None = None

    def run(self, args: Sequence[str], *, input: bytes | None = None,
            env: Mapping[str, str] | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[bytes]:
        """Run one git command and return its completed process (stdout and stderr as bytes).

        Args:
            args: git arguments after the global options; never user text starting with ``-``.
            input: bytes for stdin.
            env: extra environment variables (``GIT_INDEX_FILE`` for a scratch index, ...).
            check: raise on a non-zero exit instead of returning it.

        Raises:
            AdapterCommandError: git is missing, or exited non-zero with ``check``.
            AdapterTimeoutError: the child ran longer than :data:`GIT_TIMEOUT_SECONDS`.
        """
        cmd = [self.git, "-C", str(self.root), *_GIT_OPTIONS, *args]
        full_env = _base_env()
        if env:
            full_env.update(env)
        inherit = (self.lock_fd,) if self.lock_fd is not None else ()
        PROCESSES_STARTED[0] += 1
        try:
            proc = subprocess.run(cmd, input=input, capture_output=True, env=full_env,
                                  check=False, timeout=GIT_TIMEOUT_SECONDS, pass_fds=inherit)
        except FileNotFoundError:
            raise AdapterCommandError("git executable not found", git=self.git) from None
        except subprocess.TimeoutExpired:
            raise AdapterTimeoutError(f"git {args[0]} timed out after {GIT_TIMEOUT_SECONDS} s",
                                      target=str(self.root)) from None
        if check and proc.returncode != 0:
            raise self.error(args, proc)
        return proc

    def text(self, args: Sequence[str], **kwargs: object) -> str:
        """Stdout of :meth:`run` as stripped ASCII (object ids, numbers)."""
        return self.run(args, **kwargs).stdout.decode("ascii").strip()  # type: ignore[arg-type]

    def error(self, args: Sequence[str], proc: subprocess.CompletedProcess[bytes]
              ) -> AdapterCommandError:
        """An :class:`AdapterCommandError` naming the command and git's first stderr line."""
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        detail = first[0][:200] if first else "no message"
        return AdapterCommandError(f"git {args[0]} failed: {detail}", exit_code=proc.returncode,
                                   target=str(self.root))
